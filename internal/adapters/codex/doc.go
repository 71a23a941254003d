// Package codex is the adapter for the OpenAI Codex CLI (`codex`), verified
// with version 0.171.0 against the mock Responses API in
// internal/mock/openai. Its API names are "codex" and "openai".
//
// # Transport
//
// The gateway runs `codex app-server`, Codex's JSON-RPC server on stdin and
// stdout (one JSON object per line, no "jsonrpc" member), rather than
// `codex exec --json`, which loses what a gateway needs: thread and turn
// ids on every notification, per-request token usage, message, reasoning
// summary and command output deltas (message.delta, reasoning.delta,
// tool_call.output_delta; output a command wrote before Codex watched it is
// only in tool_call.completed), the turn's diff, plan updates, and
// turn/interrupt. The decoder holds the
// conversation through runs.Conversation:
//
//	→ initialize {clientInfo, capabilities.optOutNotificationMethods}
//	← result                       → initialized, thread/start | thread/resume {…, config.mcp_servers}
//	← result {thread.id, model}    → turn/start {threadId, input (localImage…, text), effort, outputSchema}
//	← notifications …              (a server→client request is declined, with a warning)
//	← turn/completed of the root thread's turn → stdin closed; the server exits 0
//
// Only the root thread's turn ends the run: a helper thread (a sub-agent
// spawned through the multi_agent_v1 tools) completes its own turn first,
// and its events carry its thread as session_id and the spawning call as
// parent_tool_call_id. To stop a run the supervisor writes turn/interrupt
// before any signal: the turn completes as interrupted, even while a tool
// runs or the model server has not answered, and the server exits.
//
// # Interactive runs and approvals
//
// A run whose Spec is interactive or asks for approvals gets a Session
// (session.go) on the same transport. Requests get ids in the order they
// are made (initialize, thread, first turn are 1, 2, 3), each remembered
// until answered; server→client requests carry the server's own counter
// (0, 1, …) and are answered with that id.
//
//	← turn/completed of the root turn → turn.completed; the session is idle
//	Send             → turn/start on the thread (idle), or
//	Send with steer  → turn/steer {threadId, expectedTurnId, input} (a turn runs)
//	InterruptTurn    → turn/interrupt; the turn completes "interrupted" (Cancelled)
//	Close            → stdin closed once no turn runs; the server exits 0
//	Interrupt (stop) → turn/interrupt; in an idle session its error answer
//	                   ("no active turn to interrupt") ends the conversation
//
// approvals: ask sets the thread's approval policy to untrusted (never
// otherwise). Verified with codex 0.171.0:
//
//   - item/commandExecution/requestApproval → approval.requested, tool
//     "shell", input {command, cwd, reason}; item/fileChange/requestApproval
//     → tool "apply_patch", input {changes: [{path, kind, diff}]}, taken
//     from the item's item/started, as the request has no diff (a patch
//     through exec_command's apply_patch is asked this way only, with no
//     command approval before it; accept writes the file, decline leaves
//     it unwritten, the item completes "declined" and the turn goes on:
//     TestSessionEditApproval);
//     mcpServer/elicitation/request of kind mcp_tool_call → tool
//     mcp__<server>__<tool>, input the tool's params, mcp_server the
//     server's name. tool_call_id is the item id.
//   - untrusted asks even for `ls` and `cat` (commandActions listFiles,
//     read). A command all of whose commandActions only read (read,
//     listFiles, search) is accepted by the decoder without asking; what
//     Codex cannot parse as such is "unknown" and asked. The sandbox of
//     the permission level applies either way.
//   - allow → accept, allow_session → acceptForSession (the identical
//     second call was not asked; nothing is written to the cwd), deny →
//     decline (the model is told the user refused and the turn goes on;
//     Codex takes no message), deny_and_stop → cancel (the turn completes
//     interrupted at once, no further model request). For an MCP
//     elicitation: action accept, accept with _meta.persist "session",
//     decline, and decline plus turn/interrupt. Verified with the
//     project's MCP server: accept ran the tool, decline did not (the
//     model got "user rejected MCP tool call", the call completes as an
//     error, the turn goes on: TestRealCLIMCPDenied); accept with
//     persist "session" let the identical second call run unasked and
//     left config.toml as it was (TestRealCLIMCPAllowSession); decline
//     plus interrupt is not verified.
//   - An approval still pending when its turn ends (interrupted) is
//     reported withdrawn before turn.completed; the serverRequest/resolved
//     Codex sends after turn/completed then finds nothing pending.
//   - Steered input waits for the running command's result (or its 10 s
//     yield) and reaches the next request of the same turn; one
//     turn.completed follows.
//   - turn/interrupt does not stop the running command: its process lives
//     on (it outlived the turn in every run), and no item/completed comes
//     for it. Interaction.KillToolsOnInterrupt asks the supervisor to kill
//     the run's processes but Codex's own after the interrupted turn;
//     the decoder closes the call as failed at the end of the turn.
//
// Each turn's usage is the sum of tokenUsage.last over its model
// requests, helper threads' included, equal to what the mock billed for
// the turn; the Outcome sums the turns, NumTurns counts them, and Status
// is the last turn's (Cancelled for an interrupted one). A later turn the
// server refuses fails that turn only; a process that dies mid-turn
// completes the turn as failed in Finish.
//
// # Run fields
//
//   - system_prompt → developerInstructions of the thread (Codex keeps its
//     own base instructions);
//   - model, effort → the thread's model and the turn's effort;
//   - output_schema → the turn's outputSchema (the request's json_schema
//     text format); the final message is the JSON, parsed into
//     structured_output. A final message that is not a JSON object is
//     schema_mismatch; the gateway validates it against the schema;
//   - mcp_servers, attachments → below;
//   - permission → the thread's sandbox (see below), approval policy never
//     (untrusted with approvals: ask);
//   - interactive, approvals → a Session, above;
//   - cwd → the thread's cwd, and the process's;
//   - resume_session_id → thread/resume of that thread id;
//   - keep_session → thread/start's ephemeral is false. Runs are ephemeral
//     otherwise and leave no session behind, so only a run that kept its
//     session can be resumed. The kept thread is its rollout,
//     $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl: a home
//     built from the base's config.toml and auth.json (BaseFiles) plus
//     that file alone (SessionFiles) resumes it with its history, at
//     another path too; the *.sqlite state, logs and memories Codex keeps
//     beside it are not needed (home.go, TestRealCLIHomeCarry).
//
// Codex has no max_turns and no spending limit: Command refuses both,
// and the gateway enforces max_turns and max_total_tokens itself from the
// events (Codex reports no cost, so max_budget_usd stays refused). The
// decoder emits usage.updated after every model request
// (thread/tokenUsage/updated), not only at the turn's end, closes every
// tool call it opened, and keeps the usage seen so far in the Outcome of
// a run the gateway stopped.
//
// # MCP servers
//
// A run's mcp_servers travel in thread/start's config (thread/resume's
// for a resumed run), which overrides config.toml for that thread only:
// nothing is written to the shared Codex home or the run's directory, and
// nothing is on the command line. A stdio server is {command, args, env},
// a remote one {url, http_headers} (Codex's streamable HTTP client:
// TestRealCLIRemoteMCP, against a small HTTP server in the test, saw the
// run's headers on every request and the tool run). The env and header
// values are the Command's Secrets, so that the supervisor redacts a tool
// that echoes them. Each server gets startup_timeout_sec 60 and the thread
// mcp_optional_startup_grace_ms 60000 (mcpStartupSeconds): with Codex's
// defaults a server slow to start was left out of the first turn
// (TestRealCLIOperatorMCPOff starts one in 12 s). Server names are letters, digits, '_' and '-': Codex
// offers a server's tools to the model as the namespace tool
// "mcp__<name>", whose functions are the tools' own names. Verified with
// codex 0.171.0 and internal/mcptest:
//
//   - the operator's own [mcp_servers.<name>] tables in config.toml would
//     be offered too: a run given servers turns each of them off for its
//     thread ({"enabled": false} in the thread's config; -c
//     mcp_servers.<name>.enabled=false on the app-server's command line
//     did not, nor did enabled_tools=[]), and a run's server may not take
//     one of their names (a 400), as its table would be merged into the
//     operator's. A run without servers keeps the operator's
//     (TestRealCLIOperatorMCPOff);
//   - approval policy never fails every MCP call ("MCP tool call requires
//     approval, but approval policy is never") unless the server entry
//     has default_tools_approval_mode = "approve" ("auto" fails too); the
//     adapter sets it on every server of a run that does not ask. A run
//     that asks (policy untrusted) leaves it unset, and each call comes as
//     mcpServer/elicitation/request, mapped to approval.requested above;
//   - the call is an mcpToolCall item: tool_call.started has name
//     mcp__<server>__<tool>, mcp_server and mcp_tool; tool_call.completed
//     has the result's text content ("reversed:pcm olleh"), or the error's
//     message for a failed call;
//   - a server that fails to start (mcpServer/startupStatus/updated
//     "failed") does not fail the run: Codex goes on without its tools,
//     and the decoder reports a warning mcp_server_failed with Codex's
//     error. A server whose command does not exist is reported before
//     the turn's first model request; one that starts and dies during
//     its handshake was reported before the request in some runs, after
//     the model's answer in others, and in a one-shot run not at all
//     once the turn had completed and Codex exited;
//   - the MCP server is Codex's child process; under the gateway's
//     sandbox it runs inside it (the conformance suite's mcp cases pass
//     there).
//
// # Images
//
// The prompt's images (Invocation.Images) go with the first turn/start,
// and a message's with its turn/start or turn/steer, as input items
// {"type":"localImage","path"} before the text: Codex reads each file
// itself and sends it to the model as an input_image data URL, between
// input_text parts "<image name=[Image #1] path=…>" and "</image>", so
// that the model sees the file's path. Verified with codex 0.171.0:
//
//   - small PNG, JPEG and WebP images reached the mock model byte for
//     byte, base64 in a data URL of their own type (TestRealCLIImageTypes
//     for the prompt's; a follow-up message's in the conformance suite's
//     image_follow_up);
//   - a GIF reached it re-encoded as a PNG of the same size, so the GIF's
//     own bytes are not in the request;
//   - a 4000×3000 PNG reached it resized to 1824×1368 (a PNG nine times
//     the original's 190 KB); that run took about 50 s against a second
//     or so for a small image (on a loaded machine, with a race-enabled
//     mock; where the time went was not looked into).
//
// The gateway checks type, content and size before the adapter sees an
// image.
//
// # Permissions
//
//	permission       sandbox              verified behaviour
//	read_only        read-only            commands run in Codex's bubblewrap sandbox and cannot write
//	                                      ("Read-only file system"); codex 0.171.0 reports such a
//	                                      command to the model but sends no item for it
//	workspace_write  workspace-write      commands run in the sandbox and write only inside the cwd
//	                                      and the run's TMPDIR (exclude_slash_tmp: see sandboxSettings)
//	full             danger-full-access   commands run unsandboxed, each in a session of its own
//
// Codex's sandbox prefers a bubblewrap on PATH to the one it bundles. A
// system bwrap older than 0.9 (Debian 12's 0.8.0, which the gateway's own
// sandbox installs) has no --argv0, so Codex then starts its helper as
// "codex-linux-sandbox" by name, from the aliases it makes in
// $CODEX_HOME/tmp/arg0-linux. It refuses to make them in a home under
// TMPDIR ("Refusing to create helper binaries under temporary dir"), and
// then every sandboxed command fails with "bwrap: execvp
// codex-linux-sandbox: No such file or directory" while the turn still
// succeeds. The gateway gives every run a TMPDIR of its own, outside the
// agents' homes, so that Codex always makes them (verified with 0.171.0
// and bubblewrap 0.8.0). Under the gateway's sandbox Codex's bwrap nests
// inside it; internal/sandbox says what that needs.
//
// # Provider, credentials and retries
//
// The operator configures the model provider as Codex documents it, in
// config.toml in the Codex home the gateway uses (AGENTGATE_CODEX_HOME,
// given to the CLI as CODEX_HOME and HOME). Command reads that file to find
// the active provider (model_provider, or the selected profile's), then:
//
//   - passes the provider's env_key variable, and the variables its
//     env_http_headers name, through from the gateway's environment, with
//     OPENAI_API_KEY and CODEX_API_KEY;
//   - bounds its retries with -c model_providers.<id>.request_max_retries=1
//     and stream_max_retries=1, but only for a key the table does not set.
//     Codex's defaults turned one 500 into 30 requests and 26 s. Codex's
//     built-in openai provider cannot be redefined, so its retries stay
//     Codex's; the run's deadline bounds them.
//
// Offline, Codex never reports missing credentials: it retries the
// network. Preflight therefore checks before the process starts: the
// env_key variable must be set; for the built-in provider, OPENAI_API_KEY
// or CODEX_API_KEY, or else `codex login status` must succeed. Either
// failure is not_authenticated at once, with a hint.
//
// Every run also gets -c analytics.enabled=false, -c
// otel.metrics_exporter="none", --disable plugins and --disable apps: with
// them Codex talks to its model endpoint only (without them it tries
// GitHub and ChatGPT hosts and adds about 5 s to a run).
//
// # Network
//
// ModelEndpoints is the host of the base_url of the provider config.toml
// selects, else the built-in provider's: api.openai.com:443, with
// chatgpt.com:443 (the model of a ChatGPT login) and auth.openai.com:443
// (its token refresh) when auth.json holds a ChatGPT login, or the local
// ports of ollama and lmstudio. With HTTP_PROXY, HTTPS_PROXY and ALL_PROXY
// set (NO_PROXY empty) 0.171.0 sends its model requests through the
// proxy as absolute-form POST /v1/responses, the mock on 127.0.0.1
// included (its HTTP client makes no exception for loopback); a command
// run with danger-full-access gets the variables (its curl went through
// the proxy), and its MCP client's requests to a server given by URL go
// through it too (TestProxyRealCLI). It asked the proxy for nothing else.
// ProxyEnv adds nothing. Under workspace-write and read-only Codex's own
// sandbox takes a command's network away whatever the proxy.
//
// # Binary
//
// The npm package's `codex` is a Node launcher that starts the native
// binary as its child; SIGKILLed, it orphans that child, which keeps
// stdout open for minutes. ResolveBinary maps the launcher to the native
// binary of the platform package (@openai/codex-linux-x64 or -arm64), which
// the gateway runs and /v1/agents reports.
//
// # Usage
//
// Codex sends thread/tokenUsage/updated after each model request, with
// `last` (that request) and `total` (the thread so far, earlier runs of a
// resumed thread included). The run's usage is the sum of `last` over its
// own turns, helper threads included; thread/resume replays the previous
// turn's usage, which is left out. Codex's input includes cached input and
// its output includes reasoning, the gateway's convention; the tests check
// the sum against what the mock billed. Codex reports no cost.
//
// # Errors
//
// A failed turn carries codexErrorInfo, which is classified first:
// unauthorized or an HTTP 401/403 → not_authenticated; rateLimitExceeded,
// usageLimitExceeded or a 429 → rate_limited; internalServerError,
// serverOverloaded, a 5xx, a dropped or idle stream →
// transient_api_error; contextWindowExceeded → context_exceeded; other 4xx
// and badRequest → api_error, with the message of the raw body Codex
// passes on; policy refusals → refused. Only "other" is read from the
// message: "Missing environment variable" → not_authenticated, and "stream
// disconnected before completion" (an idle stream) →
// transient_api_error. A request
// the server refuses (an unknown method or parameter), or a command line
// the CLI rejects, is flag_rejected, naming the installed and the
// verified version. A process that ends without completing its turn is
// process_killed (by a signal) or agent_crashed, with the tail of stderr.
//
// # Progress
//
// Checked in 0.171.0's app-server, not recorded: a long command streams
// item/commandExecution/outputDelta (tool_call.output_delta), and no
// notification name in the binary suggests a time-based heartbeat;
// item/mcpToolCall/progress carries an MCP server's
// progress text, not a time, and is dropped like the other deltas. Sub-
// agents are mapped above (parent_tool_call_id).
package codex
