package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/proctree/proctreetest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
)

// Targets of hibernation: what a sleeping conversation may cost the
// gateway that keeps its timer, and how much slower than a live session's
// a woken turn may answer, besides starting its CLI again.
const (
	maxBytesPerHibernatedRun = 64 << 10
)

// sleepyAdapter is keepingSessAdapter with a session of each run's own,
// so that runs resume their own sessions and none waits for another's
// session lock.
type sleepyAdapter struct{ keepingSessAdapter }

func (sleepyAdapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	id := inv.Spec.ResumeSessionID
	if id == "" {
		id = "sess-" + inv.RunID
	}
	return &ownSessionDecoder{sessDecoder: sessAdapter{}.NewDecoder(inv).(*sessDecoder), id: id}
}

// ownSessionDecoder stamps session id on every event.
type ownSessionDecoder struct {
	*sessDecoder
	id string
}

func (d *ownSessionDecoder) Decode(line []byte) []runs.Event {
	evs := d.sessDecoder.Decode(line)
	for i := range evs {
		evs[i].SessionID = d.id
	}
	return evs
}

// sleepWatch is an Observer that says when runs hibernate or finish, and
// when the first message.completed and the turn.completed of a turn it
// was armed for come. Its sends never block: the supervisor calls it with
// a run's lock held.
type sleepWatch struct {
	runstest.NopObserver
	hibernated chan struct{}
	finished   chan runs.State

	mu        sync.Mutex
	armed     bool
	firstSeen bool
	first     chan time.Time
	turnEnded chan struct{}
}

func newSleepWatch(n int) *sleepWatch {
	return &sleepWatch{hibernated: make(chan struct{}, n), finished: make(chan runs.State, n),
		first: make(chan time.Time, 1), turnEnded: make(chan struct{}, 1)}
}

func (w *sleepWatch) RunHibernated(string) {
	select {
	case w.hibernated <- struct{}{}:
	default:
	}
}

func (w *sleepWatch) RunFinished(_, _ string, st runs.State, _ runs.Class, _ float64, _ runs.Usage, _ *float64) {
	select {
	case w.finished <- st:
	default:
	}
}

func (w *sleepWatch) Event(_ string, typ runs.EventType) {
	at := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed {
		return
	}
	switch typ {
	case runs.EventMessageCompleted:
		if !w.firstSeen {
			w.firstSeen = true
			w.first <- at
		}
	case runs.EventTurnCompleted:
		w.armed = false
		w.turnEnded <- struct{}{}
	}
}

// arm watches the next turn: one turn at a time.
func (w *sleepWatch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed, w.firstSeen = true, false
}

// sleepyGateway is one supervisor over an embedded store that keeps its
// runs' homes and directories in the cluster, so that its interactive
// runs hibernate, its agents under reaper.
type sleepyGateway struct {
	sup   *Supervisor
	store runs.Store
	watch *sleepWatch
}

func newSleepyGateway(tb testing.TB, watch *sleepWatch, slots int, reaper string) *sleepyGateway {
	tb.Helper()
	st := runstest.Store(tb)
	base := tb.TempDir()
	if err := os.WriteFile(filepath.Join(base, "login"), []byte("login"), 0o600); err != nil {
		tb.Fatal(err)
	}
	cfg := Config{Replica: "r1", WorkspaceRoot: tb.TempDir(), Path: os.Getenv("PATH"), Reaper: reaper,
		KillGrace: 2 * time.Second, TempRoot: tb.TempDir(), MaxConcurrent: slots,
		Snapshots: st.(runs.Snapshots), SessionLocks: st.(runs.SessionLocks), HomesDir: tb.TempDir()}
	agent := &Agent{Adapter: sleepyAdapter{}, Bin: os.Args[0], Home: base}
	sup := New(cfg, st, []*Agent{agent}, watch, zaptest.NewLogger(tb, zaptest.Level(zap.ErrorLevel)))
	ctx, cancel := context.WithCancel(context.Background())
	if err := sup.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
		defer scancel()
		_ = sup.Shutdown(sctx)
		cancel()
		sup.loops.Wait()
	})
	return &sleepyGateway{sup: sup, store: st, watch: watch}
}

