package claude

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// cliCase is one scenario run by the real CLI against the mock server
// (TestRealCLI, which also records testdata/<name>.jsonl with -record) and
// replayed from its recording (TestGolden). The expectations below hold
// for both; check holds only live, where the mock's ledger and the run's
// directory exist.
type cliCase struct {
	name     string
	scenario func(marker string) anthropic.Scenario
	spec     runs.Spec
	// noKey leaves ANTHROPIC_API_KEY unset. ANTHROPIC_BASE_URL still
	// points at the mock, so nothing can leave the machine, and the
	// ledger proves the CLI sent nothing.
	noKey bool
	// timeout is the run's timeout, which bounds API_TIMEOUT_MS.
	timeout time.Duration
	// extraArgs are appended to the adapter's arguments.
	extraArgs  []string
	cliVersion string
	// interrupt sends the Command's InterruptSignal once the Bash tool
	// call started.
	interrupt bool
	// slow marks a case that waits on the CLI's clock for half a minute
	// or more: TestRealCLI runs it only with -record or -slow; its
	// recording is replayed by TestGolden always.
	slow bool
	// coveredBy names the TestConformance case that plays the same
	// scenario live and asserts everything of substance this case does
	// live: TestRealCLI runs the case only with -record, so that its
	// recording stays re-recordable, and TestGolden replays it always.
	coveredBy string
	// before runs first, in the same HOME and directory (resume).
	before *cliCase
	// runID is the run's id; empty for a fresh UUIDv7.
	runID string

	wantStatus runs.State
	wantClass  runs.Class
	// wantTypes is the order of event types, Outcome.Events included,
	// with each run of message.delta collapsed to one.
	wantTypes []runs.EventType
	check     func(t *testing.T, r *cliRun)
}

// The event types, short. usage.updated is left out of a case's
// wantTypes: checkUsageUpdates checks it.
const (
	tStart   = runs.EventSessionStarted
	tDelta   = runs.EventMessageDelta
	tMsg     = runs.EventMessageCompleted
	tReason  = runs.EventReasoningCompleted
	tTool    = runs.EventToolCallStarted
	tToolEnd = runs.EventToolCallCompleted
	tProg    = runs.EventToolCallProgress
	tUsage   = runs.EventUsageUpdated
	tRate    = runs.EventRateLimit
	tWarn    = runs.EventWarning
)

