// Package acpagent is the adapter of an agent the operator names in the
// agents file (AGENTGATE_AGENTS_FILE, package agentsfile) rather than one
// compiled into the gateway: any CLI with an Agent Client Protocol mode.
// It turns one entry into a runs.Adapter driven by the generic ACP client
// (package acp), and knows nothing of the CLI but what the entry says.
//
// # What a run is
//
//	argv        the entry's command (or AGENTGATE_<NAME>_BIN) and args: its ACP mode
//	env         the entry's env, then each credential (name=value, read from the
//	            gateway's from_env or from from_file at every run, and listed in
//	            Command.Secrets so that it is redacted wherever it would appear);
//	            pass_env copied from the gateway's environment when set
//	home        home_files written into the agent's home at start (PrepareHome),
//	            and taken from it into each run's own home (BaseFiles)
//	session     every run, one-shot ones too (PrefersSession): initialize,
//	            session/new {cwd, mcpServers: the run's MCP servers}, session/set_mode
//	            with the entry's mode, then one session/prompt per turn; a one-shot
//	            run closes after its first turn
//	mode        modes.read_only / workspace_write / full by the run's permission;
//	            modes.ask for a run that asks for approvals. Without approvals
//	            whatever the CLI still asks is refused at once (reject_once); with
//	            approvals and read_only too, since read_only allows nothing that asks
//	approval    allow_session picks the allow_always option the entry's
//	            session_allow_option names, or one the CLI offers alone; the
//	            others are hidden from the client (options.go), since ACP does not
//	            say where the CLI keeps such a rule (Qwen Code's first one is the
//	            workspace's .qwen/settings.json)
//
// # What is unknown, and why
//
// ACP's session/prompt result carries a stop reason and nothing of the
// bill, and its errors are JSON-RPC errors whose codes say nothing of the
// model API's status. So, for every agent of the file:
//
//   - usage is unknown (Reports.Usage): a run's usage stays zero and says
//     usage_unknown, and max_total_tokens is refused by name;
//   - cost is unknown: max_budget_usd is refused by name;
//   - failures are classed generically: a JSON-RPC error answered to a
//     request is api_error, a process that ends during a turn or before
//     the session is up agent_crashed, or process_killed for a signal.
//     Nothing is guessed from the CLI's words: a 401 and a 500 look the
//     same.
//
// Some CLIs do report usage in extensions of their own (Qwen Code puts
// each request's usage in an empty agent_message_chunk's _meta); reading
// those is a first-class adapter's work.
//
// # Fields
//
// Taken: interactive, approvals, mcp_servers (session/new's mcpServers;
// no call is known as an MCP call, since CLIs name MCP tools each their
// own way), cwd, permission and timeout_seconds, plus what the gateway
// enforces itself (max_turns, output_schema). Refused by name: model (the
// file sets it, in env or args: session/new takes none and
// session/set_model is not stable ACP), system_prompt and effort (ACP has
// neither), resume_session_id (every run is a new session), attachments,
// max_total_tokens and max_budget_usd (above). A message steered into a
// running turn is refused: what a second session/prompt does differs
// between CLIs.
//
// # Version
//
// ParseVersion takes the first semver-looking token of the output of the
// entry's version_args ("0.24.4", "v3.0.65"), since every CLI words it
// differently; the probe compares it with the entry's verified_version.
//
// # Verified
//
// Qwen Code 0.24.4 (`qwen --acp`, npm @qwen-code/qwen-code), configured
// purely by an entry (conformance_test.go), passed the suite's interactive
// cases against the mock chat server in a loopback-only namespace. Its
// entry: OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL pointing at the
// model; .qwen/settings.json turning off usage statistics, telemetry, auto
// update, managed memory (a hidden second model call after every turn)
// and ui.enableFollowupSuggestions (the prompt suggestion call after every
// ACP turn); modes plan, yolo (workspace_write: auto-edit asks before a
// shell command, which a run without approvals refuses; the gateway's
// sandbox keeps writes in the workspace), yolo, and default for approvals
// (the CLI's own default, auto, first asks the model itself whether a tool
// is safe); session_allow_option proceed_always_user. Found on the way:
// Qwen Code refuses a shell command that starts with a sleep of 2 s or
// more (detectBlockedSleepPattern), and sends notifications
// (qwen/notify/session/mode-update) and requests (craft/drainMidTurnQueue)
// of its own, reported as agent.unparsed and answered with an error.
package acpagent
