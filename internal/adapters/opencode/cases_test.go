package opencode

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/runs"
)

// cliCase is one scenario run by the real CLI against the mock (TestRealCLI,
// which also records testdata/<name>.jsonl with -record) and replayed from
// its recording (TestGolden). The expectations hold for both; check holds
// only live, where the ledger and the directories exist.
type cliCase struct {
	name     string
	scenario func(x caseEnv) chat.Scenario
	spec     func(x caseEnv) runs.Spec
	// config is where the mock provider is configured: in
	// OPENCODE_CONFIG_CONTENT (the default) or in the home's
	// opencode.json.
	homeConfig bool
	// noKey leaves the key variable the configuration names unset.
	noKey bool
	// noPreflight starts the CLI without the pre-run check, to see how
	// OpenCode itself reports what the check would have caught.
	noPreflight bool
	// titles lets OpenCode ask the model for a title (see Adapter.titles).
	titles bool
	// extraArgs make the CLI reject its arguments; cliVersion pretends
	// another installed version.
	extraArgs  []string
	cliVersion string
	// cancel sends the Command's stop signal once the long tool of the
	// scenario runs.
	cancel bool
	// before runs first, in the same home; this case then resumes its
	// session.
	before *cliCase

	wantStatus runs.State
	wantClass  runs.Class
	// wantTypes is the order of the event types that carry the story
	// (see story), Outcome.Events included; nil skips the check.
	wantTypes []runs.EventType
	// billed is the part of the mock's billing the run's usage must
	// equal; nil means all of it.
	billed func(l chat.Ledger) chat.Usage
	check  func(t *testing.T, r *cliRun)
}

// caseEnv is what a case's scenario and spec may depend on: the marker
// its long commands carry and a directory outside the run's.
type caseEnv struct {
	marker  string
	outside string
}

// cliRun is one case's live run.
type cliRun struct {
	inv       runs.Invocation
	env       caseEnv
	events    []runs.Event
	outcome   runs.Outcome
	preflight *runs.RunError
	cmdEnv    []string // the CLI's environment
	started   bool     // the CLI was started (the pre-run check passed)
	ledger    chat.Ledger
	// failing is how long the CLI ran after its first request to the
	// mock: the time a failing API took to end the run, without the
	// CLI's start, which a busy machine stretches to many seconds.
	failing time.Duration
	res     recorded
}

// recorded is a recording's meta data: what Finish needs besides stdout,
// and the directory the run had, which the decoder makes paths relative
// to.
type recorded struct {
	Exit       runs.Exit `json:"exit"`
	Stderr     string    `json:"stderr"`
	CLIVersion string    `json:"cli_version"`
	Dir        string    `json:"dir"`
	Spec       runs.Spec `json:"spec"`
	stdout     [][]byte
}

const (
	tStart   = runs.EventSessionStarted
	tMsg     = runs.EventMessageCompleted
	tReason  = runs.EventReasoningCompleted
	tTool    = runs.EventToolCallStarted
	tToolEnd = runs.EventToolCallCompleted
	tFile    = runs.EventFileChanged
	tPlan    = runs.EventPlanUpdated
	tWarn    = runs.EventWarning
)

// story keeps the event types that tell what happened, dropping usage
// updates, whose number follows the steps.
func story(evs []runs.Event) []runs.EventType {
	var out []runs.EventType
	for _, ev := range evs {
		if ev.Type != runs.EventUsageUpdated {
			out = append(out, ev.Type)
		}
	}
	return out
}

// Prices of the mock model in the configuration, in dollars per million
// tokens, so that OpenCode reports a cost.
const (
	priceInput     = 3
	priceOutput    = 15
	priceCacheRead = 0.3
)

// costOf is what the mock billed, priced as OpenCode prices it: uncached
// input, cache reads, and output with reasoning.
func costOf(u chat.Usage) float64 {
	return (float64(u.PromptTokens-u.CachedTokens)*priceInput + float64(u.CachedTokens)*priceCacheRead +
		float64(u.CompletionTokens)*priceOutput) / 1e6
}

func fixed(sc chat.Scenario) func(caseEnv) chat.Scenario {
	return func(caseEnv) chat.Scenario { return sc }
}

