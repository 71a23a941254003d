// Package copilot is the adapter for GitHub Copilot CLI (`copilot`),
// verified with version 1.0.102 against the mock Responses API in
// internal/mock/openai, as the CLI's own model provider
// (COPILOT_PROVIDER_WIRE_API=responses). It builds the command line and
// decodes `--output-format json`. Its decoder reads, through the
// Invocation's Files, the session's record as the run goes and the run's
// usage file at Finish (see Usage).
//
// # Command
//
//	copilot --output-format=json --session-id=<run id> --usage-output-file=<home>/.agentgate-usage/<run id>.json
//	        --no-auto-update --disable-client-telemetry [--model=M] [--reasoning-effort=E] <permission flags>
//	        < prompt
//
// The prompt is written to stdin: without -p and with stdin not a
// terminal, the CLI takes stdin as the prompt and runs it
// non-interactively (verified with a 140 KiB prompt, over the kernel's
// 128 KiB limit on one argument, and with a prompt starting with "-").
// A new run's session is named after the run, so its id is known before
// the CLI says it (the result line repeats it).
//
//   - model → --model (in custom-provider mode it overrides COPILOT_MODEL
//     and is the request's model);
//   - effort → --reasoning-effort (none, minimal, low, medium, high,
//     xhigh, max; the request's reasoning.effort); other values are
//     refused as unsupported, as the CLI would reject them;
//   - timeout_seconds, cwd, permission: the supervisor's, and below.
//
// Refused as unsupported: system_prompt (the CLI has no such option; it
// reads AGENTS.md and .github/copilot-instructions.md), max_turns (no
// limit), max_budget_usd (--max-ai-credits counts AI credits, not
// dollars, and the CLI reports no cost) and output_schema (none).
//
// resume_session_id → --resume=<id>, which keeps the session id; only the
// new prompt's events are printed, and an unknown id fails at once with
// "No session, task, or name matched" (api_error). The usage file of a
// resumed session counts the whole session: after a first run billed 1000
// input tokens, the resumed run's file said 2000. The decoder therefore
// reports it as Outcome.SessionUsage, and the supervisor subtracts the
// session's total it recorded after the run before; the resumed run emits
// no usage.updated of its own, and run.completed carries its own usage.
// A new run's session id is its run id (--session-id).
//
// # Permissions
//
//	permission       flags                verified behaviour
//	read_only        --deny-tool=write    no tool is pre-approved and nobody can approve one, so the CLI runs only
//	                                      what it classes as read-only: ls and git status ran; touch, echo > f,
//	                                      the create tool and cat of a file outside the working directory were
//	                                      denied (tool_call.completed is_error, a permission_denied warning)
//	workspace_write  --allow-all-tools    every tool runs without asking, but the CLI's path check denies commands
//	(the default)                         and file edits that name a path outside the working directory and the
//	                                      temp directory (touch /elsewhere/f, cd .. && touch f were denied). It
//	                                      reads the command line and is no sandbox: sh -c 'touch /elsewhere/f' ran
//	full             --allow-all          --allow-all-tools --allow-all-paths --allow-all-urls: touch /elsewhere/f ran
//
// A denied tool call does not fail the run: the model gets the denial as
// the tool's result and the prompt goes on. The bash tool runs each
// command as `/bin/bash --norc --noprofile -c <command>` in a session of
// its own, with the CLI's environment less the provider's key.
//
// # Environment
//
// Always set: --no-auto-update and COPILOT_AUTO_UPDATE=false (no update
// download), --disable-client-telemetry (without it even a run that fails
// for want of a login looks up a telemetry host), NO_COLOR=1. Passed
// through when the gateway has them (Description.CredentialEnv):
// COPILOT_GITHUB_TOKEN, GH_TOKEN, GITHUB_TOKEN (GitHub's models, in that
// order of precedence), COPILOT_OFFLINE, COPILOT_MODEL, and the custom
// provider variables of `copilot help providers`: COPILOT_PROVIDER_
// BASE_URL, _TYPE, _API_KEY, _API_KEY_COMMAND, _BEARER_TOKEN, _WIRE_API,
// _TRANSPORT, _AZURE_API_VERSION, _HEADERS, _MODEL_ID, _WIRE_MODEL,
// _MAX_PROMPT_TOKENS and _MAX_OUTPUT_TOKENS. The tests use offline mode
// (COPILOT_OFFLINE=true, COPILOT_PROVIDER_BASE_URL, COPILOT_PROVIDER_API_KEY
// sent as "Authorization: Bearer", COPILOT_PROVIDER_WIRE_API=responses,
// COPILOT_MODEL); in production the CLI uses the operator's GitHub token or
// a login in its home (HOME=AGENTGATE_COPILOT_HOME, state in .copilot
// there). A session is the directory .copilot/session-state/<id>
// (events.jsonl, workspace.yaml, checkpoints): a home built from the
// base's .copilot/config.json and settings.json (BaseFiles) plus that
// directory alone (SessionFiles) resumes it with its history at another
// path; session-store.db is not needed (home.go, TestRealCLIHomeCarry). The CLI masks the key's value wherever it appears in its output,
// so a key that is a common word would garble the JSON lines.
//
// The CLI retries a failed model request by itself, with no setting to
// change that: a 401 twice (3 requests, about 4 s), a 429 five times (6
// requests, about 7.5 s with Retry-After: 1), a 500 five times with a
// growing backoff (6 requests, 15 to 19 s), a refused connection five
// times (about 26 s); a 400 not at all. The run's deadline bounds the
// rest.
//
// # Network
//
// ModelEndpoints is the host of COPILOT_PROVIDER_BASE_URL (BYOK), else
// GitHub's: api.github.com and the githubcopilot.com API hosts. With
// HTTP_PROXY, HTTPS_PROXY and ALL_PROXY set (NO_PROXY empty) 1.0.102 (a
// native binary with a Node runtime of its own) sent its model requests,
// offline BYOK on the mock at 127.0.0.1, through the proxy as
// absolute-form POST /v1/responses, and a bash command's curl got the
// variables and went through it (TestProxyRealCLI); it asked the proxy
// for nothing else. ProxyEnv adds nothing. An MCP server given by URL was
// not checked here.
//
// # Interactive runs and approvals (ACP)
//
// A run whose Spec.Session() (interactive, or approvals "ask") runs the
// CLI's Agent Client Protocol server through the shared client in
// internal/acp (session.go):
//
//	copilot --acp --no-auto-update --disable-client-telemetry [--model=M] [--reasoning-effort=E] <flags>
//
// with the one-shot environment and the run's MCP servers (see MCP
// servers). The prompt is turn 1's session/prompt (no stdin payload, no
// usage file); session/new gets the run's directory and no MCP servers
// (the CLI rejects stdio entries there). The flags:
//
//	permission       approvals never (interactive)    approvals ask
//	read_only        --deny-tool=write, refuse all    --deny-tool=write, refuse all (nobody is asked)
//	workspace_write  --allow-all-tools                none: every shell and edit call is asked
//	full             --allow-all                      --allow-all-paths --allow-all-urls: calls are asked
//
// Verified with 1.0.102 against the mock (session_test.go):
//
//   - Every bash call asks (session/request_permission, kind execute,
//     rawInput {command, commands}), ls included; the create and edit
//     tools ask (kind edit, title "Create file" / "Edit file", rawInput
//     {fileName, diff}: the absolute path and a git diff; the wire names
//     neither tool, so approval.requested says "edit" for both). Allowed,
//     the file is written; denied, it is left as it was and the turn ends
//     a success (TestSessionEditApproval). view, glob and grep ran
//     without asking. Options allow_once, allow_always, reject_once;
//     approval.requested names bash for execute, else the kind.
//   - read_only asks for everything the CLI asks for, so every request is
//     answered reject_once at once with a warning: unlike a one-shot
//     read_only run, where ls runs, no shell command runs, and the refusal
//     ends the turn.
//   - With approvals at workspace_write, a command naming a path outside
//     the working directory and the temp directory (touch /elsewhere/f) is
//     asked like any other and runs once allowed: the path check that
//     denies it in a one-shot run guards only what the CLI approves by
//     itself. The approval shows the command; the person decides.
//   - reject_once (deny): the call fails ("The user rejected this tool
//     call.") and the prompt answers end_turn with no further model
//     request (Interaction.DenyEndsTurn). deny_and_stop adds
//     session/cancel; the prompt answered end_turn or cancelled. An
//     unanswered request waits; the supervisor's deadline denies it.
//   - allow_always: the identical second call ran unasked, and nothing
//     was written into the run's directory.
//   - A second session/prompt during a turn cancels the running one, so
//     steering is refused (Interaction.Steer false). session/cancel
//     (InterruptTurn) answers cancelled within a second, the running
//     command is gone, and the next prompt works.
//   - The prompt result's usage {inputTokens, outputTokens, thoughtTokens,
//     cachedReadTokens, cachedWriteTokens} is the session's so far:
//     input includes cached reads and output includes thoughts, the
//     gateway's convention (a tool turn billed 5000+5200 input, 4000+4900
//     cached, 50+30 output, 12+7 reasoning said 10200, 8900, 80, 19). The
//     client subtracts the previous figure, so each turn.completed has the
//     turn's own bill (three turns of 1000k/600k/20+k/k each checked) and
//     the outcome their sum. session/new names no model: the outcome's
//     model is the Spec's. No cost.
//   - A failed model request is no JSON-RPC error: the CLI writes
//     agent_message_chunk text of its own, "Error: Authentication failed
//     with provider … (HTTP 401).", "Error: Failed to get response from
//     the AI model; retried 5 times … Last error: 429 …", "Error: 400
//     Invalid request …", "Error: The provider rejected the prompt as too
//     long …", after "Info: Request failed due to a transient API error.
//     Retrying..." lines, and answers end_turn with no usage. The decoder
//     takes a chunk that starts a message with "Error: " or "Info: " as
//     such a notice, not as the model's text: an Info becomes a warning
//     (model_retry for retries), an Error fails the turn, classified from
//     its text as session.error is (401/403 not_authenticated, 429
//     rate_limited, too long context_exceeded, 408/5xx transient_api_error,
//     else api_error). A model message whose first chunk starts with one
//     of those prefixes would be taken for a notice; streamed text starts
//     with a token, not a whole "Error: ".
//   - Without a login or a provider, session/new answers -32000
//     "Authentication required" (not_authenticated, with the login hint);
//     offline without a provider the CLI exits before any line, with the
//     one-shot stderr, classified as in a one-shot run.
//   - An edit's diff comes with the pending tool_call and again with its
//     completion (oldText "" for a new file): file.changed is reported
//     once, at the completion, as add for a new file, with the unified
//     diff of rawOutput.detailedContent.
//
// resume_session_id in an interactive run is ACP session/load {sessionId,
// cwd, mcpServers} (internal/acp; refused for a Session run that is not
// interactive), so an interactive run hibernates
// (Interaction.ResumesSession). Verified with 1.0.102
// (TestSessionLoadResumesKeptSession): a turn in one process, then a
// fresh home holding only what SessionFiles lists (the session lives in
// ~/.copilot/session-state/<id>: events.jsonl, workspace.yaml,
// checkpoints/index.md and an empty .workspace-fork.lock; no
// config.json, no session-store.db) and a new `copilot --acp` in the
// same directory: initialize advertises loadSession, session/load
// replays the history as user_message_chunk and agent_message_chunk
// notifications before its answer (dropped by the client), and the next
// prompt's model request carries turn 1's text. Its usage is that
// request's alone: the prompt results count this process's requests.
// The outcome of a new session reports the session's usage (the sum of
// its turns) as SessionUsage too, so that the supervisor records it and
// a one-shot run that later resumes the session with --resume is billed
// only its own part of the usage file's session total. A loaded
// session's outcome has none (its earlier usage is not known here): the
// recorded total then lacks the loaded process's turns, which a later
// one-shot --resume of the session is billed again.
//
// One-shot runs stay on --output-format json: over ACP a read_only run
// could run no shell command at all (the CLI asks for ls, and a refusal
// ends the turn, where the one-shot read_only_ls case runs it and a denied
// call lets the prompt go on), failures would be classified from text
// rather than from session.error's errorType and statusCode, the
// unauthenticated run would lose the stderr that tells a missing login
// from a classic token, tool names would be ACP kinds, and the session id
// would be the CLI's rather than the run's.
//
// # MCP servers
//
// Spec.MCPServers reach the CLI as one --additional-mcp-config=<JSON>, in
// one-shot and ACP runs alike (verified with 1.0.102):
//
//	{"mcpServers":{"demo":{"type":"local","command":C,"args":[…],"env":{…},"tools":["*"]},
//	               "web":{"type":"http","url":U,"headers":{…},"tools":["*"]}}}
//
// the shape `copilot mcp add --json` prints. The CLI's ACP drops stdio
// entries of session/new's mcpServers ("Rejecting non-http/sse MCP server
// … from client"), so session/new still sends none. The config is an
// argument, not a file: the home is shared by every run, and the run's
// directory is the user's. Its env and header values are in
// Command.Secrets. The CLI itself writes a small cache of each server's
// tool list under <home>/.cache/copilot/mcp-tools (the tools' names and
// schemas; no env value was found in the home after a run).
//
// The model is offered a server's tools as "<server>-<tool>"
// ("demo-reverse_text"), after the 17 built-in ones. One-shot:
// session.mcp_server_status_changed says pending, then connected (another
// status becomes an mcp_server_failed warning); the assistant.message's
// toolRequests entry and tool.execution_start carry mcpServerName and
// mcpToolName, which become tool_call.started's mcp_server and mcp_tool
// (a server not the run's, the operator's own, is not named), and
// tool.execution_complete has the tool's text as result.content. With
// --allow-all-tools (workspace_write, full) the call runs unasked; a
// read_only run gets --allow-tool=<server> for each of its servers, as
// --deny-tool=write pre-approves nothing and nobody could approve the
// call. A server named shell, write, url, memory or read is refused: the
// permission rules read those names as kinds of tool.
//
// ACP: the tool_call names the tool "demo-reverse_text" (kind other); the
// session/request_permission that follows titles it "reverse_text" only,
// so the decoder keeps the name from the tool_call, and approval.requested
// carries tool "demo-reverse_text" and mcp_server "demo". With approvals
// ask every MCP call is asked (workspace_write, full); allowed, it runs.
// A run that asks for nothing allows it (acp.Profile.AllowMCP).
//
// # Images
//
// Invocation.Images are files the supervisor wrote under the run's own
// TMPDIR. One-shot: --attachment=<path> each (the help says "only valid in
// non-interactive mode": a prompt on stdin is). The user.message line then
// lists them with their base64, and the request's user message has the
// text "Image file at path <path>" and an input_image whose image_url is
// the data URL. The CLI removed the attachment file under its TMPDIR
// after the run. ACP: the first prompt's and Session.Send's images are
// image blocks; the CLI writes each to $TMPDIR/acp-resource-<hex>.png
// (the run's own TMPDIR, removed by the supervisor with the run; the CLI
// removed it itself at exit), and sends the same path text and data URL.
//
// # Budgets
//
// No stdout line carries tokens (model.call_finished has durations
// only). A one-shot run's decoder therefore reads the session's record in
// the home, where every model request leaves a session.usage_record
// before its assistant.message is printed, and emits usage.updated with
// the run's sum after each request (live.go): the gateway's
// max_total_tokens stops a tool loop mid-run (the suite's
// max_total_tokens case). An ACP run's usage comes with each
// session/prompt result, at the end of a turn; within a turn the same
// record (session-state/<ACP session id>/events.jsonl) gives the turn's
// usage so far at each tool call's start (acp.Profile.UsageSoFar: the
// record's sum less the turns before), so that a turn that loops on a
// tool is stopped too (TestGivenTokenBudgetInteractive). max_turns is the
// gateway's, counted from the events. A run the gateway stops with
// SIGTERM still writes its usage file, which Finish reads, and the
// supervisor keeps the usage.updated seen when the file says less.
//
// # Binary
//
// The npm package's `copilot` is a Node launcher (npm-loader.js) that
// runs the native binary of the platform package with spawnSync; killed by
// SIGKILL it leaves the native binary, and the command its bash tool
// runs, going. ResolveBinary maps it to the native binary
// (@github/copilot-linux-x64 or -arm64, or the linuxmusl ones), which the
// gateway runs and /v1/agents reports; its `--version` takes 0.1 s rather
// than 1 s. On its first run in a home the binary unpacks its 235 MB
// package under .cache/copilot (COPILOT_CACHE_HOME), about a second.
//
// On SIGTERM the CLI aborts the prompt (an abort line, reason
// user_abort), kills the running command, writes the usage file and
// exits, within a second. A command left by a CLI killed outright still
// carries the run's cookie, and the supervisor's sweep takes it.
//
// # Events
//
// Every line but the last is {type, data, id, timestamp, parentId} and
// transient ones add "ephemeral": true; the last is result {sessionId,
// exitCode, usage}, whose usage has durations but no tokens.
//
//	session.tools_updated or user.message  session.started (once; the run's session id, the model; tools unknown)
//	assistant.message_delta (ephemeral)    message.delta
//	assistant.message                      reasoning.completed (reasoningText; summary on the Responses wire,
//	                                       redacted when only reasoningOpaque), message.completed (content),
//	                                       tool_call.started per toolRequests entry
//	tool.execution_start                   tool_call.started, for a call no message announced
//	tool.execution_complete                file.changed per fileEdits entry (create → add, delete → delete,
//	                                       else update; the diff of result.detailedContent), then
//	                                       tool_call.completed (result.content, or error.message; is_error unless
//	                                       success), and a permission_denied warning for error.code "denied"
//	assistant.turn_retry (ephemeral)       rate_limit for reason rate_limit, else a model_retry warning
//	session.info, session.warning          a warning, except model_retry and cancellation infos (said elsewhere)
//	model.call_failure, session.error,     nothing; Finish classifies from them
//	abort, result
//	subagent.started, .completed,          nothing (the task tool's call tells it)
//	.selected, .deselected, .configured
//	subagent.failed                        warning subagent_failed inside the task call
//	other known progress lines             nothing (turn_start/turn_end bracket one model call; assistant.idle
//	                                       and result end the prompt)
//
// Progress and subagents, checked in 1.0.102's event schema (the package
// it unpacks under ~/.cache/copilot/pkg has schemas/session-events.schema.json),
// not recorded: a long tool gets no time-based heartbeat. Its progress
// lines, tool.execution_progress {toolCallId, progressMessage} (an MCP
// server's progress text), tool.shell_output and hook.progress, are
// ephemeral and carry no elapsed time, so they are dropped with the other
// transient lines. A subagent's lines carry agentId, not the task call's
// id, so they get no parent_tool_call_id; the subagent.* lines are durable
// and mapped above. hook.start and hook.end are durable too and would be
// agent.unparsed, but a run configures no hooks.
//
// Any other line becomes agent.unparsed, except an ephemeral one of an
// unknown type, which is transient progress and is dropped. num_turns
// counts assistant.turn_start, one per model call.
//
// # Usage
//
// Tokens are not in the JSONL. --usage-output-file writes the session's
// accounting when the CLI exits (also after a failed request, after
// SIGTERM and when no login was found): modelMetrics.<model>.usage
// {inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens,
// reasoningTokens}, summed over the prompt's requests. inputTokens
// includes cacheReadTokens and outputTokens includes reasoningTokens,
// the gateway's convention: for a tool turn billed 5000/5200 input
// (4000/4900 cached) and 50/30 output (12/7 reasoning) the file said
// 10200, 8900, 80, 19. That cacheWriteTokens is within inputTokens is
// assumed: an OpenAI-compatible provider reports no cache writes. The
// decoder sums every model and reports the sum at Finish, as
// Outcome.Usage and a usage.updated event; the tests check it against
// the mock's billing. The CLI reports no cost in dollars.
//
// Command names the file from the invocation alone (UsagePath: under the
// agent's home, named after the run; the CLI creates the directory), so
// the decoder stays a function of the invocation. Finish, called once the
// process has been reaped, reads the file and removes it. That, and
// reading the session's record for the usage so far (see Budgets), is
// the decoder's only I/O, through the Invocation's Files (runs.CLIFiles),
// which the supervisor injects and the golden tests replace with the
// recorded file. A file left by a gateway that died
// mid-run is a few KB and harmless.
//
// # Outcome
//
// Structured data first: an abort line → interrupted (the supervisor
// reports cancelled or timed_out when it sent the signal); a result line
// with exitCode 0 and exit 0 → succeeded; session.error → its errorType
// and statusCode, else the last model.call_failure's: authentication,
// 401, 403 → not_authenticated (the provider refused the key); rate_limit,
// 429 → rate_limited; errorCode context_length_exceeded or a
// forced_compaction retry → context_exceeded; 408, 5xx, failureKind
// transport (a refused connection) → transient_api_error; the rest
// (400) → api_error. Without a stream the CLI says why on stderr only:
// "No authentication information found", "Authentication token found but
// could not be validated" (a token it could not check with GitHub),
// "Classic Personal Access Tokens (ghp_) are not supported" and "Offline
// mode requires a local model provider" → not_authenticated, with a hint
// naming the token variables, `copilot login` and the provider
// variables; a parser error ("error: unexpected argument …") →
// flag_rejected, with a hint naming the installed and the verified
// version; a signal → process_killed; anything else → agent_crashed with
// the tail of stderr. Tool calls still open at the end are closed as
// failed.
package copilot
