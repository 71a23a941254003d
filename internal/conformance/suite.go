package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/mock/mocktest"
	"github.com/agentgate/agentgate/internal/probe"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/supervisor"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
)

// Bounds of the suite's runs. A failure or a cancel must end a run in
// seconds, not after the CLI's default retries; the tool of the cancel
// and timeout cases would run for a minute.
const (
	quick      = 10 * time.Minute // a run that succeeds or fails on its own: a bound against a hang, not a target (OpenCode took 45 s to start on a loaded machine, a whole MCP run over 2 min at load 35, and runs over 3 min at load 25)
	stopWithin = 20 * time.Second // from cancel or deadline to run.completed
	// struckTimeout is the timeout_seconds of the cases whose deadline
	// the suite strikes itself (runstest.Deadlines) once the run is where
	// the case needs it: long enough that its own timer never comes first.
	struckTimeout = 30 * time.Minute
)

// Run runs every scenario of the suite against kit's agent, each in a
// subtest, in parallel.
func Run(t *testing.T, kit Kit) {
	a := kit.Adapter()
	bin := kit.Bin(t)
	s := &suite{kit: kit, adapter: a, bin: bin}

	t.Run("version", s.version)
	t.Run("unsupported_fields", s.unsupportedFields)
	cases := []suiteCase{
		{"text", s.text},
		{"tool", s.tool},
		{"failure_401", s.failure(401, runs.NotAuthenticated)},
		{"failure_429", s.failure(429, runs.RateLimited)},
		{"failure_500", s.failure(500, runs.TransientAPIError)},
		{"no_credentials", s.noCredentials},
		{"cancel_mid_tool", s.cancelMidTool},
		{"timeout_mid_tool", s.timeoutMidTool},
		{"server_never_answers", s.hang},
	}
	cases = append(cases, s.interactiveCases()...)
	cases = append(cases, s.sandboxCases()...)
	cases = append(cases, s.mcpCases()...)
	cases = append(cases, s.imageCases()...)
	cases = append(cases, s.budgetCases()...)
	cases = append(cases, s.schemaCases()...)
	cases = append(cases, s.artifactCases()...)
	cases = append(cases, s.homeCases()...)
	cases = append(cases, s.networkCases()...)
	runCases(t, cases)
}

// RunInteractive runs, of the suite, the cases of interactive runs and
// approvals, with the checks that need no model loop: the version, the
// fields refused by name, and the budgets the agent cannot be held to
// (max_total_tokens without usage, max_budget_usd without cost) refused
// by name; and, for an adapter that knows where its model is
// (runs.NetworkNeeds), the network policies. It is for an agent proven
// over its session protocol alone; Run does all of it and more.
func RunInteractive(t *testing.T, kit Kit) {
	s := &suite{kit: kit, adapter: kit.Adapter(), bin: kit.Bin(t)}
	t.Run("version", s.version)
	t.Run("unsupported_fields", s.unsupportedFields)
	cases := s.interactiveCases()
	for _, c := range s.budgetCases() {
		if strings.HasSuffix(c.name, "_refused") {
			cases = append(cases, c)
		}
	}
	if _, ok := s.adapter.(runs.NetworkNeeds); ok {
		cases = append(cases, s.networkCases()...)
	}
	runCases(t, cases)
}

// runCases runs each case as a parallel subtest.
func runCases(t *testing.T, cases []suiteCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.f(t)
		})
	}
}

// suiteCase is one scenario of the suite, run as a parallel subtest.
type suiteCase struct {
	name string
	f    func(t *testing.T)
}

type suite struct {
	kit     Kit
	adapter runs.Adapter
	bin     string
}

// gateway is one supervisor over a store of its own, with the agent
// configured against one backend. The store is its own because replicas
// on one store share its queue: a case's runs must run against the case's
// backend.
type gateway struct {
	sup   *supervisor.Supervisor
	store runs.Store
	// deadlines strikes a run's deadline when a case says.
	deadlines *runstest.Deadlines
	backend   Backend
	home      string
	root      string // the workspace root: a fresh run's directory is root/<run id>
	data      string // hidden by the sandbox, as the gateway's data directory
	// usageUnknown says the agent reports no usage (Reports.Usage): its
	// runs' usage is zero, not the mock's bill.
	usageUnknown bool
}

