package gemini

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mock/googleai"
	"github.com/agentgate/agentgate/internal/runs"
)

// cliCase is one scenario run by the real CLI against the mock server
// (TestRealCLI, which also records testdata/<name>.jsonl with -record) and
// replayed from its recording (TestGolden). The expectations below hold
// for both; check holds only live, where the mock's ledger and the run's
// directory exist.
type cliCase struct {
	name     string
	scenario func(marker string) googleai.Scenario
	spec     runs.Spec
	// noKey leaves every key variable unset. GOOGLE_GEMINI_BASE_URL still
	// points at the mock, so nothing can leave the machine, and the
	// ledger proves the CLI sent nothing.
	noKey bool
	// env is more of the gateway's environment.
	env map[string]string
	// extraArgs are appended to the adapter's arguments.
	extraArgs  []string
	cliVersion string
	// signal is sent to the CLI once its tool call started; the tool's
	// processes, which outlive it, are killed after.
	signal syscall.Signal
	// killOnHung SIGKILLs it once the mock holds a request it will never
	// answer: a fixed delay is no bound on a loaded machine, where the
	// CLI may take longer than it to start and send the request.
	killOnHung bool
	// usageLost is set where the CLI dies before its result line, the
	// only place it reports tokens: what the server billed is not known.
	usageLost bool
	// setup prepares the run's directory.
	setup func(t *testing.T, dir string)
	// resumes names the case whose session the run resumes: one that
	// ran before it in the same home and directory (oneHome).
	resumes string

	wantStatus runs.State
	wantClass  runs.Class
	// wantTypes is the order of event types, Outcome.Events included,
	// with each run of message.delta collapsed to one.
	wantTypes []runs.EventType
	check     func(t *testing.T, r *cliRun)
}

// The event types, short.
const (
	tStart   = runs.EventSessionStarted
	tDelta   = runs.EventMessageDelta
	tMsg     = runs.EventMessageCompleted
	tReason  = runs.EventReasoningCompleted
	tTool    = runs.EventToolCallStarted
	tToolEnd = runs.EventToolCallCompleted
	tUsage   = runs.EventUsageUpdated
	tWarn    = runs.EventWarning
)

// testModel is the model a run names in the cases that name one.
const testModel = "gemini-2.5-flash"

// textPrompt is the text case's prompt, which the resume case finds in
// the history it resumed.
const textPrompt = "-say hi (a prompt that starts with a dash)"

// oneHome are the cases TestRealCLI runs one after another, in this
// order, in one home PrepareHome prepared and one directory, within a
// minute, as the supervisor runs them: PrepareHome at its start is all
// they need, the CLI does not rewrite the settings, and one run's session
// files do not disturb the next (see Command). read_only comes before
// tool_turn, whose out.txt it must not find; resume resumes text.
var oneHome = []string{"text", "read_only", "tool_turn", "resume", "resume_unknown"}

func fixed(sc googleai.Scenario) func(string) googleai.Scenario {
	return func(string) googleai.Scenario { return sc }
}

