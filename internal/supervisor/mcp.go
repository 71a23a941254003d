package supervisor

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// checkMCPServers checks a run's MCP servers against the agent and the
// operator's allow-lists: an agent that takes none refuses them, a stdio
// command must be one of allowCommands (or under one of its entries that
// ends in "/", a directory), and a URL must be under one of allowURLs.
func checkMCPServers(d runs.Description, servers map[string]runs.MCPServer, allowCommands, allowURLs []string) error {
	if len(servers) == 0 {
		return nil
	}
	if !slices.Contains(d.Fields, runs.FieldMCPServers) {
		return runs.Unsupported(d.Name, runs.FieldMCPServers, "this agent takes no MCP servers from the gateway")
	}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		m := servers[name]
		if (m.Command == "") == (m.URL == "") {
			return runs.Invalid(runs.FieldMCPServers, fmt.Sprintf("server %q needs exactly one of command and url", name))
		}
		if m.Remote() {
			if !urlAllowed(m.URL, allowURLs) {
				return &runs.FieldError{Field: runs.FieldMCPServers, Kind: runs.ErrInvalid, Code: runs.CodeMCPURLNotAllowed,
					Reason: fmt.Sprintf("server %q: the URL %s is not in the gateway's allow-list of MCP URLs (AGENTGATE_MCP_URLS)", name, redactURL(m.URL))}
			}
			continue
		}
		if !commandAllowed(m.Command, allowCommands) {
			return &runs.FieldError{Field: runs.FieldMCPServers, Kind: runs.ErrInvalid, Code: runs.CodeMCPCommandNotAllowed,
				Reason: fmt.Sprintf("server %q: the command %q is not in the gateway's allow-list of MCP commands (AGENTGATE_MCP_COMMANDS)", name, m.Command)}
		}
	}
	return nil
}

// commandAllowed reports whether cmd is one of allow, or lies under an
// entry of allow that ends in "/": then cmd must be an absolute, clean
// path, so that "/opt/mcp/../../bin/sh" is not under "/opt/mcp/".
func commandAllowed(cmd string, allow []string) bool {
	for _, a := range allow {
		if a == "" {
			continue
		}
		if cmd == a {
			return true
		}
		if strings.HasSuffix(a, "/") && path.IsAbs(cmd) && path.Clean(cmd) == cmd &&
			strings.HasPrefix(cmd, a) && len(cmd) > len(a) {
			return true
		}
	}
	return false
}

// urlAllowed reports whether raw, an http or https URL, has the scheme,
// host and port of an entry of allow, and a path under the entry's path
// (whole segments: "/mcp" covers "/mcp" and "/mcp/x", not "/mcpx").
func urlAllowed(raw string, allow []string) bool {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return false
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") || strings.Contains(strings.ToLower(p), "%2e") {
		return false
	}
	for _, a := range allow {
		au, err := url.Parse(a)
		if err != nil || au.Scheme != u.Scheme || !strings.EqualFold(au.Hostname(), u.Hostname()) || portOf(au) != portOf(u) {
			continue
		}
		ap := au.EscapedPath()
		if ap == "" || ap == "/" {
			return true
		}
		if p == ap || strings.HasPrefix(p, strings.TrimSuffix(ap, "/")+"/") {
			return true
		}
	}
	return false
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// redactURL is raw without its query, which may carry a token, for an
// error message.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}

// sealKeySize is the size of a generated seal key: AES-256.
const sealKeySize = 32

// NewSealKey returns a random key for Config.SealKey.
func NewSealKey() []byte {
	k := make([]byte, sealKeySize)
	if _, err := rand.Read(k); err != nil {
		panic("crypto/rand failed: " + err.Error()) // the runtime's own guarantee
	}
	return k
}

// CheckSealKey reports whether key can seal: 16, 24 or 32 bytes, for
// AES-128, -192 or -256.
func CheckSealKey(key []byte) error {
	switch len(key) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("the seal key is %d bytes; it must be 16, 24 or 32", len(key))
}