// start serves sc and starts a supervisor whose environment is env(backend).
// Each of tune then changes the supervisor's configuration, given the
// gateway's store.
func (s *suite) start(t *testing.T, sc Scenario, env func(Backend) map[string]string, tune ...func(*supervisor.Config, runs.Store)) *gateway {
	t.Helper()
	home, data := t.TempDir(), t.TempDir()
	b := s.kit.Serve(t, sc, home)
	gwEnv := env(b)
	cfg := supervisor.Config{
		Replica: "conformance-" + uuid.NewString()[:8], WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"),
		KillGrace: 2 * time.Second, MaxTimeout: time.Hour, DefaultTimeout: struckTimeout, // the suite's waits are the bounds: a run's own timeout never comes first
		Getenv: func(k string) string { return gwEnv[k] },
		// The suite's MCP server is the test binary (mcptest.Server).
		MCPCommands: []string{testBinary(t)},
		// Snapshots live in the data directory the sandbox hides.
		ArtifactsDir: filepath.Join(data, "artifacts"),
	}
	cfg.Sandbox = confine(t, cfg.WorkspaceRoot, data)
	// Every case's supervisor probes the same CLI: one start for all.
	cfg.VersionOutput = runstest.Versions.Output
	deadlines := &runstest.Deadlines{}
	cfg.RunDeadline = deadlines.Arm
	st := runstest.Store(t)
	// The gateway's store keeps uploaded files besides runs.
	cfg.Uploads = runstest.Uploads(t, st)
	for _, f := range tune {
		f(&cfg, st)
	}
	sup := supervisor.New(cfg, st, []*supervisor.Agent{{Adapter: s.adapter, Bin: s.bin, Home: home}},
		runstest.NopObserver{}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	ctx, cancel := context.WithCancel(context.Background())
	if err := sup.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		if err := sup.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		cancel()
	})
	return &gateway{sup: sup, store: st, deadlines: deadlines, backend: b, home: home, root: cfg.WorkspaceRoot, data: data,
		usageUnknown: !s.adapter.Describe().ReportsUsage()}
}

func credentials(b Backend) map[string]string   { return b.Env }
func noCredentials(b Backend) map[string]string { return b.NoCredentials }

// submit creates a run of the agent.
func (g *gateway) submit(t *testing.T, spec runs.Spec) runs.Run {
	t.Helper()
	return g.submitAs(t, runs.Actor{}, spec)
}

// submitAs creates a run of the agent for the caller by, of by's tenant.
func (g *gateway) submitAs(t *testing.T, by runs.Actor, spec runs.Spec) runs.Run {
	t.Helper()
	spec.Agent = g.sup.Agents()[0].Name
	if spec.Model == "" {
		spec.Model = g.backend.Model
	}
	if spec.Permission == "" {
		spec.Permission = runs.WorkspaceWrite
	}
	r, err := g.sup.Submit(runs.WithActor(context.Background(), by), spec)
	if err != nil {
		t.Fatalf("submit: %v (agent %+v)", err, g.sup.Agents()[0])
	}
	return r
}

// wait waits for the run to end and returns it with its events.
func (g *gateway) wait(t *testing.T, id string, within time.Duration) (runs.Run, []runs.Event) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		r, err := g.store.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		// The record ends before run.completed is stored: wait for both.
		if r.Status.Terminal() && runstest.Completed(t, g.store, id) {
			return r, g.events(t, id)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("run %s did not end within %s; events so far: %s", id, within, typesOf(g.events(t, id)))
	return runs.Run{}, nil
}