func cliCases() []cliCase {
	toolTurn := func(string) googleai.Scenario { return googleai.ToolTurn("echo hello > out.txt", "I wrote out.txt.") }
	prompt := func(p runs.Permission) runs.Spec {
		return runs.Spec{Prompt: "Write hello to out.txt.", Permission: p}
	}
	// usage.updated before a tool call is the chat recording's so far.
	toolTypes := []runs.EventType{tStart, tDelta, tMsg, tUsage, tTool, tToolEnd, tDelta, tMsg, tReason, tUsage}
	textTypes := []runs.EventType{tStart, tDelta, tMsg, tReason, tUsage}
	failTypes := []runs.EventType{tStart, tUsage}
	return []cliCase{
		{
			name: "tool_turn", scenario: toolTurn, spec: prompt(runs.WorkspaceWrite),
			wantStatus: runs.Succeeded, wantTypes: toolTypes,
			check: func(t *testing.T, r *cliRun) {
				r.wantFile(t, "out.txt", "hello\n")
				calls := r.ledger.Calls()
				if len(calls) != 2 {
					t.Fatalf("model calls = %d, want 2 (tool call, then its result)", len(calls))
				}
				frs := calls[1].Request.FunctionResponses()
				if len(frs) != 1 || frs[0].Name != googleai.ShellTool || !strings.Contains(frs[0].Output(), "Output: (empty)") {
					t.Errorf("second request's function responses = %+v", frs)
				}
				if r.outcome.Result != "I wrote out.txt." {
					t.Errorf("result = %q, want the last message only", r.outcome.Result)
				}
				started := r.first(tTool).Data.(runs.ToolCallStartedData)
				if started.Name != googleai.ShellTool || !strings.Contains(string(started.Input), "echo hello > out.txt") {
					t.Errorf("tool_call.started = %+v", started)
				}
				if end := r.first(tToolEnd).Data.(runs.ToolCallCompletedData); end.ID != started.ID || end.IsError {
					t.Errorf("tool_call.completed = %+v", end)
				}
				// workspace_write: auto_edit offers the edit tools and,
				// through the policy file, the shell, but not yolo's extras.
				tools := calls[0].Request.Tools
				if !calls[0].Request.HasTool("write_file") || !calls[0].Request.HasTool(googleai.ShellTool) ||
					calls[0].Request.HasTool("list_background_processes") {
					t.Errorf("tools offered = %v", tools)
				}
				// Thinking is never printed but billed: the CLI's
				// output_tokens leave it out, its total_tokens has it,
				// and the run's output includes it.
				billed := r.ledger.Billed()
				u := r.outcome.Usage
				if billed.ThoughtsTokenCount == 0 || u.ReasoningTokens != billed.ThoughtsTokenCount ||
					u.OutputTokens != billed.CandidatesTokenCount+billed.ThoughtsTokenCount ||
					u.InputTokens != billed.PromptTokenCount || u.CacheReadTokens != billed.CachedContentTokenCount {
					t.Errorf("usage %+v from billed %+v", u, billed)
				}
				if s := r.resultLine.Stats; s.OutputTokens != billed.CandidatesTokenCount || s.TotalTokens != billed.TotalTokenCount {
					t.Errorf("the CLI's stats %+v no longer leave thoughts out of output_tokens (billed %+v)", s, billed)
				}
				if want := (runs.Usage{InputTokens: 10600, CacheReadTokens: 8100, OutputTokens: 92, ReasoningTokens: 34}); u != want {
					t.Errorf("usage = %+v, want %+v", u, want)
				}
			},
		},
		{
			name:     "text",
			scenario: fixed(googleai.TextAnswer("Hello from the mock.")),
			spec:     runs.Spec{Prompt: textPrompt, Model: testModel, Permission: runs.WorkspaceWrite},
			// GEMINI_MODEL loses to the run's model.
			env:        map[string]string{"GEMINI_MODEL": "gemini-env-model"},
			wantStatus: runs.Succeeded, wantTypes: textTypes,
			check: func(t *testing.T, r *cliRun) {
				all := r.ledger
				if len(all) != 1 || all[0].Request.Method != "POST" ||
					all[0].Request.Path != "/v1beta/models/"+testModel+":streamGenerateContent" || all[0].Request.RawQuery != "alt=sse" {
					t.Fatalf("ledger = %v, want exactly one streamGenerateContent of %s (no router, no phone-home)", summarize(all), testModel)
				}
				req := all[0].Request
				if got := req.Header.Get("X-Goog-Api-Key"); got != testKey {
					t.Errorf("x-goog-api-key = %q, want %q", got, testKey)
				}
				if !strings.Contains(req.Header.Get("User-Agent"), "GeminiCLI") {
					t.Errorf("user agent = %q", req.Header.Get("User-Agent"))
				}
				if !strings.HasSuffix(req.UserText(), textPrompt) {
					t.Errorf("the prompt fed on stdin is not the request's: …%q", tail(req.UserText(), 200))
				}
				// The CLI's own session id, a random UUID (see Command).
				if !uuidRE.MatchString(r.outcome.SessionID) || r.first(tStart).SessionID != r.outcome.SessionID ||
					r.outcome.SessionID == r.inv.RunID {
					t.Errorf("session = %q (started %q), want the CLI's", r.outcome.SessionID, r.first(tStart).SessionID)
				}
				if r.outcome.Model != testModel || r.outcome.Result != "Hello from the mock." {
					t.Errorf("outcome = %+v", r.outcome)
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
				if reason := r.first(tReason).Data.(runs.ReasoningData); reason.Visibility != runs.VisibilityRedacted || reason.Text != "" {
					t.Errorf("reasoning = %+v, want redacted", reason)
				}
			},
		},
		{
			// A project's .env does not reach the CLI's environment: a
			// run that names no model takes DefaultModel, from the
			// settings PrepareHome wrote, and sends nothing else.
			name: "dotenv_ignored", scenario: fixed(googleai.TextAnswer("Default.")),
			spec: runs.Spec{Prompt: "hi"},
			setup: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("GEMINI_MODEL=gemini-from-dotenv\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantStatus: runs.Succeeded, wantTypes: textTypes,
			check: func(t *testing.T, r *cliRun) { r.wantModelCalls(t, DefaultModel, 1) },
		},
		{
			name: "env_model", scenario: fixed(googleai.TextAnswer("From the environment.")),
			spec:       runs.Spec{Prompt: "hi"},
			env:        map[string]string{"GEMINI_MODEL": "gemini-env-model", "GOOGLE_API_KEY": "google-key-unused"},
			wantStatus: runs.Succeeded, wantTypes: textTypes,
			check: func(t *testing.T, r *cliRun) {
				r.wantModelCalls(t, "gemini-env-model", 1)
				// The SDK warns "Using GOOGLE_API_KEY", but the CLI hands
				// it GEMINI_API_KEY.
				if len(r.ledger) > 0 && r.ledger[0].Request.Header.Get("X-Goog-Api-Key") != testKey {
					t.Errorf("x-goog-api-key = %q, want GEMINI_API_KEY's", r.ledger[0].Request.Header.Get("X-Goog-Api-Key"))
				}
			},
		},
		{
			// GOOGLE_API_KEY is Vertex AI's (express mode): with the
			// gemini-api-key auth type it is not a credential, and the
			// run fails as one without any key does (the conformance
			// suite's no_credentials), before any request.
			name: "google_api_key_only", scenario: fixed(googleai.TextAnswer("unused")), noKey: true,
			spec: runs.Spec{Prompt: "hi"}, env: map[string]string{"GOOGLE_API_KEY": testKey},
			wantStatus: runs.Failed, wantClass: runs.NotAuthenticated,
			check: func(t *testing.T, r *cliRun) {
				r.wantRequests(t, 0)
				if r.outcome.Error.Hint != hintAuth || !strings.Contains(r.outcome.Error.Message, "GEMINI_API_KEY") {
					t.Errorf("error = %+v", r.outcome.Error)
				}
			},
		},
		{
			name: "read_only", scenario: toolTurn, spec: prompt(runs.ReadOnly),
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tDelta, tMsg, tUsage, tTool, tToolEnd, tWarn, tDelta, tMsg, tReason, tUsage},
			check: func(t *testing.T, r *cliRun) {
				r.wantNoFile(t, "out.txt")
				if len(r.ledger.Calls()) == 0 {
					t.Fatal("no model call")
				}
				req := r.ledger.Calls()[0].Request
				for _, tool := range []string{googleai.ShellTool, "write_file", "replace", "web_fetch"} {
					if req.HasTool(tool) {
						t.Errorf("read_only offered %s: %v", tool, req.Tools)
					}
				}
				if !req.HasTool("read_file") {
					t.Errorf("read_only lost the read tools: %v", req.Tools)
				}
				if w := r.first(tWarn).Data.(runs.WarningData); w.Code != "tool_not_registered" {
					t.Errorf("warning = %+v", w)
				}
				if end := r.first(tToolEnd).Data.(runs.ToolCallCompletedData); !end.IsError {
					t.Errorf("refused tool call completed without error: %+v", end)
				}
			},
		},
		{
			name: "full", scenario: toolTurn, spec: prompt(runs.Full),
			wantStatus: runs.Succeeded, wantTypes: toolTypes,
			check: func(t *testing.T, r *cliRun) {
				r.wantFile(t, "out.txt", "hello\n")
				if c := r.ledger.Calls(); len(c) == 0 || !c[0].Request.HasTool("list_background_processes") {
					t.Errorf("full (yolo) calls = %v", summarize(c))
				}
			},
		},
		{
			name:     "resume",
			scenario: toolTurn,
			resumes:  "text",
			spec:     runs.Spec{Prompt: "Second prompt."},
			// A resumed run's usage is the result line's alone.
			wantStatus: runs.Succeeded, wantTypes: []runs.EventType{tStart, tDelta, tMsg, tTool, tToolEnd, tDelta, tMsg, tReason, tUsage},
			check: func(t *testing.T, r *cliRun) {
				calls := r.ledger.Calls()
				if len(calls) != 2 {
					t.Fatalf("model calls = %d", len(calls))
				}
				text := calls[0].Request.UserText()
				if !strings.Contains(text, textPrompt) || !strings.HasSuffix(text, "Second prompt.") {
					t.Errorf("resumed request lacks the history: …%q", tail(text, 300))
				}
				if id := r.inv.Spec.ResumeSessionID; id == "" || r.outcome.SessionID != id || r.first(tStart).SessionID != id {
					t.Errorf("session = %q, want the resumed %q", r.outcome.SessionID, id)
				}
				// This run's usage is what this run's server billed: the
				// first run's tokens are not in it.
				if r.resultLine.Stats.InputTokens != r.ledger.Billed().PromptTokenCount {
					t.Errorf("the result's stats %+v count more than this run billed (%+v)", r.resultLine.Stats, r.ledger.Billed())
				}
			},
		},
		{
			// In oneHome, after runs that recorded sessions there: the id
			// is unknown, not the first of the directory.
			name: "resume_unknown", scenario: fixed(googleai.TextAnswer("unused")),
			spec:       runs.Spec{Prompt: "hi", ResumeSessionID: "0196f0c2-7e1a-7000-8000-00000000dead"},
			wantStatus: runs.Failed, wantClass: runs.SessionNotFound,
			check: func(t *testing.T, r *cliRun) {
				r.wantRequests(t, 0)
				if r.outcome.Error.Hint != hintResume {
					t.Errorf("hint = %q", r.outcome.Error.Hint)
				}
			},
		},
		{
			name: "auth_401", scenario: fixed(googleai.Failure(401)), spec: runs.Spec{Prompt: "hi"},
			wantStatus: runs.Failed, wantClass: runs.NotAuthenticated, wantTypes: failTypes,
			check: func(t *testing.T, r *cliRun) { r.wantRequests(t, 1); r.wantExit(t, 401) },
		},
		{
			name: "forbidden_403", scenario: fixed(googleai.Failure(403)), spec: runs.Spec{Prompt: "hi"},
			wantStatus: runs.Failed, wantClass: runs.NotAuthenticated, wantTypes: failTypes,
			check: func(t *testing.T, r *cliRun) { r.wantRequests(t, 1); r.wantExit(t, 403) },
		},
		{
			name: "invalid_key_400", scenario: fixed(googleai.InvalidKey()), spec: runs.Spec{Prompt: "hi"},
			wantStatus: runs.Failed, wantClass: runs.NotAuthenticated, wantTypes: failTypes,
			check: func(t *testing.T, r *cliRun) { r.wantRequests(t, 1); r.wantExit(t, 400) },
		},
		{
			name: "bad_request_400", scenario: fixed(googleai.Failure(400)), spec: runs.Spec{Prompt: "hi"},
			wantStatus: runs.Failed, wantClass: runs.APIError, wantTypes: failTypes,
			check: func(t *testing.T, r *cliRun) { r.wantRequests(t, 1); r.wantExit(t, 400) },
		},
		{
			name: "not_found_404", scenario: fixed(googleai.Failure(404)), spec: runs.Spec{Prompt: "hi"},
			wantStatus: runs.Failed, wantClass: runs.APIError, wantTypes: failTypes,
			check: func(t *testing.T, r *cliRun) {
				r.wantRequests(t, 1)
				if r.res.Exit.Code != 1 {
					t.Errorf("exit = %+v; 0.61.0 exits 1, not 404 mod 256, on a 404", r.res.Exit)
				}
			},
		},
		{
			name: "rate_limit_429", scenario: fixed(googleai.Failure(429)), spec: runs.Spec{Prompt: "hi"},
			wantStatus: runs.Failed, wantClass: runs.RateLimited, wantTypes: failTypes,
			check: func(t *testing.T, r *cliRun) { r.wantRequests(t, MaxAttempts); r.wantExit(t, 429); r.wantQuick(t) },
		},
		{
			name: "server_500", scenario: fixed(googleai.Failure(500)), spec: runs.Spec{Prompt: "hi"},
			wantStatus: runs.Failed, wantClass: runs.TransientAPIError, wantTypes: failTypes,
			check: func(t *testing.T, r *cliRun) { r.wantRequests(t, MaxAttempts); r.wantExit(t, 500); r.wantQuick(t) },
		},
		{
			name: "rate_limit_recovered", scenario: fixed(googleai.Sequence(googleai.Failure(429), googleai.TextAnswer("Recovered."))),
			spec:       runs.Spec{Prompt: "hi"},
			wantStatus: runs.Succeeded, wantTypes: textTypes,
			check: func(t *testing.T, r *cliRun) {
				r.wantRequests(t, 2)
				if r.outcome.Result != "Recovered." {
					t.Errorf("result = %q", r.outcome.Result)
				}
			},
		},
		{
			name: "terminated",
			scenario: func(marker string) googleai.Scenario {
				return googleai.ToolTurn("sleep 60; echo "+marker, "unreachable")
			},
			spec: runs.Spec{Prompt: "Run the long command."}, signal: syscall.SIGTERM,
			// SIGTERM ends the CLI at once, without a result, and leaves
			// the tool running: the supervisor's tree kill is what stops
			// it. The usage is the chat recording's: the one response.
			wantStatus: runs.Failed, wantClass: runs.AgentCrashed,
			wantTypes: []runs.EventType{tStart, tDelta, tMsg, tUsage, tTool, tToolEnd},
			check: func(t *testing.T, r *cliRun) {
				if r.res.Exit.Code != 0 || r.res.Exit.Signal != "" {
					t.Errorf("exit = %+v, want 0 after SIGTERM", r.res.Exit)
				}
				if !r.toolOutlived {
					t.Error("the tool died with the CLI; the tree kill would no longer be needed")
				}
			},
		},
		{
			name: "hang", scenario: fixed(googleai.Hang()), spec: runs.Spec{Prompt: "hi"},
			killOnHung: true,
			wantStatus: runs.Failed, wantClass: runs.ProcessKilled,
			wantTypes: []runs.EventType{tStart},
			check: func(t *testing.T, r *cliRun) {
				if c := r.ledger.Calls(); len(c) != 1 || !c[0].Hung {
					t.Errorf("ledger = %v, want one hung call", summarize(r.ledger))
				}
			},
		},
		{
			name: "flag_rejected", scenario: fixed(googleai.TextAnswer("unused")),
			spec: runs.Spec{Prompt: "hi"}, extraArgs: []string{"--agentgate-no-such-flag"}, cliVersion: "0.50.0",
			wantStatus: runs.Failed, wantClass: runs.FlagRejected,
			check: func(t *testing.T, r *cliRun) {
				r.wantRequests(t, 0)
				if h := r.outcome.Error.Hint; !strings.Contains(h, "0.50.0") || !strings.Contains(h, VerifiedVersion) {
					t.Errorf("hint %q does not name both versions", h)
				}
				if !strings.Contains(r.outcome.Error.Message, "agentgate-no-such-flag") {
					t.Errorf("message = %q", r.outcome.Error.Message)
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
	ledger     googleai.Ledger
	elapsed    time.Duration
	// toolOutlived is set when the tool's process was alive after the
	// CLI exited.
	toolOutlived bool
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
	if got := len(r.ledger.Calls()); got != n {
		t.Errorf("model calls = %d, want %d: %v", got, n, summarize(r.ledger))
	}
}

// wantModelCalls checks that every request was a model call of model:
// no router, nothing else.
func (r *cliRun) wantModelCalls(t *testing.T, model string, n int) {
	t.Helper()
	if len(r.ledger) != n {
		t.Errorf("requests = %v, want %d", summarize(r.ledger), n)
	}
	for _, e := range r.ledger {
		if e.Request.Model != model || !e.Request.Stream || e.Request.Router() {
			t.Errorf("request %s, want a stream of %s", e.Request.Path, model)
		}
	}
}

// wantExit checks the CLI's exit code: the HTTP status mod 256.
func (r *cliRun) wantExit(t *testing.T, status int) {
	t.Helper()
	if r.res.Exit.Code != status%256 {
		t.Errorf("exit = %+v, want %d (HTTP %d mod 256)", r.res.Exit, status%256, status)
	}
}

// wantQuick checks that the bounded retries end the run in seconds.
func (r *cliRun) wantQuick(t *testing.T) {
	t.Helper()
	// From the first model call to the CLI's exit.
	if r.elapsed > 25*time.Second {
		t.Errorf("took %v: maxAttempts did not bound the retries", r.elapsed)
	}
}

// summarize is a readable form of a ledger for failure messages.
func summarize(l googleai.Ledger) []string {
	out := make([]string, 0, len(l))
	for _, e := range l {
		out = append(out, e.Request.Method+" "+e.Request.Path+"?"+e.Request.RawQuery+" → "+strconv.Itoa(e.Status))
	}
	return out
}

// collapse returns the event types in order, each run of message.delta
// collapsed to one.
func collapse(evs []runs.Event) []runs.EventType {
	var out []runs.EventType
	for _, ev := range evs {
		if ev.Type == tDelta && len(out) > 0 && out[len(out)-1] == tDelta {
			continue
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
