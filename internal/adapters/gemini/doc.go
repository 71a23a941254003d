// Package gemini is the adapter for Gemini CLI (`gemini`, npm
// @google/gemini-cli), verified with version 0.61.0 against the mock
// Gemini API in internal/mock/googleai. It builds the command line,
// prepares the CLI's home and decodes `--output-format stream-json`; it
// does no I/O of its own except PrepareHome and, for a session, reading
// the CLI's chat recording at the end of each turn ("Usage of a
// session").
//
// # Command
//
//	gemini --output-format=stream-json -p "" [--resume=<resume_session_id>]
//	       [--model=M] --approval-mode=<mode> [--policy=<home>/.gemini/agentgate-workspace-write.toml]
//
// The prompt is written to stdin: headless, the CLI reads stdin when it is
// not a terminal and puts it before the -p text, here empty (verified with
// a prompt that starts with "-"; the CLI truncates stdin at 8 MiB, far
// above the gateway's 512 KiB prompt limit). There is no stdin protocol:
// one process per run.
//
//   - model → --model. Without it the CLI takes GEMINI_MODEL (passed
//     through from the gateway), then model.name in the home's
//     settings.json, which PrepareHome sets to DefaultModel
//     (gemini-2.5-pro, the CLI's own default model). So a run always has
//     a concrete model: with none ("auto") the CLI first asks a routing
//     model (a non-streamed generateContent of gemini-3.5-flash-lite
//     answering a complexity score as JSON), whose own retries take about
//     a minute per failure and are not bounded by maxAttempts. A run that
//     does get "auto" (say, from GEMINI_MODEL=auto) carries a
//     model_routing warning.
//   - resume_session_id → --resume; the session keeps its id. The CLI
//     keeps sessions per directory, under $HOME/.gemini/tmp/<project>/,
//     so the run must be in the session's directory, which the supervisor
//     arranges. --resume needs only projects.json and the session's chat
//     recording (below): a home built from the base (BaseFiles: the
//     settings and policy PrepareHome wrote, the Google login) plus those
//     two (SessionFiles) resumes it at another path (homekeeper.go,
//     TestRealCLIHomeCarry); tmp/<project>/.project_root and
//     history/<project> are not needed. An unknown id exits 42 ("Error resuming session"),
//     api_error. The resumed run's usage is its own only: the CLI's
//     stats count this process's calls, not the replayed history's.
//   - A new run keeps the session id the CLI draws (a random UUID); it is
//     not given the run id with --session-id because the CLI names a
//     session's file after the minute and the id's first 8 characters,
//     which UUIDv7 run ids share for about a minute: two runs in one
//     directory would append to one file and break each other's resume.
//   - keep_session: sessions are always kept. timeout_seconds and cwd are
//     the supervisor's.
//
// system_prompt, effort, max_turns, max_budget_usd and output_schema are
// refused as unsupported: 0.61.0 has no flag for any of them (only files:
// GEMINI_SYSTEM_MD replaces the whole system prompt, model.maxSessionTurns
// and thinking budgets live in settings.json, shared by every run). The
// gateway enforces max_turns and max_total_tokens itself, from the events,
// and asks for output_schema in the prompt; it strips them from the spec
// the adapter gets.
//
// mcp_servers and attachments make a run go over ACP (PrefersSession),
// one-shot or not: see "MCP servers and images".
//
// # Permissions
//
//	permission       flags                                verified behaviour
//	read_only        --approval-mode=default              headless, tools that would ask are not registered: the model is
//	                                                      offered read_file, list_directory, glob, grep_search,
//	                                                      google_web_search, ...; a run_shell_command call fails as
//	                                                      tool_not_registered (a warning), and the run goes on
//	workspace_write  --approval-mode=auto_edit            write_file and replace run without asking, only inside the
//	(the default)    --policy=<home>/.gemini/agentgate-   workspace (the CLI's allowed-path check); the policy file allows
//	                 workspace-write.toml                 run_shell_command (redirection included), which is NOT confined
//	full             --approval-mode=yolo                 every tool, anywhere, plus background processes, todos,
//	                                                      skills and MCP tools
//
// The policy file is written by PrepareHome; the CLI's --allowed-tools
// does the same but is deprecated. No level is sandboxed: the CLI's
// --sandbox needs docker or podman.
//
// # Home and environment
//
// Headless, the CLI does nothing without an auth type in
// $HOME/.gemini/settings.json (exit 41), and phones home (usage
// statistics, update checks) unless that file says not to; no variable
// stops either. The adapter implements runs.HomePreparer: the supervisor
// calls PrepareHome once, at start, and it writes the settings, keeping
// what an operator put there. Always set: privacy.usageStatisticsEnabled,
// telemetry.enabled, general.enableAutoUpdate and
// enableAutoUpdateNotification, all false (with them a run talks to its
// model endpoint only). Set where absent: security.auth.selectedType
// "gemini-api-key", general.maxAttempts MaxAttempts (2: a 429 or 5xx
// fails in about 6 s instead of minutes; other 4xx are not retried),
// model.name DefaultModel, advanced.ignoreLocalEnv true (a project's .env
// stays out of the CLI's environment; a .gemini/.env in the run's
// directory is still read and no setting stops it). The CLI does not
// rewrite the file; one PrepareHome serves every run after it (tested
// with five runs in one directory, TestRealCLI/one_home).
//
// Every run gets GEMINI_CLI_TRUST_WORKSPACE=true (without it: exit 55),
// GEMINI_CLI_NO_RELAUNCH=true, GEMINI_TELEMETRY_ENABLED=false and
// NO_COLOR=1. Passed through when the gateway has them: GEMINI_API_KEY
// (sent as x-goog-api-key), GOOGLE_GEMINI_BASE_URL (every request goes
// there), GEMINI_MODEL (the model of a run that names none), and
// GOOGLE_API_KEY, which the CLI reads only when the settings select
// "vertex-ai" (express mode); with "gemini-api-key" it alone is not
// logged in, and beside GEMINI_API_KEY it is ignored, whatever the SDK's
// warning "Using GOOGLE_API_KEY" says.
//
// # Network
//
// ModelEndpoints follows the settings' security.auth.selectedType: for an
// API key the host of GOOGLE_GEMINI_BASE_URL, else
// generativelanguage.googleapis.com:443; aiplatform.googleapis.com:443
// for vertex-ai; for oauth-personal cloudcode-pa.googleapis.com (the
// model), oauth2.googleapis.com (token refresh) and www.googleapis.com
// (the account). Node 20 (the CLI's runtime here) has no NODE_USE_ENV_PROXY
// and its fetch ignores the proxy variables, but the CLI installs a proxy
// dispatcher of its own from HTTPS_PROXY/HTTP_PROXY: with them set
// (NO_PROXY empty) 0.61.0 sent its model requests through the proxy as a
// CONNECT tunnel, also to the mock's plain http://127.0.0.1, and a
// run_shell_command's curl got the variables and went through it
// (TestProxyRealCLI). It asked the proxy for nothing else. ProxyEnv adds
// nothing. A "proxy" in the operator's settings.json wins over the
// variables (the CLI then fails to connect: only the proxy leads out).
// An MCP server given by URL runs over ACP and was not checked here.
//
// # Processes
//
// The npm command is a Node script. Left to itself it re-executes itself
// with a larger heap and waits for the child, ignoring SIGTERM and SIGINT;
// GEMINI_CLI_NO_RELAUNCH keeps it to one process. That process exits 0 at
// once on SIGTERM or SIGINT, without a result line (so there is no
// graceful interrupt, and InterruptSignal is 0), and leaves a running
// shell tool behind: tools run in a session of their own (setsid). They
// carry the run's cookie, so the supervisor's tree kill takes them; the
// conformance suite's cancel and timeout cases leave no process, and did
// so without GEMINI_CLI_NO_RELAUNCH too, only slower (SIGTERM ignored,
// then SIGKILL). No BinaryResolver is needed: nothing native is orphaned.
//
// # Events
//
//	init                          session.started (session id, model; the CLI lists no tools),
//	                              a model_routing warning when the model is "auto"
//	message user                  nothing (the prompt's echo)
//	message assistant, delta      message.delta; the deltas since the last boundary become
//	                              message.completed at the next tool_use, tool_result or result
//	tool_use                      tool_call.started (tool_id, tool_name, parameters)
//	tool_result                   tool_call.completed (output, or the error's message; is_error
//	                              unless status is success); tool_not_registered adds a warning
//	error                         warning agent_<severity> ("Loop detected…", "Maximum session
//	                              turns exceeded", …)
//	result                        reasoning.completed (redacted) when thoughts were billed,
//	                              usage.updated, and the outcome
//
// Anything else becomes agent.unparsed with the reason. The CLI never
// prints thinking; the run's result is the last completed message (the
// text after the last tool call).
//
// # Usage
//
// Tokens appear only in the result line's stats, summed over every model
// call of the run (a router call too, as its own entry of stats.models):
// input_tokens is Σ promptTokenCount, which includes cached tokens, like
// the gateway's input; cached is Σ cachedContentTokenCount; output_tokens
// is Σ candidatesTokenCount, which excludes thoughts; total_tokens is Σ
// totalTokenCount, which includes them. So:
//
//	input_tokens      = stats.input_tokens
//	cache_read_tokens = stats.cached
//	reasoning_tokens  = stats.total_tokens − stats.input_tokens − stats.output_tokens   (= Σ thoughtsTokenCount)
//	output_tokens     = stats.output_tokens + reasoning_tokens
//	cache_write_tokens = 0 (Gemini's implicit caching bills no writes)
//
// For a real run: total 1219, input 1200, output 12, cached 300 → input
// 1200, cache read 300, output 19, reasoning 7. The real-CLI tests check
// every case against the mock's billing. (toolUsePromptTokenCount, which
// Gemini bills only for its built-in tools such as search grounding,
// would be counted as reasoning; function calls never bill it.) A run
// that ends without a result line (killed, cancelled, timed out, stopped
// at a budget) reports what the CLI's chat recording holds (see "Usage
// of a session"; the -p run records its session there too), and so does
// usage.updated at each tool_use line, before the result: a response's
// tokens are recorded once its stream ended, before its tool runs, so the
// gateway's token budget sees a long run as it goes
// (TestGivenUsageBeforeResult; the conformance suite's max_total_tokens). Not for a resumed
// run, whose recording holds the runs before it too: its usage is the
// result line's alone, and none when it has none. The CLI reports no
// cost.
//
// # Outcome
//
// A result line decides: status success → succeeded; status error →
// failed, classified from its error type (FatalTurnLimitedError →
// max_turns, FatalCancellationError → interrupted), then as an API
// failure. The CLI quotes the API's error body in the message for most
// statuses ("[API Error: {"error":{"code":401,…}}]") but rewrites a 429's
// and a 503's, and exits with the HTTP status mod 256 (400 → 144, 401 →
// 145, 403 → 147, 429 → 173, 500 → 244, 503 → 247; a 404 exits 1). So
// the status is read from the quoted body, else the exit code (144–255 →
// +256), else stderr ("status: 429"). 401/403, and the API's 400
// API_KEY_INVALID ("API key not valid") → not_authenticated; 429 or quota
// → rate_limited; 408, 5xx, an unreachable server ("fetch failed") →
// transient_api_error; a too long input → context_exceeded; other 4xx
// (404: model not found) → api_error.
//
// # Interactive runs and approvals (ACP)
//
// A run whose Spec.Session() (interactive, or approvals "ask") runs
//
//	gemini --acp [--model=M] [--policy=<home>/.gemini/agentgate-workspace-write.toml]
//
// with the same home, settings, environment and phone-home switches, and
// is driven by the internal/acp client (see its doc for the wire and the
// events) with this profile, verified with 0.61.0 against the mock:
//
//   - Mode, set with session/set_mode after session/new: approvals "ask"
//     → default, which asks for run_shell_command, write_file and replace
//     (and MCP tools) and runs the read-only tools (read_file,
//     list_directory, glob, grep_search, …) unasked. Approvals "never"
//     → the one-shot mapping's: read_only default, workspace_write
//     autoEdit plus the shell policy, full yolo. Whatever such a run's mode
//     still asks for is refused at once with reject_once and a warning
//     approval_refused (TestSessionRefusedWithoutApprovals), as -p leaves
//     the tool out. read_only with "ask" refuses the same way: the level
//     forbids everything that asks. "ask" leaves the shell policy out: it
//     would let the shell run unasked.
//   - Options: proceed_once (allow_once), proceed_always (allow_always,
//     "Allow for this session": the identical call is not asked again, and
//     nothing is written into the run's directory, TestSessionAllowSession),
//     cancel (reject_once). Deny: the model gets "Tool … was canceled by
//     the user." and goes on (DenyEndsTurn false); the CLI sends no update
//     for the denied call, which the client closes as failed.
//     deny_and_stop: reject_once and session/cancel: the prompt answers
//     cancelled and no further model request is made.
//   - No steer: a second session/prompt cancels the running one
//     (interactive.md); Interaction.Steer is false.
//   - InterruptTurn: session/cancel; the prompt answers cancelled within
//     a second and the running shell command's processes are gone
//     (TestSessionInterruptMidTool); the next prompt works.
//   - The tool name is the call id's prefix (run_shell_command__…); the
//     CLI sends no rawInput, so the input is the call's title (the
//     command line), kind and content. No tool_call precedes a
//     permission request in default mode.
//   - write_file and replace are asked with kind "edit", a title naming
//     the file relative to the cwd ("Writing to a.txt", "a.txt: old =>
//     new") and the change as diff content (absolute path, oldText, empty
//     for a new file, and newText), which the default input drops: their
//     input is {title, kind, changes: [{path, old_text, new_text}]}.
//     Allow writes the file; deny leaves it as it was, the model gets the
//     refusal and the turn ends a success (TestSessionEditApproval).
//   - Thoughts stream as agent_thought_chunk "**subject**\ndescription":
//     reasoning of visibility summary.
//   - Errors: a failed model call answers session/prompt with the HTTP
//     status as the JSON-RPC code and the API's error body quoted as the
//     message (a 429: "Rate limit exceeded. Try again later."), classified
//     as above: 401 and API_KEY_INVALID → not_authenticated, 429 →
//     rate_limited, 5xx → transient_api_error. Without GEMINI_API_KEY
//     session/new answers -32000 "Gemini API key is missing or not
//     configured." → not_authenticated; the client then closes stdin and
//     the CLI exits 0. An exit without an answer is classified as a
//     one-shot run without a result line. A model the API does not know
//     comes as code 500 with only the API's sentence ("models/x is not
//     found…"): read as a 404, api_error, not a transient failure.
//   - A session/set_mode that changes the mode makes 0.61.0 send the
//     agent message chunk "[MODE_UPDATE] <mode>"; it is the CLI's notice,
//     not the model's text, and is dropped.
//   - resume_session_id is refused for a Session run, so an interactive
//     run does not hibernate. session/load works in 0.61.0 only when it
//     comes in another minute than the one the session began in:
//     before reading the recording, the load starts a new one for the
//     same id, session-<this minute>-<id[:8]>.jsonl. In a later minute
//     that is a second, empty file, and the load reads the kept one
//     (verified from a fresh home holding only SessionFiles: it replays
//     the history as user_message_chunk notifications, session_context
//     included, before its answer {modes, models}). In the session's
//     first minute it is the kept file itself: the CLI appends a
//     metadata line and a "$set" of messages holding only the
//     session_context, which erases the history, and the load answers
//     -32603 "No previous sessions found for this project."; even
//     `-p --resume` of it then fails (exit 42). A run may hibernate 5 s
//     after its turn, so a wake can fall in that minute. And the replay
//     is not awaited (read in the 0.61.0 bundle: loadSession calls
//     streamHistory without await, and it awaits each update), so all
//     but its first message may come after the load's answer, where the
//     client cannot tell it from the resumed turn's output. A resumed
//     session's chat recording also holds the earlier turns' tokens,
//     which TurnUsage would bill to the first resumed turn unless read
//     as billed at the load (acp.Profile.SessionLoaded).
//
// One transport? Every run over ACP was tried (an experiment, not
// committed): usage, cost, error classes and process cleanup matched -p
// on every conformance case and every one-shot real-CLI case. Three
// things keep one-shot runs on -p: resume (session/load, above);
// read_only, where -p offers the model only the read tools while the ACP
// modes offer every tool and the gateway refuses the calls; and tool
// inputs, which ACP gives as title, kind and content instead of the
// model's call arguments.
//
// # MCP servers and images
//
// Verified with 0.61.0 against the mock and the project's stdio MCP
// server (internal/mcptest), TestGivenMCPTool, TestGivenMCPAsk,
// TestGivenMCPSecretRedacted, and the conformance suite's image_prompt and
// image_follow_up:
//
//   - A run given mcp_servers or attachments runs `gemini --acp`
//     (runs.SessionPreferrer), even one-shot: -p takes an MCP server only
//     from $HOME/.gemini/settings.json ("mcpServers" with "trust": true),
//     in the home every run shares, and an image only as "@path" inside
//     the workspace. Such a run cannot resume a session (ACP session/load
//     is unsafe in 0.61.0, above).
//   - The servers go in session/new's mcpServers (acp.MCPServers): stdio
//     {name, command, args, env: [{name, value}]}, remote {type: "http",
//     name, url, headers: [{name, value}]} (remote: built and unit-tested,
//     not run end to end). The env and header values are the command's
//     Secrets, redacted wherever they would appear.
//   - The CLI offers the model each tool as mcp_<server>_<tool>
//     (mcp_demo_reverse_text, beside mcp_demo_show_token; the request's
//     tools list), and its ACP tool call id starts with that name, its
//     title is "reverse_text (demo MCP Server)", kind "other", the tool's
//     text output is the call's content. tool_call.started carries
//     mcp_server and mcp_tool, split from the name against the run's
//     servers (a server name may hold "_": the longest that matches wins).
//   - Every mode but yolo asks for an MCP tool, offering
//     proceed_always_server, proceed_always_tool (both allow_always),
//     proceed_once and cancel. With approvals "never" the client allows
//     each call once, unasked (acp.Profile.AllowMCP), at every permission
//     level, read_only included: the run's creator named the server. With
//     approvals "ask" it is an approval.requested whose mcp_server is set;
//     allow_session picks the first allow_always the CLI lists,
//     proceed_always_server.
//   - With an MCP server the CLI does not exit at the end of its stdin
//     (seen: not within 30 s; interactive.md §5.10). The supervisor stops
//     a conversation's CLI that outlives the end of its stdin by 10 s
//     (or twice the kill grace) with SIGTERM, which ends 0.61.0 at once
//     under GEMINI_CLI_NO_RELAUNCH, then SIGKILL: the run ends about 10 s
//     after its last turn, with its outcome, and leaves no process.
//   - Images (Invocation.Images, and Session.Send's) go as ACP image
//     blocks {type: "image", mimeType, data: base64} after the prompt's
//     text block; the CLI sends them to the model as
//     {"inlineData":{"mimeType","data"}} parts of the user content, after
//     a countTokens request, and a follow-up message's images go with
//     that message only.
//
// Without a result line: a signal → process_killed; exit 41 (no
// GEMINI_API_KEY, or an auth type headless mode rejects) →
// not_authenticated with a hint; exit 42 "Error resuming session" →
// flag_rejected with a hint on sessions; a command line yargs refuses
// ("Unknown arguments"), or another exit 42, → flag_rejected with a hint
// naming the installed and the verified version; exit 55 and 52 →
// agent_crashed with a hint; an HTTP status in the exit code or stderr →
// its class; exit 0 (what SIGTERM does) and anything else → agent_crashed.
// Tool calls still open at the end are closed as failed, and text
// streamed since the last boundary is completed.
//
// # Usage of a session
//
// The ACP wire does not carry a turn's whole bill. The session/prompt
// result's _meta.quota.token_count is, in 0.61.0's code, Σ
// promptTokenCount (input, cached included) and Σ candidatesTokenCount
// (output, thoughts excluded) of the turn's model requests and nothing
// else; a cancelled turn's result has no _meta at all, an error answer
// none either; no session/update carries tokens (the CLI's ACP never
// sends usage_update). So the adapter reads the CLI's own chat
// recording, the one file the decoder reads (through the Invocation's
// Files, which the supervisor injects and tests fake; chatlog.go), at the
// end of every turn
// (acp.Profile.TurnUsage):
//
//	$HOME/.gemini/projects.json                 {"projects":{"<cwd>":"<slug>"}}: the run's directory's slug
//	                                            (seen: the directory's base name)
//	$HOME/.gemini/tmp/<slug>/chats/session-<YYYY-MM-DDTHH-MM>-<id[:8]>.jsonl
//	                                            the session's file: its first line {"sessionId":"<the ACP
//	                                            session id>",…}, then one JSON record per line
//	{"id":…,"type":"gemini","content":…,"tokens":{"input","output","cached","thoughts","tool","total"},"model":…}
//	                                            one model response, with its usageMetadata's
//	                                            promptTokenCount, candidatesTokenCount,
//	                                            cachedContentTokenCount, thoughtsTokenCount,
//	                                            toolUsePromptTokenCount and totalTokenCount
//
// A message may be recorded again under its id (with its tool calls, or
// its tokens once they came), and $set records may list messages; a
// rewind ($rewindTo) drops messages from the conversation but not from
// the bill. The turn's usage is what the file's messages sum to, each id
// once, less what they summed to at the end of the previous turn,
// normalized as the one-shot stats are (input = input, cache read =
// cached, reasoning = total − input − output, output = output +
// reasoning). Each turn reads only the lines appended since the last
// (a file found shorter was rewritten and is read again; its ids are
// the same).
//
// Mid-turn, at every tool call's start, the same file gives the turn's
// usage so far (acp.Profile.UsageSoFar), which usage.updated carries with
// the turns before: the gateway's token budget sees a turn that loops on
// tools. A turn the process did not finish (killed, stopped at a budget)
// is billed what the file holds.
//
// When: the CLI records a response's tokens with a synchronous append
// (appendFileSync) once its stream ended, inside the generator the ACP
// prompt loop drains, so before it answers session/prompt: the answer
// on stdout means the file holds the turn (verified with the real CLI
// on every turn of TestSessionTurnsBilledApart, where the file and the
// bill agree at each turn.completed). The file is found by the session
// id session/new answered: in the registry's slug for the run's
// directory, else in any project directory, by name and first line
// (the CLI also starts a session of its own at start-up, under another
// id, in the same directory).
//
// What is tested with the real CLI against the mock's ledger, thoughts
// and cached tokens billed: each of three turns equals its own bill
// (TestSessionTurnsBilledApart), a turn of three requests with an
// allowed and a denied call (TestSessionTwoToolsAllowThenDeny), an
// interrupted turn whose prompt result has no usage and the turn after
// it (TestSessionInterruptMidTool), and the conformance suite's
// interactive cases.
//
// Fallback: when the file cannot be found or read (the CLI stops
// recording on ENOSPC, a line longer than 32 MiB), or counts fewer input
// or output tokens for the turn than the prompt result does, that turn
// and every later one take the prompt result's figures (without cached
// and thought tokens, and nothing for a cancelled turn), with one
// warning, usage_unreadable or usage_mismatch, so that nothing is
// counted twice. Not counted by either: model calls the CLI makes
// outside the conversation (the model router of "auto", a next-speaker
// check, loop detection, history compression, which the mock's
// scenarios never trigger), and a response whose stream the CLI
// rejected and retried (its tokens are never recorded).
//
// # Progress and subagents
//
// Checked in 0.61.0's bundle (JsonStreamEventType), not recorded:
// --output-format stream-json prints only init, message, tool_use,
// tool_result, error and result. A long tool prints nothing until its
// tool_result, and a subagent's activity goes to the CLI's internal
// message bus (subagent-activity), not to stdout: there is no line to map
// to tool_call.progress or to a parent_tool_call_id.
package gemini
