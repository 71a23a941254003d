package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
)

// Bounds of a run's mcp_servers. They keep a stored spec small and an
// agent's command line sane; the allow-lists are the supervisor's.
const (
	maxMCPServers     = 16
	maxMCPArgs        = 64
	maxMCPArgBytes    = 4096
	maxMCPCommandLen  = 4096
	maxMCPURLBytes    = 2048
	maxMCPPairs       = 64 // env variables, or headers, of one server
	maxMCPNameBytes   = 256
	maxMCPValueBytes  = 8192
	fieldMCPCommand   = "command"
	fieldMCPArgs      = "args"
	fieldMCPEnv       = "env"
	fieldMCPURL       = "url"
	fieldMCPHeaders   = "headers"
	mcpNameDescribing = "names must be 1 to 64 letters, digits, '_' or '-'"
)

var (
	mcpServerName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	envName       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerName    = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$") // an RFC 9110 token
	mcpFields     = []string{fieldMCPCommand, fieldMCPArgs, fieldMCPEnv, fieldMCPURL, fieldMCPHeaders}
)

// decodeMCPServers parses a run request's mcp_servers: nil when absent. It
// is a JSON object from a server's name to either a stdio server,
// {"command", "args", "env"}, or a remote one, {"url", "headers"}.
// Unknown or repeated members are refused, as everywhere in a request.
func decodeMCPServers(raw json.RawMessage) (map[string]runs.MCPServer, error) {
	if raw == nil {
		return nil, nil
	}
	bad := func(format string, args ...any) error {
		return invalidField(runs.FieldMCPServers, fmt.Sprintf(format, args...))
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	members, err := readMembers(raw)
	if err != nil {
		return nil, bad("must be an object from a server's name to its command or url")
	}
	if len(members) > maxMCPServers {
		return nil, bad("has %d servers; the limit is %d", len(members), maxMCPServers)
	}
	out := make(map[string]runs.MCPServer, len(members))
	for _, m := range members {
		if !mcpServerName.MatchString(m.name) {
			return nil, bad("server name %s is not allowed: %s", quote(m.name), mcpNameDescribing)
		}
		if _, dup := out[m.name]; dup {
			return nil, bad("server %q appears more than once", m.name)
		}
		srv, err := decodeMCPServer(m.name, m.raw)
		if err != nil {
			return nil, err
		}
		out[m.name] = srv
	}
	return out, nil
}

// mcpFault is a 400 about one server of a run's mcp_servers, naming it.
type mcpFault func(format string, args ...any) error

// mcpMember checks a member of a server and sets it in srv.
type mcpMember func(f fields, srv *runs.MCPServer, bad mcpFault) error

// mcpKind is a kind of MCP server: a stdio one, run from a command, or a
// remote one, reached at a url. Adding a member to a kind is adding a row.
type mcpKind struct {
	// foreign are the other kind's members, refused with misplaced.
	foreign   []string
	misplaced string
	// members check the kind's members, in order: the first fault wins.
	members []mcpMember
}

var (
	stdioMCPServer = mcpKind{
		foreign:   []string{fieldMCPHeaders},
		misplaced: "headers belong to a remote server (url), not a command",
		members:   []mcpMember{checkMCPCommand, decodeMCPArgs, decodeMCPEnv},
	}
	remoteMCPServer = mcpKind{
		foreign:   []string{fieldMCPArgs, fieldMCPEnv},
		misplaced: "args and env belong to a stdio server (command), not a url",
		members:   []mcpMember{checkMCPURL, decodeMCPHeaders},
	}
)

func decodeMCPServer(name string, raw json.RawMessage) (runs.MCPServer, error) {
	bad := func(format string, args ...any) error {
		return invalidField(runs.FieldMCPServers, fmt.Sprintf("server %q: ", name)+fmt.Sprintf(format, args...))
	}
	f, err := mcpServerMembers(raw, bad)
	if err != nil {
		return runs.MCPServer{}, err
	}
	var srv runs.MCPServer
	if srv.Command, err = mcpString(f, fieldMCPCommand, maxMCPCommandLen, bad); err != nil {
		return runs.MCPServer{}, err
	}
	if srv.URL, err = mcpString(f, fieldMCPURL, maxMCPURLBytes, bad); err != nil {
		return runs.MCPServer{}, err
	}
	kind, err := mcpKindOf(srv, bad)
	if err != nil {
		return runs.MCPServer{}, err
	}
	if err := kind.decode(f, &srv, bad); err != nil {
		return runs.MCPServer{}, err
	}
	return srv, nil
}

// mcpServerMembers indexes a server's members by name, refusing the first
// unknown or repeated one.
func mcpServerMembers(raw json.RawMessage, bad mcpFault) (fields, error) {
	members, err := readMembers(raw)
	if err != nil {
		return nil, bad("must be an object with command (and args, env) or url (and headers)")
	}
	f := fields{}
	for _, m := range members {
		if !slices.Contains(mcpFields, m.name) {
			return nil, bad("unknown member %s; a server has %s", quote(m.name), strings.Join(mcpFields, ", "))
		}
		if _, dup := f[m.name]; dup {
			return nil, bad("member %q appears more than once", m.name)
		}
		f[m.name] = m.raw
	}
	return f, nil
}

// mcpString returns the string member of a server, "" when absent.
func mcpString(f fields, member string, limit int, bad mcpFault) (string, error) {
	raw := f.get(member)
	if raw == nil {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", bad("%s must be a string", member)
	}
	if err := checkMCPString(s, limit); err != nil {
		return "", bad("%s %s", member, err)
	}
	return s, nil
}

// mcpKindOf tells a server's kind by which of command and url it has: one
// of them, never both.
func mcpKindOf(srv runs.MCPServer, bad mcpFault) (mcpKind, error) {
	switch {
	case srv.Command == "" && srv.URL == "":
		return mcpKind{}, bad("needs a command (a stdio server) or a url (a remote one)")
	case srv.Command != "" && srv.URL != "":
		return mcpKind{}, bad("has both command and url; give one")
	case srv.Command != "":
		return stdioMCPServer, nil
	}
	return remoteMCPServer, nil
}

// decode refuses the other kind's members, then checks the kind's own.
func (k mcpKind) decode(f fields, srv *runs.MCPServer, bad mcpFault) error {
	for _, member := range k.foreign {
		if f.get(member) != nil {
			return bad("%s", k.misplaced)
		}
	}
	for _, decode := range k.members {
		if err := decode(f, srv, bad); err != nil {
			return err
		}
	}
	return nil
}

func checkMCPCommand(_ fields, srv *runs.MCPServer, bad mcpFault) error {
	if strings.HasPrefix(srv.Command, "-") {
		return bad("command must not begin with '-'")
	}
	return nil
}

func decodeMCPArgs(f fields, srv *runs.MCPServer, bad mcpFault) error {
	raw := f.get(fieldMCPArgs)
	if raw == nil {
		return nil
	}
	if json.Unmarshal(raw, &srv.Args) != nil {
		return bad("args must be an array of strings")
	}
	if len(srv.Args) > maxMCPArgs {
		return bad("has %d args; the limit is %d", len(srv.Args), maxMCPArgs)
	}
	for i, a := range srv.Args {
		if err := checkMCPString(a, maxMCPArgBytes); err != nil && a != "" {
			return bad("args[%d] %s", i, err)
		}
	}
	return nil
}

func decodeMCPEnv(f fields, srv *runs.MCPServer, bad mcpFault) (err error) {
	if srv.Env, err = decodePairs(f.get(fieldMCPEnv), envName, "variable"); err != nil {
		return bad("env %s", err)
	}
	return nil
}

func checkMCPURL(_ fields, srv *runs.MCPServer, bad mcpFault) error {
	u, err := url.Parse(srv.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("url must be an http or https URL")
	}
	if u.User != nil {
		return bad("url must not carry a user or password; send credentials in headers")
	}
	return nil
}

func decodeMCPHeaders(f fields, srv *runs.MCPServer, bad mcpFault) (err error) {
	if srv.Headers, err = decodePairs(f.get(fieldMCPHeaders), headerName, "header"); err != nil {
		return bad("headers %s", err)
	}
	return nil
}

// readMembers reads raw as one JSON object, keeping repeated names.
func readMembers(raw json.RawMessage) ([]member, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("not an object")
	}
	return readObject(raw)
}

