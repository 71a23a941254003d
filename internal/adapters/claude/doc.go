// Package claude is the adapter for Claude Code (`claude`), verified with
// version 2.1.332 against the mock model server in internal/mock/anthropic.
// It builds the command line and decodes `--output-format stream-json`; it
// does no I/O.
//
// # Command
//
//	claude -p --input-format=stream-json --output-format=stream-json --verbose --include-partial-messages
//	       --session-id=<run id> | --resume=<resume_session_id>
//	       [--model=M] [--append-system-prompt=S] [--effort=E] [--max-turns=N]
//	       [--max-budget-usd=X] [--json-schema=SCHEMA] <permission flags>
//	       [--mcp-config=JSON --strict-mcp-config [--allowedTools=…,mcp__<server>]]
//
// Every run uses one transport, the Agent SDK's stream-json input: the
// prompt is written to stdin as one user line
// ({"type":"user","message":{"role":"user","content":…}}), and a run that
// is not a Session then closes stdin, after which the CLI answers that
// line and exits. Every one-shot case of the real-CLI tests and the
// conformance suite gives the same events, usage, cost and classes this
// way as with the plain prompt on stdin it replaced (verified with a 2 MB
// prompt and with a prompt that starts with "-"). Values are passed as --flag=value so that one starting
// with "-" is not read as a flag. The system prompt and the schema stay on
// the command line, so each is limited to 100 KiB (the kernel refuses an
// argument of 128 KiB).
//
//   - system_prompt → --append-system-prompt: the text is appended to Claude
//     Code's own system prompt, which keeps its tool instructions.
//     (--system-prompt, which replaces that prompt, also works but is not
//     used.)
//   - effort → --effort; the CLI accepts low, medium, high, xhigh and max,
//     sends the value as output_config.effort, and silently ignores any other
//     value, so the adapter refuses other values as unsupported.
//   - resume_session_id → --resume, which keeps the session id. The session
//     must be in the HOME (the working directory may differ): its
//     transcript ~/.claude/projects/<dir with "/"→"-">/<id>.jsonl is all
//     --resume reads, so a home built from the base home (BaseFiles:
//     ~/.claude.json, ~/.claude/.credentials.json, ~/.claude/settings.json)
//     plus that transcript (SessionFiles) resumes it, at another path too
//     (home.go, TestRealCLIHomeCarry). A new run uses its run id as
//     --session-id.
//   - max_turns → --max-turns, max_budget_usd → --max-budget-usd,
//     output_schema → --json-schema (the CLI adds a StructuredOutput tool;
//     its input becomes result.structured_output, Outcome.StructuredOutput).
//     The CLI validates the tool's input against the schema and answers a
//     mismatch as an error result ("Output does not match required
//     schema: root: must have required property 'visits'"); a model that
//     then gives up ends in result success without structured_output,
//     which the adapter fails as schema_mismatch with that reason
//     (TestRealCLISchemaMismatch). A model that answers in text instead
//     gets one "[structured-output-enforce]" reminder; its text is then
//     the result, which the gateway validates.
//     The run that a native limit stops fails max_turns or
//     budget_exceeded with RunError.Budget naming the field. The gateway
//     enforces max_total_tokens itself, from usage.updated, which comes
//     as each API message streams its usage (message_start, then
//     message_delta), not only at the turn's result.
//   - mcp_servers → --mcp-config=<JSON> --strict-mcp-config (see "MCP
//     servers"); attachments → image blocks of the user line (see
//     "Images").
//
// # MCP servers
//
// Verified with 2.1.332 and the internal/mcptest server (TestRealCLIMCP*,
// TestSessionMCPAsk):
//
//	--mcp-config={"mcpServers":{"demo":{"type":"stdio","command":…,"args":[…],"env":{…}},
//	                            "remote":{"type":"http","url":…,"headers":{…}}}}
//	--strict-mcp-config
//
// The config is an argument, not a file: a file in the shared HOME or in
// the run's directory would reach other runs, and --strict-mcp-config
// makes the CLI ignore every other MCP config (~/.claude.json, a
// project's .mcp.json). system/init lists the server (status
// "connected", source "dynamic") and its tools as mcp__<server>__<tool>.
// The tools are deferred: the request's tools hold only
// DeferredToolPlaceholder, and a system reminder names them for
// ToolSearch, but a direct call of mcp__demo__reverse_text ran. Its
// result is a block array ([{"type":"text","text":"reversed:pcm olleh"}]),
// flattened into tool_call.completed; tool_call.started carries
// mcp_server and mcp_tool, read back from the tool's name against the
// run's own servers. A server's name is therefore letters, digits, '-'
// and single '_', so that mcp__<server>__ is unambiguous.
//
// Without approvals the run's servers are allowed by the rule mcp__<name>
// in --allowedTools (one flag, after Bash for workspace_write; the call
// ran with permission_decision reason_type "rule"), at every level,
// read_only included (dontAsk ran it): the client chose the servers, and
// nobody could answer a question. full skips every check. With approvals
// ask no rule is added: the call is a can_use_tool request (with
// "mcp_server":{"name":"demo","source":"dynamic"}), approval.requested
// with MCPServer set, and it ran once allowed. With read_only and ask
// (dontAsk) it is refused unasked, like every other call not allowed.
//
// Traps, each seen with the real CLI:
//   - A stdio server inherits the CLI's whole environment (a variable set
//     only for the CLI reached the server), the gateway's model
//     credentials included. The adapter sets every credential variable
//     of the CLI the client did not set to "" in the server's env, which
//     replaces the inherited value.
//   - The CLI expands ${NAME} in the config with its own environment (an
//     env value "${HOME}" reached the server as the CLI's HOME; "$HOME"
//     stayed as it was), and has no escape for it: a value with "${" in
//     a command, argument, env or header value or URL is refused, or a
//     header could carry the gateway's key to a remote server.
//   - The env and header values are on the command line: they are the
//     Command's Secrets, which the supervisor redacts wherever the run
//     stores or logs anything.
//   - Remote servers are type "http" (streamable HTTP): against a small
//     streamable-HTTP server in the tests (mcptest's tools, one JSON
//     answer per POST), the CLI sent the headers with every request and
//     mcp__remote__reverse_text ran (TestRealCLIRemoteMCP). SSE-only
//     servers (type "sse") are not offered.
//
// # Images
//
// An attachment is an image block after the text of the user line:
// {"type":"image","source":{"type":"base64","media_type":"image/png","data":…}},
// in the first line (one-shot and session alike: every run reads
// stream-json) and in Send's lines (TestConformance/image_follow_up sends
// one with a follow-up message). The model got the same block, and the
// CLI added a text block "[Image: source: $TMPDIR/claude-<uid>/<cwd with
// / as ->/<session id>/images/1.png]" naming a copy it writes there
// (TestRealCLIImage: with the run's own TMPDIR, which the supervisor
// removes with the run, the copy is under it, not under /tmp). The CLI
// re-encodes a large image before sending it: a 1600×1600 PNG of 7.7 MB
// reached the model as a JPEG of about 480 KB (the 73-byte test PNG went
// as it was), so the model may not get the attachment's own bytes. PNG,
// JPEG, GIF and WebP are taken; any other type, and an empty image, are
// refused with invalid attachments. No SessionPreferrer is needed: the
// one-shot transport takes both images and MCP servers.
//
// # Permissions
//
//	permission       flags                                          verified behaviour
//	read_only        --permission-mode=dontAsk                      Edit, Write, NotebookEdit are gone; Bash runs only what the
//	                 --disallowedTools=Edit,Write,NotebookEdit       CLI itself deems read-only (ls, git status); touch, perl,
//	                                                                cat of a file outside the workspace: refused
//	workspace_write  --permission-mode=acceptEdits                  edits and every Bash command run; Bash is NOT confined
//	(the default)    --allowedTools=Bash                            to the workspace (touch /tmp/x ran)
//	full             --dangerously-skip-permissions, IS_SANDBOX=1   everything runs; IS_SANDBOX=1 because the CLI refuses
//	                                                                the flag as root without it
//
// A refused tool call does not fail the run: the CLI ends with a success
// and exit 0, and the decoder emits a permission_denied warning per refusal
// and a permission_denials warning at the result.
//
// With approvals: ask (TestSessionPermissions: the read_only and
// workspace_write rows with the real CLI, one session per level making
// each call in turn; full with ask is the same command as
// workspace_write with ask, which TestCommandSession holds):
//
//	permission       flags                                          verified behaviour
//	read_only        as without ask, + --permission-prompt-tool=stdio  nothing is asked: touch and Write are refused as
//	                                                                without ask; Read and ls run
//	workspace_write  --permission-mode=default                      Bash (touch) and Write are asked and run once
//	                 --permission-prompt-tool=stdio                  allowed; Read and ls run without asking
//	full             the same as workspace_write (no                the same: every change is asked, so the level
//	                 --dangerously-skip-permissions)                adds nothing the client is not asked for
//
// Edit is asked like Write in default mode (TestSessionEditApproval, with
// the real CLI: the approval is the tool's name with input.file_path; allow
// writes the file, deny leaves it as it was, the model gets the message as
// an error result and the turn ends a success); NotebookEdit and MCP tools
// are asked too (interactive.md §2). The 2.1.332 build offers no Glob, Grep or LS
// tool (find and ls go through Bash).
//
// # Sessions
//
// A run that is interactive or asks for approvals is a runs.Session (the
// Agent SDK's transport):
//
//	claude -p --input-format=stream-json --output-format=stream-json --verbose --include-partial-messages
//	       --replay-user-messages [--permission-prompt-tool=stdio] …
//
// Command.Stdin is nil; Open writes the prompt as the first user line
// ({"type":"user","message":{"role":"user","content":…}}); no initialize
// handshake is needed. Each turn prints system/init … result, and
// --replay-user-messages echoes every user line (isReplay) when the CLI
// takes it up. Verified with the real CLI against the mock
// (TestSession*):
//
//   - control_request can_use_tool → approval.requested (id approval_N,
//     tool_name, input, tool_use_id, the four decisions); the CLI waits with
//     no timeout. control_cancel_request (sent on an interrupt while a
//     request is pending) → approval.resolved withdrawn; a request still
//     pending at the result is withdrawn too.
//   - allow → {"behavior":"allow","updatedInput":<the request's input>};
//     allow_session adds "updatedPermissions": the request's addRules
//     suggestions with destination "session" (the CLI suggests
//     "localSettings", which writes <cwd>/.claude/settings.local.json);
//     setMode and addDirectories suggestions are dropped, as they allow
//     more than the identical call. The 2nd identical `touch made.txt` was
//     not asked and nothing appeared under <cwd>/.claude. deny →
//     {"behavior":"deny","message":M}: the model gets M as an error result
//     and the turn goes on; deny_and_stop adds "interrupt":true: the result
//     is error_during_execution (aborted_tools), no further request, the
//     turn is Cancelled. The CLI echoes each control_response; the echo is
//     ignored.
//   - A result ends a turn: turn.completed with result.usage (the turn's)
//     and the cost of model_usage_since_last_result (the turn's; modelUsage
//     and total_cost_usd add up over the process, and a resumed session's
//     earlier runs). usage.updated carries the run's sums. Finish's Outcome
//     sums the turns' usage, NumTurns counts turns, Status is the last
//     turn's, and SessionCostUSD is still the last total_cost_usd, which
//     the supervisor makes the run's own of.
//   - Send while idle writes the next user line. Steered while a tool
//     runs, the line is folded into the running turn's next request ("The
//     user sent a new message while you were working: …"), one result. If
//     the CLI instead queues it (it arrived while the model streamed with
//     no tool), it prints the turn's result and runs the line as a turn of
//     its own; the echo of the line comes only then, so a result while a
//     written line is unechoed is folded into the running turn: the client
//     sees one turn with both results' usage.
//   - InterruptTurn → {"type":"control_request","request_id":…,"request":
//     {"subtype":"interrupt"}}: the CLI answers still_queued, kills the
//     tool (no process with the test's marker was left), prints
//     error_during_execution (aborted_tools) → turn.completed Cancelled;
//     the next user line runs a normal turn. The CLI answers the interrupt
//     even when idle, which is what Interrupt (stop the run) relies on: at
//     its answer Pending reports done, stdin closes, the CLI exits 0.
//   - Close: Pending reports done once no turn runs; at EOF the CLI exits
//     (0 after a successful last turn).
//   - A can_use_tool in a run without approvals (none was seen: without
//     --permission-prompt-tool the CLI refuses instead) is denied with a
//     warning; other control requests are answered with an error.
//   - A CLI that ends mid-turn still ends the turn in Finish, with the
//     usage its streams reported.
//
// # Environment
//
// Always set: DISABLE_TELEMETRY, DISABLE_AUTOUPDATER, DISABLE_ERROR_REPORTING
// and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC (with all four a run talks
// to its model endpoint only), CLAUDE_CODE_MAX_RETRIES=2, and API_TIMEOUT_MS
// (see APITimeout). Passed through when the gateway has them:
// ANTHROPIC_API_KEY (sent as x-api-key), ANTHROPIC_AUTH_TOKEN and
// CLAUDE_CODE_OAUTH_TOKEN (both sent as "Authorization: Bearer"),
// ANTHROPIC_BASE_URL, ANTHROPIC_MODEL (the default model) and
// ANTHROPIC_CUSTOM_HEADERS; each was checked against the mock. The run is
// interrupted with SIGINT: the CLI stops the running tool, prints a result
// (terminal_reason aborted_tools) and exits 0 (on a busy machine it may
// exit before the result; see Outcome). A Session is interrupted with the
// control protocol's interrupt instead (see Sessions).
//
// # Network
//
// ModelEndpoints is the host of ANTHROPIC_BASE_URL (from the gateway or
// the "env" of the home's settings.json), else api.anthropic.com:443, and
// platform.claude.com:443, where a login in ~/.claude/.credentials.json
// is refreshed. With HTTP_PROXY, HTTPS_PROXY and ALL_PROXY set (NO_PROXY
// empty) 2.1.332 (a native binary) sends everything through the proxy,
// the mock on 127.0.0.1 included (TestProxyRealCLI): its model requests
// as absolute-form POST /v1/messages, a Bash command's curl (which reads
// the lower-case variables), and every request of its MCP client to a
// server given by URL. It asked the proxy for nothing else. ProxyEnv adds
// nothing.
//
// # Events
//
//	system/init                           session.started (session id, model, tools)
//	stream_event text_delta               message.delta (other stream events: nothing;
//	                                      the assistant lines repeat them)
//	stream_event message_start/_delta     usage.updated, when the streamed usage changed
//	                                      (the run's so far: results, then streams)
//	assistant thinking/redacted_thinking  reasoning.completed (full, or redacted when empty)
//	assistant text                        message.completed
//	assistant tool_use                    tool_call.started (mcp__<server>__<tool>: with
//	                                      mcp_server and mcp_tool)
//	user tool_result                      tool_call.completed (block content flattened)
//	system/api_retry                      rate_limit (rate_limit, overloaded) or warning
//	system/permission_denied              warning permission_denied
//	rate_limit_event                      nothing when allowed; warning or rate_limit
//	result                                usage.updated, and the outcome
//	system/status, thinking_tokens, task_*  nothing
//	tool_progress                         tool_call.progress of parent_tool_use_id's call;
//	                                      with subagent_retry, rate_limit or warning
//	                                      inside that call; elapsed 0: nothing
//
// tool_progress: while a main-thread tool runs, 2.1.332 prints
// {"type":"tool_progress","tool_use_id":"<call>-heartbeat-<n>","tool_name":"Bash",
// "parent_tool_use_id":"<call>","elapsed_time_seconds":30,"heartbeat":true,
// "session_id","uuid"} every 30 s (testdata/long_tool.jsonl). The interval
// is a constant in the binary (30000 ms): no variable or setting changes
// it, so the case is recorded once and replayed, and TestRealCLI runs it
// only with -slow. A subagent's own tools get no heartbeat. The same line
// type carries a hook's heartbeat (tool_use_id "hook-<event>-<call>-…",
// tool_name the hook's event) and a subagent's API retry (subagent_type,
// subagent_retry {agent_id, attempt, max_retries, retry_delay_ms,
// error_status, error_category}), read from the binary's source, not
// recorded. tool_use_summary lines (a model-written summary of tool
// calls) are in the binary too but were not seen in a headless run.
//
// Apart from tool_progress, parent_tool_use_id becomes ParentToolCallID. A synthetic assistant line
// (is_api_error_message) is the CLI's error text, not the model's: it yields
// no event and feeds the classification. Anything else becomes
// agent.unparsed with the reason.
//
// # Usage and cost
//
// Usage comes from result.usage, whose input_tokens excludes the cache:
// input = input + cache_creation + cache_read, and it falls back to the sum
// of modelUsage when usage is all zeros (as on error_max_budget_usd). The
// real-CLI test checks it against the mock's billed sum. Without a result
// line, as when the CLI exits on SIGINT before printing it, the usage is
// the sum of what each API message's stream reported: message_start's
// counts, replaced by message_delta's totals. total_cost_usd is the
// session's cost so far: on a resumed session it (like modelUsage) also
// counts the earlier runs, while usage counts this run only. So the
// adapter reports it as Outcome.SessionCostUSD and the supervisor makes the
// run's cost of it; usage.updated carries it as the run's cost only for a
// new session.
//
// The same stream figures make a usage.updated as soon as they change
// (message_start, then each message_delta), so that the gateway's
// max_total_tokens sees a turn's usage while it runs: in a one-shot run
// the sum of the API messages streamed so far, in a session the ended
// turns' usage plus the streams since, with the ended turns' cost. The
// result's usage.updated follows with the CLI's own sums (which equalled
// the streamed ones in every real-CLI case: checkUsageUpdates). A run the
// gateway stops before its result keeps the streamed usage.
//
// # Outcome
//
// Every API failure ends with a result of subtype "success", is_error true,
// and exit 1, so the class comes from is_error, subtype, terminal_reason,
// api_error_status and the assistant line's error kind: 401/403 and
// authentication_failed → not_authenticated; 429 and rate_limit →
// rate_limited; 408, 5xx, 529, overloaded, server_error (also a refused
// connection) and timeouts → transient_api_error; other 4xx and the rest →
// api_error; error_max_turns → max_turns; error_max_budget_usd →
// budget_exceeded; aborted_tools/aborted_streaming → interrupted; an
// unknown --resume id → flag_rejected. Exit 0 without a result after the
// CLI's "[Request interrupted by user" line, or after the supervisor
// stopped the run (Exit.Reason) → interrupted: under load the CLI was seen
// to exit on SIGINT before its result line. "Not logged in" anywhere →
// not_authenticated, even with exit 0. Without a result line: a signal →
// process_killed; an argument error on stderr → flag_rejected, with a hint
// naming the installed and the verified version; an HTTP status on stderr
// → its class; otherwise agent_crashed. Tool calls still open at the end
// are closed as failed.
//
// Streamed text and thinking deltas, most of a run's lines, are read by a
// one-pass scanner (fastdelta.go) that takes a line only when it can tell
// encoding/json would decode it into the same event; every other line,
// and any delta it is unsure of, goes through encoding/json.
package claude
