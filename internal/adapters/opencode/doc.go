// Package opencode is the adapter for OpenCode (`opencode`, npm
// opencode-ai), verified with version 1.18.33 against the mock Chat
// Completions API in internal/mock/chat, configured as an
// @ai-sdk/openai-compatible provider. It builds the command line and
// decodes `opencode run --format json`; apart from a pre-run check it
// does no I/O.
//
// # Command
//
//	opencode run --format=json --pure --thinking --title=
//	             [--session=<resume_session_id>] [--model=<provider/model>]
//	             [--variant=<effort>] [--auto]           (stdin: the prompt)
//
// The prompt goes on stdin, which `run` reads when it is not a terminal:
// given as an argument, it reaches the model wrapped in literal quotes.
// --pure loads no external plugin; --thinking prints the model's
// reasoning. --title= names the session after the prompt's first 50
// characters: without a title OpenCode sends the small model a title
// request of its own beside the first turn, which is billed and which no
// output reports (the real-CLI case title_unreported shows the run's
// usage then falls short of the bill by exactly that request). With a
// title, every request is the run's, and its usage is complete.
//
//   - model → --model, as provider/model; OpenCode fails a model that is
//     not one of a configured (or, for a built-in provider, credentialed)
//     provider's with only "Unexpected server error" (agent_crashed, with
//     a hint).
//   - effort → --variant: a variant the model defines (for a reasoning
//     model of an OpenAI-compatible provider low, medium and high, sent
//     as reasoning_effort, verified for high). OpenCode ignores a variant
//     the model does not define, without a word.
//   - resume_session_id → --session. OpenCode keeps every session (so
//     keep_session needs nothing) in the agent's home, and continues one
//     only in the directory it began in: started elsewhere, run prints
//     nothing and never ends. The gateway resumes in the session's
//     directory by default, and Preflight checks it first (below). The
//     resumed run prints only its own steps, so its usage is its own.
//   - cwd → the process's directory.
//
// system_prompt, max_turns, max_budget_usd and output_schema are refused
// as unsupported: `run` has no such options (an agent's prompt and steps
// limit live only in OpenCode's configuration). The gateway enforces
// max_turns, max_total_tokens and max_budget_usd itself, from the events
// (usage.updated after every step, with the cost so far: OpenCode prices
// each step from the model's cost in its configuration), and asks for
// output_schema in the prompt; it strips those fields before Command.
//
// # Network
//
// ModelEndpoints is the baseURL (or api) of every provider the
// configurations OpenCode reads declare, the built-in host of a provider
// they name without one, of the default model's provider and of those the
// passed key variables (OPENAI_API_KEY, ANTHROPIC_API_KEY) or `opencode
// auth login` give credentials, since a run may pick any provider's
// model; OpenCode's own (opencode.ai) when there is none. With
// HTTP_PROXY, HTTPS_PROXY and ALL_PROXY set (NO_PROXY empty) 1.18.33 sent
// its model requests to the mock at 127.0.0.1 through the proxy as
// absolute-form POST /v1/chat/completions, and a bash command's curl got
// the variables and went through it (TestProxyRealCLI). It also asked the
// proxy for registry.npmjs.org:443 (a CONNECT, for its provider's npm
// package) and, refused, ran on. ProxyEnv adds nothing. An MCP server
// given by URL was not checked here.
//
// # Permissions
//
// The level goes in OPENCODE_PERMISSION, which OpenCode merges into the
// permission table after every configuration, so it decides the
// permissions it names and leaves the operator's others alone. `run`
// rejects any permission that would ask.
//
//	permission       OPENCODE_PERMISSION                                  verified behaviour
//	read_only        {"edit":"deny","bash":"deny",                        bash, edit and write are not offered to the model;
//	                  "external_directory":"deny"}                        a bash call fails as OpenCode's "invalid" tool
//	workspace_write  {"edit":"allow","bash":"allow",                      touch in the directory runs; touch /tmp/x and
//	(the default)     "external_directory":"deny"}                        cat /etc/hostname are refused (no sandbox:
//	                                                                      only paths OpenCode sees in a command count)
//	full             {"*":"allow"}, and --auto                            touch outside the directory runs
//
// A refused call does not fail the run: the tool call completes as an
// error and the decoder adds a permission_denied warning.
//
// # Configuration and credentials
//
// The operator configures the provider as OpenCode documents it:
// OPENCODE_CONFIG_CONTENT or OPENCODE_CONFIG in the gateway's environment
// (both passed through), or a configuration file in the agent's home
// (AGENTGATE_OPENCODE_HOME, ~/.config/opencode/opencode.json). The
// adapter writes none of them: the gateway's own settings are OpenCode's
// environment switches, which change no configuration, so OpenCode's own
// merge of the operator's files and variables stands:
// OPENCODE_DISABLE_AUTOUPDATE, OPENCODE_DISABLE_SHARE,
// OPENCODE_DISABLE_MODELS_FETCH (the bundled model catalogue is used),
// OPENCODE_DISABLE_LSP_DOWNLOAD, and OPENCODE_PERMISSION.
//
// Passed through: OPENCODE_CONFIG_CONTENT, OPENCODE_CONFIG,
// OPENAI_API_KEY and ANTHROPIC_API_KEY (the built-in providers' keys),
// and every variable the configuration files in the agent's home name as
// {env:NAME} (comments aside), which Command reads. Command cannot see
// the values of OPENCODE_CONFIG_CONTENT and OPENCODE_CONFIG, so a
// variable only they name is not passed; Preflight then says so. The
// project's files in the run's directory are never read for names: the
// client writes them.
//
// # Interactive runs and approvals (acp.go)
//
// A run whose Spec.Session() (interactive, or approvals ask) runs
// `opencode acp --pure` (no --title, --model or --variant there) and gets
// the shared ACP client (internal/acp) with OpenCode's profile, wrapped
// to set the model and effort: after session/new it sends
// session/set_config_option "model" (provider/model) and "effort", one at
// a time, and only then turn 1's session/prompt; a refused option fails
// turn 1 with OpenCode's answer and ends the session (no request is
// made). Verified with 1.18.33 against the mock:
//
//   - Approvals: OPENCODE_PERMISSION asks for every permission ("*":
//     bash, edit/write, task, MCP tools) but the read-only tools (read,
//     glob, grep, list, todoread/todowrite, webfetch, websearch,
//     codesearch, lsp, skill), and denies what the level forbids without
//     asking: read_only adds edit, bash and external_directory deny,
//     workspace_write external_directory deny, full external_directory
//     allow. A read ran unasked and a bash call asked (real-CLI test
//     TestSessionAllowThenDeny). Without approvals the one-shot
//     mapping is used and anything that still asks is refused
//     (Profile.RefuseAll). tool_call (pending, titled with the tool's
//     name) and tool_call_update come before session/request_permission
//     (options once/always/reject); approval.requested names the tool
//     after that first title ("bash").
//   - deny (reject) ends the turn with no further model request
//     (DenyEndsTurn); always covered the identical second call.
//   - write and edit are asked like bash (kind "edit", titled with the
//     absolute path); their input is the permission's rawInput
//     {filepath, diff}: the absolute path and a unified diff of the
//     change. Allow writes the file; deny leaves it as it was and ends the
//     turn a success (TestSessionEditApproval). edit needs a read of the
//     file first in the session, which runs unasked.
//   - A second session/prompt during a turn joins it (Steer): both
//     prompts answer with the same result once the turn ends.
//   - session/cancel stops the running tool and the prompt answers
//     cancelled; the next prompt works.
//   - A bash tool whose process dies of a signal never completes: no
//     tool_call_update and no further model request within 15 s, for a
//     SIGKILL from outside or from the process itself (the conformance
//     kit's long command is built so that its shell outlives it).
//   - No title request: OpenCode asks the model for a session title
//     beside a session's first turn, billed and reported nowhere.
//     PrepareHome writes {"agent":{"title":{"disable":true}}} into
//     <home>/.agentgate/opencode-session/opencode.json and a Session run
//     adds that directory with OPENCODE_CONFIG_DIR, which OpenCode merges
//     after the operator's files; nothing else of the configuration
//     changes.
//   - Errors: a failed request answers session/prompt with -32603
//     "Internal error: <the API's message>" and data
//     {"service":"session","errorName":"APIError"}: the HTTP status and
//     isRetryable of `run` are lost, so an APIError is classified from
//     the message's words (rate limit → rate_limited, API key /
//     unauthorized → not_authenticated, server error / overloaded →
//     transient_api_error, else api_error); other error names as in
//     `run`.
//   - resume_session_id in an interactive run is ACP session/load {sessionId,
//     cwd, mcpServers} (internal/acp; refused for a Session run that is
//     not interactive), so an interactive run hibernates
//     (Interaction.ResumesSession). Verified with 1.18.33
//     (TestSessionLoadResumesKeptSession): a turn in one process, then a
//     fresh home restored from SessionFiles alone (opencode.db with its
//     -wal and -shm; the session lives there, keyed to the run's
//     directory, the same cwd) and a new `opencode acp`: initialize
//     advertises loadSession, session/load replays the history as
//     user_message_chunk and agent_message_chunk notifications before
//     its answer (dropped by the client), and the next prompt's model
//     request carries turn 1's text. The store then holds the earlier
//     processes' messages: the load's answer reads them as billed
//     (Profile.SessionLoaded), so the first turn is billed only its own.
//
// Usage of a Session run (store.go). The session/prompt result's usage
// ({inputTokens (cache excluded), outputTokens (reasoning excluded),
// thoughtTokens, cachedReadTokens, cachedWriteTokens}) is that of the
// turn's LAST model request only: OpenCode builds it from the last
// assistant message, and its ACP translator forwards only text,
// reasoning and tool parts, never a step's tokens (usage_update, sent
// after a turn only for a model with a context limit, carries the last
// request's context size and the session's cost, no tokens). A turn with
// tool calls would fall short by every request before its last.
//
// So each turn is billed from OpenCode's own store, the SQLite database
// <home>/.local/share/opencode/opencode.db (WAL mode; OPENCODE_DB, which
// would move it, is never passed; it holds every session of the home,
// so it, with its -wal and -shm, is what SessionFiles carries to resume
// one in another home: verified, a fresh home at another path with the
// base files and that database alone resumes with the history
// (homekeeper.go, TestRealCLIHomeCarry)), read-only with the pure-Go driver
// github.com/ncruces/go-sqlite3, through an injected interface (records)
// so that decoder tests touch no file. Its message table holds one row
// per message ({id, session_id, data}); an assistant message's data has
// its request's tokens ({input, output, reasoning, cache:{read, write}},
// cache out of input and reasoning out of output, as a step_finish) and
// its cost, priced as `run` prices a step. At every end of a turn the
// decoder reads the messages of the session (the id session/new gave,
// which is OpenCode's own, "ses_…") and of the sessions it started
// (parent_id: a subagent's; not verified with a real subagent), and
// bills the turn what every assistant message was billed since the
// previous turn ended: a new message whole, one still growing by its
// growth. Verified with 1.18.33: in a turn of three requests the stored
// messages summed exactly to the mock's bill (input 1000+300+300 plus
// cache read 4000+4900+4900 = 15400, output 38+23+23 plus reasoning
// 12+7+7 = 110), their cost to the configured prices
// (TestSessionAllowThenDeny, TestSessionToolTurnsBilledApart, the
// conformance cases approval_allow_then_deny and approval_allow_session).
//
// During a turn, at every tool call's start (Profile.UsageSoFar), the
// store is read the same way without moving on, and usage.updated
// carries the run's usage before the turn plus the turn's so far, and
// the cost likewise (the wrapper adds the turn's cost, which the core's
// hook does not carry): so the gateway's max_total_tokens and
// max_budget_usd stop a turn that never ends by itself. The figure lags
// one request: the request that asked for the call is stored once its
// tools return (TestGivenUsageMidTurn: it grew from call to call, with a
// cost, in a turn of endless bash calls).
//
// The rows are final when the prompt answers: OpenCode's ACP prompt
// awaits its session's prompt, whose loop has written every message
// (time.completed set) when it returns, then reads the session's
// messages back from the store (for usage_update) and only then answers.
// Read at the moment the answer is decoded, every message of the turn
// was complete (time.completed, finish set) in a probe and in every
// real-CLI test. No wait is needed, and none is made.
//
// A store that is missing or cannot be read (a lock held beyond a 250 ms
// busy timeout, a query beyond 3 s, a row of more than 1 MiB, more than
// 65536 messages, data that is not JSON), or that counts fewer input or
// output tokens for the turn than the prompt result, makes the turn take
// the prompt result's figures, with one warning (usage_unreadable,
// usage_mismatch); every later turn takes them too, without a cost, so
// that nothing is counted twice. A turn whose process ended before its
// answer is billed what the store holds then: killed while it waited for
// an approval, the requests whose steps had finished, not the one whose
// tool calls were pending, whose tokens OpenCode records only once its
// tools return (TestSessionKilledMidTurn).
// OpenCode leaves its WAL behind, which a reader recovers). Cost is reported per turn
// (turn.completed) and summed for the run when above zero.
//
// Preflight fails a run at once, before OpenCode starts (which takes
// seconds), when the provider of the run's model (the model field, or
// the configurations' model) names a key as {env:NAME} and NAME is not in
// the run's environment (OpenCode would send no key at all), or is openai
// or anthropic without a configuration, key variable or `opencode auth
// login` in the home: not_authenticated, with a hint. For a resumed run
// it runs `opencode session list --format json` in the run's directory:
// a session it does not list, or one that began in another directory, is
// api_error at once instead of a run that hangs.
//
// # MCP servers and images (mcp.go, images.go)
//
// A run given mcp_servers or attachments runs over ACP even when it is
// neither interactive nor asks (PrefersSession; the supervisor ends the
// session after its one turn). `opencode run` takes MCP servers only
// from OpenCode's configuration, which the adapter could reach only
// through OPENCODE_CONFIG_CONTENT (the operator's own would be replaced)
// or a file (in the shared home, or written by the adapter, which does no
// I/O); session/new takes them per session. Verified with 1.18.33
// against the mock and the project's stdio MCP server (mcptest):
//
//   - session/new mcpServers: a stdio server as {name, command, args,
//     env: [{name, value}]}, a remote one as {type: "http", name, url,
//     headers: [{name, value}]} (initialize says mcpCapabilities http and
//     sse; a remote server was not exercised). The env reached the server
//     (show_token echoed its token). Env and header values are the
//     Command's Secrets: they travel on stdin, in session/new.
//   - OpenCode offers a tool to the model as "<server>_<tool>"
//     ("demo_reverse_text"), and its first tool_call is titled so;
//     tool_call.started and approval.requested name the run's server and
//     the tool (Profile.MCPTool; the longest server name that is a prefix
//     wins, with OpenCode's replacement of characters other than
//     [A-Za-z0-9_-] by "_"). Without approvals the call ran unasked
//     (kind "other"), the result was the tool's text
//     ("reversed:pcm olleh"); should the operator's configuration make an
//     MCP tool ask, it is allowed (Profile.AllowMCP). With approvals ask,
//     "*":"ask" covers MCP tools: the call was asked, tool
//     "demo_reverse_text", and ran once allowed (TestSessionEditApproval).
//   - A resumed run with MCP servers or attachments is refused
//     (resume_session_id) unless it is interactive: session/load is
//     verified for interactive runs only.
//
// Images go as ACP image blocks after the prompt's text, and after a
// message's (Session.Send), and reached the model as image_url parts with
// a data: URL. Only for a model whose entry in the configuration lists
// "image" in modalities.input: with a plain entry, or with only
// "attachment": true, OpenCode replaced the image with the text
// `ERROR: Cannot read "image" (this model does not support image input).
// Inform the user.`, silently for the client. So Command (for the run)
// and Send (for a message) refuse images with an unsupported error naming
// attachments unless the configurations the adapter sees (the home's
// files, and with WithGetenv the operator's OPENCODE_CONFIG_CONTENT and
// OPENCODE_CONFIG) declare it for the run's model (its model field, or
// the configurations' "model"); Preflight checks again with the run's
// environment. A model without an entry in those configurations (one of
// the bundled catalogue's) is refused too: nothing the adapter can read
// says it takes images.
//
// # Binary
//
// The npm package's bin/opencode.exe is made the native binary of the
// platform's package (opencode-linux-x64, ...) by the package's install
// script, a hard link; without the script it stays a shell stub that
// prints "postinstall script was not run". ResolveBinary keeps a native
// binary and maps the stub to the platform package's binary. OpenCode
// runs as one process; each tool command runs in a session of its own,
// which OpenCode does not end when it is killed: SIGTERM (the stop
// signal: SIGINT lets a running tool finish first) ends OpenCode at once
// and the supervisor's kill of the run's tree takes the rest.
//
// # Events
//
//	first line with a sessionID       session.started (the run's model, no tool list)
//	step_start                        nothing (a step is one model request)
//	reasoning                         reasoning.completed (full; redacted when empty)
//	text                              message.completed (whole texts: run prints no deltas)
//	tool_use completed/error          tool_call.started (mcp_server, mcp_tool for a tool of the
//	                                  run's MCP servers) and tool_call.completed together: run
//	                                  prints a call only once it has finished; is_error for
//	                                  an error, a command's non-zero exit and OpenCode's
//	                                  "invalid" tool; a permission refusal adds a warning
//	  write / edit                    file.changed between them (add when the file was new;
//	                                  edit's unified diff); paths relative to the directory
//	  todowrite                       plan.updated after them (cancelled counts as completed)
//	step_finish                       usage.updated with the run's usage so far
//	error                             nothing; the outcome
//
// Anything else becomes agent.unparsed with the reason.
//
// # Usage and cost
//
// Each step_finish carries that request's tokens with the cache taken out
// of input and the reasoning out of output: input = input + cache.read +
// cache.write, output = output + reasoning, summed over the steps. The
// real-CLI tests check the sum against the mock's billing (e.g. billed
// 5000 prompt with 4000 cached and 50 completion with 12 reasoning,
// printed as input 1000, cache.read 4000, output 38, reasoning 12). A step
// still in its tools when the run is stopped prints no tokens, so a
// cancelled run lacks that last request's usage. OpenCode prices each
// step from its catalogue or the model's cost in the configuration; the
// sum is the run's cost, reported when above zero (OpenCode reports 0 for
// a model without a price).
//
// # Outcome
//
// A failure is one error line and exit 1. APIError is classified by its
// HTTP status: 401/403 → not_authenticated, 429 → rate_limited, 408 and
// 5xx → transient_api_error, a 4xx whose body has the code
// context_length_exceeded → context_exceeded, other 4xx → api_error;
// without a status (a refused connection), by isRetryable. Other names:
// ProviderAuthError → not_authenticated, ContextOverflowError →
// context_exceeded, ContentFilterError → refused, MessageAbortedError →
// interrupted, MessageOutputLengthError and StructuredOutputError →
// api_error, UnknownError → by the OpenAI error object it carries as its
// message (an in-stream error), else agent_crashed. Without an error line:
// a signal → process_killed; "Session not found" → api_error; the
// command's usage on stderr (an unknown flag) → flag_rejected naming the
// installed and the verified version; exit 0 without a step →
// agent_crashed; a last step stopped by the content filter → refused.
//
// OpenCode retries a 5xx, 429 and a failed connection 5 times, honouring
// Retry-After(-Ms) and otherwise waiting 2, 4, 8, 16 and 32 s, with no
// setting to bound it and no output meanwhile: a persistent 5xx fails the
// run only after about 65 s (verified), unless the run's deadline comes
// first. A 429 with Retry-After: 1 fails in 6 to 10 s.
//
// # Traffic
//
// With the switches above a run talks to its model endpoint, plus one
// thing OpenCode does unconditionally: while loading its configuration it
// installs its plugin SDK (@opencode-ai/plugin) from registry.npmjs.org
// into the home's ~/.config/opencode, in the background, until a
// node_modules there satisfies it (offline it fails quietly, and the
// next run tries again). Installing it there once (`npm install --prefix
// <home>/.config/opencode @opencode-ai/plugin@1.18.33`) should stop it:
// with a node_modules and a package-lock.json there that list it, a run
// made no DNS query at all (verified; the npm install itself was not
// tried).
//
// # Progress and subagents
//
// Checked in 1.18.33's binary (the run command's JSON writer), not
// recorded: --format json prints step_start, step_finish, text,
// reasoning, error, and tool_use only once a call completed or failed. A
// running tool prints nothing, and the parts of a subagent's (task tool's)
// child session are skipped (the writer keeps the run's own session id),
// so there is no line to map to tool_call.progress or to a
// parent_tool_call_id.
package opencode
