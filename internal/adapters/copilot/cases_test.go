package copilot

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

// cliCase is one scenario run by the real CLI against the mock
// (TestRealCLI, which also records testdata/<name>.jsonl with -record)
// and replayed from its recording (TestGolden). The expectations hold for
// both; check holds only live, where the ledger and directories exist.
type cliCase struct {
	name     string
	scenario func(marker string) openai.Scenario
	spec     runs.Spec
	// env is the gateway's environment for the mock at url; nil means
	// providerEnv.
	env func(url string) map[string]string
	// extraArgs make the CLI reject its command line.
	extraArgs []string
	// ownTemp gives the CLI a temp directory of its own (TMPDIR), so
	// that the test's temp directory is outside what the CLI allows.
	ownTemp bool
	// signal is sent to the CLI once the tool's command runs.
	signal syscall.Signal
	// home and dir, when set, are the CLI's home and working directory,
	// shared with another run (resume); fresh ones otherwise.
	home, dir string

	wantStatus runs.State
	wantClass  runs.Class
	// wantTypes is the order of the event types that carry the story
	// (see story), Outcome.Events included; nil is not checked.
	wantTypes []runs.EventType
	check     func(t *testing.T, r *cliRun)
}

// cliRun is one case's live run.
type cliRun struct {
	inv     runs.Invocation
	marker  string
	outside string // a path outside the run's directory and the CLI's temp directory
	events  []runs.Event
	outcome runs.Outcome
	ledger  openai.Ledger
	// failing is how long the CLI ran after its first request to the
	// mock, and stopping how long after the stop signal: the times a
	// failing API and a stop take, without the CLI's start, which a busy
	// machine stretches to many seconds.
	failing, stopping time.Duration
	res               recorded
}

const (
	tStart   = runs.EventSessionStarted
	tMsg     = runs.EventMessageCompleted
	tReason  = runs.EventReasoningCompleted
	tTool    = runs.EventToolCallStarted
	tToolEnd = runs.EventToolCallCompleted
	tFile    = runs.EventFileChanged
)

// story keeps the event types that tell what happened, dropping the ones
// whose number and place vary with timing: deltas, usage, warnings and
// rate-limit notices.
func story(evs []runs.Event) []runs.EventType {
	var out []runs.EventType
	for _, ev := range evs {
		switch ev.Type {
		case runs.EventMessageDelta, runs.EventUsageUpdated, runs.EventWarning, runs.EventRateLimit:
			continue
		}
		out = append(out, ev.Type)
	}
	return out
}

// testKey is the provider key the tests give the CLI, and the only one
// the mock accepts. The CLI masks its value wherever it appears in its
// output, so it must not be a word the output holds.
const testKey = "sk-agentgate-copilot-test-key"

// providerEnv is the gateway's environment for a custom provider at url:
// offline mode, the mock as an OpenAI Responses endpoint, and its key.
func providerEnv(url string) map[string]string {
	return map[string]string{
		"COPILOT_OFFLINE":           "true",
		"COPILOT_PROVIDER_BASE_URL": url,
		"COPILOT_PROVIDER_API_KEY":  testKey,
		"COPILOT_PROVIDER_WIRE_API": "responses",
		"COPILOT_MODEL":             openai.DefaultModel,
	}
}

func fixed(sc openai.Scenario) func(string) openai.Scenario {
	return func(string) openai.Scenario { return sc }
}

func failure(status int) func(string) openai.Scenario { return fixed(openai.Failure(status)) }