// events reads the run's log as stored.
func (g *gateway) events(t *testing.T, id string) []runs.Event {
	t.Helper()
	last, err := g.store.LastEvent(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if last.Seq == 0 {
		return nil
	}
	cur, err := g.store.OpenCursor(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var out []runs.Event
	for uint64(len(out)) < last.Seq {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		batch, err := cur.Next(ctx, 512)
		cancel()
		if err != nil {
			t.Fatalf("read events of %s: %v", id, err)
		}
		for _, se := range batch {
			var ev runs.Event
			var raw struct {
				Data json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(se.JSON, &ev); err != nil || json.Unmarshal(se.JSON, &raw) != nil {
				t.Fatalf("event %d of %s: %v", se.Seq, id, err)
			}
			ev.Data = raw.Data
			out = append(out, ev)
		}
	}
	return out
}

// waitFor waits until the run has an event of type typ.
func (g *gateway) waitFor(t *testing.T, id string, typ runs.EventType, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, ev := range g.events(t, id) {
			if ev.Type == typ {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no %s in run %s within %s: %s", typ, id, within, typesOf(g.events(t, id)))
}

// typesOf lists the events' types, for a failure message, with the data
// of those that say what went wrong: a warning's text, an unparsed line,
// the run's outcome.
func typesOf(evs []runs.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(string(ev.Type))
		switch ev.Type {
		case runs.EventWarning, runs.EventAgentUnparsed, runs.EventRunCompleted:
			if raw, err := json.Marshal(ev.Data); err == nil {
				b.WriteString(clip.Text(string(raw), 500))
			}
		}
		b.WriteByte(' ')
	}
	return b.String()
}

func of(evs []runs.Event, typ runs.EventType) []runs.Event {
	var out []runs.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// wantUsage checks the run's usage against what the mock billed; for an
// agent that reports no usage, that the run's stays zero and says so.
func (g *gateway) wantUsage(t *testing.T, r runs.Run) {
	t.Helper()
	billed := g.backend.Billed()
	if g.usageUnknown {
		if r.Usage != (runs.Usage{}) || !r.UsageUnknown {
			t.Errorf("usage = %+v, usage_unknown %v: an agent that reports no usage must say so and report none", r.Usage, r.UsageUnknown)
		}
	} else if r.Usage != billed {
		t.Errorf("usage = %+v, the mock billed %+v", r.Usage, billed)
	}
	if billed.InputTokens == 0 || billed.OutputTokens == 0 {
		t.Errorf("the mock billed %+v: a run that reached it must be billed", billed)
	}
}

// wantNoProcesses checks that nothing of the run is left.
func wantNoProcesses(t *testing.T, id, marker string) {
	t.Helper()
	deadline := time.Now().Add(stopWithin)
	for {
		pids, err := proctree.New().Find(id)
		if err != nil {
			t.Fatal(err)
		}
		left := agenttest.ProcessesMatching(marker)
		if len(pids) == 0 && len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left: %v of the run, %v running the tool", pids, left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *suite) version(t *testing.T) {
	d := s.adapter.Describe()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	info := probe.With(context.Background(), s.adapter, s.bin, env, runstest.Versions.Output)
	if !info.Installed || info.Version == "" {
		t.Fatalf("probe = %+v", info)
	}
	if info.Compatibility != runs.CompatVerified || info.Version != d.VerifiedVersion {
		t.Errorf("installed %s is %s against the verified %s: pin the verified version (%s)",
			info.Version, info.Compatibility, d.VerifiedVersion, d.InstallCommand)
	}
	if _, err := s.adapter.ParseVersion([]byte("not a version at all")); err == nil {
		t.Error("ParseVersion accepted garbage")
	}
}

// optional are the run fields an agent may or may not honour, each with a
// valid value.
var optional = map[string]func(*runs.Spec){
	runs.FieldSystemPrompt:    func(s *runs.Spec) { s.SystemPrompt = "Be brief." },
	runs.FieldModel:           func(s *runs.Spec) { s.Model = "some-model" },
	runs.FieldEffort:          func(s *runs.Spec) { s.Effort = "high" },
	runs.FieldMaxTurns:        func(s *runs.Spec) { s.MaxTurns = 3 },
	runs.FieldMaxBudgetUSD:    func(s *runs.Spec) { s.MaxBudgetUSD = 1 },
	runs.FieldOutputSchema:    func(s *runs.Spec) { s.OutputSchema = json.RawMessage(`{"type":"object"}`) },
	runs.FieldResumeSessionID: func(s *runs.Spec) { s.ResumeSessionID = "0196f0c2-7e1a-7000-8000-000000000001" },
	runs.FieldMaxTotalTokens:  func(s *runs.Spec) { s.MaxTotalTokens = 1000 },
}

// unsupportedFields checks that every optional field the agent does not
// list, and the gateway does not enforce for it, is refused by name, and
// every other one is taken. The spec goes the gateway's way: through
// runs.CheckFields, then to the adapter without the fields the gateway
// enforces itself.
func (s *suite) unsupportedFields(t *testing.T) {
	d := s.adapter.Describe()
	for field, set := range optional {
		spec := runs.Spec{Agent: d.Name, Prompt: "hi", Permission: runs.WorkspaceWrite}
		set(&spec)
		err := runs.CheckFields(d, spec)
		if err == nil {
			inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: runs.AdapterSpec(d, spec), Dir: t.TempDir(), Bin: s.bin,
				Home: t.TempDir(), Timeout: time.Minute, Files: runs.HostFiles{}}
			_, err = s.adapter.Command(inv)
		}
		var fe *runs.FieldError
		taken := slices.Contains(d.Fields, field) || runs.EnforcedByGateway(d, field)
		switch {
		case taken && err != nil:
			t.Errorf("%s is listed as supported, but Command refused it: %v", field, err)
		case !taken && (!errors.As(err, &fe) || !errors.Is(err, runs.ErrUnsupported) || fe.Field != field):
			t.Errorf("%s is not listed as supported, but Command gave %v, not unsupported_option naming it", field, err)
		}
	}
	for _, p := range []runs.Permission{runs.ReadOnly, runs.WorkspaceWrite, runs.Full} {
		if d.Permissions[p] == "" {
			t.Errorf("permission %s has no documented mapping", p)
		}
	}
}

func (s *suite) text(t *testing.T) {
	const answer = "Conformance answer."
	g := s.start(t, Scenario{Kind: Text, Text: answer}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Say the conformance answer."})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	if strings.TrimSpace(r.Result) != answer {
		t.Errorf("result = %q, want %q", r.Result, answer)
	}
	msgs := of(evs, runs.EventMessageCompleted)
	if len(msgs) == 0 || !strings.Contains(string(msgs[len(msgs)-1].Data.(json.RawMessage)), answer) {
		t.Errorf("no message.completed with the answer: %s", typesOf(evs))
	}
	for _, ev := range evs {
		if ev.Type == runs.EventAgentUnparsed {
			t.Errorf("agent.unparsed: %s", ev.Data)
		}
	}
	g.wantUsage(t, r)
	if last := evs[len(evs)-1]; last.Type != runs.EventRunCompleted {
		t.Errorf("last event %s", last.Type)
	}
}

func (s *suite) tool(t *testing.T) {
	const answer = "The file is written."
	g := s.start(t, Scenario{Kind: Tool, Command: "echo conformance > conformance.txt", Text: answer}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Write conformance to conformance.txt."})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	started, done := of(evs, runs.EventToolCallStarted), of(evs, runs.EventToolCallCompleted)
	if len(started) == 0 || len(done) == 0 {
		t.Fatalf("no tool call: %s", typesOf(evs))
	}
	var first, end struct {
		ID      string `json:"id"`
		IsError bool   `json:"is_error"`
	}
	_ = json.Unmarshal(started[0].Data.(json.RawMessage), &first)
	_ = json.Unmarshal(done[0].Data.(json.RawMessage), &end)
	if first.ID == "" || end.ID != first.ID || end.IsError || done[0].Seq < started[0].Seq {
		t.Errorf("tool call started %+v (seq %d), completed %+v (seq %d)", first, started[0].Seq, end, done[0].Seq)
	}
	var began struct {
		Cwd string `json:"cwd"`
	}
	if st := of(evs, runs.EventRunStarted); len(st) == 1 {
		_ = json.Unmarshal(st[0].Data.(json.RawMessage), &began)
	}
	dir := began.Cwd
	if b, err := os.ReadFile(filepath.Join(dir, "conformance.txt")); err != nil || strings.TrimSpace(string(b)) != "conformance" {
		t.Errorf("conformance.txt in %s = %q, %v", dir, b, err)
	}
	if strings.TrimSpace(r.Result) != answer {
		t.Errorf("result = %q, want %q", r.Result, answer)
	}
	g.wantUsage(t, r)
}

func (s *suite) failure(status int, class runs.Class) func(t *testing.T) {
	return func(t *testing.T) {
		bound := 30 * time.Second
		if slow, ok := s.kit.(SlowFailures); ok {
			bound = max(bound, slow.FailureBound(status))
		}
		g := s.start(t, Scenario{Kind: Failure, Status: status}, credentials)
		// The bound is on how long a failing API keeps the run going,
		// from the CLI's first request: its start before that is CPU
		// work, which a busy machine stretches.
		first := mocktest.WatchFirstRequest(t, g.backend.Requests)
		r := g.submit(t, runs.Spec{Prompt: "Say hi."})
		// The wait only catches a hang: it includes the CLI's start,
		// which a loaded machine stretches far (OpenCode took over 45 s
		// to its first request under a whole suite); the bound itself is
		// checked below, from the first request.
		r, evs := g.wait(t, r.ID, bound+2*time.Minute)
		if r.Status != runs.Failed || r.Error == nil || r.Error.Class != class || r.Error.Retryable != class.Retryable() {
			t.Fatalf("HTTP %d: status %s, error %+v, want failed %s (retryable %v); events %s",
				status, r.Status, r.Error, class, class.Retryable(), typesOf(evs))
		}
		if r.Error.Message == "" {
			t.Error("an error without a message")
		}
		if took := r.FinishedAt.Sub(first()); took > bound {
			t.Errorf("took %s from the first request: a failing model API must fail the run within %s", took, bound)
		}
		if g.backend.Requests() == 0 {
			t.Error("the mock got no request: the failure did not come from it")
		}
	}
}

func (s *suite) noCredentials(t *testing.T) {
	g := s.start(t, Scenario{Kind: Text, Text: "unreachable"}, noCredentials)
	r := g.submit(t, runs.Spec{Prompt: "Say hi."})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Failed || r.Error == nil || r.Error.Class != runs.NotAuthenticated || r.Error.Retryable {
		t.Fatalf("status %s, error %+v, want not_authenticated; events %s", r.Status, r.Error, typesOf(evs))
	}
	if r.Error.Hint == "" {
		t.Error("not_authenticated without a hint")
	}
	// No bound of its own beyond wait's: most of the run's time is the
	// CLI's start, which a busy machine stretches.
}

// longTool starts a run whose tool runs for a minute and waits until the
// tool's process runs; the run must not end before.
func (s *suite) longTool(t *testing.T, timeout int) (g *gateway, r runs.Run, marker string) {
	t.Helper()
	marker = "conformance-" + uuid.NewString()
	g = s.start(t, Scenario{Kind: LongTool, Marker: marker, Text: "done"}, credentials)
	r = g.submit(t, runs.Spec{Prompt: "Run the long command.", TimeoutSeconds: timeout})
	started := false
	deadline := time.Now().Add(quick)
	for {
		if !started {
			started = len(of(g.events(t, r.ID), runs.EventToolCallStarted)) > 0
		}
		if started && len(agenttest.ProcessesMatching(marker)) > 0 {
			return g, r, marker
		}
		now, err := g.store.GetRun(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if now.Status.Terminal() {
			t.Fatalf("the run ended %s (%+v) before its tool ran: %s", now.Status, now.Error, typesOf(g.events(t, r.ID)))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tool's process did not run within %s: %s", quick, typesOf(g.events(t, r.ID)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *suite) cancelMidTool(t *testing.T) {
	g, r, marker := s.longTool(t, 0)
	start := time.Now()
	if _, err := g.sup.Cancel(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	r, evs := g.wait(t, r.ID, stopWithin)
	if r.Status != runs.Cancelled || r.Error == nil || r.Error.Class != runs.ClassCancelled {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	if took := time.Since(start); took > stopWithin {
		t.Errorf("cancel took %s", took)
	}
	wantNoProcesses(t, r.ID, marker)
}

// timeoutMidTool lets the run's deadline strike while its tool runs. How
// long a CLI takes to reach its tool depends on how busy the machine is,
// so the deadline is struck once the tool's process runs, not timed from
// the start: the run then ends as a real timeout does.
func (s *suite) timeoutMidTool(t *testing.T) {
	g, r, marker := s.longTool(t, int(struckTimeout/time.Second))
	g.deadlines.Strike(r.ID)
	struck := time.Now()
	r, evs := g.wait(t, r.ID, stopWithin)
	if r.Status != runs.TimedOut || r.Error == nil || r.Error.Class != runs.Timeout || !r.Error.Retryable {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	if took := time.Since(struck); took > stopWithin {
		t.Errorf("the run ended %s after its deadline", took)
	}
	wantNoProcesses(t, r.ID, marker)
}

// hang strikes the run's deadline once the mock holds its request
// unanswered: a deadline before the request would not be about a server
// that never answers.
func (s *suite) hang(t *testing.T) {
	g := s.start(t, Scenario{Kind: Hang}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Say hi.", TimeoutSeconds: int(struckTimeout / time.Second)})
	g.waitRequest(t, r.ID)
	g.deadlines.Strike(r.ID)
	struck := time.Now()
	r, evs := g.wait(t, r.ID, stopWithin)
	if r.Status != runs.TimedOut || r.Error == nil || r.Error.Class != runs.Timeout {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	if took := time.Since(struck); took > stopWithin {
		t.Errorf("the run ended %s after its deadline", took)
	}
	wantNoProcesses(t, r.ID, fmt.Sprintf("no-marker-%s", r.ID))
}

// waitRequest waits until the mock has a request of run id, or fails if
// the run ends first.
func (g *gateway) waitRequest(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(quick)
	for g.backend.Requests() == 0 {
		now, err := g.store.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if now.Status.Terminal() {
			t.Fatalf("the run ended %s (%+v) before the mock got a request: %s", now.Status, now.Error, typesOf(g.events(t, id)))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request reached the mock within %s: %s", quick, typesOf(g.events(t, id)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
