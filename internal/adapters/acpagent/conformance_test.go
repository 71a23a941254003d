package acpagent

import (
	"testing"

	"github.com/agentgate/agentgate/internal/agentsfile"
	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/conformance"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/runs"
)

// qwenEntry configures Qwen Code 0.24.4 (`qwen --acp`) as an operator
// would, in the agents file, against the mock Chat Completions server.
// The model's URL is the gateway's variable, passed through, since every
// case has a server of its own; the key is a credential.
//
// The settings turn off what phones home (usage statistics, telemetry,
// auto update) and the model requests nobody asked for: managed memory's
// extraction after every turn, and the follow-up suggestion after every
// ACP turn (ui.enableFollowupSuggestions, read by the ACP agent before it
// asks the model "[SUGGESTION MODE: …"). workspace_write is yolo, not
// auto-edit: auto-edit asks before a shell command, which a run without
// approvals refuses; the gateway's sandbox keeps the run's writes in its
// workspace. Approvals use default, which asks before shell and edits,
// rather than the CLI's own auto, which first asks the model whether a
// call is safe. For allow_session it offers two allow_always options: the
// project's, which writes a rule into the workspace's .qwen/settings.json,
// and the user's, which writes it into the run's own home: the entry
// names the latter.
const qwenEntry = `
agents:
  - name: qwen-acp
    display_name: Qwen Code over ACP
    command: qwen
    args: ["--acp"]
    verified_version: "0.24.4"
    env:
      OPENAI_MODEL: mock-model
      QWEN_CODE_SUPPRESS_YOLO_WARNING: "1"
      NO_COLOR: "1"
    pass_env: [OPENAI_BASE_URL]
    credentials:
      - {name: OPENAI_API_KEY, from_env: AGENTGATE_TEST_QWEN_KEY}
    home_files:
      .qwen/settings.json: |
        {"privacy": {"usageStatisticsEnabled": false},
         "telemetry": {"enabled": false},
         "general": {"enableAutoUpdate": false},
         "memory": {"enableManagedAutoMemory": false, "enableManagedAutoDream": false},
         "ui": {"enableFollowupSuggestions": false}}
    modes:
      read_only: plan
      workspace_write: yolo
      full: yolo
      ask: default
    session_allow_option: proceed_always_user
    model_endpoints: ["$OPENAI_BASE_URL"]
`

// testKey is the key every case's mock accepts.
const testKey = "qwen-test-key"

// TestConformanceQwen runs the suite's interactive cases against the real
// Qwen Code, configured by qwenEntry alone, and, since the entry names its
// model endpoint, the network cases: Qwen Code sends its model requests
// through HTTPS_PROXY/HTTP_PROXY, as the egress proxy needs.
func TestConformanceQwen(t *testing.T) {
	entries, err := agentsfile.Parse("qwen.yaml", []byte(qwenEntry), nil)
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "AGENTGATE_TEST_QWEN_KEY" {
			return testKey
		}
		return ""
	}
	conformance.RunInteractive(t, qwenKit{ForEntry(entries[0], getenv)})
}

type qwenKit struct{ a runs.Adapter }

func (k qwenKit) Adapter() runs.Adapter { return k.a }

func (qwenKit) Bin(t testing.TB) string { return agenttest.Bin(t, "qwen") }

// Serve plays sc in Chat Completions, calling Qwen Code's shell tool,
// run_shell_command.
func (qwenKit) Serve(t testing.TB, sc conformance.Scenario, _ string) conformance.Backend {
	var s chat.Scenario
	switch sc.Kind {
	case conformance.Text:
		s = chat.TextAnswer(sc.Text)
	case conformance.Tool:
		s = chat.ToolTurn(shell(sc.Command), sc.Text)
	case conformance.LongTool:
		// Not a command that starts with sleep: Qwen Code refuses
		// those (detectBlockedSleepPattern) and tells the model to use
		// a background task.
		s = chat.ToolThenText([]chat.Call{shell("echo started; sleep 60; echo " + sc.Marker)}, sc.Text)
	case conformance.TwoTools:
		s = chat.TwoTools(shell(sc.Command), shell(sc.Command2), sc.Text)
	case conformance.Turns:
		s = chat.Turns(sc.Text)
	default:
		t.Fatalf("scenario %q is not one of the interactive cases'", sc.Kind)
	}
	srv, err := chat.Start("127.0.0.1:0", s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return conformance.Backend{
		Env:           map[string]string{"OPENAI_BASE_URL": srv.URL},
		NoCredentials: map[string]string{"OPENAI_BASE_URL": srv.URL},
		Billed: func() runs.Usage {
			u := srv.Ledger().Billed()
			return runs.Usage{InputTokens: u.PromptTokens, CacheReadTokens: u.CachedTokens, OutputTokens: u.CompletionTokens,
				ReasoningTokens: u.ReasoningTokens}
		},
		Requests: func() int { return len(srv.Ledger().Completions()) },
		Seen:     func(text string) bool { return srv.Ledger().Seen(text) },
	}
}

// shell is a call of Qwen Code's shell tool.
func shell(command string) chat.Call {
	return chat.FunctionCall("run_shell_command", map[string]string{"command": command, "description": "conformance"})
}