func cliCases() []cliCase {
	write := runs.Spec{Prompt: "Write hello to out.txt.", Permission: runs.WorkspaceWrite}
	failed := func(name string, sc func(string) openai.Scenario, class runs.Class, requests int, within time.Duration) cliCase {
		return cliCase{
			name: name, scenario: sc, spec: runs.Spec{Prompt: "say hi"},
			wantStatus: runs.Failed, wantClass: class, wantTypes: []runs.EventType{tStart},
			check: func(t *testing.T, r *cliRun) {
				r.wantRequests(t, requests)
				if r.failing > within {
					t.Errorf("the CLI ran %s after its first request, want at most %s", r.failing, within)
				}
			},
		}
	}
	outsideCase := func(name string, perm runs.Permission, written bool) cliCase {
		return cliCase{
			name: name, ownTemp: true,
			scenario: func(marker string) openai.Scenario {
				return openai.BashTurn("touch "+outsidePath(marker), "Touched it.")
			},
			spec:       runs.Spec{Prompt: "Touch the file outside.", Permission: perm},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tReason, tTool, tToolEnd, tMsg},
			check: func(t *testing.T, r *cliRun) {
				_, err := os.Stat(r.outside)
				if got := err == nil; got != written {
					t.Errorf("%s written = %v, want %v", r.outside, got, written)
				}
				if done := r.first(tToolEnd).Data.(runs.ToolCallCompletedData); done.IsError == written {
					t.Errorf("tool_call.completed = %+v", done)
				}
			},
		}
	}
	return []cliCase{
		{
			name: "tool_turn", scenario: fixed(openai.BashTurn("echo hello > out.txt", "I wrote out.txt.")), spec: write,
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tReason, tTool, tToolEnd, tMsg},
			check: func(t *testing.T, r *cliRun) {
				r.wantFile(t, "out.txt", "hello\n")
				r.wantRequests(t, 2)
				if r.outcome.Result != "I wrote out.txt." || r.outcome.SessionID != r.inv.RunID || r.outcome.NumTurns != 2 {
					t.Errorf("outcome = %+v", r.outcome)
				}
				started := r.first(tTool).Data.(runs.ToolCallStartedData)
				if started.Name != "bash" || !strings.Contains(string(started.Input), "echo hello > out.txt") {
					t.Errorf("tool_call.started = %+v", started)
				}
				if done := r.first(tToolEnd).Data.(runs.ToolCallCompletedData); done.IsError || done.ID != started.ID ||
					!strings.Contains(done.Output, "exit code 0") {
					t.Errorf("tool_call.completed = %+v", done)
				}
				if reason := r.first(tReason).Data.(runs.ReasoningData); reason.Visibility != runs.VisibilitySummary || reason.Text == "" {
					t.Errorf("reasoning = %+v, want its summary", reason)
				}
				req := r.ledger.Responses()[0].Request
				if got := req.Header.Get("Authorization"); got != "Bearer "+testKey {
					t.Errorf("Authorization = %q", got)
				}
				var deltas int
				for _, ev := range r.events {
					if ev.Type == runs.EventMessageDelta {
						deltas++
					}
					if ev.SessionID != r.inv.RunID {
						t.Errorf("%s on session %q, want the run's %q", ev.Type, ev.SessionID, r.inv.RunID)
					}
				}
				if deltas == 0 {
					t.Error("no message.delta")
				}
			},
		},
		{
			name:     "text",
			scenario: fixed(openai.TextAnswer("Hello from the mock.")),
			spec: runs.Spec{Prompt: "-say hi (a prompt that starts with a dash)", Model: "mock-model-2", Effort: "high",
				Permission: runs.ReadOnly},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tMsg},
			check: func(t *testing.T, r *cliRun) {
				all := r.ledger
				if len(all) != 1 || all[0].Request.Path != "/v1/responses" {
					t.Fatalf("ledger has %d requests, want exactly one POST /v1/responses (no phone-home)", len(all))
				}
				req := all[0].Request
				if req.Model != "mock-model-2" || req.Effort != "high" || !strings.HasSuffix(req.LastUserText(), "\n-say hi (a prompt that starts with a dash)") {
					t.Errorf("request: model %q effort %q prompt %q", req.Model, req.Effort, req.LastUserText())
				}
				if r.outcome.Model != "mock-model-2" || r.outcome.Result != "Hello from the mock." {
					t.Errorf("outcome = %+v", r.outcome)
				}
			},
		},
		{
			name: "big_prompt", scenario: fixed(openai.TextAnswer("Read it all.")),
			spec:       runs.Spec{Prompt: bigPrompt()},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tMsg},
			check: func(t *testing.T, r *cliRun) {
				if got := r.ledger.Responses()[0].Request.LastUserText(); !strings.HasSuffix(got, bigPrompt()) {
					t.Errorf("the model got a prompt of %d bytes, want the %d sent on stdin", len(got), len(bigPrompt()))
				}
			},
		},
		{
			name: "read_only", scenario: fixed(openai.BashTurn("echo hi > ro.txt", "Could not write.")),
			spec:       runs.Spec{Prompt: "Write hi to ro.txt.", Permission: runs.ReadOnly},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tReason, tTool, tToolEnd, tMsg},
			check: func(t *testing.T, r *cliRun) {
				if _, err := os.Stat(filepath.Join(r.inv.Dir, "ro.txt")); err == nil {
					t.Error("read_only let the command write ro.txt")
				}
				if done := r.first(tToolEnd).Data.(runs.ToolCallCompletedData); !done.IsError || !strings.Contains(done.Output, "denied") {
					t.Errorf("tool_call.completed = %+v", done)
				}
				r.wantWarning(t, "permission_denied")
			},
		},
		{
			name: "read_only_ls", scenario: fixed(openai.BashTurn("ls -a", "Listed.")),
			spec:       runs.Spec{Prompt: "List the files.", Permission: runs.ReadOnly},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tReason, tTool, tToolEnd, tMsg},
			check: func(t *testing.T, r *cliRun) {
				if done := r.first(tToolEnd).Data.(runs.ToolCallCompletedData); done.IsError || !strings.Contains(done.Output, "..") {
					t.Errorf("tool_call.completed = %+v, want ls's output", done)
				}
			},
		},
		{
			name: "create_file", scenario: createTurn, spec: write,
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tTool, tFile, tToolEnd, tMsg},
			check: func(t *testing.T, r *cliRun) {
				r.wantFile(t, "made.txt", "made by the create tool\n")
				fc := r.first(tFile).Data.(runs.FileChangedData)
				if fc.Path != "made.txt" || fc.Kind != runs.ChangeAdd || fc.Status != "completed" || fc.ToolCallID == "" ||
					!strings.Contains(fc.Diff, "+made by the create tool") {
					t.Errorf("file.changed = %+v", fc)
				}
				if started := r.first(tTool).Data.(runs.ToolCallStartedData); started.Name != "create" {
					t.Errorf("tool_call.started = %+v", started)
				}
			},
		},
		{
			name: "read_only_create", scenario: createTurn, spec: runs.Spec{Prompt: "Create made.txt.", Permission: runs.ReadOnly},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tTool, tToolEnd, tMsg},
			check: func(t *testing.T, r *cliRun) {
				if _, err := os.Stat(filepath.Join(r.inv.Dir, "made.txt")); err == nil {
					t.Error("read_only let the create tool write made.txt")
				}
				if done := r.first(tToolEnd).Data.(runs.ToolCallCompletedData); !done.IsError || !strings.Contains(done.Output, "denied") {
					t.Errorf("tool_call.completed = %+v", done)
				}
				r.wantWarning(t, "permission_denied")
			},
		},
		outsideCase("workspace_outside", runs.WorkspaceWrite, false),
		outsideCase("full_outside", runs.Full, true),
		failed("rate_limit_429", failure(429), runs.RateLimited, 6, 15*time.Second),
		failed("server_500", failure(500), runs.TransientAPIError, 6, 30*time.Second),
		failed("bad_request_400", failure(400), runs.APIError, 1, 10*time.Second),
		failed("context_exceeded", fixed(openai.ContextExceeded()), runs.ContextExceeded, 1, 10*time.Second),
		// Without its key the CLI still asks the mock, which refuses it
		// with HTTP 401 as it refuses a wrong key: the CLI prints the same
		// lines for both (a wrong key, openai.Failure(401), is the suite's
		// failure_401), so this case is also the one-shot 401.
		{
			name: "no_key", scenario: fixed(openai.TextAnswer("unreachable")), spec: runs.Spec{Prompt: "say hi"},
			env: func(url string) map[string]string {
				e := providerEnv(url)
				delete(e, "COPILOT_PROVIDER_API_KEY")
				return e
			},
			wantStatus: runs.Failed, wantClass: runs.NotAuthenticated, wantTypes: []runs.EventType{tStart},
			check: func(t *testing.T, r *cliRun) {
				if h := r.ledger.Responses()[0].Request.Header.Get("Authorization"); h != "" {
					t.Errorf("Authorization = %q without a key", h)
				}
				if !strings.Contains(r.outcome.Error.Hint, "COPILOT_PROVIDER_API_KEY") {
					t.Errorf("hint = %q", r.outcome.Error.Hint)
				}
				// A 401 is retried twice.
				r.wantRequests(t, 3)
				if within := 10 * time.Second; r.failing > within {
					t.Errorf("the CLI ran %s after its first request, want at most %s", r.failing, within)
				}
			},
		},
		{
			name: "no_credentials", scenario: fixed(openai.TextAnswer("unreachable")), spec: runs.Spec{Prompt: "say hi"},
			env:        func(string) map[string]string { return map[string]string{} },
			wantStatus: runs.Failed, wantClass: runs.NotAuthenticated, wantTypes: []runs.EventType{},
			check: func(t *testing.T, r *cliRun) {
				e := r.outcome.Error
				if e.Message != "No authentication information found." || !strings.Contains(e.Hint, "COPILOT_GITHUB_TOKEN") ||
					!strings.Contains(e.Hint, "copilot login") || !strings.Contains(e.Hint, "COPILOT_PROVIDER_BASE_URL") {
					t.Errorf("error = %+v", e)
				}
				if len(r.res.stdout) != 0 || r.res.Exit.Code != 1 {
					t.Errorf("stdout %d lines, exit %+v; want nothing and 1", len(r.res.stdout), r.res.Exit)
				}
				// It exits by itself (code 1 above, not the test's kill),
				// without a request; how long its start takes is the
				// machine's.
				r.wantRequests(t, 0)
			},
		},
		{
			name: "classic_token", scenario: fixed(openai.TextAnswer("unreachable")), spec: runs.Spec{Prompt: "say hi"},
			env: func(string) map[string]string {
				return map[string]string{"GH_TOKEN": "ghp_agentgateNotARealToken0000000000000000"}
			},
			wantStatus: runs.Failed, wantClass: runs.NotAuthenticated, wantTypes: []runs.EventType{},
			check: func(t *testing.T, r *cliRun) {
				if !strings.Contains(r.outcome.Error.Message, "Classic Personal Access Tokens") {
					t.Errorf("error = %+v", r.outcome.Error)
				}
			},
		},
		{
			name: "offline_no_provider", scenario: fixed(openai.TextAnswer("unreachable")), spec: runs.Spec{Prompt: "say hi"},
			env:        func(string) map[string]string { return map[string]string{"COPILOT_OFFLINE": "true"} },
			wantStatus: runs.Failed, wantClass: runs.NotAuthenticated, wantTypes: []runs.EventType{},
			check: func(t *testing.T, r *cliRun) {
				if !strings.Contains(r.outcome.Error.Hint, "COPILOT_PROVIDER_BASE_URL") {
					t.Errorf("error = %+v", r.outcome.Error)
				}
			},
		},
		{
			name: "flag_rejected", scenario: failure(500), spec: runs.Spec{Prompt: "say hi"},
			extraArgs:  []string{"--agentgate-no-such-flag"},
			wantStatus: runs.Failed, wantClass: runs.FlagRejected, wantTypes: []runs.EventType{},
			check: func(t *testing.T, r *cliRun) {
				if !strings.Contains(r.outcome.Error.Hint, VerifiedVersion) {
					t.Errorf("hint %q does not name the verified version", r.outcome.Error.Hint)
				}
				r.wantRequests(t, 0)
			},
		},
		{
			name: "interrupt", spec: write, signal: syscall.SIGTERM,
			scenario: func(marker string) openai.Scenario {
				return openai.BashTurn("sleep 60; echo "+marker, "finished")
			},
			wantStatus: runs.Failed, wantClass: runs.Interrupted,
			wantTypes: []runs.EventType{tStart, tReason, tTool, tToolEnd},
			check: func(t *testing.T, r *cliRun) {
				if r.outcome.StopReason != "aborted" || r.res.Exit.Signal != "" {
					t.Errorf("stop %q exit %+v: SIGTERM should abort the prompt and the CLI exit", r.outcome.StopReason, r.res.Exit)
				}
				if left := agenttest.WaitGone(r.marker, 5*time.Second); len(left) > 0 {
					t.Errorf("command processes left after SIGTERM: %v", left)
				}
				if r.stopping > 20*time.Second {
					t.Errorf("the CLI ran %s after SIGTERM", r.stopping)
				}
			},
		},
	}
}