// decodePairs parses an object of string values whose names match name.
func decodePairs(raw json.RawMessage, name *regexp.Regexp, what string) (map[string]string, error) {
	if raw == nil {
		return nil, nil
	}
	members, err := readMembers(raw)
	if err != nil {
		return nil, fmt.Errorf("must be an object of strings")
	}
	if len(members) > maxMCPPairs {
		return nil, fmt.Errorf("has %d entries; the limit is %d", len(members), maxMCPPairs)
	}
	out := make(map[string]string, len(members))
	for _, m := range members {
		if len(m.name) > maxMCPNameBytes || !name.MatchString(m.name) {
			return nil, fmt.Errorf("has %s, which is not a %s name", quote(m.name), what)
		}
		if _, dup := out[m.name]; dup {
			return nil, fmt.Errorf("has %q more than once", m.name)
		}
		var v string
		if json.Unmarshal(m.raw, &v) != nil {
			return nil, fmt.Errorf("%q must be a string", m.name)
		}
		// The value is a secret: the error never quotes it.
		if len(v) > maxMCPValueBytes || !utf8.ValidString(v) || strings.ContainsAny(v, "\x00\r\n") {
			return nil, fmt.Errorf("%q must be at most %d bytes of UTF-8 without NUL or line breaks", m.name, maxMCPValueBytes)
		}
		out[m.name] = v
	}
	return out, nil
}

// checkMCPString checks a command, url or argument: bounded, UTF-8, no
// NUL or line break (it ends up in argv or a config file).
func checkMCPString(s string, limit int) error {
	switch {
	case s == "":
		return fmt.Errorf("must not be empty")
	case len(s) > limit:
		return fmt.Errorf("must be at most %d bytes", limit)
	case !utf8.ValidString(s) || strings.ContainsAny(s, "\x00\r\n"):
		return fmt.Errorf("must be UTF-8 without NUL or line breaks")
	}
	return nil
}
