// Package cline is the gateway's adapter for Cline CLI (npm `cline`,
// verified with 3.0.65, a Bun-built native binary that
// node_modules/.bin/cline points at directly).
//
// # Runs
//
// A one-shot run is `cline --json [--model=M] [--plan] -- PROMPT`. Cline
// takes an argument without whitespace for a subcommand, even after "--"
// ("Unknown command or unquoted prompt: hi"), and refuses a prompt on
// stdin with --json ("requires a prompt argument or piped stdin", with
// stdin a pipe); a one-word prompt gets a newline, which Cline trims (the
// session records "hi"). Act
// mode with every tool auto-approved (Cline's headless default), JSON
// lines on stdout (decoder.go): hook_event (agent_start names the task,
// the run's session_id), agent_event (content_start text chunks →
// message.delta, content_end → message.completed; tool content_start →
// tool_call.started, content_end → tool_call.completed, failed when an
// entry of run_commands' output has success false; usage → the running
// totals; error → the run's failure) and a final run_result with the
// run's whole usage. --id makes a run interactive, so `cline --json`
// cannot resume a session: a run that resumes one runs over ACP
// (PrefersSession), a one-shot one as a session of one turn.
//
// An interactive run, or one with approvals, is `cline --acp`
// (internal/acp, acp.go). Verified: `session/set_config_option model`
// picks the model (without it Cline sends gpt-4o, whatever providers.json
// or CLINE_MODEL say), and the session then sends the configured one; the
// process exits at once when its stdin closes. auto_approve is a config
// option, false by default, so over ACP every tool asks: a run without
// approvals sets it true (read_only runs in mode plan instead and
// refuses whatever asks). 3.0.65 refuses a boolean option sent as
// {"value":true} ("expected string") and takes {"type":"boolean",
// "value":true}. After allow_always it asks again for the same call
// (seen in the conformance suite), so the adapter answers such a request
// itself with allow_once, for a call of the same title and input. A second prompt during a turn is not verified
// to join it, so Interaction.Steer is false.
//
// resume_session_id is ACP session/load {sessionId, cwd, mcpServers}
// instead of session/new (internal/acp), so an interactive run
// hibernates (Interaction.ResumesSession). Verified with 3.0.65
// (TestSessionLoadResumesKeptSession, the resuming run interactive and
// one-shot): a turn in one process,
// then a fresh home at another path holding the settings and what
// SessionFiles lists, the first home removed, and a new `cline --acp` in
// the same directory. The session lives in two places: its folder
// ~/.cline/data/sessions/<id>/ (<id>.json, the record with the usage and
// an absolute messages_path; <id>.messages.json) and a row of the index
// ~/.cline/data/db/sessions.db (with -wal and -shm, every session of the
// home), so SessionFiles lists both. The folder alone: session/load
// answers -32002 "Resource not found: <id>"; both, at another path: the
// same, because the load reads the messages through the row's absolute
// messages_path (not the record's: rewriting only that changed nothing).
// So Preflight points the row at this home's messages file
// (relink.go); then initialize advertises loadSession, session/load
// replays the history as user_message_chunk and agent_message_chunk
// notifications before its answer (dropped by the client), and the next
// prompt's model request carries turn 1's text. The record's usage then
// counts the earlier turns: the load's answer reads it as billed
// (Profile.SessionLoaded), so the first turn is billed only its own.
//
// # MCP servers and images
//
// Verified with 3.0.65 against the mock and the conformance suite's MCP
// server. `cline --acp` announces no MCP capability; session/new's
// mcpServers are kept with the session and never read again (its
// source: buildConfig does not use them; seen: the model was offered
// none of their tools). Both `cline --json` and `cline --acp` start the
// servers of the MCP settings file that CLINE_MCP_SETTINGS_PATH names
// ({"mcpServers": {name: {type "stdio", command, args, env} or {type
// "streamableHttp", url, headers}}}), in place of the home's
// cline_mcp_settings.json, and offer each tool to the model as
// <server>__<tool> ("demo__reverse_text"); the call's ACP title starts
// with that name too. So a run's MCP servers go in a file of its own,
// settings/agentgate-mcp-<run id>.json in the home, which Preflight
// writes (owner-only) and the decoder's Finish removes: it holds the
// servers' env and header values, which Command.Secrets lists. The
// operator's own cline_mcp_settings.json is not read by such a run. With
// auto-approve an MCP call runs unasked; with approvals it is asked like
// any other, naming its server. Remote (streamableHttp) servers: not
// verified.
//
// Images: a one-shot run mentions each image's file, the supervisor's
// under the run's TMPDIR, in its prompt as @"<path>"; Cline reads the
// file into the user message as an image_url data URL (sent to the
// OpenAI-compatible mock-model, which Cline knows nothing about) and
// puts "[image: <file name>]" in the mention's place. Over ACP, 3.0.65
// announces promptCapabilities.image but keeps only a session/prompt's
// text blocks (its source: the prompt is the text blocks joined), and
// does not read a file mentioned in the text there either (seen: the
// mention reached the model as text, without the image). An interactive
// run, or one with approvals, is refused its images (attachments):
// with its first prompt by Command; a later message with images starts
// its turn, which fails at once (flag_rejected) without reaching Cline
// (acp.go, Send), rather than leave the turn waiting.
//
// # Provider, key and home
//
// Cline reads its provider from $HOME/.cline/data/settings/providers.json
// (what `cline auth` writes). Every entry needs updatedAt: without it the
// file fails Cline's schema silently, Cline falls back to its own provider
// (api.cline.bot) and overwrites the file. With CLINE_BASE_URL set for
// the gateway, PrepareHome writes that file for the openai-compatible
// provider at that URL, with CLINE_MODEL as its model. The key is
// CLINE_API_KEY: `cline --acp` refuses session/new without it ("call
// authenticate", -32000) and sends its value as the bearer token in place
// of the file's; `cline --json` ignores it (verified: no Authorization
// header) and reads only the file's apiKey, so Preflight writes the key
// there (by rename) before every run, and PrepareHome at start; a session
// run passes the file's key as CLINE_API_KEY. Preflight fails a run at once,
// not_authenticated, when there is no provider or no key: Cline would
// otherwise try api.cline.bot for a minute and then hang.
//
// PrepareHome also sets telemetryOptOut and autoUpdateEnabled:false in
// global-settings.json (keeping the operator's other keys):
// otel.cline.bot is then no longer contacted. The feature-flag lookups of
// data.cline.bot (four per run) have no switch, DO_NOT_TRACK included;
// under network "model" the egress policy blocks them and Cline goes on.
// Every run gets CLINE_SESSION_BACKEND_MODE=local: otherwise the first
// run starts a hub daemon (parent pid 1) that outlives it.
//
// # Usage and cost
//
// Usage is exact (Reports.Usage "exact") in its input, cached and output
// counts: one model request per model
// call, no title or side requests. One-shot: run_result.usage, the sum
// over the run; inputTokens is the API's prompt_tokens (cached included),
// cacheReadTokens its cached_tokens. Over ACP nothing on the wire carries
// usage: after each turn the adapter reads the session record
// $HOME/.cline/data/sessions/<id>/<id>.json, whose metadata.usage is the
// session's so far, and takes the growth (Profile.TurnUsage). totalCost
// is 0 for an OpenAI-compatible model, so no cost is reported
// (max_budget_usd is refused). Reasoning tokens are in the output count,
// as the API's completion_tokens has them, but never reported apart:
// reasoning_tokens stays 0.
//
// # Failures
//
// Cline reports a failed model request by the API's message only
// (errorClass "auth" for a 401, "unknown" otherwise), never its status:
// the class is read from the message (outcome.go). A 401 ends in about
// 3 s; a 429 with Retry-After: 1 after 6 requests, about 7 s; a 500 after
// 6 requests with backoff 2 to 32 s, about 65 s. The retries are the AI
// SDK's maxRetries, fixed at 5 in Cline's code with no setting (--retries
// counts the agent's consecutive mistakes, not API retries), so the
// conformance kit declares a 100 s bound for 5xx (SlowFailures).
//
// Cline ignores SIGTERM (verified with `timeout`: it lived until the
// SIGKILL 5 s later, taking more model turns meanwhile). SIGINT ends a
// one-shot run at once (run_result finishReason "aborted", then a
// run_aborted line), so it is the command's InterruptSignal; the
// supervisor's SIGKILL of the process group after the grace period takes
// what is left. `cline --acp` exits at once when its stdin closes.
// Under the gateway's bubblewrap sandbox the interrupt signal goes to
// bwrap, which does not pass it on: a budget stop of a one-shot run then
// takes the grace period, and a model loop as fast as the mock's gets
// about three more turns meanwhile (the conformance case max_turns sees
// five tool calls for max_turns 2, with 0.5 s tools as with instant ones).
//
// HTTP_PROXY and HTTPS_PROXY are honoured for model requests, even to
// 127.0.0.1.
package cline
