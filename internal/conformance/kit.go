package conformance

import (
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// Kit is what the suite needs to know about one agent.
type Kit interface {
	// Adapter returns the adapter under test.
	Adapter() runs.Adapter
	// Bin returns the agent's real CLI. It fails the test, never skips
	// it, when the CLI is missing.
	Bin(t testing.TB) string
	// Serve starts the agent's mock model server on 127.0.0.1, playing sc
	// in the agent's own API, and returns how the CLI reaches it. home is
	// the CLI's home, for a kit whose CLI reads its endpoint from a file
	// there. The server is closed when the test ends.
	Serve(t testing.TB, sc Scenario, home string) Backend
}

// HomeTrap is implemented by a kit that knows how a run can change its
// CLI's configuration in its home so that later runs of that home run a
// command: a hook, a notifier, an MCP server the CLI starts. The suite's
// home_isolation case fails for a kit without it.
type HomeTrap interface {
	// TrapCommand returns a shell command that, run by a tool of a run
	// whose HOME is the CLI's home, changes the CLI's configuration there
	// so that every later run of the CLI in that home appends a line to
	// marker, an absolute path outside every run's directory.
	TrapCommand(marker string) string
}

// SlowFailures is implemented by a kit whose CLI cannot be made to give
// up on a failing model API within the suite's default bound: OpenCode
// retries a persistent 500 for about a minute, with no setting to shorten
// it. FailureBound returns how long such a run may take to fail, with
// the class the suite expects; the kit's doc says why.
type SlowFailures interface {
	FailureBound(status int) time.Duration
}

// Backend is a mock model server as the gateway's configuration sees it.
type Backend struct {
	// Env is the gateway's environment as the CLI reads it: credential
	// and endpoint variables, which reach the CLI through the adapter's
	// PassEnv.
	Env map[string]string
	// NoCredentials is Env with the credentials taken away, but the
	// endpoint kept, so that a CLI without them cannot reach anything
	// else either.
	NoCredentials map[string]string
	// Model is the model a run asks for; empty for the CLI's default.
	Model string
	// Billed returns the usage the server billed so far, in the
	// gateway's convention (input includes cached, output reasoning).
	Billed func() runs.Usage
	// Requests returns how many model requests the server received.
	Requests func() int
	// Seen reports whether a request the server received holds text,
	// anywhere in its body: the suite checks with it that a steered
	// message reached the model, and that an image did (its base64, as
	// every wire carries it).
	Seen func(text string) bool
}

// Kind names what a scenario's model does.
type Kind string

// The scenarios every mock plays.
const (
	// Text answers every request with Scenario.Text.
	Text Kind = "text"
	// Tool asks for one shell tool call running Scenario.Command, then
	// answers its result with Scenario.Text.
	Tool Kind = "tool"
	// LongTool asks for one shell tool call that runs for a minute and
	// whose command line carries Scenario.Marker, so that the suite can
	// find its processes. The command is the kit's: some CLIs refuse a
	// foreground `sleep 60`. Every later request, in the same turn (a
	// steered message) or the next (after an interrupt), is answered
	// with Scenario.Text.
	LongTool Kind = "long_tool"
	// Failure answers every request with HTTP Scenario.Status and the
	// API's error body (a 429 with Retry-After: 1).
	Failure Kind = "failure"
	// Hang accepts every request and never answers.
	Hang Kind = "hang"
	// TwoTools asks for a shell tool call running Scenario.Command, then,
	// once its result came back, for one running Scenario.Command2, then
	// answers with Scenario.Text. A result refused by the client counts
	// as a result. With Command2 equal to Command it is the same call
	// twice, for allow_session.
	TwoTools Kind = "two_tools"
	// Turns answers each request with Scenario.Text, like Text, for runs
	// of several turns; the suite reads Backend.Billed between turns.
	Turns Kind = "turns"
	// MCPTool asks for one call of the tool Scenario.MCPTool of the run's
	// MCP server Scenario.MCPServer, with the JSON object Scenario.Input
	// as its arguments, named as the CLI offers MCP tools to its model,
	// then answers its result with Scenario.Text.
	MCPTool Kind = "mcp_tool"
	// ToolLoop asks for a shell tool call running Scenario.Command on
	// every request, never ending the turn by itself, each request billed
	// a non-zero usage: the scenario of budgets, which the gateway must
	// stop.
	ToolLoop Kind = "tool_loop"
)

// Scenario is what the mock model does in one test.
type Scenario struct {
	Kind     Kind
	Text     string
	Command  string
	Command2 string
	Marker   string
	Status   int
	// MCPServer, MCPTool and Input are an MCPTool scenario's.
	MCPServer string
	MCPTool   string
	Input     string
}
