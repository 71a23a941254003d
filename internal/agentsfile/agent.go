package agentsfile

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// defaultVersionArgs print a CLI's version when an entry names none.
var defaultVersionArgs = []string{"--version"}

// ownedEnv are variables the gateway sets for every agent itself: an
// entry that set or passed them would undo the run's home or PATH.
var ownedEnv = []string{"HOME", "PATH"}

// agentField reads one key of an agent entry into a.
type agentField func(p *parser, a *Agent, who, field string, v *yaml.Node) error

// agentFields are an entry's keys; any other is an error.
var agentFields = map[string]agentField{
	"name":             func(p *parser, a *Agent, who, f string, v *yaml.Node) error { return p.str(v, who, f, &a.Name) },
	"display_name":     (*parser).displayName,
	"command":          (*parser).command,
	"args":             func(p *parser, a *Agent, who, f string, v *yaml.Node) error { return p.args(v, who, f, &a.Args) },
	"version_args":     (*parser).versionArgs,
	"verified_version": (*parser).verifiedVersion,
	"env":              (*parser).env,
	"pass_env":         (*parser).passEnv,
	"credentials":      (*parser).credentials,
	"home_files":       (*parser).homeFiles,
	"modes":            (*parser).modes,
	"model_endpoints":  (*parser).modelEndpoints,
	"session_allow_option": func(p *parser, a *Agent, who, f string, v *yaml.Node) error {
		if err := p.str(v, who, f, &a.SessionAllowOption); err != nil {
			return err
		}
		return p.optionID(v, who, f, a.SessionAllowOption)
	},
}

// agent reads the entry n, the i-th of the list (from 0).
func (p *parser) agent(i int, n *yaml.Node) (Agent, error) {
	who := fmt.Sprintf("#%d", i+1)
	if n.Kind != yaml.MappingNode {
		return Agent{}, p.fail(n, who, "", "must be a mapping")
	}
	// The name first, so that every later error names the agent.
	if name := nameOf(n); namePattern.MatchString(name) {
		who = name
	}
	var a Agent
	err := p.pairs(n, who, "", func(key string, k, v *yaml.Node) error {
		read, ok := agentFields[key]
		if !ok {
			return p.fail(k, who, key, "unknown key; the keys are "+strings.Join(sortedKeys(agentFields), ", "))
		}
		return read(p, &a, who, key, v)
	})
	if err != nil {
		return Agent{}, err
	}
	if err := p.check(n, who, &a); err != nil {
		return Agent{}, err
	}
	p.seen = append(p.seen, a.Name)
	return a, nil
}

// nameOf is the scalar value of n's name key, "" when it has none.
func nameOf(n *yaml.Node) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], n.Content[i+1]; k.Value == "name" && v.Kind == yaml.ScalarNode {
			return v.Value
		}
	}
	return ""
}

// check validates what the keys do not say alone: the required ones, the
// name against the others, and variables named twice.
func (p *parser) check(n *yaml.Node, who string, a *Agent) error {
	switch {
	case a.Name == "":
		return p.fail(n, who, "name", "is missing")
	case !namePattern.MatchString(a.Name):
		return p.fail(n, who, "name", fmt.Sprintf("%q must match [a-z][a-z0-9-]{0,31}", a.Name))
	case slices.Contains(p.reserved, a.Name):
		return p.fail(n, who, "name", fmt.Sprintf("%q is the name or alias of a built-in agent", a.Name))
	case slices.Contains(p.seen, a.Name):
		return p.fail(n, who, "name", fmt.Sprintf("%q names an earlier agent of the file too", a.Name))
	case a.Command == "":
		return p.fail(n, who, "command", "is missing")
	}
	if a.VersionArgs == nil {
		a.VersionArgs = slices.Clone(defaultVersionArgs)
	}
	// A variable has one source: fixed, passed through, or a credential.
	sources := map[string]string{}
	for k := range a.Env {
		sources[k] = "env"
	}
	for _, k := range a.PassEnv {
		if s, dup := sources[k]; dup {
			return p.fail(n, who, "pass_env", fmt.Sprintf("%s is set by %s too", k, s))
		}
		sources[k] = "pass_env"
	}
	for i, c := range a.Credentials {
		if s, dup := sources[c.Name]; dup {
			return p.fail(n, who, fmt.Sprintf("credentials[%d].name", i+1), fmt.Sprintf("%s is set by %s too", c.Name, s))
		}
		sources[c.Name] = "credentials"
	}
	return p.checkEndpointVars(n, who, a)
}

