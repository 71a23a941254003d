// Package qwen is the adapter for Qwen Code (`qwen`, npm
// @qwen-code/qwen-code), verified with version 0.24.4 on Node 20 against
// the mock Chat Completions API in internal/mock/chat. It builds the
// command line, prepares the CLI's home and speaks ACP with it through
// internal/acp; it does no I/O of its own except PrepareHome and reading
// the home's settings for images.
//
// # Command
//
//	qwen --acp [--model=M]
//
// Every run goes over ACP (PrefersSession), a one-shot run as a session of
// one turn that is closed when the turn ends: only ACP reports each model
// request's whole usage. Headless `qwen PROMPT --output-format
// stream-json` reports a turn's input, cached and output tokens in its
// result line but never the reasoning tokens (completion_tokens_details),
// so its usage could not equal the bill of a model that thinks; ACP
// reports them (below, Usage). The prompt goes as turn 1's session/prompt.
//
//   - model → --model; without it the CLI takes OPENAI_MODEL. session/new
//     names the model "$runtime|openai|<model>(openai)"; session.started
//     carries <model> alone.
//   - permission and approvals → the session's mode (Permissions).
//   - mcp_servers → session/new's mcpServers; attachments → image blocks
//     of the prompt, only for a model the settings declare takes images
//     (Images).
//   - system_prompt (only headless has --system-prompt), effort (no flag)
//     and max_budget_usd (no cost is reported) are refused by name.
//   - resume_session_id → ACP session/load {sessionId, cwd, mcpServers}
//     instead of session/new (internal/acp), in a one-shot run (a session
//     of one turn) as in an interactive one, which so hibernates
//     (Interaction.ResumesSession).
//
// The gateway enforces max_turns and max_total_tokens from the events and
// asks for output_schema in the prompt.
//
// The environment is the supervisor's minimal one plus OPENAI_API_KEY,
// OPENAI_BASE_URL and OPENAI_MODEL passed through (the CLI then picks its
// "openai" auth type by itself, and sends the key as a bearer token), and
// QWEN_CODE_SUPPRESS_YOLO_WARNING, QWEN_CODE_LEGACY_MCP_BLOCKING (MCP
// servers connected before session/new answers: by default discovery runs
// in the background and a first request that calls an MCP tool at once
// found it "not found in registry") and NO_COLOR.
//
// A run is three node processes: the launcher `qwen`, and `cli.js --acp`
// twice (a relaunch with --expose-gc). The supervisor's process-group
// kill takes them all; the suite's cancel, timeout and interrupt cases
// find none left, nor the tool's processes.
//
// # Home
//
// PrepareHome writes $HOME/.qwen/settings.json, keeping every key an
// operator set there, forcing:
//
//	privacy.usageStatisticsEnabled false   without it a turn made 4 DNS lookups of
//	telemetry.enabled false                gb4w8c3ygj-default-sea.rum.aliyuncs.com
//	general.enableAutoUpdate false
//	memory.enableManagedAutoMemory false   else a "managed memory extraction" model
//	memory.enableManagedAutoDream false    request follows every turn: usage 2× the bill
//	ui.enableFollowupSuggestions false     else a "[SUGGESTION MODE: …" request follows
//	                                       every ACP turn, billed, with no usage report
//
// and model.generationConfig.maxRetries 0 where the operator set none
// (Failures). With these settings a tool turn made exactly the model
// requests the mock answered (2 for a tool and its answer) and no other
// connection. BaseFiles is the settings file alone: a run's QWEN.md,
// skills, agents, extensions or commands in ~/.qwen would steer the next
// run of the home. The session's chat recording is
// ~/.qwen/projects/<cwd with "/" replaced by "-">/chats/<session id>.jsonl
// (SessionFiles): the folder is named after the absolute directory, every
// character but an ASCII letter or digit replaced by "-" (sanitizeCwd; a
// directory with "_" in its name showed that it is not "/" alone), so a
// session resumes only in a run of the same directory path.
//
// Resume, verified with 0.24.4 (TestSessionLoadResumesKeptSession, the
// resuming run interactive and one-shot): a turn in one process, then a
// fresh home at another path holding the settings and that one recording
// alone, the first home removed, and a new `qwen --acp` in the same
// directory:
// initialize advertises loadSession, session/load replays the history
// before its answer ({modes, …}) as user_message_chunk and
// agent_message_chunk notifications, one of them the empty chunk whose
// _meta.usage is the earlier request's (dropped with the rest, so it is
// not counted again), and the next prompt's model request carries turn
// 1's text. Its usage is that request's alone.
//
// # Permissions
//
// The ACP modes of 0.24.4 are plan, default, auto-edit, auto and yolo.
// auto, the CLI's own default, asks the model itself ("You are a security
// classifier…", a request no usage chunk reports) before a risky tool, so
// it is never used; the mode is set with session/set_mode before turn 1.
//
//	permission        without approvals          with approvals
//	read_only         plan                       plan, nothing asked
//	workspace_write   yolo                       default: every edit and shell command asks
//	full              yolo                       default
//
// workspace_write runs in yolo because auto-edit asks for every shell
// command, which a run without approvals would have to refuse; the
// gateway's sandbox is what confines it to the workspace. Whatever a mode
// still asks for in a run without approvals is refused at once
// (Profile.RefuseAll); the run's MCP tools are allowed. Permission
// requests offer allow_once (proceed_once), two allow_always options and
// reject_once (cancel). proceed_always_project writes an allow rule into
// the run's directory (.qwen/settings.json there), a file in the user's
// workspace, so the adapter drops that option and allow_session picks
// proceed_always_user, whose rule goes into the run's home. A rejected
// call is reported to the model, which goes on (DenyEndsTurn false).
//
// # ACP
//
// initialize answers protocolVersion 1, agentInfo qwen-code 0.24.4, image,
// audio and embedded context prompts, loadSession, session list and
// resume, and MCP over stdio, SSE and HTTP. Beyond ACP the CLI sends:
//
//   - qwen/notify/session/mode-update, a notification of the mode
//     set_mode set (dropped);
//   - craft/drainMidTurnQueue, a request after each tool call's result and
//     before the next model request, for messages the client queued
//     meanwhile. It waits 2 s for an answer, and after an error answer
//     stops asking for the session. The adapter answers at once with the
//     steered messages ({"messages": [...], "hasQueuedPrompt": false}).
//
// Steering: a steered message waits in the adapter for the next drain and
// reaches the model in the running turn's next request, with the tool's
// result (the suite's steer case). A turn that ends before another tool
// call leaves it undelivered: a warning (steer_undelivered) says so. A
// second session/prompt during a turn would cancel it; it is never sent.
// session/cancel ends the running tool and the prompt answers cancelled.
//
// Tool calls come as tool_call (title "Shell", kind execute, status
// pending, _meta.toolName run_shell_command), then tool_call_update
// in_progress with the command, shell progress every 10 s, and completed
// or failed. Its text content is what the model gets, the output framed
// by "Command: …", "Directory: …", "Output: " and exit code, signal and
// process group lines; rawOutput (type shell_result) has the command's
// own output and exit code, which tool_call.completed carries instead
// (with "exit code N" after a non-zero one). A tool's name is its
// _meta.toolName. MCP tools are named mcp__<server>__<tool>; 0.24.4 offers
// them behind its tool_search bridge, but runs a direct call by that
// name. The shell tool refuses a command that starts with sleep and goes
// on ("Blocked: sleep 60 followed by: … Run blocking commands in the
// background"), a failed tool call the model sees.
//
// # Usage
//
// The session/prompt result carries no usage. After each model request
// the CLI sends an agent_message_chunk with empty text and
// _meta.usage {inputTokens, outputTokens, totalTokens, thoughtTokens,
// cachedReadTokens}: the API's prompt_tokens (cached included),
// completion_tokens (reasoning included), reasoning and cached tokens.
// The adapter sums them per turn (Profile.Update, TurnUsage) and drops
// the empty chunk; usage.updated during a turn carries the sum so far at
// each tool call (UsageSoFar). Every conformance case's usage equals the
// mock's bill: Reports.Usage is exact. A turn interrupted mid-request
// reports the requests that completed. No cost is reported anywhere
// (Reports.Cost unknown; max_budget_usd refused).
//
// # Failures
//
// A failed model request answers session/prompt with a JSON-RPC error:
// 401 as -32603 "Internal error" with data.details "401 Incorrect API key
// provided"; 429 with code 429 "Rate limit exceeded. Try again later.";
// 5xx as -32603 with the status leading data.details. The class is the
// status's (adapterkit.StatusClass: Reports.ErrorClasses http_status);
// the message is the details. Without a key session/new answers -32000
// "Authentication required", not_authenticated.
//
// Retries: model.generationConfig.maxRetries bounds both the CLI's retries
// of a 429 (default 10, from 60 s growing to 5 min) and the OpenAI SDK's
// retries of every failed request (default 3). With 0 a 429 failed in
// about 10 s headless and 12 s over ACP (seen). A 5xx is retried by
// another loop, 7 attempts 1.5 s growing to 30 s apart, that no setting
// reaches: a persistent 500 failed after 70 s headless, so the kit
// implements conformance.SlowFailures with 150 s for a 5xx. 401 is never
// retried.
//
// # Images
//
// 0.24.4 sends an image only to a model whose input modalities include
// images, from model.generationConfig.modalities in the settings, else
// from its own table of model names; any other model gets the prompt
// without it, and nothing says so (seen: with mock-model no request
// carried the image). The gateway cannot read that table, so a run or
// message with images is refused (unsupported_option on attachments)
// unless the home's settings declare {"image": true} there.
//
// # Network
//
// ModelEndpoints is OPENAI_BASE_URL's host, else api.openai.com:443. The
// CLI sends model requests through HTTP_PROXY/HTTPS_PROXY even to
// 127.0.0.1 (seen: none reached the mock behind a dead proxy), which is
// what the egress proxy of network "model" relies on; the shell tool's
// commands inherit them.
package qwen