// createTurn asks for Copilot's create tool to write made.txt in the
// run's directory, then answers.
func createTurn(string) openai.Scenario {
	return openai.Func(func(req *openai.Request) openai.Response {
		if req.HasFunctionOutput() {
			return openai.Response{Items: []openai.Item{openai.Text("Created it.")}, Usage: openai.Usage{InputTokens: 700, CachedTokens: 100, OutputTokens: 9}}
		}
		return openai.Response{Items: []openai.Item{openai.FunctionCall("create", map[string]string{
			"path": "made.txt", "file_text": "made by the create tool\n"})}, Usage: openai.Usage{InputTokens: 600, OutputTokens: 30}}
	})
}

// bigPrompt is larger than one command-line argument may be (128 KiB):
// it reaches the CLI on stdin.
func bigPrompt() string {
	return strings.Repeat("agentgate ", 14<<10) + "Say you read it all."
}

// outsidePath is where the outside cases touch a file: in a directory
// named after the marker, under the system temp directory, which the CLI
// run with a TMPDIR of its own does not allow.
func outsidePath(marker string) string {
	return filepath.Join(os.TempDir(), marker, "outside.txt")
}

// checkRun asserts what every case shares: status, class, event order,
// and usage against the ledger.
func checkRun(t *testing.T, c cliCase, r *cliRun) {
	t.Helper()
	o := r.outcome
	if o.Status != c.wantStatus {
		t.Errorf("status = %s, want %s (error %+v; exit %+v; stderr %q)", o.Status, c.wantStatus, o.Error, r.res.Exit, tail(r.res.Stderr, 300))
	}
	switch {
	case c.wantClass == "" && o.Error != nil:
		t.Errorf("error %+v", o.Error)
	case c.wantClass != "" && (o.Error == nil || o.Error.Class != c.wantClass):
		t.Errorf("error = %+v, want class %s", o.Error, c.wantClass)
	case o.Error != nil && o.Error.Retryable != o.Error.Class.Retryable():
		t.Errorf("retryable = %v for %s", o.Error.Retryable, o.Error.Class)
	}
	if c.wantTypes != nil {
		if got := story(r.events); !slices.Equal(got, c.wantTypes) {
			t.Errorf("events =\n  %v\nwant\n  %v", got, c.wantTypes)
		}
	}
	if got, want := o.Usage, normalized(r.ledger.Billed()); got != want {
		t.Errorf("usage = %+v, the mock billed %+v", got, want)
	}
	for _, ev := range r.events {
		if ev.Type == runs.EventAgentUnparsed {
			t.Errorf("unparsed: %+v", ev.Data)
		}
	}
}