// testSchema is the output_schema of the structured case.
const testSchema = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`

// resumeFirstID is the session the resume case continues.
const resumeFirstID = "0196f0c2-7e1a-7000-8000-00000000a001"

func fixed(sc anthropic.Scenario) func(string) anthropic.Scenario {
	return func(string) anthropic.Scenario { return sc }
}

func cliCases() []cliCase {
	toolTurn := func(string) anthropic.Scenario { return anthropic.ToolTurn("echo hello > out.txt", "I wrote out.txt.") }
	prompt := func(p runs.Permission) runs.Spec {
		return runs.Spec{Prompt: "Write hello to out.txt.", Permission: p}
	}
	return []cliCase{
		{
			name: "tool_turn", scenario: toolTurn, spec: prompt(runs.WorkspaceWrite),
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tReason, tDelta, tMsg, tTool, tToolEnd, tDelta, tMsg},
			check: func(t *testing.T, r *cliRun) {
				r.wantFile(t, "out.txt", "hello\n")
				reqs := r.ledger.Messages()
				if len(reqs) != 2 {
					t.Fatalf("requests = %d, want 2 (tool call, then its result)", len(reqs))
				}
				tr := reqs[1].Request.ToolResults()
				if len(tr) != 1 || tr[0].IsError {
					t.Errorf("second request's tool results = %+v, want one successful result", tr)
				}
				if r.outcome.Result != "I wrote out.txt." {
					t.Errorf("result = %q", r.outcome.Result)
				}
				started := r.first(tTool).Data.(runs.ToolCallStartedData)
				if started.Name != "Bash" || !strings.Contains(string(started.Input), "echo hello > out.txt") {
					t.Errorf("tool_call.started = %+v", started)
				}
				reason := r.first(tReason).Data.(runs.ReasoningData)
				if reason.Visibility != runs.VisibilityFull || reason.Text == "" {
					t.Errorf("reasoning = %+v, want full text", reason)
				}
				var streamed strings.Builder
				for _, ev := range r.events {
					if ev.Type == runs.EventReasoningDelta {
						streamed.WriteString(ev.Data.(runs.DeltaData).Text)
					}
				}
				if streamed.String() != reason.Text {
					t.Errorf("reasoning deltas add up to %q, the block is %q", streamed.String(), reason.Text)
				}
			},
		},
		{
			name:     "text",
			scenario: fixed(anthropic.TextAnswer("Hello from the mock.")),
			spec: runs.Spec{Prompt: "-say hi (a prompt that starts with a dash)", Model: "claude-opus-5-5", Effort: "high",
				SystemPrompt: "Answer in one line.", Permission: runs.WorkspaceWrite},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tDelta, tMsg},
			check: func(t *testing.T, r *cliRun) {
				all := r.ledger
				if len(all) != 1 || all[0].Request.Method != "POST" || all[0].Request.Path != "/v1/messages" ||
					all[0].Request.RawQuery != "beta=true" {
					t.Fatalf("ledger = %+v, want exactly one POST /v1/messages?beta=true (no phone-home)", summarize(all))
				}
				req := all[0].Request
				if got := req.Header.Get("X-Api-Key"); got != testKey {
					t.Errorf("x-api-key = %q, want %q", got, testKey)
				}
				if req.Model != "claude-opus-5-5" || req.Effort != "high" {
					t.Errorf("model, effort = %q, %q", req.Model, req.Effort)
				}
				if !strings.HasSuffix(req.System, "Answer in one line.") {
					t.Errorf("system prompt does not end with the appended text: …%q", tail(req.System, 80))
				}
				if !strings.Contains(req.UserText(), "-say hi (a prompt that starts with a dash)") {
					t.Errorf("the prompt fed on stdin is not in the request: %q", tail(req.UserText(), 200))
				}
				if got := req.Header.Get("X-Claude-Code-Session-Id"); got != r.inv.RunID {
					t.Errorf("session header = %q, want the run id %q", got, r.inv.RunID)
				}
				if r.outcome.SessionID != r.inv.RunID {
					t.Errorf("outcome session = %q, want the run id", r.outcome.SessionID)
				}
				var text strings.Builder
				for _, ev := range r.events {
					if ev.Type == tDelta {
						text.WriteString(ev.Data.(runs.MessageData).Text)
					}
				}
				if text.String() != "Hello from the mock." {
					t.Errorf("deltas = %q", text.String())
				}
			},
		},
		{
			name: "read_only", scenario: toolTurn, spec: prompt(runs.ReadOnly),
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tReason, tDelta, tMsg, tTool, tWarn, tToolEnd, tDelta, tMsg, tWarn},
			check: func(t *testing.T, r *cliRun) {
				r.wantNoFile(t, "out.txt")
				if w := r.first(tWarn).Data.(runs.WarningData); w.Code != "permission_denied" {
					t.Errorf("first warning = %+v, want permission_denied", w)
				}
				if end := r.first(tToolEnd).Data.(runs.ToolCallCompletedData); !end.IsError {
					t.Errorf("refused tool call completed without error: %+v", end)
				}
			},
		},
		{
			// The sandbox cases run a Bash call under full and check
			// that it writes; tool_turn checks this scenario's events,
			// usage and cost live under workspace_write.
			name: "full", scenario: toolTurn, spec: prompt(runs.Full), coveredBy: "sandbox_write_outside",
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tReason, tDelta, tMsg, tTool, tToolEnd, tDelta, tMsg},
			check:      func(t *testing.T, r *cliRun) { r.wantFile(t, "out.txt", "hello\n") },
		},
		{
			name:     "structured",
			scenario: fixed(anthropic.Structured(map[string]string{"name": "Bob"})),
			spec:     runs.Spec{Prompt: "Name someone.", OutputSchema: json.RawMessage(testSchema)},
			// The StructuredOutput call has no visible text; the CLI
			// closes it itself and asks nothing more.
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tTool, tToolEnd},
			check: func(t *testing.T, r *cliRun) {
				if string(r.outcome.StructuredOutput) != `{"name":"Bob"}` {
					t.Errorf("structured output = %s", r.outcome.StructuredOutput)
				}
				if reqs := r.ledger.Messages(); len(reqs) != 1 || !reqs[0].Request.HasTool("StructuredOutput") {
					t.Errorf("want one request offering StructuredOutput, got %+v", summarize(reqs))
				}
			},
		},
		{
			name: "max_turns", scenario: fixed(anthropic.AlwaysTool("echo again")),
			spec:       runs.Spec{Prompt: "Loop.", MaxTurns: 1},
			wantStatus: runs.Failed, wantClass: runs.MaxTurns,
			wantTypes: []runs.EventType{tStart, tDelta, tMsg, tTool, tToolEnd},
		},
		{
			name: "budget", scenario: toolTurn,
			spec:       runs.Spec{Prompt: "Spend.", MaxBudgetUSD: 0.001},
			wantStatus: runs.Failed, wantClass: runs.BudgetExceeded,
			// The tool call never ran: Finish closes it as failed.
			wantTypes: []runs.EventType{tStart, tReason, tDelta, tMsg, tTool, tToolEnd},
			check: func(t *testing.T, r *cliRun) {
				if r.resultLine.Usage == nil || r.resultLine.Usage.InputTokens != 0 {
					t.Errorf("result.usage = %+v; the CLI used to report zeros here, which the modelUsage fallback covers", r.resultLine.Usage)
				}
			},
		},
		{
			name:     "resume",
			scenario: fixed(anthropic.TextAnswer("Hello from the mock.")),
			before: &cliCase{
				name: "resume_first", scenario: fixed(anthropic.TextAnswer("First answer.")),
				spec: runs.Spec{Prompt: "First prompt."}, runID: resumeFirstID,
			},
			spec:       runs.Spec{Prompt: "Second prompt.", ResumeSessionID: resumeFirstID},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tDelta, tMsg},
			check: func(t *testing.T, r *cliRun) {
				reqs := r.ledger.Messages()
				if len(reqs) != 1 {
					t.Fatalf("requests = %d", len(reqs))
				}
				text := reqs[0].Request.UserText()
				if !strings.Contains(text, "First prompt.") || !strings.Contains(text, "Second prompt.") {
					t.Errorf("resumed request lacks the history: %q", tail(text, 300))
				}
				if r.outcome.SessionID != resumeFirstID || r.first(tStart).SessionID != resumeFirstID {
					t.Errorf("session = %q, want the resumed %q", r.outcome.SessionID, resumeFirstID)
				}
			},
		},
		{
			name: "resume_unknown", scenario: fixed(anthropic.TextAnswer("unused")),
			spec:       runs.Spec{Prompt: "hi", ResumeSessionID: "0196f0c2-7e1a-7000-8000-00000000dead"},
			wantStatus: runs.Failed, wantClass: runs.SessionNotFound,
			wantTypes: []runs.EventType{},
			check:     func(t *testing.T, r *cliRun) { r.wantRequests(t, 0) },
		},
		{
			name: "no_credentials", scenario: fixed(anthropic.TextAnswer("unused")), noKey: true,
			spec:       runs.Spec{Prompt: "hi"},
			wantStatus: runs.Failed, wantClass: runs.NotAuthenticated,
			wantTypes: []runs.EventType{tStart},
			check: func(t *testing.T, r *cliRun) {
				r.wantRequests(t, 0)
				if r.outcome.Error.Hint != hintAuth {
					t.Errorf("hint = %q", r.outcome.Error.Hint)
				}
			},
		},
		{
			name: "auth_401", scenario: fixed(anthropic.Failure(401)), spec: runs.Spec{Prompt: "hi"},
			wantStatus: runs.Failed, wantClass: runs.NotAuthenticated,
			wantTypes: []runs.EventType{tStart, tWarn, tWarn},
			check:     func(t *testing.T, r *cliRun) { r.wantRequests(t, 1+MaxRetries) },
		},
		{
			name: "rate_limit_429", scenario: fixed(anthropic.Failure(429)), spec: runs.Spec{Prompt: "hi"},
			wantStatus: runs.Failed, wantClass: runs.RateLimited,
			wantTypes: []runs.EventType{tStart, tRate, tRate},
			check:     func(t *testing.T, r *cliRun) { r.wantRequests(t, 1+MaxRetries) },
		},
		{
			// failure_500 checks the class live; auth_401 and
			// rate_limit_429 check the retries' requests and events.
			name: "server_500", scenario: fixed(anthropic.Failure(500)), spec: runs.Spec{Prompt: "hi"}, coveredBy: "failure_500",
			wantStatus: runs.Failed, wantClass: runs.TransientAPIError,
			wantTypes: []runs.EventType{tStart, tWarn, tWarn},
		},
		{
			name: "overloaded_529", scenario: fixed(anthropic.Failure(529)), spec: runs.Spec{Prompt: "hi"},
			wantStatus: runs.Failed, wantClass: runs.TransientAPIError,
			wantTypes: []runs.EventType{tStart, tRate, tRate},
		},
		{
			name: "bad_request_400", scenario: fixed(anthropic.Failure(400)), spec: runs.Spec{Prompt: "hi"},
			wantStatus: runs.Failed, wantClass: runs.APIError,
			wantTypes: []runs.EventType{tStart},
		},
		{
			name: "rate_limit_recovered", scenario: fixed(anthropic.Sequence(anthropic.Failure(429), anthropic.TextAnswer("Recovered."))),
			spec:       runs.Spec{Prompt: "hi"},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tRate, tDelta, tMsg},
		},
		{
			name: "stream_error", scenario: fixed(anthropic.StreamFailure("Recovered without streaming.")),
			spec:       runs.Spec{Prompt: "hi"},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tMsg},
			check: func(t *testing.T, r *cliRun) {
				var nonStream int
				for _, e := range r.ledger.Messages() {
					if !e.Request.Stream {
						nonStream++
					}
				}
				if nonStream == 0 {
					t.Errorf("no stream:false fallback request in %+v", summarize(r.ledger))
				}
			},
		},
		{
			name: "hang", scenario: fixed(anthropic.Hang()), spec: runs.Spec{Prompt: "hi"},
			timeout:    3 * time.Second, // API_TIMEOUT_MS=1000
			wantStatus: runs.Failed, wantClass: runs.TransientAPIError,
			wantTypes: []runs.EventType{tStart, tWarn, tWarn},
			check: func(t *testing.T, r *cliRun) {
				if !strings.Contains(r.outcome.Error.Message, "timed out") {
					t.Errorf("message = %q, want the CLI's timeout", r.outcome.Error.Message)
				}
				// Three attempts of 1 s and two short retry delays take
				// about 5 s; the CLI's own default would take minutes.
				// The bound leaves room for a loaded machine.
				if r.elapsed > 30*time.Second {
					t.Errorf("took %v: API_TIMEOUT_MS did not bound the attempts", r.elapsed)
				}
			},
		},
		{
			name: "interrupted",
			scenario: func(marker string) anthropic.Scenario {
				return anthropic.ToolTurn(anthropic.LongCommand+" "+marker, "unreachable")
			},
			spec: runs.Spec{Prompt: "Run the long command."}, interrupt: true,
			wantStatus: runs.Failed, wantClass: runs.Interrupted,
			wantTypes: []runs.EventType{tStart, tReason, tDelta, tMsg, tTool, tToolEnd},
			check: func(t *testing.T, r *cliRun) {
				if r.res.Exit.Code != 0 {
					t.Errorf("exit = %+v, want 0 after SIGINT", r.res.Exit)
				}
			},
		},
		{
			// The CLI reports a running tool every 30 s, a constant of
			// its own: the tool runs 31 s to give one report.
			name: "long_tool", slow: true,
			scenario:   fixed(anthropic.ToolTurn("perl -e 'sleep 31'", "The command finished.")),
			spec:       runs.Spec{Prompt: "Run the long command.", Permission: runs.WorkspaceWrite},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tReason, tDelta, tMsg, tTool, tProg, tToolEnd, tDelta, tMsg},
			check: func(t *testing.T, r *cliRun) {
				started := r.first(tTool).Data.(runs.ToolCallStartedData)
				p := r.first(tProg)
				got := p.Data.(runs.ToolCallProgressData)
				if got.ID != started.ID || got.Name != "Bash" || got.ElapsedMS < 30000 || p.ParentToolCallID != "" {
					t.Errorf("tool_call.progress = %+v (parent %q), want call %s, Bash, at least 30 s, no parent",
						got, p.ParentToolCallID, started.ID)
				}
			},
		},
		{
			name: "flag_rejected", scenario: fixed(anthropic.TextAnswer("unused")),
			spec: runs.Spec{Prompt: "hi"}, extraArgs: []string{"--no-such-flag"}, cliVersion: "2.0.0",
			wantStatus: runs.Failed, wantClass: runs.FlagRejected,
			wantTypes: nil,
			check: func(t *testing.T, r *cliRun) {
				r.wantRequests(t, 0)
				if h := r.outcome.Error.Hint; !strings.Contains(h, "2.0.0") || !strings.Contains(h, VerifiedVersion) {
					t.Errorf("hint %q does not name both versions", h)
				}
			},
		},
	}
}

// testKey is the API key the real-CLI runs send.
const testKey = "test-key-agentgate"

// cliRun is one finished real-CLI run.
type cliRun struct {
	inv        runs.Invocation
	res        recorded
	events     []runs.Event
	outcome    runs.Outcome
	resultLine *wireLine
	ledger     anthropic.Ledger
	elapsed    time.Duration
}

// recorded is what -record keeps of a run next to its stdout.
type recorded struct {
	Exit       runs.Exit `json:"exit"`
	Stderr     string    `json:"stderr"`
	CLIVersion string    `json:"cli_version"`
	stdout     [][]byte
}

func (r *cliRun) first(t runs.EventType) runs.Event {
	for _, ev := range r.events {
		if ev.Type == t {
			return ev
		}
	}
	return runs.Event{Type: t, Data: zeroData(t)}
}

func zeroData(t runs.EventType) any {
	switch t {
	case tTool:
		return runs.ToolCallStartedData{}
	case tToolEnd:
		return runs.ToolCallCompletedData{}
	case tReason:
		return runs.ReasoningData{}
	case tWarn:
		return runs.WarningData{}
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

func (r *cliRun) wantNoFile(t *testing.T, name string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(r.inv.Dir, name)); err == nil {
		t.Errorf("%s exists; the permission level should have refused it", name)
	}
}

func (r *cliRun) wantRequests(t *testing.T, n int) {
	t.Helper()
	if got := len(r.ledger.Messages()); got != n {
		t.Errorf("model requests = %d, want %d: %+v", got, n, summarize(r.ledger))
	}
}

// summarize is a readable form of a ledger for failure messages.
func summarize(l anthropic.Ledger) []string {
	out := make([]string, 0, len(l))
	for _, e := range l {
		out = append(out, e.Request.Method+" "+e.Request.Path+"?"+e.Request.RawQuery+" → "+strconv.Itoa(e.Status))
	}
	return out
}

// collapse returns the event types in order, each run of message.delta
// collapsed to one and reasoning deltas left out.
func collapse(evs []runs.Event) []runs.EventType {
	var out []runs.EventType
	for _, ev := range evs {
		if ev.Type == tDelta && len(out) > 0 && out[len(out)-1] == tDelta {
			continue
		}
		if ev.Type == runs.EventReasoningDelta {
			continue // checked against reasoning.completed where a case has thinking
		}
		if ev.Type == tUsage {
			continue // they come with every stream's usage: checked by wantUsageUpdates
		}
		out = append(out, ev.Type)
	}
	return out
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// checkUsageUpdates checks the usage.updated events of a one-shot run:
// they come as the CLI streams the usage of each API message, so a
// budget can be enforced mid-run, never go down, and the last is the
// outcome's usage; a run that used tokens has at least one.
func checkUsageUpdates(t *testing.T, evs []runs.Event, o runs.Outcome) {
	t.Helper()
	var last *runs.Usage
	for _, ev := range evs {
		if ev.Type != tUsage {
			continue
		}
		u := ev.Data.(runs.UsageData).Usage
		if last != nil && (u.InputTokens < last.InputTokens || u.OutputTokens < last.OutputTokens) {
			t.Errorf("usage.updated went down: %+v after %+v", u, *last)
		}
		last = &u
	}
	switch {
	case last == nil && !o.Usage.IsZero():
		t.Errorf("no usage.updated, but the outcome's usage is %+v", o.Usage)
	case last != nil && *last != o.Usage:
		t.Errorf("last usage.updated = %+v, outcome %+v", *last, o.Usage)
	}
}
