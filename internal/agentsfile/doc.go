// Package agentsfile reads the agents file (AGENTGATE_AGENTS_FILE): the
// operator's list of ACP agents the gateway runs without an adapter of its
// own, each driven by the generic ACP client (internal/adapters/acpagent).
// It owns the file's format and its validation, nothing else: it starts
// no process and reads no credential.
//
// The file is YAML (JSON is YAML too), read once at startup:
//
//	agents:
//	  - name: qwen-acp
//	    display_name: Qwen Code over ACP
//	    command: qwen
//	    args: ["--acp"]
//	    version_args: ["--version"]
//	    verified_version: "0.24.4"
//	    env: {OPENAI_MODEL: mock-model}
//	    pass_env: [OPENAI_BASE_URL]
//	    credentials:
//	      - {name: OPENAI_API_KEY, from_env: AGENTGATE_QWEN_KEY}
//	    home_files:
//	      .qwen/settings.json: '{"privacy":{"usageStatisticsEnabled":false}}'
//	    modes: {read_only: plan, workspace_write: auto-edit, full: yolo, ask: default}
//	    session_allow_option: proceed_always_user
//
// Parsing is strict: an unknown key anywhere is an error, and so is every
// value the gateway could not use as written. Every error is an *Error
// naming the file, the agent (its name, or its position when it has none)
// and the field, so that a gateway that refuses to start says where to
// look. Sizes are bounded (the file, the agents, each list and each home
// file), because the file is read whole into memory and its home files are
// written into every run's home.
package agentsfile