// normalized is the mock's billing in the gateway's convention, which
// the Responses API shares: input includes cached, output reasoning.
func normalized(u openai.Usage) runs.Usage {
	return runs.Usage{InputTokens: u.InputTokens, CacheReadTokens: u.CachedTokens, OutputTokens: u.OutputTokens, ReasoningTokens: u.ReasoningTokens}
}

func (r *cliRun) first(typ runs.EventType) runs.Event {
	for _, ev := range r.events {
		if ev.Type == typ {
			return ev
		}
	}
	return runs.Event{Type: typ, Data: zeroData(typ)}
}

func zeroData(typ runs.EventType) any {
	switch typ {
	case tTool:
		return runs.ToolCallStartedData{}
	case tToolEnd:
		return runs.ToolCallCompletedData{}
	case tReason:
		return runs.ReasoningData{}
	case tFile:
		return runs.FileChangedData{}
	}
	return runs.MessageData{}
}

func (r *cliRun) wantFile(t *testing.T, name, content string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.inv.Dir, name))
	if err != nil || string(b) != content {
		t.Errorf("%s = %q, %v; want %q", name, b, err, content)
	}
}

func (r *cliRun) wantRequests(t *testing.T, n int) {
	t.Helper()
	if got := len(r.ledger.Responses()); got != n {
		t.Errorf("the mock got %d requests, want %d", got, n)
	}
}

func (r *cliRun) wantWarning(t *testing.T, code string) {
	t.Helper()
	for _, ev := range r.events {
		if w, ok := ev.Data.(runs.WarningData); ok && ev.Type == runs.EventWarning && w.Code == code {
			return
		}
	}
	t.Errorf("no %s warning", code)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