// sealed is what MCPServer.Sealed holds, before encryption.
type sealed struct {
	Env     map[string]string `json:"env,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

func aead(key []byte) (cipher.AEAD, error) {
	if err := CheckSealKey(key); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealAAD binds a sealed value to its run and server: a sealed blob
// copied into another run's spec does not open there.
func sealAAD(runID, name string) []byte { return []byte("agentgate mcp\x00" + runID + "\x00" + name) }

// sealMCPServers returns servers with each one's Env and Headers sealed
// with key into Sealed, and only their names kept in the clear. The map
// is a copy; servers is unchanged.
func sealMCPServers(key []byte, runID string, servers map[string]runs.MCPServer) (map[string]runs.MCPServer, error) {
	if len(servers) == 0 {
		return servers, nil
	}
	g, err := aead(key)
	if err != nil {
		return nil, err
	}
	out := make(map[string]runs.MCPServer, len(servers))
	for name, m := range servers {
		m.EnvNames, m.HeaderNames, m.Sealed = sortedKeys(m.Env), sortedKeys(m.Headers), nil
		if len(m.Env) > 0 || len(m.Headers) > 0 {
			plain, err := json.Marshal(sealed{Env: m.Env, Headers: m.Headers})
			if err != nil {
				return nil, err
			}
			nonce := make([]byte, g.NonceSize())
			if _, err := rand.Read(nonce); err != nil {
				return nil, err
			}
			m.Sealed = g.Seal(nonce, nonce, plain, sealAAD(runID, name))
		}
		m.Env, m.Headers = nil, nil
		out[name] = m
	}
	return out, nil
}

// openMCPServers returns servers with each one's Sealed opened into Env
// and Headers, for the adapter of the replica that runs the run. The map
// is a copy; servers keeps only ciphertext.
func openMCPServers(key []byte, runID string, servers map[string]runs.MCPServer) (map[string]runs.MCPServer, error) {
	if len(servers) == 0 {
		return servers, nil
	}
	g, err := aead(key)
	if err != nil {
		return nil, err
	}
	out := make(map[string]runs.MCPServer, len(servers))
	for name, m := range servers {
		if len(m.Sealed) > 0 {
			if len(m.Sealed) < g.NonceSize() {
				return nil, fmt.Errorf("MCP server %q: its sealed values are cut short", name)
			}
			plain, err := g.Open(nil, m.Sealed[:g.NonceSize()], m.Sealed[g.NonceSize():], sealAAD(runID, name))
			if err != nil {
				return nil, fmt.Errorf("MCP server %q: its sealed values do not open with this gateway's key (was the run submitted to a replica with another AGENTGATE_SEAL_KEY?)", name)
			}
			var v sealed
			if err := json.Unmarshal(plain, &v); err != nil {
				return nil, fmt.Errorf("MCP server %q: its sealed values: %w", name, err)
			}
			m.Env, m.Headers = v.Env, v.Headers
		}
		m.Sealed = nil
		out[name] = m
	}
	return out, nil
}

// mcpSecrets returns the env and header values of servers: the run
// redacts them from everything it stores and logs.
func mcpSecrets(servers map[string]runs.MCPServer) []string {
	var out []string
	for _, m := range servers {
		for _, v := range m.Env {
			if v != "" {
				out = append(out, v)
			}
		}
		for _, v := range m.Headers {
			if v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

// checkGiven checks what a run is given that the gateway itself answers
// for, at submission: its output_schema compiles, and its MCP servers are
// ones the agent takes and the operator allows.
func (s *Supervisor) checkGiven(d runs.Description, spec runs.Spec) error {
	if spec.MaxTotalTokens < 0 {
		return runs.Invalid(runs.FieldMaxTotalTokens, "must be at least 1")
	}
	if len(spec.OutputSchema) > 0 {
		if _, err := CompileSchema(spec.OutputSchema); err != nil {
			return err
		}
	}
	return checkMCPServers(d, spec.MCPServers, s.cfg.MCPCommands, s.cfg.MCPURLs)
}