// str reads a scalar string of at most MaxValueBytes, without control
// characters but tab.
func (p *parser) str(v *yaml.Node, who, field string, out *string) error {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return p.fail(v, who, field, "must be a string")
	}
	s := v.Value
	switch {
	case len(s) > MaxValueBytes:
		return p.fail(v, who, field, fmt.Sprintf("is longer than %d bytes", MaxValueBytes))
	case !utf8.ValidString(s):
		return p.fail(v, who, field, "is not UTF-8")
	case strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }):
		return p.fail(v, who, field, "holds a control character")
	}
	*out = s
	return nil
}

// list reads a sequence of at most MaxList strings.
func (p *parser) list(v *yaml.Node, who, field string) ([]string, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, p.fail(v, who, field, "must be a list of strings")
	}
	if len(v.Content) > MaxList {
		return nil, p.fail(v, who, field, fmt.Sprintf("has more than %d entries", MaxList))
	}
	out := make([]string, len(v.Content))
	for i, e := range v.Content {
		if err := p.str(e, who, fmt.Sprintf("%s[%d]", field, i+1), &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// stringMap reads a mapping of at most limit string values.
func (p *parser) stringMap(v *yaml.Node, who, field string, limit int, each func(key string, k, val *yaml.Node) error) error {
	if v.Kind == yaml.MappingNode && len(v.Content)/2 > limit {
		return p.fail(v, who, field, fmt.Sprintf("has more than %d entries", limit))
	}
	return p.pairs(v, who, field, each)
}

func (p *parser) displayName(a *Agent, who, field string, v *yaml.Node) error {
	if err := p.str(v, who, field, &a.DisplayName); err != nil {
		return err
	}
	if len(a.DisplayName) > 100 {
		return p.fail(v, who, field, "is longer than 100 bytes")
	}
	return nil
}

// command is a bare name, looked up on the agents' PATH, or an absolute
// path: a relative path would depend on the gateway's working directory.
func (p *parser) command(a *Agent, who, field string, v *yaml.Node) error {
	if err := p.str(v, who, field, &a.Command); err != nil {
		return err
	}
	c := a.Command
	switch {
	case c == "":
		return p.fail(v, who, field, "is empty")
	case strings.Contains(c, "/") && !filepath.IsAbs(c):
		return p.fail(v, who, field, fmt.Sprintf("%q must be a name found on PATH or an absolute path", c))
	case strings.TrimSpace(c) != c:
		return p.fail(v, who, field, fmt.Sprintf("%q has leading or trailing space", c))
	}
	return nil
}

func (p *parser) args(v *yaml.Node, who, field string, out *[]string) error {
	l, err := p.list(v, who, field)
	*out = l
	return err
}

func (p *parser) versionArgs(a *Agent, who, field string, v *yaml.Node) error {
	if err := p.args(v, who, field, &a.VersionArgs); err != nil {
		return err
	}
	if len(a.VersionArgs) == 0 {
		return p.fail(v, who, field, "is empty; leave it out for the default [\"--version\"]")
	}
	return nil
}

func (p *parser) verifiedVersion(a *Agent, who, field string, v *yaml.Node) error {
	if err := p.str(v, who, field, &a.VerifiedVersion); err != nil {
		return err
	}
	if !versionPattern.MatchString(a.VerifiedVersion) {
		return p.fail(v, who, field, fmt.Sprintf("%q is not a dotted version such as 0.24.4", a.VerifiedVersion))
	}
	return nil
}

// envName checks the name of a variable the CLI gets.
func (p *parser) envName(v *yaml.Node, who, field, name string) error {
	switch {
	case !envNamePattern.MatchString(name):
		return p.fail(v, who, field, fmt.Sprintf("%q is not a variable name", name))
	case slices.Contains(ownedEnv, name) || strings.HasPrefix(name, "AGENTGATE_"):
		return p.fail(v, who, field, fmt.Sprintf("%s is the gateway's to set", name))
	}
	return nil
}

func (p *parser) env(a *Agent, who, field string, v *yaml.Node) error {
	a.Env = map[string]string{}
	return p.stringMap(v, who, field, MaxList, func(key string, k, val *yaml.Node) error {
		f := field + "." + key
		if err := p.envName(k, who, f, key); err != nil {
			return err
		}
		var s string
		if err := p.str(val, who, f, &s); err != nil {
			return err
		}
		a.Env[key] = s
		return nil
	})
}

func (p *parser) passEnv(a *Agent, who, field string, v *yaml.Node) error {
	names, err := p.list(v, who, field)
	if err != nil {
		return err
	}
	for i, name := range names {
		f := fmt.Sprintf("%s[%d]", field, i+1)
		if err := p.envName(v.Content[i], who, f, name); err != nil {
			return err
		}
		if slices.Contains(names[:i], name) {
			return p.fail(v.Content[i], who, f, fmt.Sprintf("%s is listed twice", name))
		}
	}
	a.PassEnv = names
	return nil
}

// credentials reads {name, from_env | from_file} entries.
func (p *parser) credentials(a *Agent, who, field string, v *yaml.Node) error {
	if v.Kind != yaml.SequenceNode {
		return p.fail(v, who, field, "must be a list of {name, from_env or from_file}")
	}
	if len(v.Content) > MaxList {
		return p.fail(v, who, field, fmt.Sprintf("has more than %d entries", MaxList))
	}
	for i, e := range v.Content {
		c, err := p.credential(e, who, fmt.Sprintf("%s[%d]", field, i+1))
		if err != nil {
			return err
		}
		for _, prev := range a.Credentials {
			if prev.Name == c.Name {
				return p.fail(e, who, fmt.Sprintf("%s[%d].name", field, i+1), fmt.Sprintf("%s is listed twice", c.Name))
			}
		}
		a.Credentials = append(a.Credentials, c)
	}
	return nil
}

func (p *parser) credential(e *yaml.Node, who, field string) (Credential, error) {
	var c Credential
	err := p.pairs(e, who, field, func(key string, k, v *yaml.Node) error {
		f := field + "." + key
		switch key {
		case "name":
			if err := p.str(v, who, f, &c.Name); err != nil {
				return err
			}
			return p.envName(v, who, f, c.Name)
		case "from_env":
			if err := p.str(v, who, f, &c.FromEnv); err != nil {
				return err
			}
			if !envNamePattern.MatchString(c.FromEnv) {
				return p.fail(v, who, f, fmt.Sprintf("%q is not a variable name", c.FromEnv))
			}
		case "from_file":
			if err := p.str(v, who, f, &c.FromFile); err != nil {
				return err
			}
			if !filepath.IsAbs(c.FromFile) || filepath.Clean(c.FromFile) != c.FromFile {
				return p.fail(v, who, f, fmt.Sprintf("%q must be a clean absolute path", c.FromFile))
			}
		default:
			return p.fail(k, who, f, "unknown key; the keys are name, from_env, from_file")
		}
		return nil
	})
	switch {
	case err != nil:
		return c, err
	case c.Name == "":
		return c, p.fail(e, who, field+".name", "is missing")
	case (c.FromEnv == "") == (c.FromFile == ""):
		return c, p.fail(e, who, field, "must have exactly one of from_env and from_file")
	}
	return c, nil
}

// homeFiles reads paths relative to the home, inside it, and their
// contents.
func (p *parser) homeFiles(a *Agent, who, field string, v *yaml.Node) error {
	a.HomeFiles = map[string]string{}
	return p.stringMap(v, who, field, MaxHomeFiles, func(key string, k, val *yaml.Node) error {
		f := field + "[" + key + "]"
		if !filepath.IsLocal(key) || filepath.Clean(key) != key || strings.ContainsFunc(key, unicode.IsControl) {
			return p.fail(k, who, f, "must be a clean relative path inside the home (no .., not absolute)")
		}
		if val.Kind != yaml.ScalarNode || val.Tag == "!!null" {
			return p.fail(val, who, f, "must be the file's contents, a string")
		}
		if len(val.Value) > MaxHomeFileBytes {
			return p.fail(val, who, f, fmt.Sprintf("is longer than %d bytes", MaxHomeFileBytes))
		}
		// One file may not be the directory of another.
		for other := range a.HomeFiles {
			if strings.HasPrefix(key, other+"/") || strings.HasPrefix(other, key+"/") {
				return p.fail(k, who, f, fmt.Sprintf("%s is inside %s", max(key, other), min(key, other)))
			}
		}
		a.HomeFiles[key] = val.Value
		return nil
	})
}

// modeKeys are modes' keys, each with where its value goes.
var modeKeys = map[string]func(m *Modes) *string{
	"read_only":       func(m *Modes) *string { return &m.ReadOnly },
	"workspace_write": func(m *Modes) *string { return &m.WorkspaceWrite },
	"full":            func(m *Modes) *string { return &m.Full },
	"ask":             func(m *Modes) *string { return &m.Ask },
}

func (p *parser) modes(a *Agent, who, field string, v *yaml.Node) error {
	return p.pairs(v, who, field, func(key string, k, val *yaml.Node) error {
		f := field + "." + key
		at, ok := modeKeys[key]
		if !ok {
			return p.fail(k, who, f, "unknown key; the keys are "+strings.Join(sortedKeys(modeKeys), ", "))
		}
		if err := p.str(val, who, f, at(&a.Modes)); err != nil {
			return err
		}
		return p.optionID(val, who, f, *at(&a.Modes))
	})
}

// optionID checks an ACP id (a mode, a permission option).
func (p *parser) optionID(v *yaml.Node, who, field, id string) error {
	if id == "" || len(id) > 64 || strings.TrimSpace(id) != id {
		return p.fail(v, who, field, "must be an ACP id of 1 to 64 bytes without surrounding space")
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
