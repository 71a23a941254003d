// Package googleai is a mock of the Gemini API (generativelanguage) that
// the real Gemini CLI accepts, for tests and benchmarks. It serves on a
// loopback address only; its URL is a base URL for GOOGLE_GEMINI_BASE_URL.
//
// A Server answers POST /{version}/models/{model}:streamGenerateContent
// and :generateContent from a Scenario, which sees a parsed summary of the
// request (model and call from the path, the x-goog-api-key and other
// headers, system instruction, function declarations, contents with text,
// thought, functionCall and functionResponse parts, response MIME type and
// schema, thinking config) and returns a Response: candidate parts
// (thoughts, text, function calls) streamed as server-sent events exactly
// as the API frames them with alt=sse ("data: <chunk>" and a blank line,
// CRLF; finishReason and usageMetadata on the last chunk only), the same
// chunks as one JSON array without alt=sse, one response object for
// generateContent, an HTTP error with a Google error body
// ({"error":{code,message,status,details}}), or no answer at all (Hang),
// optionally after a delay. countTokens is answered by the server itself
// and bills nothing. Other routes answer 404 with a Google error body.
//
// The built-in scenarios cover what the adapter and gateway tests need:
// TextAnswer, ToolTurn (a thought, text and a run_shell_command call, then
// a text answer to its functionResponse), LongTool, AlwaysTool, Failure
// (400, 401, 403, 404, 429 with a RetryInfo, 500, 503, ...), InvalidKey (the
// API's 400 API_KEY_INVALID), Hang and Sequence, and for interactive runs
// ToolThenText (a tool call, then text for every later request), TwoTools
// (two calls in one turn, or the same call twice) and Turns (text, each
// request billed TurnUsage(n)). Each answers the CLI's
// model router (Request.Router), which the CLI calls when it has no model,
// with RouterAnswer. Their usage has non-zero, distinct counts, thoughts
// included, so that a test can tell the fields apart.
//
// The server keeps a ledger: each request's summary, the status sent, and
// the usage billed, i.e. the usageMetadata of an answer sent in full.
// Ledger.Seen finds a text in the request bodies (a message sent during
// a turn). Ledger.Billed sums it, so a test can compare an agent's normalized usage
// with what the server actually billed.
//
// Close drops hung requests without an answer and returns once every
// handler has returned; nothing outlives it.
package googleai