// submit starts an interactive run whose first turn says hello.
func (g *sleepyGateway) submit(tb testing.TB, hibernateAfterSeconds int) runs.Run {
	tb.Helper()
	r, err := g.sup.Submit(context.Background(), runs.Spec{Agent: "sess", Prompt: "hello", Interactive: true,
		HibernateAfterSeconds: hibernateAfterSeconds})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// hibernateRuns submits n runs that hibernate 5 s after their first turn,
// at most inFlight of them awake at once, and returns their ids once all
// sleep. A run that finishes instead fails the benchmark.
func (g *sleepyGateway) hibernateRuns(tb testing.TB, n, inFlight int) []string {
	tb.Helper()
	ids := make([]string, 0, n)
	asleep := 0
	waitOne := func() {
		select {
		case <-g.watch.hibernated:
			asleep++
		case st := <-g.watch.finished:
			tb.Fatalf("a run finished %s instead of hibernating (%d of %d asleep)", st, asleep, n)
		case <-time.After(2 * time.Minute): // a hang guard: each run sleeps 5 s after its turn
			tb.Fatalf("no run hibernated for 2 minutes (%d of %d asleep)", asleep, n)
		}
	}
	for range n {
		if len(ids)-asleep >= inFlight {
			waitOne()
		}
		ids = append(ids, g.submit(tb, int(runs.MinHibernateAfter/time.Second)).ID)
	}
	for asleep < n {
		waitOne()
	}
	return ids
}

// checkAsleep fails tb unless every run of ids is recorded hibernated,
// has a close timer here, and has neither a task nor a process left.
func (g *sleepyGateway) checkAsleep(tb testing.TB, ids []string) {
	tb.Helper()
	for _, id := range ids {
		r, err := g.store.GetRun(context.Background(), id)
		if err != nil {
			tb.Fatal(err)
		}
		if r.Activity != runs.Hibernated || r.HibernatedAt == nil || r.ClosesAt == nil || len(r.Turns) != 1 || r.Turns[0].Status != runs.Succeeded {
			tb.Fatalf("run %s is recorded %s (activity %s, turns %+v), want hibernated after its first turn", id, r.Status, r.Activity, r.Turns)
		}
	}
	// A run is recorded hibernated a moment before its task leaves.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		held := g.heldTasks(ids)
		if len(held) == 0 {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the supervisor still holds tasks of %d hibernated runs, such as %s", len(held), held[0])
		}
	}
	g.sup.mu.Lock()
	timers := len(g.sup.sleepers)
	g.sup.mu.Unlock()
	if timers < len(ids) {
		tb.Fatalf("%d close timers for %d hibernated runs", timers, len(ids))
	}
	procs, err := proctree.New().FindAny()
	if err != nil {
		tb.Fatal(err)
	}
	for _, id := range ids {
		if pids := procs[id]; len(pids) > 0 {
			tb.Fatalf("hibernated run %s still has processes %v", id, pids)
		}
	}
}

// heldTasks are the runs of ids the supervisor holds a task for.
func (g *sleepyGateway) heldTasks(ids []string) []string {
	g.sup.mu.Lock()
	defer g.sup.mu.Unlock()
	var held []string
	for _, id := range ids {
		if g.sup.tasks[id] != nil {
			held = append(held, id)
		}
	}
	return held
}

// firstEvent sends text to run id and returns how long its turn's first
// event from the CLI (a message.completed) took to come, once the turn
// ended.
func (g *sleepyGateway) firstEvent(tb testing.TB, id, text string) time.Duration {
	tb.Helper()
	g.watch.arm()
	start := time.Now()
	if _, err := g.sup.Input(context.Background(), id, runs.Input{Kind: runs.InputMessage, Text: text}); err != nil {
		tb.Fatalf("message to %s: %v", id, err)
	}
	guard := time.After(time.Minute) // a hang guard, not a target
	var first time.Time
	select {
	case first = <-g.watch.first:
	case <-guard:
		tb.Fatalf("run %s: no message.completed within a minute of a message", id)
	}
	select {
	case <-g.watch.turnEnded:
	case <-guard:
		tb.Fatalf("run %s: its turn did not end within a minute", id)
	}
	return first.Sub(start)
}

