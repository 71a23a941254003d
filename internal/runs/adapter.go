package runs

import (
	"context"
	"io"
	"io/fs"
	"os"
	"time"
)

// Adapter translates between agentgate and one agent CLI: it builds a
// command and decodes output. The Supervisor runs the command and feeds
// the decoder.
//
// Command, ParseVersion and the Decoder do no I/O of their own. Whatever
// files they need they read through Invocation.Files, which the
// supervisor injects: Command the operator's configuration of the CLI in
// its home, a decoder what its CLI wrote there (a usage record, a chat
// log, a store). The optional hooks below (Preflighter, HomePreparer,
// HostAdvisor, BinaryResolver) are the declared I/O of an adapter: they
// may run programs and read and write the CLI's files.
type Adapter interface {
	// Name is the API's agent field, e.g. "claude".
	Name() string
	// Describe returns the static facts about the CLI: install command,
	// verified version, credentials, capabilities.
	Describe() Description
	// ParseVersion reads the version from the output of the CLI run with
	// Description.VersionArgs. It returns an error when the output is not
	// recognised.
	ParseVersion(output []byte) (string, error)
	// Command builds the invocation for inv. The supervisor has already
	// refused, with CheckFields, every optional field the agent does not
	// take (Description.Refused says why); Command returns an error
	// wrapping ErrUnsupported (see Unsupported), naming the field, for a
	// value of a field it takes that the CLI cannot honour (an effort
	// level it lacks), and never drops one silently.
	Command(inv Invocation) (Command, error)
	// NewDecoder returns a decoder for one run; it keeps state across lines.
	NewDecoder(inv Invocation) Decoder
}

// Decoder turns one run's CLI output into events. It is called from one
// goroutine, in order, and must never panic on any input: a line it does not
// understand becomes an agent.unparsed event.
type Decoder interface {
	// Decode maps one line of stdout (without its newline) to zero or more
	// events. The events are the caller's once Decode returns: they must
	// not point into line, whose buffer is reused for the next line, nor
	// be changed by later calls, since the supervisor stores them on
	// another goroutine while the next line is decoded
	// (agenttest.Decode checks both).
	Decode(line []byte) []Event
	// Finish is called once, after stdout ended and the process was
	// reaped. It closes anything left open (tool calls without a result)
	// and classifies how the run ended from everything seen, the exit and
	// the tail of stderr.
	Finish(exit Exit, stderrTail []byte) Outcome
}

// Conversation is implemented by a Decoder whose CLI is driven over stdin
// by a protocol, such as the JSON-RPC of codex app-server, rather than
// handed one prompt. The supervisor then keeps stdin open: it writes Open
// as soon as the process starts and, after each Decode, whatever Pending
// returns. When the run must stop it writes Interrupt, and gives the CLI
// a grace period to wind down, before any signal.
type Conversation interface {
	Decoder
	// Open returns the first messages to write to stdin.
	Open() []byte
	// Pending returns what to write to stdin in answer to the lines
	// decoded so far, and whether stdin is then to be closed because the
	// conversation is over. It is called after every Decode.
	Pending() (out []byte, done bool)
	// Interrupt returns the message that asks the CLI to stop its work
	// and end the conversation, or nil when there is nothing to ask yet.
	// Unlike the other methods it may be called while Decode runs, from
	// another goroutine.
	Interrupt() []byte
}

// Preflighter is implemented by an adapter whose CLI does not report a
// failure it could see coming: offline and without credentials, Codex
// retries the network for ever instead of saying it is not logged in.
// Preflight runs before the process starts, with the environment the
// process would get; a non-nil RunError fails the run at once.
type Preflighter interface {
	Preflight(ctx context.Context, inv Invocation, env []string) *RunError
}

// HomePreparer is implemented by an adapter that owns files in its CLI's
// home: Gemini CLI does nothing headless without a settings file there.
// The supervisor calls PrepareHome once, at start, after the probe found
// the CLI; an error makes the agent unavailable, with the reason.
type HomePreparer interface {
	PrepareHome(home string) error
}

