package acp

import (
	"encoding/json"

	"github.com/agentgate/agentgate/internal/runs"
)

// Counting is how a CLI's session/prompt result counts usage.
type Counting int

// The ways a CLI counts the usage it reports at the end of a turn.
const (
	// PerTurn: the result holds the turn's own usage, every model
	// request of the turn (Gemini).
	PerTurn Counting = iota
	// Cumulative: the result holds the session's usage so far (Copilot);
	// the core subtracts the previous turn's figure.
	Cumulative
	// LastRequest: the result holds only the last model request of the
	// turn (OpenCode). The core reports it as the turn's usage; the
	// adapter's doc must say that a turn with tool calls under-reports.
	LastRequest
)

// Bill is one turn's usage and cost, as Profile.TurnBill reads them.
type Bill struct {
	// Usage is the turn's own, normalized as for ReadUsage; OK says it
	// is known.
	Usage runs.Usage
	OK    bool
	// CostUSD is the turn's cost in dollars, nil when unknown.
	CostUSD *float64
	// Events precede usage.updated (a warning when the source could not
	// be read).
	Events []runs.Event
}

// Steering is what a second session/prompt does while a turn runs.
type Steering int

// The ways a CLI treats a prompt sent during a running turn.
const (
	// SteerCancels: the running prompt answers cancelled and the new one
	// runs (Gemini, Copilot). The core refuses Send(text, true) during a
	// turn: that is no steer, and the agent must not set
	// Interaction.Steer.
	SteerCancels Steering = iota
	// SteerMerges: the new prompt joins the running turn and both answer
	// with the same result (OpenCode). The core sends it and ends the
	// turn once every prompt of it answered.
	SteerMerges
)

// Profile is what one CLI's ACP differs in. The adapter fills it per run;
// every hook is optional.
type Profile struct {
	// Agent names the CLI in messages ("gemini").
	Agent string
	// Cwd is session/new's cwd; empty means the invocation's Dir.
	Cwd string
	// MCPServers are session/new's mcpServers entries, as the CLI takes
	// them; nil sends [].
	MCPServers []json.RawMessage
	// Mode, when set, is sent as session/set_mode after session/new, and
	// turn 1 starts once the CLI accepted it.
	Mode string
	// ConfigOptions are sent as session/set_config_option, one at a time
	// and in order, after Mode: for what a CLI takes only so (the model,
	// the effort, an auto-approve switch). Turn 1 starts once the CLI
	// accepted them all; a refusal fails it, so that no turn runs on a
	// model the run did not ask for.
	ConfigOptions []ConfigOption
	// Counting says how ReadUsage's figure relates to the turn.
	Counting Counting
	// ReadUsage reads the usage from a session/prompt result (the whole
	// result object), normalized to the gateway's convention (input
	// includes cached tokens, output includes reasoning). ok is false
	// when the result reports none. Nil: no usage.
	ReadUsage func(result json.RawMessage) (u runs.Usage, ok bool)
	// TurnUsage, when set, replaces ReadUsage and Counting: for a CLI
	// whose prompt result does not carry the whole bill and that keeps
	// it elsewhere (Gemini's chat recording). It is called once at the
	// end of every turn, whatever ended it: with the session id and the
	// session/prompt result, which is nil when the prompt answered an
	// error or the process ended first (from Finish). It returns the
	// turn's own usage, normalized as for ReadUsage (ok false: none),
	// and events to emit before turn.completed (a warning when its
	// source could not be read). It may do I/O; the Decoder's lock is
	// held.
	TurnUsage func(sessionID string, result json.RawMessage) (u runs.Usage, ok bool, evs []runs.Event)
	// UsageSoFar, when set, is asked for the running turn's usage so far
	// each time a tool call starts (a model response ended with it), with
	// the session id: the Decoder then emits usage.updated with the run's
	// sum before the turn plus it, so that the gateway's token budget
	// sees a long turn's usage before the turn ends. It must not change
	// what TurnUsage or TurnBill will report for the turn. It may do
	// I/O; the Decoder's lock is held.
	UsageSoFar func(sessionID string) (u runs.Usage, ok bool)
	// TurnBill, when set, replaces TurnUsage: asked the same way, it
	// also gives the turn's cost, for a CLI whose records price each
	// model request (OpenCode's store). The Decoder sums the costs into
	// usage.updated and the Outcome.
	TurnBill func(sessionID string, result json.RawMessage) Bill
	// SessionLoaded, when set, is called once session/load answered,
	// before turn 1 is sent, with the session id: a profile that bills
	// turns from the CLI's own records (TurnBill, TurnUsage) takes what
	// they hold then as the earlier processes' turns, not this run's.
	// Its events (a warning) follow session.started. It may do I/O; the
	// Decoder's lock is held.
	SessionLoaded func(sessionID string) []runs.Event
	// RefuseAll answers every permission request reject_once at once,
	// with a warning and no approval.requested: for a run that does not
	// ask for approvals, where the CLI's mode still asks for what the
	// run's permission level forbids.
	RefuseAll bool
	// Steering says what a prompt sent during a turn does.
	Steering Steering
	// DenyEndsTurn is whether the CLI ends the turn on a reject_once
	// (OpenCode, Copilot). It changes nothing in the core; it is here so
	// that one struct says what the adapter puts in Interaction.
	DenyEndsTurn bool
	// ToolName names a tool call for tool_call.started and
	// approval.requested. Nil: the call's kind ("execute", "edit", …),
	// else its title.
	ToolName func(tc ToolCall) string
	// MCPTool names the run's MCP server (a key of Spec.MCPServers) and
	// the tool's own name on it, for a call of an MCP tool; ok false for
	// a built-in tool. It sets tool_call.started's MCPServer and MCPTool
	// and approval.requested's MCPServer. Nil: no call is an MCP call.
	MCPTool func(tc ToolCall) (server, tool string, ok bool)
	// AllowMCP, with RefuseAll, answers a permission request for a tool
	// of one of the run's MCP servers (MCPTool) allow_once, without
	// asking: a run that does not ask for approvals and names an MCP
	// server means its tools to run.
	AllowMCP bool
	// ToolInput is a tool call's input for tool_call.started and
	// approval.requested. Nil: rawInput when the CLI sent one, else
	// {"title","kind"} and the text of its content.
	ToolInput func(tc ToolCall) json.RawMessage
	// ClassifyError classifies a JSON-RPC error the CLI answered a
	// request with (method is the request's). Nil: api_error.
	ClassifyError func(method string, e *RPCError) *runs.RunError
	// ClassifyExit classifies a process that ended before the turn that
	// ran, or before the session was up, from its exit and the tail of
	// its stderr. Nil: agent_crashed.
	ClassifyExit func(exit runs.Exit, stderrTail []byte) *runs.RunError
	// Update handles a session/update kind the core does not know, or
	// overrides one it knows: it gets the kind and the update object,
	// and returns the events and whether it handled it. An update no
	// one handles becomes agent.unparsed.
	Update func(kind string, update json.RawMessage) (evs []runs.Event, handled bool)
	// Reasoning is the visibility of agent_thought_chunk text in
	// reasoning.completed; empty means runs.VisibilityFull.
	Reasoning string
	// ClientVersion is initialize's clientInfo.version; empty means "1".
	ClientVersion string
}

// ConfigOption is one session/set_config_option: the option's configId
// and its value, a string (a select's value id) or a bool (a boolean
// option, sent with "type": "boolean" as the protocol's boolean options
// are).
type ConfigOption struct {
	ID    string
	Value any
}