// close closes run id and waits until it finished: nothing of it runs
// while the next turn is timed.
func (g *sleepyGateway) close(tb testing.TB, id string) {
	tb.Helper()
	if _, err := g.sup.Input(context.Background(), id, runs.Input{Kind: runs.InputClose}); err != nil {
		tb.Fatalf("close %s: %v", id, err)
	}
	g.waitRecord(tb, id, "finished after its close", func(r runs.Run) bool { return r.Status.Terminal() })
	// run.completed is stored a moment after the record.
	for deadline := time.Now().Add(time.Minute); !runstest.Completed(tb, g.store, id); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("run %s: no run.completed a minute after it finished", id)
		}
	}
}

// waitRecord waits until run id's record satisfies ok.
func (g *sleepyGateway) waitRecord(tb testing.TB, id, what string, ok func(runs.Run) bool) runs.Run {
	tb.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) { // a hang guard
		r, err := g.store.GetRun(context.Background(), id)
		if err != nil {
			tb.Fatal(err)
		}
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("run %s never %s: %+v", id, what, r)
		}
	}
}

// idleAfter reports whether a run waits for a message after n turns, the
// last succeeded.
func idleAfter(n int) func(runs.Run) bool {
	return func(r runs.Run) bool {
		return r.Activity == runs.Idle && len(r.Turns) == n && r.Turns[n-1].Status == runs.Succeeded
	}
}

// wakePrepared is, for each woken run of ids, the time from its
// run.resumed to the turn.started of its woken turn, as stamped on the
// events: what the gateway did before it started the CLI again.
func (g *sleepyGateway) wakePrepared(tb testing.TB, ids []string) []time.Duration {
	tb.Helper()
	var out []time.Duration
	for _, id := range ids {
		var resumed time.Time
		for _, e := range runstest.StoredEvents(tb, g.store, id) {
			var env runs.Event
			if err := json.Unmarshal(e.JSON, &env); err != nil {
				tb.Fatal(err)
			}
			if e.Type == runs.EventRunResumed {
				resumed = env.Time
			}
			if e.Type == runs.EventTurnStarted && !resumed.IsZero() {
				out = append(out, env.Time.Sub(resumed))
				break
			}
		}
	}
	if len(out) != len(ids) {
		tb.Fatalf("%d of %d woken runs have a run.resumed then a turn.started", len(out), len(ids))
	}
	return out
}

// cliStart is how long the CLI (the fake agent, this test binary) takes
// from its exec to its first line of output.
func cliStart(tb testing.TB) time.Duration {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{fakeAgentEnv + "=hello"}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	r := bufio.NewReader(out)
	if _, err := r.ReadString('\n'); err != nil {
		tb.Fatalf("the fake CLI's first line: %v", err)
	}
	took := time.Since(start)
	_, _ = r.ReadString(0)
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("the fake CLI: %v", err)
	}
	return took
}