// HostAdvisor is implemented by an adapter whose CLI works, but less well,
// on a host that lacks something it looks for. The supervisor asks once, at
// start, after the probe found the CLI, and adds the answer to the agent's
// advisory and to a warning in the log, so that the CLI's own complaint
// need not repeat in every run (Codex warns of a missing bubblewrap in each
// session it starts).
type HostAdvisor interface {
	// HostAdvisory returns what the host lacks, given the agent's
	// environment, or "" when it lacks nothing.
	HostAdvisory(env []string) string
}

// BinaryResolver is implemented by an adapter whose installed command is a
// launcher rather than the program to supervise. The Codex npm package's
// command is a Node script that, killed, orphans the native binary it
// started. ResolveBinary maps the path found on the PATH to the program to
// execute; the probe reports the resolved path.
type BinaryResolver interface {
	ResolveBinary(path string) (string, error)
}

// HomeKeeper is implemented by an adapter that knows which of its CLI's
// files in a home are the operator's and which are a session's. Each run
// gets a home of its own, made from the operator's base home, so that
// nothing a run writes there (a hook, a setting, a transcript) reaches
// another run; a session's own files are carried, within its tenant, from
// the run that last used it to the run that resumes it, on any replica.
type HomeKeeper interface {
	// BaseFiles lists, relative to a home, the files and directories a
	// run's home takes from the base home: the CLI's login and the
	// operator's configuration. What the base lacks is skipped.
	BaseFiles() []string
	// SessionFiles lists, relative to home, the files and directories
	// that hold session sessionID's state after a run of it in dir,
	// read through files. What is listed but missing is skipped.
	SessionFiles(files CLIFiles, home, dir, sessionID string) ([]string, error)
}

// Outcome is the decoder's verdict on a finished run. The supervisor
// overrides Status and Error when it ended the run itself (cancel, timeout,
// shutdown).
type Outcome struct {
	// Events are emitted before run.completed, e.g. tool calls closed as
	// failed because the process died.
	Events           []Event
	Status           State // Succeeded or Failed
	StopReason       string
	Result           string
	StructuredOutput []byte
	Usage            Usage
	CostUSD          *float64
	// SessionCostUSD is set instead of CostUSD by a CLI that reports the
	// cost of the whole session so far, earlier runs of a resumed session
	// included. The supervisor makes the run's own cost of it, from the
	// session cost it recorded before.
	SessionCostUSD *float64
	// SessionUsage is set instead of Usage by a CLI that reports the
	// usage of the whole session so far (Copilot's usage file after a
	// resume). The supervisor makes the run's own usage of it, from the
	// session usage it recorded before.
	SessionUsage *Usage
	NumTurns     int
	SessionID    string
	Model        string
	// Diff is the unified diff of every file the run changed, for a CLI
	// that reports one.
	Diff  string
	Error *RunError
}

// Invocation is everything an adapter needs to build one run's command.
type Invocation struct {
	RunID string
	Spec  Spec
	// Dir is the absolute working directory of the run.
	Dir string
	// Bin is the CLI to execute, as configured or found on PATH.
	Bin string
	// Home is the HOME the CLI gets, where its login and sessions live.
	Home string
	// Timeout is the run's deadline, for CLIs that take one of their own.
	Timeout time.Duration
	// CLIVersion is the installed version found at startup.
	CLIVersion string
	// Images are the prompt's attachments, written to files under the
	// run's temporary directory before the command is built: an adapter
	// passes the path or the bytes, whichever its CLI takes.
	Images []Image
	// Files is the adapter's only way to the file system, from Command
	// and its decoder; the supervisor sets HostFiles. Nil is a file
	// system with no files (see CLIFiles).
	Files CLIFiles
}

