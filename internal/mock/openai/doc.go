// Package openai is a mock of the OpenAI Responses API that the real Codex
// CLI and GitHub Copilot CLI accept, for tests and benchmarks. It serves on
// a loopback address only; its URL ends in /v1, as a Codex model
// provider's base_url and COPILOT_PROVIDER_BASE_URL do.
//
// A Server answers each POST /v1/responses (or /responses) from a Scenario,
// which sees a parsed summary of the request (model, instructions,
// reasoning effort and summary, prompt_cache_key, tool names with the
// functions of namespace tools, the text format and its JSON schema, the
// input items in order, and the headers that tell Codex's threads apart)
// and returns a Response: output items (reasoning summaries, message text,
// function calls with generated call ids) streamed as server-sent events
// exactly as the API frames them (response.created, response.in_progress,
// output_item.added and .done, content_part, output_text,
// reasoning_summary_part and reasoning_summary_text,
// function_call_arguments, then response.completed
// with the usage), the same response as one JSON object when the request
// has stream:false, an HTTP error with an OpenAI error body or a raw body,
// an in-stream response.failed, a stream that stalls after
// response.created (Stall), or no answer at all (Hang), optionally after a
// delay. Other routes answer 404 with an OpenAI error body.
//
// The built-in scenarios cover what the adapter and gateway tests need:
// TextAnswer, ToolTurn (a reasoning summary and an exec_command call, then
// a text answer to its output, polling with write_stdin while the command
// runs), LongTool, AlwaysTool, Structured (answers the JSON when the
// request carries a json_schema format), Failure (400 with a raw body, 401,
// 429 with Retry-After, 500, 503, ...), ContextExceeded, Hang, Stall,
// Sequence, and HelperThread, which makes Codex spawn a sub-agent through
// its multi_agent_v1 tools, answers the sub-agent's own requests, and lets
// the root turn finish only after the sub-agent's turn has completed.
// For interactive runs, TwoTools asks for two exec_command calls in one
// turn (a refused call's result counts as a result), Turns answers with
// text billing a distinct TurnUsage for every request, so that each
// turn's usage can be told apart, and LongThenText asks for a long
// command once, polls it while it runs, and answers every later request
// (steered input, the next turn after an interrupt) with text;
// Request.Contains and Ledger.Seen tell whether a text reached the model.
// For GitHub Copilot CLI, which runs against a custom provider with
// COPILOT_PROVIDER_WIRE_API=responses, BashTurn is ToolTurn with Copilot's
// bash tool (waiting with read_bash while the command runs), and a
// Request keeps the instructions key, where Copilot sends its system
// prompt. Their usage has non-zero, distinct counts so that a test can
// tell the fields apart.
//
// With the RequireKey option the server answers a request without the
// right "Authorization: Bearer" key with 401 invalid_api_key, as the API
// does, so that a client without credentials meets a refusal.
//
// The server keeps a ledger: each request's summary, the status sent, and
// the usage billed, i.e. sent to the client in a complete response.
// Ledger.Billed sums it, so a test can compare an agent's normalized usage
// with what the server actually billed.
//
// Close drops hung and stalled requests without an answer and returns once
// every handler has returned; nothing outlives it.
package openai