func prompt(p string) func(caseEnv) runs.Spec {
	return func(caseEnv) runs.Spec { return runs.Spec{Prompt: p} }
}

// retryAfterMS answers every request with a 500 that tells the client to
// retry after 100 ms. OpenCode's own backoff (2, 4, 8, 16 and 32 s, five
// times) makes a persistent 500 last over a minute, and no setting shortens
// it; the header makes OpenCode go through the same retries and the same
// final error in under a second.
func retryAfterMS() chat.Scenario {
	return chat.Func(func(*chat.Request) chat.Response {
		return chat.Response{Status: http.StatusInternalServerError, Header: http.Header{"Retry-After-Ms": {"100"}}}
	})
}

func failed(name string, sc chat.Scenario, class runs.Class, requests int) cliCase {
	return cliCase{
		name: name, scenario: fixed(sc), spec: prompt("say hi"),
		wantStatus: runs.Failed, wantClass: class, wantTypes: []runs.EventType{tStart},
		check: func(t *testing.T, r *cliRun) {
			r.wantRequests(t, requests)
			if r.failing > 20*time.Second {
				t.Errorf("the CLI ran %s after its first request; a failing API must end it in seconds", r.failing)
			}
		},
	}
}

func cliCases() []cliCase {
	const toolPrompt = `-Write hello to out.txt, "quoted" (a prompt that starts with a dash)`
	return []cliCase{
		{
			name:       "tool_turn",
			scenario:   fixed(chat.ToolTurn(chat.Bash("echo hello > out.txt"), "I wrote out.txt.")),
			spec:       func(caseEnv) runs.Spec { return runs.Spec{Prompt: toolPrompt, Permission: runs.WorkspaceWrite} },
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tReason, tTool, tToolEnd, tMsg},
			check: func(t *testing.T, r *cliRun) {
				r.wantFile(t, "out.txt", "hello\n")
				r.wantRequests(t, 2)
				if n := len(r.ledger.Titles()); n != 0 {
					t.Errorf("%d title requests, want none", n)
				}
				req := r.ledger.Completions()[0].Request
				if got := req.LastUserText(); got != toolPrompt {
					t.Errorf("the model got the prompt %q, want it as written", got)
				}
				if got := req.Header.Get("Authorization"); got != "Bearer "+testKey {
					t.Errorf("Authorization = %q", got)
				}
				if got := req.Header.Get("X-Operator-Setting"); got != "kept" {
					t.Errorf("the operator's provider header = %q: the configuration was not used as written", got)
				}
				if r.outcome.Result != "I wrote out.txt." || r.outcome.NumTurns != 2 || r.outcome.StopReason != "stop" {
					t.Errorf("outcome = %+v", r.outcome)
				}
				started := r.first(tTool).Data.(runs.ToolCallStartedData)
				if started.Name != "bash" || started.Input == nil || !strings.Contains(string(started.Input), "echo hello > out.txt") {
					t.Errorf("tool_call.started = %+v", started)
				}
				if done := r.first(tToolEnd).Data.(runs.ToolCallCompletedData); done.IsError || done.ID != started.ID {
					t.Errorf("tool_call.completed = %+v", done)
				}
				if reason := r.first(tReason).Data.(runs.ReasoningData); reason.Visibility != runs.VisibilityFull || reason.Text == "" {
					t.Errorf("reasoning = %+v", reason)
				}
				r.wantCost(t)
			},
		},
		{
			name:       "text",
			homeConfig: true,
			scenario:   fixed(chat.TextAnswer("Hello from the mock.")),
			spec: func(caseEnv) runs.Spec {
				return runs.Spec{Prompt: "say hi", Model: "mock/mock-model", Effort: "high", Permission: runs.WorkspaceWrite}
			},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tMsg},
			check: func(t *testing.T, r *cliRun) {
				r.wantRequests(t, 1)
				req := r.ledger[0].Request
				if req.Path != "/v1/chat/completions" || req.Model != "mock-model" || req.ReasoningEffort != "high" {
					t.Errorf("request: %s model %q effort %q", req.Path, req.Model, req.ReasoningEffort)
				}
				// The key variable is named only in the home's
				// configuration file: Command found it there.
				if got := req.Header.Get("Authorization"); got != "Bearer "+testKey {
					t.Errorf("Authorization = %q: the variable the home's configuration names was not passed", got)
				}
				if r.outcome.Result != "Hello from the mock." || r.outcome.Model != "mock/mock-model" {
					t.Errorf("outcome = %+v", r.outcome)
				}
				r.wantCost(t)
			},
		},
		{
			// OpenCode's title request is billed, and nothing reports
			// it: with titles on, the run's usage falls short of the
			// bill by exactly that request. So runs give a title.
			name:       "title_unreported",
			titles:     true,
			scenario:   fixed(chat.TextAnswer("Hello from the mock.")),
			spec:       prompt("say hi"),
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tMsg},
			billed:     func(l chat.Ledger) chat.Usage { return l.Turns().Billed() },
			check: func(t *testing.T, r *cliRun) {
				titles := r.ledger.Titles()
				if len(titles) != 1 || titles.Billed() == (chat.Usage{}) {
					t.Fatalf("title requests = %+v, want one, billed", titles)
				}
				if r.outcome.Usage == normalized(r.ledger.Billed()) {
					t.Error("the usage covers the title request: OpenCode reports it now, and runs may let it ask for titles")
				}
			},
		},
		{
			name: "files_and_plan",
			scenario: fixed(chat.ToolChain([]chat.Call{
				chat.FunctionCall("write", map[string]string{"filePath": "hello.txt", "content": "hi there\n"}),
				chat.FunctionCall("edit", map[string]string{"filePath": "hello.txt", "oldString": "hi there", "newString": "hi again"}),
				chat.FunctionCall("todowrite", map[string]any{"todos": []map[string]string{
					{"content": "write the file", "status": "completed", "priority": "high"},
					{"content": "check it", "status": "in_progress", "priority": "medium"},
					{"content": "tidy up", "status": "cancelled", "priority": "low"}}}),
				chat.Bash("exit 3"),
			}, "Done with the file.")),
			spec:       prompt("Write hello.txt, then change it."),
			wantStatus: runs.Succeeded,
			wantTypes: []runs.EventType{tStart, tReason, tTool, tFile, tToolEnd, tReason, tTool, tFile, tToolEnd,
				tReason, tTool, tToolEnd, tPlan, tReason, tTool, tToolEnd, tMsg},
			check: func(t *testing.T, r *cliRun) {
				r.wantFile(t, "hello.txt", "hi again\n")
				var files []runs.FileChangedData
				var ends []runs.ToolCallCompletedData
				for _, ev := range r.events {
					switch d := ev.Data.(type) {
					case runs.FileChangedData:
						files = append(files, d)
					case runs.ToolCallCompletedData:
						ends = append(ends, d)
					}
				}
				if len(files) != 2 || files[0].Path != "hello.txt" || files[0].Kind != runs.ChangeAdd || files[1].Kind != runs.ChangeUpdate ||
					!strings.Contains(files[1].Diff, "-hi there") || !strings.Contains(files[1].Diff, "+hi again") || files[0].ToolCallID != ends[0].ID {
					t.Errorf("file changes = %+v", files)
				}
				plan := r.first(tPlan).Data.(runs.PlanUpdatedData)
				want := []runs.PlanStep{{Step: "write the file", Status: runs.StepCompleted}, {Step: "check it", Status: runs.StepInProgress},
					{Step: "tidy up", Status: runs.StepCompleted}}
				if !reflect.DeepEqual(plan.Steps, want) {
					t.Errorf("plan = %+v", plan)
				}
				if len(ends) != 4 || ends[0].IsError || ends[1].IsError || !ends[3].IsError {
					t.Errorf("tool results = %+v, want only the exit 3 failed", ends)
				}
			},
		},
		{
			name:     "read_only",
			scenario: fixed(chat.ToolTurn(chat.Bash("touch ro.txt"), "I could not.")),
			spec: func(caseEnv) runs.Spec {
				return runs.Spec{Prompt: "Create ro.txt.", Permission: runs.ReadOnly}
			},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tReason, tTool, tToolEnd, tMsg},
			check: func(t *testing.T, r *cliRun) {
				if _, err := os.Stat(filepath.Join(r.inv.Dir, "ro.txt")); err == nil {
					t.Error("ro.txt was created under read_only")
				}
				req := r.ledger[0].Request
				for _, tool := range []string{"bash", "edit", "write"} {
					if req.HasTool(tool) {
						t.Errorf("read_only offers %s", tool)
					}
				}
				if !req.HasTool("read") || !req.HasTool("grep") {
					t.Errorf("read_only tools = %v, want the reading ones", req.Tools)
				}
				started := r.first(tTool).Data.(runs.ToolCallStartedData)
				if done := r.first(tToolEnd).Data.(runs.ToolCallCompletedData); started.Name != "invalid" || !done.IsError ||
					!strings.Contains(done.Output, "unavailable tool 'bash'") {
					t.Errorf("tool call %+v ended %+v, want OpenCode's invalid tool, failed", started, done)
				}
			},
		},
		{
			// A command naming a path outside the directory is refused;
			// workspace_write is no sandbox though: OpenCode judges a
			// command by the paths it can see in it, and a path built at
			// run time escapes it.
			name: "outside_workspace_write",
			scenario: func(x caseEnv) chat.Scenario {
				return chat.ToolChain([]chat.Call{chat.Bash("touch " + filepath.Join(x.outside, "ww.txt")),
					chat.Bash("D=" + x.outside + "; touch \"$D/unseen.txt\"")}, "Refused, then done.")
			},
			spec:       prompt("Touch a file elsewhere, then cleverly."),
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tReason, tTool, tWarn, tToolEnd, tReason, tTool, tToolEnd, tMsg},
			check: func(t *testing.T, r *cliRun) {
				if _, err := os.Stat(filepath.Join(r.env.outside, "ww.txt")); err == nil {
					t.Error("workspace_write touched a file outside the run's directory")
				}
				w := r.first(tWarn).Data.(runs.WarningData)
				if w.Code != "permission_denied" || !strings.HasPrefix(w.Message, "bash was refused") {
					t.Errorf("warning = %+v", w)
				}
				if ends := ofType(r.events, tToolEnd); len(ends) != 2 || !ends[0].Data.(runs.ToolCallCompletedData).IsError ||
					ends[1].Data.(runs.ToolCallCompletedData).IsError {
					t.Errorf("tool results = %+v, want the first refused, the second run", ends)
				}
				if _, err := os.Stat(filepath.Join(r.env.outside, "unseen.txt")); err != nil {
					t.Errorf("the command did not write outside (%v): update the permission docs, workspace_write confines more now", err)
				}
			},
		},
		{
			name: "outside_full",
			scenario: func(x caseEnv) chat.Scenario {
				return chat.ToolTurn(chat.Bash("touch "+filepath.Join(x.outside, "full.txt")), "Done.")
			},
			spec: func(caseEnv) runs.Spec {
				return runs.Spec{Prompt: "Touch a file elsewhere.", Permission: runs.Full}
			},
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tReason, tTool, tToolEnd, tMsg},
			check: func(t *testing.T, r *cliRun) {
				if _, err := os.Stat(filepath.Join(r.env.outside, "full.txt")); err != nil {
					t.Errorf("full did not touch the file outside: %v", err)
				}
			},
		},
		failed("auth_401", chat.Failure(401), runs.NotAuthenticated, 1),
		failed("rate_limit_429", chat.Failure(429), runs.RateLimited, 6),
		failed("server_500", retryAfterMS(), runs.TransientAPIError, 6),
		failed("bad_request_400", chat.Failure(400), runs.APIError, 1),
		{
			name: "context_exceeded", scenario: fixed(chat.ContextExceeded()), spec: prompt("say hi"),
			wantStatus: runs.Failed, wantClass: runs.ContextExceeded, wantTypes: []runs.EventType{tStart},
		},
		{
			name: "no_key", scenario: fixed(chat.TextAnswer("unreachable")), spec: prompt("say hi"), noKey: true,
			wantStatus: runs.Failed, wantClass: runs.NotAuthenticated,
			check: func(t *testing.T, r *cliRun) {
				if r.preflight == nil || !strings.Contains(r.preflight.Message, "{env:OPENAI_API_KEY}") || r.preflight.Hint == "" {
					t.Errorf("preflight = %+v, want it to name the variable, with a hint", r.preflight)
				}
				if r.started {
					t.Error("the CLI started although the pre-run check failed")
				}
				r.wantRequests(t, 0)
			},
		},
		{
			name:       "resume",
			scenario:   fixed(chat.TextAnswer("Resumed.")),
			before:     &cliCase{name: "resume_first", scenario: fixed(chat.TextAnswer("First.")), spec: prompt("remember the word kiwi")},
			spec:       prompt("which word?"),
			wantStatus: runs.Succeeded,
			wantTypes:  []runs.EventType{tStart, tMsg},
			check: func(t *testing.T, r *cliRun) {
				if r.outcome.SessionID != r.inv.Spec.ResumeSessionID {
					t.Errorf("session %s, want the resumed %s", r.outcome.SessionID, r.inv.Spec.ResumeSessionID)
				}
				req := r.ledger[0].Request
				if got := strings.Join(req.UserTexts(), " | "); got != "remember the word kiwi | which word?" {
					t.Errorf("user messages = %q, want the first run's prompt, then this one", got)
				}
				// This run's mock billed only this run's request; the
				// usage equals it, so the first run's is not in it.
				if r.outcome.Usage.InputTokens == 0 {
					t.Errorf("usage = %+v", r.outcome.Usage)
				}
				// The same session resumed in another directory would
				// hang OpenCode: the pre-run check fails it first.
				elsewhere := r.inv
				elsewhere.Dir = t.TempDir()
				if perr := New().Preflight(context.Background(), elsewhere, r.cmdEnv); perr == nil || perr.Class != runs.APIError ||
					!strings.Contains(perr.Message, "began in") {
					t.Errorf("resumed elsewhere: preflight = %+v, want api_error naming where the session began", perr)
				}
			},
		},
		{
			name: "resume_unknown", scenario: fixed(chat.TextAnswer("unreachable")),
			spec: func(caseEnv) runs.Spec {
				return runs.Spec{Prompt: "again", ResumeSessionID: "ses_0000000000000agentgateNone"}
			},
			wantStatus: runs.Failed, wantClass: runs.SessionNotFound,
			check: func(t *testing.T, r *cliRun) {
				if r.preflight == nil || !strings.Contains(r.preflight.Message, "no session ses_0000000000000agentgateNone") || r.started {
					t.Errorf("preflight = %+v, started %v", r.preflight, r.started)
				}
			},
		},
		{
			name: "resume_unknown_cli", scenario: fixed(chat.TextAnswer("unreachable")), noPreflight: true,
			spec: func(caseEnv) runs.Spec {
				return runs.Spec{Prompt: "again", ResumeSessionID: "ses_0000000000000agentgateNone"}
			},
			wantStatus: runs.Failed, wantClass: runs.SessionNotFound, wantTypes: []runs.EventType{},
			check: func(t *testing.T, r *cliRun) {
				r.wantRequests(t, 0)
				if !strings.Contains(r.outcome.Error.Message, "ses_0000000000000agentgateNone") {
					t.Errorf("error = %+v", r.outcome.Error)
				}
			},
		},
		{
			name: "flag_rejected", scenario: fixed(chat.TextAnswer("unreachable")), spec: prompt("say hi"),
			extraArgs: []string{"--agentgate-no-such-flag"}, cliVersion: "1.0.0",
			wantStatus: runs.Failed, wantClass: runs.FlagRejected, wantTypes: []runs.EventType{},
			check: func(t *testing.T, r *cliRun) {
				if h := r.outcome.Error.Hint; !strings.Contains(h, VerifiedVersion) || !strings.Contains(h, "1.0.0") {
					t.Errorf("hint %q does not name the installed and the verified version", h)
				}
				r.wantRequests(t, 0)
			},
		},
		{
			// run prints a tool call only once it has finished, so the
			// model asks for a quick command beside the long one: its
			// line shows the turn is in its tools while the long one
			// runs (the conformance kit's long tool does the same).
			name: "cancel_mid_tool", cancel: true,
			scenario: func(x caseEnv) chat.Scenario {
				return chat.ToolSteps([][]chat.Call{{chat.Bash("echo started"), chat.Bash(chat.LongCommand + " " + x.marker)}}, "finished")
			},
			spec: prompt("Run the long command."),
			// OpenCode prints a step's tokens when the step finishes,
			// after its tools: killed in them, it reported none of the
			// request the mock billed.
			billed:     func(chat.Ledger) chat.Usage { return chat.Usage{} },
			wantStatus: runs.Failed, wantClass: runs.ProcessKilled,
			wantTypes: []runs.EventType{tStart, tReason, tTool, tToolEnd},
			check: func(t *testing.T, r *cliRun) {
				if billed := r.ledger.Billed(); billed == (chat.Usage{}) {
					t.Error("the mock billed nothing: the model was never asked")
				}
				if r.res.Exit.Signal != "SIGTERM" {
					t.Errorf("exit = %+v, want killed by SIGTERM", r.res.Exit)
				}
				// OpenCode leaves its tool's process, in a session of
				// its own, running: only the supervisor's kill of the
				// whole tree (by the environment cookie) ends it.
				left := agenttest.ProcessesMatching(r.env.marker)
				if len(left) == 0 {
					t.Error("the tool's process ended with OpenCode: the supervisor's tree kill may no longer be needed")
				}
				for _, pid := range left {
					if sid, err := unix.Getsid(pid); err != nil || sid != pid {
						t.Errorf("tool process %d is in session %d, want a session of its own (%v)", pid, sid, err)
					}
				}
				killAll(left)
			},
		},
	}
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
		t.Errorf("error = %+v, want none", o.Error)
	case c.wantClass != "" && (o.Error == nil || o.Error.Class != c.wantClass):
		t.Errorf("error = %+v, want class %s", o.Error, c.wantClass)
	case o.Error != nil && (o.Error.Retryable != o.Error.Class.Retryable() || o.Error.Message == ""):
		t.Errorf("error = %+v: retryable must follow the class, and a message is due", o.Error)
	}
	if c.wantTypes != nil {
		if got := story(r.events); !reflect.DeepEqual(got, c.wantTypes) && !(len(got) == 0 && len(c.wantTypes) == 0) {
			t.Errorf("events =\n  %v\nwant\n  %v", got, c.wantTypes)
		}
	}
	billed := r.ledger.Billed()
	if c.billed != nil {
		billed = c.billed(r.ledger)
	}
	if got, want := o.Usage, normalized(billed); got != want {
		t.Errorf("usage = %+v, the mock billed %+v", got, want)
	}
	for _, ev := range r.events {
		if ev.Type == runs.EventAgentUnparsed {
			t.Errorf("unparsed: %+v", ev.Data)
		}
		if _, err := json.Marshal(ev); err != nil {
			t.Errorf("event %s does not marshal: %v", ev.Type, err)
		}
		if u, ok := ev.Data.(runs.UsageData); ok && u.Usage.InputTokens > o.Usage.InputTokens {
			t.Errorf("usage.updated %+v exceeds the run's %+v", u.Usage, o.Usage)
		}
	}
}

// normalized is the mock's billing in the gateway's convention, which
// Chat Completions shares: prompt tokens include cached ones, completion
// tokens reasoning.
func normalized(u chat.Usage) runs.Usage {
	return runs.Usage{InputTokens: u.PromptTokens, CacheReadTokens: u.CachedTokens, OutputTokens: u.CompletionTokens,
		ReasoningTokens: u.ReasoningTokens}
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
	case tPlan:
		return runs.PlanUpdatedData{}
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

func (r *cliRun) wantRequests(t *testing.T, n int) {
	t.Helper()
	if got := len(r.ledger.Completions()); got != n {
		t.Errorf("the mock got %d requests, want %d", got, n)
	}
}

// wantCost checks the run's cost against the mock's billing at the
// configured prices.
func (r *cliRun) wantCost(t *testing.T) {
	t.Helper()
	want := costOf(r.ledger.Billed())
	if r.outcome.CostUSD == nil || math.Abs(*r.outcome.CostUSD-want) > 1e-9 {
		t.Errorf("cost = %v, want %v from the mock's billing at the configured prices", r.outcome.CostUSD, want)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
