package opencode

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The operator configures OpenCode the way OpenCode documents it: in
// OPENCODE_CONFIG_CONTENT or a file named by OPENCODE_CONFIG, both passed
// through from the gateway's environment, or in a configuration file in
// the agent's home. OpenCode merges them (home files first, then
// OPENCODE_CONFIG, then the project's files, then
// OPENCODE_CONFIG_CONTENT). The adapter never writes any of them: its own
// settings are environment switches (see phoneHome and permissionEnv).
// It reads them only to learn which variables a configuration names as
// {env:NAME}, and, before a run, whether the provider in use has the key
// it asks for: Command and the decoder through the Invocation's Files,
// Preflight from the host's file system.

// fileReader is what reading the configuration takes of runs.CLIFiles.
type fileReader interface {
	ReadFile(name string) ([]byte, error)
}

// homeConfigFiles are the global configuration files OpenCode reads from
// its home, in the order it merges them.
var homeConfigFiles = []string{"config.json", "opencode.json", "opencode.jsonc"}

// configDir is OpenCode's global configuration directory under home
// (XDG_CONFIG_HOME is not set for the agent).
func configDir(home string) string { return filepath.Join(home, ".config", "opencode") }

// authFile is where `opencode auth login` keeps credentials, by provider.
func authFile(home string) string {
	return filepath.Join(home, ".local", "share", "opencode", "auth.json")
}

// envRefRE matches OpenCode's {env:NAME} substitution, for names a
// process environment can hold.
var envRefRE = regexp.MustCompile(`\{env:([A-Za-z_][A-Za-z0-9_]*)\}`)

// envRefs returns the variable names text refers to as {env:NAME},
// comments left out, sorted and without repeats.
func envRefs(text []byte) []string {
	seen := map[string]bool{}
	for _, m := range envRefRE.FindAllSubmatch(stripJSONC(text), -1) {
		seen[string(m[1])] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// homeEnvRefs returns the {env:NAME} names of the configuration files in
// home. The project's files in the run's directory are not read: they are
// the client's, and a client must not pick which of the gateway's
// variables reach the agent.
func homeEnvRefs(files fileReader, home string) []string {
	if home == "" {
		return nil
	}
	var all []byte
	for _, f := range homeConfigFiles {
		if b, err := files.ReadFile(filepath.Join(configDir(home), f)); err == nil {
			all = append(append(all, b...), '\n')
		}
	}
	return envRefs(all)
}

// config is the part of an OpenCode configuration the adapter reads.
type config struct {
	Model    string                     `json:"model"`
	Provider map[string]json.RawMessage `json:"provider"`
}

// parseConfig reads a JSONC configuration leniently: comments and
// trailing commas are allowed, as OpenCode allows them. ok is false when
// it is not an object.
func parseConfig(text []byte) (config, bool) {
	var c config
	if err := json.Unmarshal(stripTrailingCommas(stripJSONC(text)), &c); err != nil {
		return config{}, false
	}
	return c, true
}

// stripJSONC blanks // and /* */ comments outside strings, keeping every
// other byte where it was.
func stripJSONC(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
			out = append(out, c)
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			if i < len(b) {
				out = append(out, '\n')
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			end := bytes.Index(b[i+2:], []byte("*/"))
			if end < 0 {
				return out
			}
			i += end + 3
			out = append(out, ' ')
		default:
			out = append(out, c)
		}
	}
	return out
}

// stripTrailingCommas drops a comma that only space separates from the
// closing bracket or brace after it, outside strings.
func stripTrailingCommas(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
		}
		if c == ',' {
			j := i + 1
			for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
				j++
			}
			if j < len(b) && (b[j] == '}' || b[j] == ']') {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// source is one configuration OpenCode will read, named for messages.
type source struct {
	name string
	text []byte
}

// configSources returns the configurations a run's OpenCode reads that
// the adapter can see, in OpenCode's order: the files in home, the file
// OPENCODE_CONFIG names, and OPENCODE_CONFIG_CONTENT; env is the run's
// environment.
func configSources(files fileReader, home string, env []string) []source {
	var out []source
	for _, f := range homeConfigFiles {
		p := filepath.Join(configDir(home), f)
		if b, err := files.ReadFile(p); err == nil {
			out = append(out, source{p, b})
		}
	}
	if p := lookupEnv(env, "OPENCODE_CONFIG"); p != "" {
		if b, err := files.ReadFile(p); err == nil {
			out = append(out, source{"OPENCODE_CONFIG (" + p + ")", b})
		}
	}
	if c := lookupEnv(env, "OPENCODE_CONFIG_CONTENT"); c != "" {
		out = append(out, source{"OPENCODE_CONFIG_CONTENT", []byte(c)})
	}
	return out
}

// providerOf returns the provider id of a "provider/model" name.
func providerOf(model string) string {
	p, _, ok := strings.Cut(model, "/")
	if !ok {
		return ""
	}
	return p
}

// lookupEnv returns the value of name in env ("KEY=value" entries); the
// last entry wins, as in exec.
func lookupEnv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}