// CLIFiles is what an adapter reads of its CLI's files: its
// configuration, and what a run of it wrote (see Adapter). Names are
// absolute paths. A file that is not there is an error wrapping
// fs.ErrNotExist.
type CLIFiles interface {
	// ReadFile returns a file's contents.
	ReadFile(name string) ([]byte, error)
	// Open opens a file for reading, for one read in parts.
	Open(name string) (io.ReadSeekCloser, error)
	// ReadDir returns the names of a directory's entries.
	ReadDir(name string) ([]string, error)
	// Remove removes a file the CLI wrote for the adapter alone, once it
	// was read.
	Remove(name string) error
	// HostPath returns name as a path on the host, for a library that
	// opens the file itself (SQLite), after checking that it is there;
	// an error when it is not or when these files are not the host's.
	HostPath(name string) (string, error)
}

// FilesOrNone is inv.Files, or a file system with no files when it is
// nil.
func (inv Invocation) FilesOrNone() CLIFiles {
	if inv.Files == nil {
		return NoFiles{}
	}
	return inv.Files
}

// HostFiles is CLIFiles on the host's file system: the supervisor's.
type HostFiles struct{}

func (HostFiles) ReadFile(name string) ([]byte, error)        { return os.ReadFile(name) }
func (HostFiles) Open(name string) (io.ReadSeekCloser, error) { return os.Open(name) }
func (HostFiles) Remove(name string) error                    { return os.Remove(name) }

func (HostFiles) ReadDir(name string) ([]string, error) {
	ents, err := os.ReadDir(name)
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, err
}

func (HostFiles) HostPath(name string) (string, error) {
	if _, err := os.Stat(name); err != nil {
		return "", err
	}
	return name, nil
}

// NoFiles is CLIFiles with no files at all.
type NoFiles struct{}

func (NoFiles) ReadFile(name string) ([]byte, error)        { return nil, notExist("read", name) }
func (NoFiles) Open(name string) (io.ReadSeekCloser, error) { return nil, notExist("open", name) }
func (NoFiles) ReadDir(name string) ([]string, error)       { return nil, notExist("readdir", name) }
func (NoFiles) Remove(name string) error                    { return notExist("remove", name) }
func (NoFiles) HostPath(name string) (string, error)        { return "", notExist("stat", name) }

