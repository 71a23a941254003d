package agentsfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Bounds of the file. Each keeps what the gateway holds in memory, and
// writes into every run's home, to a size no operator needs to pass.
const (
	// MaxFileBytes bounds the whole file, read into memory at startup.
	MaxFileBytes = 1 << 20
	// MaxAgents bounds the agents one file names.
	MaxAgents = 64
	// MaxList bounds each list and map of an agent: args, version_args,
	// env, pass_env, credentials.
	MaxList = 64
	// MaxValueBytes bounds one string: an argument, a variable's value, a
	// path, a mode.
	MaxValueBytes = 4096
	// MaxHomeFiles bounds the files of home_files.
	MaxHomeFiles = 32
	// MaxHomeFileBytes bounds one home file's contents.
	MaxHomeFileBytes = 64 << 10
)

// Agent is one entry of the file, validated.
type Agent struct {
	// Name is the API's agent field: [a-z][a-z0-9-]{0,31}.
	Name string
	// DisplayName names the agent for people; empty means Name.
	DisplayName string
	// Command is a name looked up on the agents' PATH, or an absolute
	// path.
	Command string
	// Args are the arguments of the CLI's ACP mode.
	Args []string
	// VersionArgs print the CLI's version; ["--version"] by default.
	VersionArgs []string
	// VerifiedVersion is the version the operator checked the entry
	// against; empty when none was.
	VerifiedVersion string
	// Env are fixed variables given to the CLI: settings, not secrets.
	Env map[string]string
	// PassEnv names variables of the gateway's environment passed
	// through unchanged when set.
	PassEnv []string
	// Credentials are the CLI's secret variables and where the gateway
	// reads them.
	Credentials []Credential
	// HomeFiles are files written into each run's home, by path relative
	// to it.
	HomeFiles map[string]string
	// Modes are ACP session modes per permission level, and for runs
	// that ask for approvals.
	Modes Modes
	// SessionAllowOption is the optionId of the allow_always option that
	// allows a tool for the rest of the session, for a CLI that offers
	// several, each persisting elsewhere (Qwen Code: one in the
	// workspace, one in the home). Empty: an allow_always option is
	// used only when the CLI offers one alone.
	SessionAllowOption string
	// ModelEndpoints are where the CLI calls its model, so that the
	// gateway can confine its runs' network to them (network "model").
	// None: the gateway does not know, and runs have network "open" only.
	ModelEndpoints []ModelEndpoint
}

// Credential is one secret variable of the CLI. Exactly one of FromEnv
// and FromFile is set.
type Credential struct {
	// Name is the CLI's variable.
	Name string
	// FromEnv is the gateway's variable that holds the value.
	FromEnv string
	// FromFile is an absolute path whose contents, trimmed of trailing
	// newlines, are the value; read at every run, so a rotated secret
	// takes effect without a restart.
	FromFile string
}

// Modes are the ACP session mode ids (session/set_mode) of an agent; an
// empty one leaves the CLI's own default mode.
type Modes struct {
	ReadOnly       string
	WorkspaceWrite string
	Full           string
	// Ask is the mode of a run that asks for approvals, whatever its
	// permission: one where the CLI asks before each tool.
	Ask string
}

// Error is a problem with the file, naming where it is.
type Error struct {
	// File is the file's path.
	File string
	// Agent is the agent's name, or "#n" (from 1) for an entry without
	// a valid one; empty for a problem with the file as a whole.
	Agent string
	// Field is the key, dotted below the agent ("credentials[2].from_env",
	// "home_files[.qwen/settings.json]"); empty for the file or the agent
	// as a whole.
	Field string
	// Line is the line in the file, 0 when unknown.
	Line int
	// Problem says what is wrong, as a sentence fragment.
	Problem string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("agents file ")
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Agent != "" {
		fmt.Fprintf(&b, ": agent %s", e.Agent)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Problem)
	return b.String()
}

// Load reads and parses the file at path; reserved are the names no entry
// may take (the built-in agents' names and aliases). Every error is an
// *Error.
func Load(path string, reserved []string) ([]Agent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Problem: err.Error()}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, &Error{File: path, Problem: err.Error()}
	}
	return Parse(path, data, reserved)
}

// Parse parses data, the contents of the file named file (for errors).
// It is strict: an unknown key anywhere, a value of the wrong type, a
// duplicate key, a second YAML document and every value the gateway
// could not use as written are errors, each an *Error. A file that lists
// no agent is an error too: an operator who set the file meant some.
func Parse(file string, data []byte, reserved []string) ([]Agent, error) {
	p := &parser{file: file, reserved: reserved}
	if len(data) > MaxFileBytes {
		return nil, p.fail(nil, "", "", fmt.Sprintf("is larger than %d bytes", MaxFileBytes))
	}
	root, err := p.document(data)
	if err != nil {
		return nil, err
	}
	list, err := p.agentsList(root)
	if err != nil {
		return nil, err
	}
	agents := make([]Agent, 0, len(list.Content))
	for i, n := range list.Content {
		a, err := p.agent(i, n)
		if err != nil {
			return nil, err
		}
		agents = append(agents, a)
	}
	return agents, nil
}

// parser holds what every error names.
type parser struct {
	file     string
	reserved []string
	seen     []string // names of the agents so far
}

func (p *parser) fail(n *yaml.Node, agent, field, problem string) *Error {
	e := &Error{File: p.file, Agent: agent, Field: field, Problem: problem}
	if n != nil {
		e.Line = n.Line
	}
	return e
}

// document parses the one YAML document of data into its root mapping.
func (p *parser) document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.fail(nil, "", "", "is empty; it must list agents")
		}
		return nil, p.fail(nil, "", "", "is not YAML: "+err.Error())
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, p.fail(&more, "", "", "holds more than one YAML document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, p.fail(&doc, "", "", "is not one YAML document")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, p.fail(root, "", "", "must be a mapping with the key agents")
	}
	return root, nil
}

// agentsList is the root's agents sequence, the only key the root has.
func (p *parser) agentsList(root *yaml.Node) (*yaml.Node, error) {
	var list *yaml.Node
	err := p.pairs(root, "", "", func(key string, k, v *yaml.Node) error {
		if key != "agents" {
			return p.fail(k, "", key, "unknown key; the file's only key is agents")
		}
		list = v
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case list == nil:
		return nil, p.fail(root, "", "agents", "is missing")
	case list.Kind != yaml.SequenceNode:
		return nil, p.fail(list, "", "agents", "must be a list")
	case len(list.Content) == 0:
		return nil, p.fail(list, "", "agents", "lists no agent")
	case len(list.Content) > MaxAgents:
		return nil, p.fail(list, "", "agents", fmt.Sprintf("lists more than %d agents", MaxAgents))
	}
	return list, nil
}

// pairs calls f for each key of mapping n in order, refusing a key that
// is no string and a key given twice. agent and field name n for errors.
func (p *parser) pairs(n *yaml.Node, agent, field string, f func(key string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.fail(n, agent, field, "must be a mapping")
	}
	var keys []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
			return p.fail(k, agent, field, "has a key that is not a plain string")
		}
		if slices.Contains(keys, k.Value) {
			return p.fail(k, agent, join(field, k.Value), "is given twice")
		}
		keys = append(keys, k.Value)
		if err := f(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

// join dots a key below field.
func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// namePattern is an agent's name: what the API's agent field and the
// metrics' label take without quoting.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// envNamePattern is a variable's name as a shell takes it.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// versionPattern is a dotted version the probe can compare.
var versionPattern = regexp.MustCompile(`^\d+(\.\d+)*([-+][0-9A-Za-z.-]+)?$`)
