// Package anthropic is a mock of the Anthropic Messages API that the real
// Claude Code CLI accepts, for tests and benchmarks. It serves on a loopback
// address only.
//
// A Server answers each POST /v1/messages (?beta=true or not) from a
// Scenario, which sees a parsed summary of the request (model, effort,
// system text, tool names, messages including Claude Code's role:"system"
// entry, and whether the last message carries tool results) and returns a
// Response: a message streamed as server-sent events exactly as the API
// frames them (message_start with input and cache usage, ping, content
// blocks with text, thinking, signature and input_json deltas,
// message_delta with the full usage, message_stop), the same message as one
// JSON object when the request has stream:false (the CLI's fallback after
// failed streams), an HTTP error with an Anthropic error body, a mid-stream
// error event, or no answer at all (Hang). HEAD /api/hello answers 200;
// other routes answer 404 not_found_error.
//
// The built-in scenarios cover what the adapter tests need: ToolTurn
// (thinking, text and a Bash call, then a text answer to its result),
// TextAnswer, Failure (401, 429 with retry-after, 500, 529, 400, ...), Hang,
// LongTool, AlwaysTool, Structured (calls the StructuredOutput tool when the
// request offers it), StreamFailure and Sequence, and for interactive runs
// TwoTools (two Bash calls one after the other, then text), ToolThenText (a
// Bash call, then text for every later request, steered or in a later
// turn) and Turns (text, billing each request a distinct TurnUsage). Their
// usage has non-zero, distinct cache counts so that a test can tell the
// fields apart.
//
// The server keeps a ledger: each request's headers and summary, the status
// sent, and the usage billed, i.e. reported to the client. Ledger.Billed
// sums it, so a test can compare an agent's normalized usage with what the
// server actually billed; Ledger.Seen finds a text in the requests, such as
// a message steered into a running turn.
//
// Close drops hung requests without an answer and returns once every
// handler has returned; nothing outlives it.
package anthropic
