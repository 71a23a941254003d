// Package claude is the adapter for Claude Code (`claude`), verified with
// version 2.1.332 against the mock model server in internal/mock/anthropic.
// It builds the command line and decodes `--output-format stream-json`; it
// does no I/O.
//
// # Command
//
//	claude -p --output-format=stream-json --verbose --include-partial-messages
//	       --session-id=<run id> | --resume=<resume_session_id>
//	       [--model=M] [--append-system-prompt=S] [--effort=E] [--max-turns=N]
//	       [--max-budget-usd=X] [--json-schema=SCHEMA] <permission flags>
//
// The prompt is written to stdin: with -p and no prompt argument the CLI
// reads it from there (verified with a 2 MB prompt and with a prompt that
// starts with "-"). Values are passed as --flag=value so that one starting
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
//     must be in the same HOME (the working directory may differ). A new
//     run uses its run id as --session-id.
//   - max_turns → --max-turns, max_budget_usd → --max-budget-usd,
//     output_schema → --json-schema (the CLI adds a StructuredOutput tool).
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
// (terminal_reason aborted_tools) and exits 0.
//
// # Events
//
//	system/init                           session.started (session id, model, tools)
//	stream_event text_delta               message.delta (other stream events: nothing;
//	                                      the assistant lines repeat them)
//	assistant thinking/redacted_thinking  reasoning.completed (full, or redacted when empty)
//	assistant text                        message.completed
//	assistant tool_use                    tool_call.started
//	user tool_result                      tool_call.completed (block content flattened)
//	system/api_retry                      rate_limit (rate_limit, overloaded) or warning
//	system/permission_denied              warning permission_denied
//	rate_limit_event                      nothing when allowed; warning or rate_limit
//	result                                usage.updated, and the outcome
//	system/status, thinking_tokens, task_*  nothing
//
// parent_tool_use_id becomes ParentToolCallID. A synthetic assistant line
// (is_api_error_message) is the CLI's error text, not the model's: it yields
// no event and feeds the classification. Anything else becomes
// agent.unparsed with the reason.
//
// # Usage and cost
//
// Usage comes from result.usage, whose input_tokens excludes the cache:
// input = input + cache_creation + cache_read, and it falls back to the sum
// of modelUsage when usage is all zeros (as on error_max_budget_usd). The
// real-CLI test checks it against the mock's billed sum. total_cost_usd is
// the session's cost so far: on a resumed session it (like modelUsage)
// also counts the earlier runs, while usage counts this run only. So the
// adapter reports it as Outcome.SessionCostUSD and the supervisor makes the
// run's cost of it; usage.updated carries it as the run's cost only for a
// new session.
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
// unknown --resume id → flag_rejected. "Not logged in" anywhere →
// not_authenticated, even with exit 0. Without a result line: a signal →
// process_killed; an argument error on stderr → flag_rejected, with a hint
// naming the installed and the verified version; an HTTP status on stderr
// → its class; otherwise agent_crashed. Tool calls still open at the end
// are closed as failed.
package claude
