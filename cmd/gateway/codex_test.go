package main

// End-to-end tests of the codex agent: the whole gateway, as run() builds
// it, driving the real codex CLI (its app-server, over stdin) against the
// mock Responses API on 127.0.0.1.
//
// A gateway's Codex home, and so its config.toml and model provider, is
// shared by all its runs; where one test needs several scenarios at once,
// one mock answers each run by its prompt (byPrompt) and the ledger is read
// per prompt (forPrompt).

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/adapters/codex"
	"github.com/agentgate/agentgate/internal/mock/mocktest"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

// codexKey is the dummy API key of the mock provider.
const codexKey = "mock-key-1"

// codexKeyEnv names the variable the mock provider reads its key from (its
// env_key); the gateway passes it through to Codex.
const codexKeyEnv = "MOCK_KEY"

// codexVersion is the installed CLI the tests expect: the verified one.
const codexVersion = "0.171.0"

func startOpenAI(t testing.TB, sc openai.Scenario) *openai.Server {
	t.Helper()
	m, err := openai.Start("127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// codexHome returns a new Codex home whose config.toml makes a provider
// "mock" at url the active one, reading its key from envKey; extra lines
// go into the provider's table.
func codexHome(t testing.TB, url, envKey string, extra ...string) string {
	t.Helper()
	home := t.TempDir()
	cfg := fmt.Sprintf("model_provider = \"mock\"\n\n[model_providers.mock]\nname = \"mock\"\nbase_url = %q\n"+
		"wire_api = \"responses\"\nenv_key = %q\n", url, envKey)
	for _, l := range extra {
		cfg += l + "\n"
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// startCodexGateway starts a gateway whose codex uses home, with the mock
// provider's key in its environment.
func startCodexGateway(t *testing.T, home string) *gateway {
	t.Helper()
	settings := gatewayEnv(t, t.TempDir())
	settings["AGENTGATE_CODEX_HOME"] = home
	settings["AGENTGATE_MAX_CONCURRENT_RUNS"] = "8"
	return startGateway(t, settings, map[string]string{codexKeyEnv: codexKey})
}

// byPrompt answers each request with the scenario of its turn's prompt, so
// that concurrent runs of one gateway each get their own. A prompt it does
// not know gets a 400.
type byPrompt map[string]openai.Scenario

func (m byPrompt) Respond(req *openai.Request) openai.Response {
	if sc, ok := m[req.LastUserText()]; ok {
		return sc.Respond(req)
	}
	return openai.Response{Status: http.StatusBadRequest,
		Error: &openai.APIError{Type: "invalid_request_error", Message: "no scenario for prompt " + req.LastUserText()}}
}

// forPrompt returns the entries of the requests whose turn's prompt is
// prompt: one run's, as every run has its own prompt.
func forPrompt(l openai.Ledger, prompt string) openai.Ledger {
	var out openai.Ledger
	for _, e := range l.Responses() {
		if e.Request.LastUserText() == prompt {
			out = append(out, e)
		}
	}
	return out
}

// codexUsage is usage the mock billed as the gateway reports it. OpenAI's
// input already includes the cached tokens and its output the reasoning
// tokens, which is the gateway's convention too.
func codexUsage(u openai.Usage) runs.Usage {
	return runs.Usage{InputTokens: u.InputTokens, CacheReadTokens: u.CachedTokens,
		OutputTokens: u.OutputTokens, ReasoningTokens: u.ReasoningTokens}
}

// runBody is a POST /v1/runs body for codex against the mock's model, with
// extra fields (`"timeout_seconds":3`).
func runBody(agent, prompt string, extra ...string) string {
	b, _ := json.Marshal(prompt)
	return `{"agent":"` + agent + `","model":"mock-model","prompt":` + string(b) + strings.Join(append([]string{""}, extra...), ",") + `}`
}

// dumpEvents logs a run's events, to explain a failure.
func dumpEvents(t *testing.T, evs []sseEvent) {
	t.Helper()
	for _, e := range evs {
		t.Logf("%d %s %s", e.ID, e.Type, e.Data)
	}
}

// ofType returns the events of type typ.
func ofType(evs []sseEvent, typ runs.EventType) []sseEvent {
	var out []sseEvent
	for _, e := range evs {
		if e.Type == string(typ) {
			out = append(out, e)
		}
	}
	return out
}

// applyPatch is an exec_command that Codex recognises as its apply_patch
// tool: it reports a file change, not a shell command.
const applyPatch = "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: hello.txt\n+hi there\n*** End Patch\nEOF\n"

func TestCodexToolRunEndToEnd(t *testing.T) {
	const (
		patchPrompt  = "Add hello.txt."
		patchAnswer  = "I added hello.txt."
		shellPrompt  = "Write hi to out.txt."
		shellCommand = "echo hi > out.txt"
		shellAnswer  = "I wrote out.txt."
	)
	mock := startOpenAI(t, byPrompt{
		patchPrompt: openai.ToolTurn(applyPatch, patchAnswer),
		shellPrompt: openai.ToolTurn(shellCommand, shellAnswer),
	})
	g := startCodexGateway(t, codexHome(t, mock.URL, codexKeyEnv))

	// The alias is accepted and the run recorded under the agent's name.
	patch := g.post(t, runBody("openai", patchPrompt, `"metadata":{"ticket":"T-2"}`))
	shell := g.post(t, runBody("codex", shellPrompt))
	if patch.Agent != "codex" || patch.Status != runs.Queued || patch.Metadata["ticket"] != "T-2" {
		t.Fatalf("run created with the alias: %+v", patch)
	}

	var total runs.Usage
	t.Run("apply_patch", func(t *testing.T) {
		_, evs := g.stream(t, patch.ID, "")
		want := []string{"run.queued", "run.started", "session.started", "reasoning.completed", "tool_call.started",
			"file.changed", "tool_call.completed", "message.delta", "message.completed", "run.completed"}
		if !subsequence(types(evs), want) {
			dumpEvents(t, evs)
			t.Fatalf("events %v\ndo not contain, in order, %v", types(evs), want)
		}
		done := g.get(t, patch.ID)
		for i, e := range evs {
			if e.ID != uint64(i+1) || e.Env.Seq != e.ID || e.Env.RunID != patch.ID || e.Env.Agent != "codex" || e.Env.V != 1 {
				t.Fatalf("event %d: id %d envelope %+v", i, e.ID, e.Env)
			}
			if i >= 3 && e.Env.SessionID != done.SessionID {
				t.Errorf("event %d (%s) has session %q, want the run's %q", e.ID, e.Type, e.Env.SessionID, done.SessionID)
			}
		}
		var started runs.ToolCallStartedData
		ofType(evs, runs.EventToolCallStarted)[0].data(&started)
		var input struct{ Paths []string }
		json.Unmarshal(started.Input, &input)
		if started.Name != "apply_patch" || started.ID == "" || len(input.Paths) != 1 || input.Paths[0] != "hello.txt" {
			dumpEvents(t, evs)
			t.Fatalf("tool_call.started = %+v", started)
		}
		var changed runs.FileChangedData
		ofType(evs, runs.EventFileChanged)[0].data(&changed)
		if changed.Path != "hello.txt" || changed.Kind != runs.ChangeAdd || changed.ToolCallID != started.ID ||
			changed.Status != "completed" || !strings.Contains(changed.Diff, "hi there") {
			t.Fatalf("file.changed = %+v", changed)
		}
		var completed runs.ToolCallCompletedData
		ofType(evs, runs.EventToolCallCompleted)[0].data(&completed)
		if completed.ID != started.ID || completed.IsError {
			t.Fatalf("tool_call.completed = %+v", completed)
		}
		var reasoning runs.ReasoningData
		ofType(evs, runs.EventReasoningCompleted)[0].data(&reasoning)
		if !strings.Contains(reasoning.Text, "I will use exec_command") || reasoning.Visibility != runs.VisibilitySummary {
			t.Errorf("reasoning = %+v", reasoning)
		}
		var session runs.SessionStartedData
		ofType(evs, runs.EventSessionStarted)[0].data(&session)
		if session.SessionID == "" || session.SessionID != done.SessionID || session.Model != "mock-model" {
			t.Errorf("session.started = %+v, run session %q", session, done.SessionID)
		}

		if done.Status != runs.Succeeded || done.Error != nil || done.Result != patchAnswer || done.Agent != "codex" {
			t.Fatalf("run = %s %q %+v", done.Status, done.Result, done.Error)
		}
		if done.Exit == nil || *done.Exit != (runs.Exit{}) || done.AgentVersion != codexVersion || done.Model != "mock-model" {
			t.Fatalf("run exit %+v, version %q, model %q", done.Exit, done.AgentVersion, done.Model)
		}
		if !strings.Contains(done.Diff, "hello.txt") || !strings.Contains(done.Diff, "+hi there") {
			t.Fatalf("run diff = %q", done.Diff)
		}
		b, err := os.ReadFile(filepath.Join(g.DataDir, "workspaces", patch.ID, "hello.txt"))
		if err != nil || string(b) != "hi there\n" {
			t.Fatalf("hello.txt in the run's directory = %q, %v", b, err)
		}
		billed := codexUsage(forPrompt(mock.Ledger(), patchPrompt).Billed())
		var end runs.RunCompletedData
		evs[len(evs)-1].data(&end)
		if billed.IsZero() || done.Usage != billed || end.Usage != billed {
			t.Fatalf("usage: run %+v, run.completed %+v; the mock billed %+v", done.Usage, end.Usage, billed)
		}
		if end.Diff != done.Diff || end.Status != runs.Succeeded || end.Exit == nil || end.Exit.Code != 0 {
			t.Fatalf("run.completed = %+v", end)
		}
		total = total.Add(done.Usage)
		assertNoProcesses(t, patch.ID)
	})
	t.Run("shell", func(t *testing.T) {
		_, evs := g.stream(t, shell.ID, "")
		want := []string{"run.queued", "run.started", "session.started", "reasoning.completed", "tool_call.started",
			"tool_call.completed", "message.completed", "run.completed"}
		if !subsequence(types(evs), want) || len(ofType(evs, runs.EventFileChanged)) != 0 {
			dumpEvents(t, evs)
			t.Fatalf("events %v\ndo not contain, in order, %v, or report a file change", types(evs), want)
		}
		var started runs.ToolCallStartedData
		ofType(evs, runs.EventToolCallStarted)[0].data(&started)
		var input struct{ Command, Cwd string }
		json.Unmarshal(started.Input, &input)
		if started.Name != "shell" || !strings.Contains(input.Command, shellCommand) {
			t.Fatalf("tool_call.started = %+v", started)
		}
		var completed runs.ToolCallCompletedData
		ofType(evs, runs.EventToolCallCompleted)[0].data(&completed)
		if completed.ID != started.ID || completed.IsError {
			t.Fatalf("tool_call.completed = %+v", completed)
		}
		done := g.get(t, shell.ID)
		if done.Status != runs.Succeeded || done.Result != shellAnswer {
			t.Fatalf("run = %s %q %+v", done.Status, done.Result, done.Error)
		}
		b, err := os.ReadFile(filepath.Join(g.DataDir, "workspaces", shell.ID, "out.txt"))
		if err != nil || string(b) != "hi\n" {
			t.Fatalf("out.txt in the run's directory = %q, %v", b, err)
		}
		if billed := codexUsage(forPrompt(mock.Ledger(), shellPrompt).Billed()); billed.IsZero() || done.Usage != billed {
			t.Fatalf("usage %+v; the mock billed %+v", done.Usage, billed)
		}
		total = total.Add(done.Usage)
		assertNoProcesses(t, shell.ID)
	})
	if t.Failed() {
		return
	}
	assertCodexMetrics(t, g, total, 2)
}

// assertCodexMetrics checks that /metrics splits the codex runs' usage into
// disjoint parts that add up to it, and counts the runs that succeeded and
// the installed version.
func assertCodexMetrics(t *testing.T, g *gateway, u runs.Usage, succeeded int) {
	t.Helper()
	sum := g.metrics(t)
	codex := map[string]string{"agent": "codex"}
	with := func(k, v string) map[string]string { return map[string]string{"agent": "codex", k: v} }
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"input tokens, all parts", sum("agentgate_input_tokens_total", codex), float64(u.InputTokens)},
		{"input tokens, uncached", sum("agentgate_input_tokens_total", with("cache", "none")), float64(u.InputTokens - u.CacheReadTokens)},
		{"input tokens, cache read", sum("agentgate_input_tokens_total", with("cache", "read")), float64(u.CacheReadTokens)},
		{"input tokens, cache write", sum("agentgate_input_tokens_total", with("cache", "write")), 0},
		{"output tokens, all parts", sum("agentgate_output_tokens_total", codex), float64(u.OutputTokens)},
		{"output tokens, reasoning", sum("agentgate_output_tokens_total", with("kind", "reasoning")), float64(u.ReasoningTokens)},
		{"runs succeeded", sum("agentgate_runs_finished_total", with("status", "succeeded")), float64(succeeded)},
		{"agent info", sum("agentgate_agent_info", map[string]string{"agent": "codex", "version": codexVersion, "compatibility": "verified"}), 1},
		{"file.changed events", sum("agentgate_events_total", with("type", "file.changed")), 1},
	} {
		if c.got != c.want {
			t.Errorf("metrics: %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if n := sum("agentgate_input_tokens_total", map[string]string{"agent": "claude"}); n != 0 {
		t.Errorf("metrics: codex tokens counted for claude (%v)", n)
	}
}

// maxCodexRequests is the most requests one turn of Codex makes under the
// gateway's bounds on its retries: each attempt of a stream may be retried
// as a request.
const maxCodexRequests = (1 + codex.DefaultRequestMaxRetries) * (1 + codex.DefaultStreamMaxRetries)

func TestCodexFailuresAreClassified(t *testing.T) {
	type failure struct {
		name      string
		scenario  openai.Scenario
		extra     []string
		status    runs.State
		class     runs.Class
		retryable bool
		within    time.Duration
		// strike: the run's deadline strikes once its request reached
		// the mock, which leaves it unanswered.
		strike bool
	}
	failures := []failure{
		{name: "401", scenario: openai.Failure(401), class: runs.NotAuthenticated},
		{name: "429", scenario: openai.Failure(429), class: runs.RateLimited, retryable: true},
		{name: "500", scenario: openai.Failure(500), class: runs.TransientAPIError, retryable: true},
		{name: "400", scenario: openai.Failure(400), class: runs.APIError},
		{name: "context exceeded", scenario: openai.ContextExceeded(), class: runs.ContextExceeded},
		{name: "hung server", scenario: openai.Hang(), extra: []string{`"timeout_seconds":3600`}, strike: true,
			status: runs.TimedOut, class: runs.Timeout, retryable: true, within: 10 * time.Second},
	}
	prompt := func(name string) string { return "Fail with " + name + "." }
	scenarios := byPrompt{}
	for _, f := range failures {
		scenarios[prompt(f.name)] = f.scenario
	}
	mock := startOpenAI(t, scenarios)
	g := startCodexGateway(t, codexHome(t, mock.URL, codexKeyEnv))
	// A Codex home whose provider sets one of the retry bounds itself.
	kept := startOpenAI(t, openai.Failure(500))
	gKept := startCodexGateway(t, codexHome(t, kept.URL, codexKeyEnv, "request_max_retries = 0"))
	// A provider whose key variable the gateway's environment lacks.
	unkeyed := startOpenAI(t, openai.TextAnswer("unreachable"))
	gUnkeyed := startCodexGateway(t, codexHome(t, unkeyed.URL, "ABSENT_KEY"))
	// Codex's own provider, never logged in, and no API key.
	gLogin := startCodexGateway(t, t.TempDir())

	// run posts a run and waits for its end, whose requests at the mock
	// (requests counts them) must be within the gateway's bounds on the
	// CLI's retries. With strike, the run's deadline strikes once it has
	// a request, and the end must come within of that.
	run := func(t *testing.T, g *gateway, body string, within time.Duration, requests func() int, strike bool) runs.Run {
		t.Helper()
		first := mocktest.WatchFirstRequest(t, requests)
		r := g.post(t, body)
		from := first
		if strike {
			waitFor(t, "request of the run at the mock", func() bool { return requests() > 0 })
			g.deadlines.Strike(r.ID)
			struck := time.Now()
			from = func() time.Time { return struck }
		}
		done := g.waitRun(t, r.ID, 2*time.Minute) // against a hang: it includes the CLI's start
		switch {
		case strike:
			// The deadline is what is tested: the run ends soon after it.
			if took := done.FinishedAt.Sub(from()); took > within {
				t.Errorf("run ended %s after its deadline; want within %s", took.Round(time.Millisecond), within)
			}
		case requests() > maxCodexRequests:
			// The gateway bounds the CLI's retries: counted, not timed,
			// which a loaded machine would stretch.
			t.Errorf("the run made %d requests; the gateway's bounds on Codex's retries allow %d", requests(), maxCodexRequests)
		}
		assertNoProcesses(t, r.ID)
		return done
	}
	check := func(t *testing.T, g *gateway, done runs.Run, status runs.State, class runs.Class, retryable bool) {
		t.Helper()
		if done.Status != status || done.Error == nil || done.Error.Class != class || done.Error.Retryable != retryable {
			_, evs := g.stream(t, done.ID, "")
			dumpEvents(t, evs)
			t.Fatalf("run %s %+v; want %s %s retryable=%v", done.Status, done.Error, status, class, retryable)
		}
		if done.Error.Message == "" {
			t.Fatal("error without a message")
		}
	}

	t.Run("classes", func(t *testing.T) {
		for _, f := range failures {
			t.Run(f.name, func(t *testing.T) {
				t.Parallel()
				within := f.within
				if within == 0 {
					within = 8 * time.Second
				}
				status := f.status
				if status == "" {
					status = runs.Failed
				}
				mine := func() int { return len(forPrompt(mock.Ledger(), prompt(f.name))) }
				done := run(t, g, runBody("codex", prompt(f.name), f.extra...), within, mine, f.strike)
				check(t, g, done, status, f.class, f.retryable)
				if reqs := forPrompt(mock.Ledger(), prompt(f.name)); len(reqs) == 0 {
					t.Errorf("no request reached the mock")
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	sum := g.metrics(t)
	for _, f := range failures {
		if n := sum("agentgate_run_errors_total", map[string]string{"agent": "codex", "class": string(f.class)}); n != 1 {
			t.Errorf("agentgate_run_errors_total{class=%q} = %v, want 1", f.class, n)
		}
	}
	// The gateway bounds Codex's own retries (4 request retries in each
	// of 5 stream retries: 30 requests and 26 s for a 500) to one of
	// each: 2 stream attempts of 2 requests.
	if n := len(forPrompt(mock.Ledger(), prompt("500"))); n != 4 {
		t.Errorf("a 500 with the gateway's retry bounds made %d requests, want 4 (2 stream attempts of 2)", n)
	}

	t.Run("operator's retry bounds", func(t *testing.T) {
		t.Parallel()
		done := run(t, gKept, runBody("codex", prompt("500")), 8*time.Second, func() int { return len(kept.Ledger().Responses()) }, false)
		check(t, gKept, done, runs.Failed, runs.TransientAPIError, true)
		// config.toml's request_max_retries = 0 is kept, and the
		// gateway's stream bound still applies: 2 stream attempts of 1
		// request (4 if the gateway overrode the operator, 6 if it
		// left Codex's own stream retries).
		if n := len(kept.Ledger().Responses()); n != 2 {
			t.Errorf("with request_max_retries = 0 in config.toml a 500 made %d requests, want 2", n)
		}
	})
	t.Run("key variable unset", func(t *testing.T) {
		t.Parallel()
		done := run(t, gUnkeyed, runBody("codex", "Say hello."), 5*time.Second, func() int { return len(unkeyed.Ledger()) }, false)
		check(t, gUnkeyed, done, runs.Failed, runs.NotAuthenticated, false)
		if !strings.Contains(done.Error.Message, "ABSENT_KEY") || !strings.Contains(done.Error.Hint, "ABSENT_KEY") {
			t.Errorf("error %+v does not name the variable", done.Error)
		}
		if n := len(unkeyed.Ledger()); n != 0 || done.Exit != nil {
			t.Errorf("the run reached the mock (%d requests) or started codex (exit %+v)", n, done.Exit)
		}
	})
	t.Run("not logged in", func(t *testing.T) {
		t.Parallel()
		done := run(t, gLogin, runBody("codex", "Say hello."), 5*time.Second, func() int { return 0 }, false)
		check(t, gLogin, done, runs.Failed, runs.NotAuthenticated, false)
		if !strings.Contains(done.Error.Message, "codex login status") || !strings.Contains(done.Error.Hint, "codex login") {
			t.Errorf("error %+v: not from `codex login status`, or the hint does not mention `codex login`", done.Error)
		}
		// The check failed the run before codex app-server started: it
		// never tried the network.
		if done.Exit != nil || done.SessionID != "" {
			t.Errorf("codex was started: exit %+v, session %q", done.Exit, done.SessionID)
		}
	})
}

// cancelRun asks the gateway to cancel run id.
func cancelRun(t *testing.T, g *gateway, id string) {
	t.Helper()
	resp, err := http.Post(g.URL+"/v1/runs/"+id+"/cancel", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel = %d", resp.StatusCode)
	}
}

// TestCodexCancelMidCommand cancels a run while its command runs: the
// gateway asks Codex to interrupt the turn and then closes its stdin, so
// Codex stops the command and exits by itself, before any signal.
func TestCodexCancelMidCommand(t *testing.T) {
	mock := startOpenAI(t, openai.LongTool())
	g := startCodexGateway(t, codexHome(t, mock.URL, codexKeyEnv))
	r := g.post(t, runBody("codex", "Run the long command."))
	g.waitEvent(t, r.ID, runs.EventToolCallStarted, 20*time.Second)
	waitForProcess(t, r.ID, "sleep")
	start := time.Now()
	cancelRun(t, g, r.ID)
	done := g.waitRun(t, r.ID, 15*time.Second)
	took := time.Since(start)
	_, evs := g.stream(t, r.ID, "")
	if done.Status != runs.Cancelled || done.Error == nil || done.Error.Class != runs.ClassCancelled || done.Error.Retryable {
		dumpEvents(t, evs)
		t.Fatalf("run %s %+v", done.Status, done.Error)
	}
	// The graceful path is checked below by its exit; this bound catches
	// a cancel that waited for the kill's grace, or longer.
	if took > 20*time.Second {
		t.Errorf("cancelled after %s; want within seconds", took.Round(time.Millisecond))
	}
	assertNoProcesses(t, r.ID)
	// The graceful path: Codex ended the turn as interrupted and exited
	// 0 when stdin closed; no signal was needed.
	var end runs.RunCompletedData
	evs[len(evs)-1].data(&end)
	if done.Exit == nil || *done.Exit != (runs.Exit{Code: 0, Reason: "cancelled"}) || end.StopReason != "interrupted" {
		dumpEvents(t, evs)
		t.Fatalf("exit %+v, stop reason %q; want code 0 without a signal, after an interrupted turn", done.Exit, end.StopReason)
	}
	// The command's call is closed, as failed.
	var started runs.ToolCallStartedData
	ofType(evs, runs.EventToolCallStarted)[0].data(&started)
	closed := false
	for _, e := range ofType(evs, runs.EventToolCallCompleted) {
		var c runs.ToolCallCompletedData
		e.data(&c)
		closed = closed || (c.ID == started.ID && c.IsError)
	}
	if !closed {
		dumpEvents(t, evs)
		t.Fatalf("tool call %s not closed as failed", started.ID)
	}
}

// TestCodexTimeoutMidCommand lets a run's own timeout end it while its
// command runs.
func TestCodexTimeoutMidCommand(t *testing.T) {
	mock := startOpenAI(t, openai.LongTool())
	g := startCodexGateway(t, codexHome(t, mock.URL, codexKeyEnv))
	// The deadline must strike while the command runs, but how long Codex
	// takes to reach its command is up to how busy the machine is: a
	// deadline that came first proves nothing, so the run is tried again
	// with more time, up to 40 s, which the command's minute outlasts.
	var (
		done    runs.Run
		evs     []sseEvent
		timeout time.Duration
	)
	for _, timeout = range []time.Duration{3 * time.Second, 15 * time.Second, 40 * time.Second} {
		r := g.post(t, runBody("codex", "Run the long command.", fmt.Sprintf(`"timeout_seconds":%d`, int(timeout/time.Second))))
		done = g.waitRun(t, r.ID, timeout+20*time.Second)
		_, evs = g.stream(t, r.ID, "")
		if done.Status != runs.TimedOut || len(ofType(evs, runs.EventToolCallStarted)) > 0 {
			break
		}
		t.Logf("the %s deadline came before the command: %v", timeout, types(evs))
		assertNoProcesses(t, r.ID)
	}
	if done.Status != runs.TimedOut || done.Error == nil || done.Error.Class != runs.Timeout || !done.Error.Retryable {
		dumpEvents(t, evs)
		t.Fatalf("run %s %+v", done.Status, done.Error)
	}
	// The run's own clock, which the deadline counts from, not the
	// client's, which adds the request and the polling.
	if done.StartedAt == nil || done.FinishedAt == nil {
		t.Fatalf("run started %v, finished %v", done.StartedAt, done.FinishedAt)
	}
	if took := done.FinishedAt.Sub(*done.StartedAt); took < timeout-100*time.Millisecond || took > timeout+7*time.Second {
		t.Errorf("timed out after %s; want %s and the time to stop", took.Round(time.Millisecond), timeout)
	}
	if done.Exit == nil || done.Exit.Reason != "timeout" {
		t.Errorf("exit %+v", done.Exit)
	}
	// The deadline struck while the command ran.
	if !subsequence(types(evs), []string{"tool_call.started", "tool_call.completed", "run.completed"}) {
		dumpEvents(t, evs)
		t.Errorf("events %v: no command started and closed", types(evs))
	}
	assertNoProcesses(t, done.ID)
}

// TestCodexHelperThreadDoesNotEndRun runs a turn in which Codex hands a
// task to a sub-agent: the sub-agent's turn ends first, and the run goes on
// until the root's turn ends, with the root's answer.
func TestCodexHelperThreadDoesNotEndRun(t *testing.T) {
	const helperAnswer, rootAnswer = "The helper is done.", "The root is done."
	mock := startOpenAI(t, openai.HelperThread(helperAnswer, rootAnswer))
	g := startCodexGateway(t, codexHome(t, mock.URL, codexKeyEnv))
	r := g.post(t, runBody("codex", "Ask a helper, then answer."))
	_, evs := g.stream(t, r.ID, "")
	done := g.get(t, r.ID)
	if done.Status != runs.Succeeded || done.Result != rootAnswer {
		dumpEvents(t, evs)
		t.Fatalf("run %s result %q %+v", done.Status, done.Result, done.Error)
	}
	root := done.SessionID
	// The helper's thread, as the mock saw it ask.
	var helper string
	for _, e := range mock.Ledger().Responses() {
		if e.Request.SubAgent() {
			helper = e.Request.ThreadID()
		}
	}
	// The call that started it, in the root thread.
	var spawn string
	for _, e := range ofType(evs, runs.EventToolCallStarted) {
		var d runs.ToolCallStartedData
		e.data(&d)
		if d.Name == "agent_spawnAgent" && e.Env.SessionID == root {
			spawn = d.ID
		}
	}
	if helper == "" || helper == root || spawn == "" {
		dumpEvents(t, evs)
		t.Fatalf("helper thread %q (root %q), spawn call %q", helper, root, spawn)
	}
	// Each event is the helper's, under the call that spawned it, or the
	// root's, under none. usage.updated is the run's usage so far, so it is
	// the root's.
	var helperMessages, rootMessages []string
	for _, e := range evs {
		switch e.Env.SessionID {
		case helper:
			if e.Env.ParentToolCallID != spawn || e.Type == string(runs.EventUsageUpdated) {
				t.Errorf("event %d (%s) of the helper thread has parent_tool_call_id %q; want the spawn call %q, and no run-wide event",
					e.ID, e.Type, e.Env.ParentToolCallID, spawn)
			}
		case root:
			if e.Env.ParentToolCallID != "" {
				t.Errorf("event %d (%s) of the root thread has parent_tool_call_id %q", e.ID, e.Type, e.Env.ParentToolCallID)
			}
		default:
			if e.ID > 3 { // run.queued, run.started and Codex's startup warning come before the session
				t.Errorf("event %d (%s) has session %q, neither the root %q nor the helper %q", e.ID, e.Type, e.Env.SessionID, root, helper)
			}
		}
		if e.Type == string(runs.EventMessageCompleted) {
			var m runs.MessageData
			e.data(&m)
			if e.Env.SessionID == helper {
				helperMessages = append(helperMessages, m.Text)
			} else {
				rootMessages = append(rootMessages, m.Text)
			}
		}
	}
	if strings.Join(helperMessages, "|") != helperAnswer || len(rootMessages) == 0 || rootMessages[len(rootMessages)-1] != rootAnswer {
		t.Errorf("helper messages %q, root messages %q", helperMessages, rootMessages)
	}
	if t.Failed() {
		dumpEvents(t, evs)
	}
	// The helper's requests were billed too, and are the run's.
	if billed := codexUsage(mock.Ledger().Billed()); done.Usage != billed {
		t.Fatalf("usage %+v; the mock billed %+v", done.Usage, billed)
	}
	assertNoProcesses(t, r.ID)
}

// rollouts returns the names of the rollout files under home's sessions
// that record thread.
func rollouts(t *testing.T, home, thread string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(home, "sessions"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.Contains(d.Name(), thread) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCodexResumeBillsOnlyNewTurn resumes a kept session: Codex replays the
// whole thread to the model, and reports the thread's usage so far, but the
// resumed run is given only what its own requests were billed. A session
// not kept leaves nothing to resume.
func TestCodexResumeBillsOnlyNewTurn(t *testing.T) {
	const first, ephemeral, second, again = "Remember the number 42.", "Remember nothing.", "Which number was it?", "And now?"
	mock := startOpenAI(t, byPrompt{
		first:     openai.TextAnswer("Noted."),
		ephemeral: openai.TextAnswer("Noted."),
		second:    openai.ToolTurn("echo 42", "It was 42."),
		again:     openai.TextAnswer("Still 42."),
	})
	home := codexHome(t, mock.URL, codexKeyEnv)
	g := startCodexGateway(t, home)

	// The two run side by side.
	keptID, droppedID := g.post(t, runBody("codex", first, `"keep_session":true`)).ID, g.post(t, runBody("codex", ephemeral)).ID
	kept, dropped := g.waitRun(t, keptID, 20*time.Second), g.waitRun(t, droppedID, 20*time.Second)
	if kept.Status != runs.Succeeded || kept.SessionID == "" || dropped.Status != runs.Succeeded || dropped.SessionID == "" {
		t.Fatalf("first runs: kept %s %q %+v; ephemeral %s %q %+v", kept.Status, kept.SessionID, kept.Error,
			dropped.Status, dropped.SessionID, dropped.Error)
	}
	// Each run writes a home of its own, and its session goes to the
	// cluster: the agent's base home gets no rollout, kept or not.
	for _, id := range []string{kept.SessionID, dropped.SessionID} {
		if got := rollouts(t, home, id); len(got) != 0 {
			t.Errorf("session %s left rollout files in the agent's base home: %v", id, got)
		}
	}

	resumed := g.waitRun(t, g.post(t, runBody("codex", second, `"resume_session_id":"`+kept.SessionID+`"`)).ID, 20*time.Second)
	if resumed.Status != runs.Succeeded || resumed.SessionID != kept.SessionID || resumed.Result != "It was 42." {
		t.Fatalf("resumed run: %s session %q result %q %+v", resumed.Status, resumed.SessionID, resumed.Result, resumed.Error)
	}
	reqs := forPrompt(mock.Ledger(), second)
	if len(reqs) != 2 {
		t.Fatalf("the resumed run made %d requests, want 2", len(reqs))
	}
	// It is the same thread: the first turn is replayed to the model.
	replayed := false
	for _, it := range reqs[0].Request.Input {
		replayed = replayed || (it.Type == "message" && it.Role == "user" && it.Text == first)
	}
	if !replayed || reqs[0].Request.SessionID() != kept.SessionID {
		t.Fatalf("the resumed run's request does not continue session %s: %+v", kept.SessionID, reqs[0].Request.Input)
	}
	if billed := codexUsage(reqs.Billed()); resumed.Usage != billed {
		t.Fatalf("resumed usage %+v; the mock billed %+v for its requests (and %+v before)",
			resumed.Usage, billed, codexUsage(forPrompt(mock.Ledger(), first).Billed()))
	}
	// A resumed session is kept: it can be resumed again, and again bills
	// only its own turn.
	resumedAgain := g.waitRun(t, g.post(t, runBody("codex", again, `"resume_session_id":"`+kept.SessionID+`"`)).ID, 20*time.Second)
	if billed := codexUsage(forPrompt(mock.Ledger(), again).Billed()); resumedAgain.Status != runs.Succeeded || resumedAgain.Usage != billed {
		t.Fatalf("second resume: %s usage %+v %+v; the mock billed %+v", resumedAgain.Status, resumedAgain.Usage, resumedAgain.Error, billed)
	}

	start := time.Now()
	gone := g.waitRun(t, g.post(t, runBody("codex", "Anything?", `"resume_session_id":"`+dropped.SessionID+`"`)).ID, 20*time.Second)
	if gone.Status != runs.Failed || gone.Error == nil || gone.Error.Class != runs.SessionNotFound || gone.Error.Retryable ||
		!strings.Contains(gone.Error.Hint, "keep_session") {
		t.Fatalf("resuming a session not kept: %s %+v", gone.Status, gone.Error)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("resuming a session not kept failed after %s", took.Round(time.Millisecond))
	}
	if n := len(forPrompt(mock.Ledger(), "Anything?")); n != 0 {
		t.Errorf("resuming a session not kept made %d requests", n)
	}
	for _, r := range []runs.Run{kept, dropped, resumed, resumedAgain, gone} {
		assertNoProcesses(t, r.ID)
	}
}

// TestCodexAgentIsListed checks what the startup probe found: the native
// binary behind the npm launcher, at the verified version.
func TestCodexAgentIsListed(t *testing.T) {
	g := startCodexGateway(t, t.TempDir())
	resp, err := http.Get(g.URL + "/v1/agents")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Agents []runs.AgentInfo }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	var codex *runs.AgentInfo
	for i, a := range body.Agents {
		if a.Name == "codex" {
			codex = &body.Agents[i]
		}
	}
	if codex == nil {
		t.Fatalf("codex not listed: %+v", body.Agents)
	}
	if !codex.Installed || codex.Version != codexVersion || codex.VerifiedVersion != codexVersion ||
		codex.Compatibility != runs.CompatVerified || !slices.Equal(codex.Aliases, []string{"openai"}) {
		t.Fatalf("codex = %+v", *codex)
	}
	if strings.HasSuffix(codex.Path, ".js") || filepath.Base(codex.Path) != "codex" || !filepath.IsAbs(codex.Path) {
		t.Fatalf("codex path %q: want the native binary, not the launcher", codex.Path)
	}
	if magic := fileMagic(t, codex.Path); magic != "\x7fELF" {
		t.Fatalf("%s starts with %q: not an ELF binary", codex.Path, magic)
	}
	if len(codex.Permissions) != 3 || codex.Advisory == "" {
		t.Fatalf("codex permissions %v, advisory %q", codex.Permissions, codex.Advisory)
	}
	if n := g.metrics(t)("agentgate_agent_info", map[string]string{"agent": "codex", "version": codexVersion, "compatibility": "verified"}); n != 1 {
		t.Fatalf("agentgate_agent_info for codex = %v", n)
	}
}

// fileMagic returns the first 4 bytes of the file at path.
func fileMagic(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 4)
	n, _ := f.Read(b)
	return string(b[:n])
}