func notExist(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

// Command is a process to start, built by an adapter.
type Command struct {
	Args []string // argv[1:]; argv[0] is Invocation.Bin
	// Env holds settings the adapter always sets ("KEY=value"), such as
	// the variables that stop the CLI phoning home.
	Env []string
	// PassEnv names the variables copied from the gateway's environment
	// when set there: the CLI's own credential and endpoint variables.
	// Nothing else of the gateway's environment reaches the child.
	PassEnv []string
	// Stdin is fed to the process and then closed; nil means stdin is
	// closed from the start.
	Stdin []byte
	// InterruptSignal is sent first to cancel gracefully, before SIGTERM
	// and SIGKILL; 0 means start with SIGTERM.
	InterruptSignal int
	// Secrets are values the command carries that must never be stored
	// or logged, besides its credential variables, which the supervisor
	// finds itself: the env and header values of the run's MCP servers,
	// written into a config file or an argument.
	Secrets []string
}

// Description is the static facts about an agent CLI.
type Description struct {
	Name        string
	DisplayName string
	// Aliases are other names a client may give as the run's agent, such
	// as "openai" for Codex. Runs are recorded under Name.
	Aliases         []string
	DefaultBin      string
	InstallCommand  string
	VerifiedVersion string
	VersionArgs     []string
	// CredentialEnv lists the variables Command passes through.
	CredentialEnv []string
	// Fields lists the optional Spec fields (Field* constants) the agent
	// honours.
	Fields []string
	// Refused gives, for each optional field the agent does not take
	// (see CheckFields), the sentence that tells a client why.
	Refused map[string]string
	// Permissions documents how each permission level maps to CLI flags.
	Permissions map[Permission]string
	// Interaction is what the agent offers interactive runs; it matters
	// only when Fields lists FieldInteractive or FieldApprovals.
	Interaction Interaction
	// ReportsCost says the CLI reports what a run cost, so that the
	// gateway can enforce max_budget_usd itself where the CLI has no flag
	// for it. The gateway never prices tokens on its own.
	ReportsCost bool
	// Reports says how much of a run's usage and failures the CLI tells;
	// the zero value is exact usage and failures classed by HTTP status.
	Reports Reports
	// Source is SourceConfigured for an agent from the agents file; empty
	// is SourceBuiltin.
	Source string
}

// SessionPreferrer is implemented by an adapter that runs some specs over
// its session protocol even when they are neither interactive nor ask for
// approvals, because the CLI takes what they are given (an image, an MCP
// server) only there. The supervisor then drives the run as a Session
// that ends after its first turn; the adapter's NewDecoder must return a
// Session for it.
type SessionPreferrer interface {
	PrefersSession(s Spec) bool
}

// Compatibility of the installed CLI with the version an adapter was
// verified on.
const (
	CompatVerified     = "verified"
	CompatNewer        = "newer"
	CompatOlder        = "older"
	CompatUnrecognized = "unrecognized"
	// CompatUnverified: the version was read, but no version is verified
	// to compare it with (an agent of the agents file that names none).
	CompatUnverified = "unverified"
	CompatMissing    = "missing"
)

// AgentInfo is an adapter plus what the startup probe found.
type AgentInfo struct {
	Name            string                `json:"name"`
	Aliases         []string              `json:"aliases,omitempty"`
	Installed       bool                  `json:"installed"`
	Path            string                `json:"path,omitempty"`
	Version         string                `json:"version,omitempty"`
	VerifiedVersion string                `json:"verified_version"`
	Compatibility   string                `json:"compatibility"`
	Advisory        string                `json:"advisory"`
	Capabilities    []string              `json:"capabilities"`
	Permissions     map[Permission]string `json:"permissions"`
	// Interaction is set for an agent that takes interactive runs or
	// approvals.
	Interaction *Interaction `json:"interaction,omitempty"`
	// Enforcement says what enforces a run's permission:
	// EnforcementSandbox when the gateway confines the agent's processes
	// (Config.Sandbox) besides the CLI's own flags, EnforcementCLI when
	// the CLI alone does.
	Enforcement string `json:"enforcement"`
	// Sandbox names the gateway's sandbox ("bubblewrap") when Enforcement
	// is EnforcementSandbox.
	Sandbox string `json:"sandbox,omitempty"`
	// Networks are the network policies the gateway can give the
	// agent's runs (see Network).
	Networks []Network `json:"networks"`
	// Source is SourceBuiltin or SourceConfigured.
	Source string `json:"source"`
	// Reports says which of a run's figures the agent reports.
	Reports Reports `json:"reports"`
}

// What enforces a run's permission, in AgentInfo.Enforcement.
const (
	EnforcementSandbox = "sandbox"
	EnforcementCLI     = "cli"
)

// NetworkNeeds is implemented by an adapter that knows where its CLI
// reaches its model, so that the gateway can confine the CLI's network to
// it (network "model" and "allow"). The runs of an agent whose adapter
// lacks it can only have network "open".
type NetworkNeeds interface {
	// ModelEndpoints returns the host:port of every endpoint the CLI
	// calls for its model, as its environment (getenv) and its home
	// configure it. None: the CLI needs no network for its model.
	ModelEndpoints(getenv func(string) string, home string) []string
	// ProxyEnv returns the variables, beyond HTTP_PROXY and HTTPS_PROXY
	// (which every CLI gets), that point the CLI and the commands its
	// tools run at the egress proxy at proxyURL. Most CLIs need none.
	ProxyEnv(proxyURL string) []string
}