// liveHeap is the bytes of heap the process holds live, after a
// collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // the second frees what the first's finalizers released
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkHibernation puts 1,000 interactive runs (100 with -short) to
// sleep on one gateway, after their first turn, and measures:
//
//   - B/hibernated-run: the gateway's live heap per hibernated run, all
//     of them asleep, against the heap before they were created (the
//     embedded store included, as a gateway with its own store holds it);
//     the target is at most 64 KiB;
//   - woken-first-event-ms: the median time from a message to a
//     hibernated run to the first event its CLI, started again, produces;
//   - live-first-event-ms: the same for a message to a live idle session,
//     timed in turns alternating with the woken ones, the baseline;
//   - cli-start-ms: the median time the fake CLI takes from its exec to
//     its first line, alternating with both;
//   - woken-prepare-ms: the median time from a woken run's run.resumed to
//     its turn.started, what waking costs before the CLI starts (its
//     directory and home restored);
//
// and fails when a hibernated run holds more than 64 KiB. The fake CLI
// answers a live turn in microseconds, with no model behind it, so the
// wake's fixed cost (the claim, the restores) cannot be held here to a
// ratio of a live turn: cmd/gateway's BenchmarkClaudeWake holds a real
// CLI's woken turn to 1.5 × its live turn plus its start. It runs the
// scenario once, whatever b.N: its runs each wait 5 s idle before they
// sleep.
func BenchmarkHibernation(b *testing.B) {
	n, inFlight, samples := 1000, 100, 25
	if testing.Short() {
		n, samples = 100, 10
	}
	watch := newSleepWatch(n + samples)
	// The reaper the gateway ships, the light one: the test binary as
	// reaper would add the Go runtime's start to every wake.
	g := newSleepyGateway(b, watch, inFlight+2, proctreetest.BuildReaper(b))
	live := g.submit(b, 0).ID // the operator's default: it never hibernates
	g.waitRecord(b, live, "idle after its first turn", idleAfter(1))
	cliStart(b) // the binary in the page cache before anything is timed

	before := liveHeap()
	ids := g.hibernateRuns(b, n, inFlight)
	g.checkAsleep(b, ids)
	perRun := (float64(liveHeap()) - float64(before)) / float64(n)

	var woken, baseline, starts []time.Duration
	for i := range samples {
		starts = append(starts, cliStart(b))
		baseline = append(baseline, g.firstEvent(b, live, fmt.Sprintf("live %d", i)))
		woken = append(woken, g.firstEvent(b, ids[i], fmt.Sprintf("wake %d", i)))
		g.close(b, ids[i])
	}

	w, l, c := median(woken), median(baseline), median(starts)
	p := median(g.wakePrepared(b, ids[:samples]))
	b.ReportMetric(0, "ns/op") // one scenario, not an op repeated b.N times
	b.ReportMetric(perRun, "B/hibernated-run")
	b.ReportMetric(ms(w), "woken-first-event-ms")
	b.ReportMetric(ms(l), "live-first-event-ms")
	b.ReportMetric(ms(c), "cli-start-ms")
	b.ReportMetric(ms(p), "woken-prepare-ms")
	b.Logf("%d runs asleep: %.0f B of heap each; first event of a woken turn %s (%s of it before its CLI starts), of a live turn %s; the CLI starts in %s",
		n, perRun, w, p, l, c)
	if perRun > maxBytesPerHibernatedRun {
		b.Errorf("%.0f bytes of heap per hibernated run, over the %d-byte target", perRun, maxBytesPerHibernatedRun)
	}
}

// Runs that hibernate leave nothing running on the gateway: each is
// recorded hibernated after its first turn, with a close timer, no task
// and no process; and a message wakes one as its next turn.
func TestHibernatedRunsHoldNoTaskAndNoProcess(t *testing.T) {
	const n = 3
	g := newSleepyGateway(t, newSleepWatch(n+1), n, os.Args[0])
	ids := g.hibernateRuns(t, n, n)
	g.checkAsleep(t, ids)

	if took := g.firstEvent(t, ids[0], "wake"); took <= 0 {
		t.Fatalf("the woken turn's first event came %s after its message", took)
	}
	r := g.waitRecord(t, ids[0], "idle after its woken turn", idleAfter(2))
	if r.Turns[1].Turn != 2 || r.Turns[1].MessageID == "" {
		t.Fatalf("the woken turn is %+v, want turn 2 of the message", r.Turns[1])
	}
	if held := g.heldTasks(ids[:1]); len(held) != 1 {
		t.Fatalf("the supervisor holds no task for the woken run %s", ids[0])
	}
	g.close(t, ids[0])
}
