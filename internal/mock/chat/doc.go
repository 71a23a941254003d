// Package chat is a mock of the OpenAI Chat Completions API, the wire that
// OpenAI-compatible model providers speak, for tests and benchmarks of the
// agent CLIs that use it (OpenCode's @ai-sdk/openai-compatible provider
// among them). It serves on a loopback address only; its URL ends in /v1,
// as such a provider's base URL does.
//
// A Server answers each POST /v1/chat/completions (or /chat/completions)
// from a Scenario, which sees a parsed summary of the request (model,
// stream and stream_options.include_usage, max tokens, reasoning_effort,
// the names of the functions offered, tool_choice, response_format and
// its JSON schema, the messages in order with their tool calls and the
// call each tool message answers) and returns a Response: reasoning
// (reasoning_content), text and tool calls (with generated call ids),
// streamed as chat.completion.chunk server-sent events the way the API
// frames them ("data: <json>" and a blank line, no event names: the
// assistant role first, then reasoning_content deltas, content deltas,
// each tool call as a header chunk with its id and name and an arguments
// chunk, a chunk with the finish_reason, the usage chunk with no choices
// when the request asked for it with stream_options.include_usage, and
// "data: [DONE]"), or the same answer as one chat.completion object when
// the request has no stream; an HTTP error with an OpenAI error body or a
// raw body; an error chunk in the middle of a stream (Failed); a stream
// that stalls after its first chunk (Stall); or no answer at all (Hang),
// optionally after a delay. Other routes answer 404 with an OpenAI error
// body.
//
// The built-in scenarios cover what the adapter and gateway tests need:
// TextAnswer, ToolTurn (reasoning and one call, then an answer to its
// result), ToolChain and ToolSteps (several calls, one after the other or
// several in one answer), LongTool, AlwaysTool, Structured, Failure (400,
// 401, 429 with Retry-After, 500, 503, ...), ContextExceeded,
// StreamError, Hang, Stall and Sequence; for interactive runs TwoTools
// (a call, then a second once the first has its result, then text),
// ToolThenText (calls on the first request, text on every later one: a
// steered message, the turn after an interrupt) and Turns (text, each
// request billed TurnUsage(n), distinct, so that turns are billed apart). Bash builds a call of the shell
// tool the agents that use this wire name bash; FunctionCall any other.
// Every built-in scenario that answers also answers a title request (see
// Request.TitleRequest), which agent CLIs send beside the first turn of a
// session, with Title and a usage of its own. Their usage has non-zero,
// distinct counts so that a test can tell the fields apart.
//
// The server keeps a ledger: each request's summary, the status sent, and
// the usage billed, i.e. charged for an answer sent in full, whether or
// not the client asked to be told (a client that leaves include_usage off
// cannot report what it was billed). Ledger.Billed sums it, so a test can
// compare an agent's normalized usage with what the server billed;
// Ledger.Titles and Ledger.Turns split title requests from the turns;
// Ledger.Seen reports whether a request's messages held a text (the raw
// bodies are not kept, their summaries are searched).
//
// Close drops hung and stalled requests without an answer and returns once
// every handler has returned; nothing outlives it.
package chat
