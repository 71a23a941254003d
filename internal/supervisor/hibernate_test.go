package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/store"
	"github.com/agentgate/agentgate/internal/tenants"
)

// keeper is one replica of a cluster of supervisors over one store, each
// with its own disk (workspace root and homes), running the keeping sess
// agent, which can hibernate.
type keeper struct {
	sup         *Supervisor
	root, homes string
	stop        func()
}

// startKeeper starts replica name over st; change, if not nil, changes
// its config first.
func startKeeper(t *testing.T, st runs.Store, name string, change func(*Config)) *keeper {
	t.Helper()
	base := t.TempDir()
	if err := os.WriteFile(filepath.Join(base, "login"), []byte("login"), 0o600); err != nil {
		t.Fatal(err)
	}
	k := &keeper{root: t.TempDir(), homes: t.TempDir()}
	cfg := Config{Replica: name, WorkspaceRoot: k.root, Path: os.Getenv("PATH"), Reaper: os.Args[0], KillGrace: 2 * time.Second,
		ReplicaTTL: time.Second, TempRoot: t.TempDir(), Snapshots: st.(runs.Snapshots), SessionLocks: st.(runs.SessionLocks),
		HomesDir: k.homes, MaxConcurrent: 4}
	if change != nil {
		change(&cfg)
	}
	agent := &Agent{Adapter: keepingSessAdapter{}, Bin: os.Args[0], Home: base}
	k.sup = New(cfg, st, []*Agent{agent}, runstest.NopObserver{}, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	loopCtx, cancel := context.WithCancel(context.Background())
	if err := k.sup.Start(loopCtx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	k.stop = func() {
		if stopped {
			return
		}
		stopped = true
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		if err := k.sup.Shutdown(sctx); err != nil {
			t.Errorf("shut down replica %s: %v", name, err)
		}
		cancel()
		k.sup.loops.Wait()
	}
	t.Cleanup(k.stop)
	return k
}

// submit starts an interactive run of the sess agent on k that
// hibernates after 5 s idle, and waits for its first turn to end.
func (k *keeper) submit(t *testing.T, st runs.Store, spec runs.Spec) runs.Run {
	t.Helper()
	spec.Agent, spec.Interactive = "sess", true
	if spec.Prompt == "" {
		spec.Prompt = "first"
	}
	r, err := k.sup.Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	waitRecordOf(t, st, r.ID, "done with turn 1", func(r runs.Run) bool {
		return len(r.Turns) == 1 && r.Turns[0].Status == runs.Succeeded
	})
	return r
}

// waitAsleep waits until r is hibernated, and checks that the replica
// that put it to sleep holds nothing of it: no task, no process, no home.
func waitAsleep(t *testing.T, st runs.Store, k *keeper, id string) runs.Run {
	t.Helper()
	r := waitRecordOf(t, st, id, "hibernated", func(r runs.Run) bool { return r.Activity == runs.Hibernated })
	// The record says hibernated a moment before the replica lets the
	// task go: input meanwhile finds the task and waits for the sleep.
	for deadline := time.Now().Add(time.Minute); k.sup.task(id) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) { // a hang guard, not a target
			t.Fatalf("replica %s still holds a task of the hibernated run", k.sup.cfg.Replica)
		}
	}
	if pids, err := k.sup.tree.Find(id); err != nil || len(pids) > 0 {
		t.Errorf("processes of the hibernated run: %v (%v), want none", pids, err)
	}
	if _, err := os.Stat(filepath.Join(k.homes, id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the hibernated run's home is still there (%v)", err)
	}
	if r.HibernatedAt == nil || r.ClosesAt == nil || !r.ClosesAt.After(*r.HibernatedAt) {
		t.Errorf("hibernated record: hibernated_at %v, closes_at %v", r.HibernatedAt, r.ClosesAt)
	}
	return r
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("read %s: %v", path, err)
	}
	return string(b)
}

// An idle run hibernates on replica a and holds nothing there; a steer
// and an interrupt say it sleeps; a message sent to replica b wakes it on
// b, in b's own home and directory restored from the cluster, as the
// session's next turn; a close sent to a reaches it on b.
func TestAnIdleRunHibernatesAndWakesOnAnotherReplica(t *testing.T) {
	t.Parallel() // each waits seconds for its runs to sleep
	st := runstest.Store(t)
	a, b := startKeeper(t, st, "a", nil), startKeeper(t, st, "b", nil)
	r := a.submit(t, st, runs.Spec{HibernateAfterSeconds: 5, IdleTimeoutSeconds: 600})

	asleep := waitAsleep(t, st, a, r.ID)
	hib := eventData[runs.RunHibernatedData](t, waitEventsOf(t, st, r.ID, runs.EventRunHibernated), runs.EventRunHibernated)
	if hib.Turn != 1 || hib.Replica != "a" || hib.Reason != runs.HibernatedIdle || !hib.ClosesAt.Equal(*asleep.ClosesAt) {
		t.Fatalf("run.hibernated = %+v, record closes at %v", hib, asleep.ClosesAt)
	}
	if idle := asleep.ClosesAt.Sub(*asleep.Turns[0].FinishedAt); idle < 590*time.Second || idle > 610*time.Second {
		t.Errorf("the run closes %s after its last turn, want its idle timeout of 600s", idle)
	}
	ctx := context.Background()
	if _, err := b.sup.Input(ctx, r.ID, runs.Input{Kind: runs.InputMessage, Text: "hurry", Mode: runs.MessageSteer}); conflictCode(err) != runs.ConflictHibernated {
		t.Errorf("a steer to the hibernated run: %v, want %s", err, runs.ConflictHibernated)
	}
	if _, err := a.sup.Input(ctx, r.ID, runs.Input{Kind: runs.InputInterrupt}); conflictCode(err) != runs.ConflictHibernated {
		t.Errorf("an interrupt of the hibernated run: %v, want %s", err, runs.ConflictHibernated)
	}

	res, err := b.sup.Input(ctx, r.ID, runs.Input{Kind: runs.InputMessage, Text: "second"})
	if err != nil {
		t.Fatalf("a message to the hibernated run: %v", err)
	}
	woken := waitRecordOf(t, st, r.ID, "done with turn 2 on b", func(r runs.Run) bool {
		return len(r.Turns) == 2 && r.Turns[1].Status == runs.Succeeded && r.Activity == runs.Idle
	})
	if woken.Owner != "b" || woken.Turns[1].Turn != 2 || woken.Turns[1].MessageID != res.MessageID || woken.HibernatedAt != nil {
		t.Fatalf("the woken run: owner %s, turn %+v, hibernated_at %v; want b's turn 2 of message %s", woken.Owner, woken.Turns[1], woken.HibernatedAt, res.MessageID)
	}
	resumed := eventData[runs.RunResumedData](t, runstest.StoredEvents(t, st, r.ID), runs.EventRunResumed)
	if resumed.Replica != "b" || resumed.PreviousReplica != "a" || resumed.Turn != 1 || resumed.Reason != runs.ResumedWoken {
		t.Fatalf("run.resumed = %+v", resumed)
	}
	// The session and the directory b's CLI worked in are those turn 1
	// left on a, kept in the cluster, with turn 2 after them.
	want := "prompt:first\nprompt:second\n" // the woken CLI gets the message as its prompt
	if got := readFile(t, filepath.Join(b.homes, r.ID, "sessions", "sess-1")); got != want {
		t.Errorf("the session's file on b holds %q, want %q", got, want)
	}
	if got := readFile(t, filepath.Join(b.root, r.ID, "transcript.txt")); got != want {
		t.Errorf("the run's directory on b holds a transcript %q, want %q", got, want)
	}

	if _, err := a.sup.Input(ctx, r.ID, runs.Input{Kind: runs.InputClose}); err != nil {
		t.Fatalf("close through a: %v", err)
	}
	end := waitRecordOf(t, st, r.ID, "finished", func(r runs.Run) bool { return r.Status.Terminal() })
	if end.Status != runs.Succeeded || end.Activity != "" {
		t.Fatalf("the run ended %s (activity %q, %+v), want succeeded", end.Status, end.Activity, end.Error)
	}
}

// A hibernated run closed from another replica ends there without its
// CLI starting again: its status is that of its last turn.
func TestAHibernatedRunClosesWithoutWaking(t *testing.T) {
	t.Parallel() // each waits seconds for its runs to sleep
	st := runstest.Store(t)
	a, b := startKeeper(t, st, "a", nil), startKeeper(t, st, "b", nil)
	r := a.submit(t, st, runs.Spec{HibernateAfterSeconds: 5})
	waitAsleep(t, st, a, r.ID)

	if _, err := b.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputClose}); err != nil {
		t.Fatalf("close: %v", err)
	}
	end := waitRecordOf(t, st, r.ID, "finished", func(r runs.Run) bool { return r.Status.Terminal() })
	evs := runstest.StoredEvents(t, st, r.ID)
	if end.Status != runs.Succeeded || len(end.Turns) != 1 || countType(evs, runs.EventRunResumed) != 0 || countType(evs, runs.EventTurnStarted) != 1 {
		t.Fatalf("closed asleep: %s with %d turns, %d run.resumed, %d turn.started; want succeeded, 1 turn, not woken",
			end.Status, len(end.Turns), countType(evs, runs.EventRunResumed), countType(evs, runs.EventTurnStarted))
	}
	if evs[len(evs)-1].Type != runs.EventRunCompleted {
		t.Errorf("the last event is %s, want run.completed", evs[len(evs)-1].Type)
	}
}

// A cancel of a hibernated run ends it cancelled, by the canceller, or
// by nobody on a gateway without keys.
func TestAHibernatedRunIsCancelled(t *testing.T) {
	t.Parallel() // each waits seconds for its runs to sleep
	st := runstest.Store(t)
	a, b := startKeeper(t, st, "a", nil), startKeeper(t, st, "b", nil)
	for _, by := range []runs.Actor{{KeyID: "k9"}, {}} {
		r := a.submit(t, st, runs.Spec{HibernateAfterSeconds: 5})
		waitAsleep(t, st, a, r.ID)
		if _, err := b.sup.Cancel(runs.WithActor(context.Background(), by), r.ID); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		end := waitRecordOf(t, st, r.ID, "finished", func(r runs.Run) bool { return r.Status.Terminal() })
		if end.Status != runs.Cancelled || end.Error == nil || end.Error.Class != runs.ClassCancelled {
			t.Fatalf("the hibernated run cancelled by %+v ended %s (%+v)", by, end.Status, end.Error)
		}
		if got := end.CancelledBy; by.KeyID != "" && (got == nil || got.KeyID != by.KeyID) {
			t.Errorf("cancelled by %+v, want %s", got, by.KeyID)
		}
	}
}

// idle_timeout_seconds is how long a run stays open at all: a hibernated
// run is closed when it passes, by the replica that keeps its timer.
func TestAHibernatedRunClosesAtItsIdleTimeout(t *testing.T) {
	t.Parallel() // each waits seconds for its runs to sleep
	st := runstest.Store(t)
	a := startKeeper(t, st, "a", nil)
	r := a.submit(t, st, runs.Spec{HibernateAfterSeconds: 5, IdleTimeoutSeconds: 7})
	waitAsleep(t, st, a, r.ID)

	end := waitRecordOf(t, st, r.ID, "closed by its idle timeout", func(r runs.Run) bool { return r.Status.Terminal() })
	if end.Status != runs.Succeeded || end.FinishedAt.Before(end.Turns[0].FinishedAt.Add(7*time.Second)) {
		t.Fatalf("ended %s at %v, its turn at %v; want succeeded at least 7s later", end.Status, end.FinishedAt, end.Turns[0].FinishedAt)
	}
	if w := eventData[runs.WarningData](t, runstest.StoredEvents(t, st, r.ID), runs.EventWarning); w.Code != "idle_timeout" {
		t.Errorf("the warning is %+v, want idle_timeout", w)
	}
}

// A replica that shuts down puts its idle runs to sleep rather than
// ending them; the hibernated run's timer is adopted by a live replica,
// which closes it when its idle time is over.
func TestShutdownHibernatesAndAnotherReplicaKeepsTheTimer(t *testing.T) {
	t.Parallel() // each waits seconds for its runs to sleep
	// a is found dead two seconds after its last heartbeat.
	st := runstest.StoreWith(t, store.Options{ReplicaTTL: 2 * time.Second})
	a := startKeeper(t, st, "a", nil)
	r := a.submit(t, st, runs.Spec{IdleTimeoutSeconds: 10})
	waitRecordOf(t, st, r.ID, "idle", func(r runs.Run) bool { return r.Activity == runs.Idle })
	a.stop()

	asleep := waitAsleep(t, st, a, r.ID)
	hib := eventData[runs.RunHibernatedData](t, runstest.StoredEvents(t, st, r.ID), runs.EventRunHibernated)
	if hib.Reason != runs.HibernatedShutdown || asleep.Status != runs.Running || asleep.Owner != "a" {
		t.Fatalf("after a's shutdown: %+v, record %s owned by %s; want hibernated for shutdown, running, a's", hib, asleep.Status, asleep.Owner)
	}
	startKeeper(t, st, "b", nil)
	waitRecordOf(t, st, r.ID, "adopted by b", func(r runs.Run) bool { return r.Owner == "b" })
	end := waitRecordOf(t, st, r.ID, "closed by its idle timeout", func(r runs.Run) bool { return r.Status.Terminal() })
	if end.Status != runs.Succeeded || end.Owner != "b" {
		t.Fatalf("ended %s owned by %s, want succeeded, closed by b", end.Status, end.Owner)
	}
}

// Only an agent that resumes a session the gateway keeps hibernates; a
// run of another that asks is refused by name, and /v1/agents says which.
func TestOnlyAnAgentThatResumesHibernates(t *testing.T) {
	h := newSessionHarness(t, nil, "a")
	_, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "sess", Prompt: "x", Interactive: true, HibernateAfterSeconds: 5})
	var fe *runs.FieldError
	if !errors.As(err, &fe) || fe.Field != runs.FieldHibernateAfterSeconds || !errors.Is(err, runs.ErrUnsupported) {
		t.Fatalf("hibernate_after_seconds for an agent that cannot resume: %v, want unsupported naming the field", err)
	}
	if in := h.sup.Agents()[0].Interaction; in == nil || in.Hibernate {
		t.Errorf("the agent that cannot resume says interaction %+v", in)
	}
	k := startKeeper(t, runstest.Store(t), "k", func(c *Config) { c.MaxHibernateAfter = time.Minute })
	if in := k.sup.Agents()[0].Interaction; in == nil || !in.Hibernate {
		t.Errorf("the agent that resumes says interaction %+v, want hibernate", in)
	}
	for _, spec := range []runs.Spec{
		{HibernateAfterSeconds: 4, Interactive: true},
		{HibernateAfterSeconds: 61, Interactive: true},
		{HibernateAfterSeconds: 5},
		{IdleTimeoutSeconds: 25 * 3600, Interactive: true},
	} {
		spec.Agent, spec.Prompt = "sess", "x"
		_, err := k.sup.Submit(context.Background(), spec)
		if !errors.As(err, &fe) || !errors.Is(err, runs.ErrInvalid) ||
			!strings.Contains(fe.Field, "_seconds") {
			t.Errorf("spec %+v: %v, want invalid naming its field", spec, err)
		}
	}
}

// A quota refusal on the replica that wakes a run is the same refusal,
// with its Retry-After, on the replica that took the message.
func TestQuotaErrorCrossesReplicas(t *testing.T) {
	in := &tenants.QuotaError{Limit: tenants.LimitRunning, Message: "at the limit", RetryAfter: 5 * time.Second}
	_, err := decodeInputReply(encodeInputReply(runs.InputResult{}, fmt.Errorf("wrapped: %w", in)))
	var got *tenants.QuotaError
	if !errors.As(err, &got) || *got != *in {
		t.Fatalf("decoded %v (%T), want %+v", err, err, in)
	}
}

// A hibernated run leaves its tenant's running slot to another run, and
// waking it while that run holds the slot is refused by the quota.
func TestAHibernatedRunLeavesItsRunningSlot(t *testing.T) {
	t.Parallel() // each waits seconds for its runs to sleep
	st := runstest.Store(t)
	a := startKeeper(t, st, "a", func(c *Config) {
		c.Quotas = tenants.NewLedger(tenants.Quotas{MaxRunning: 1}, st.(tenants.Store), nil, nil)
	})
	ctx := runs.WithActor(context.Background(), runs.Actor{KeyID: "k1", Tenant: "acme"})
	first, err := a.sup.Submit(ctx, runs.Spec{Agent: "sess", Prompt: "first", Interactive: true, HibernateAfterSeconds: 5})
	if err != nil {
		t.Fatal(err)
	}
	waitAsleep(t, st, a, first.ID)

	second, err := a.sup.Submit(ctx, runs.Spec{Agent: "sess", Prompt: "other", Interactive: true})
	if err != nil {
		t.Fatalf("a run beside the hibernated one, at a running limit of 1: %v", err)
	}
	waitRecordOf(t, st, second.ID, "idle after its turn", func(r runs.Run) bool { return r.Activity == runs.Idle })
	_, err = a.sup.Input(ctx, first.ID, runs.Input{Kind: runs.InputMessage, Text: "wake"})
	var qe *tenants.QuotaError
	if !errors.As(err, &qe) || qe.Limit != tenants.LimitRunning {
		t.Fatalf("waking the first run while the second holds the slot: %v, want the running limit", err)
	}
	if r, _ := st.GetRun(context.Background(), first.ID); r.Activity != runs.Hibernated {
		t.Errorf("the refused wake left the run %s, want it still hibernated", r.Activity)
	}
}

// anonymousKeepingAdapter keeps sessions but its CLI never names one.
type anonymousKeepingAdapter struct{ keepingSessAdapter }

func (anonymousKeepingAdapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	return sessAdapter{}.NewDecoder(inv)
}

// A run whose CLI never named its session stays awake when its time to
// hibernate comes: woken, its CLI would begin another conversation.
func TestARunWithoutASessionIDStaysAwake(t *testing.T) {
	t.Parallel() // each waits seconds for its runs to sleep
	st := runstest.Store(t)
	k := startKeeper(t, st, "a", nil)
	k.sup.agents["sess"].Adapter = anonymousKeepingAdapter{}
	r := k.submit(t, st, runs.Spec{HibernateAfterSeconds: 3600})
	waitRecordOf(t, st, r.ID, "idle", func(r runs.Run) bool { return r.Activity == runs.Idle })
	tk := k.sup.task(r.ID)
	if tk == nil || tk.sess == nil {
		t.Fatal("the idle run has no session here")
	}
	tk.sess.sleepExpired() // as its timer would
	tk.sess.mu.Lock()
	asleep := tk.sess.hibernating
	tk.sess.mu.Unlock()
	if asleep {
		t.Fatal("a run without a session id began to hibernate")
	}
	h := &harness{sup: k.sup}
	h.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "still here"})
	waitRecordOf(t, st, r.ID, "done with turn 2 in the same process", func(r runs.Run) bool {
		return len(r.Turns) == 2 && r.Turns[1].Status == runs.Succeeded
	})
}

// A run that slept on a, woke and worked on b, and slept again, wakes on
// a in the directory b left, not in the one a kept from before: what a
// replica holds of a run is current only while nobody else ran it since.
func TestARunThatMovedAwayIsRestoredWhenItComesBack(t *testing.T) {
	t.Parallel() // each waits seconds for its runs to sleep
	st := runstest.Store(t)
	a, b := startKeeper(t, st, "a", nil), startKeeper(t, st, "b", nil)
	r := a.submit(t, st, runs.Spec{HibernateAfterSeconds: 5})
	waitAsleep(t, st, a, r.ID)
	for i, k := range []*keeper{b, a} {
		if _, err := k.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputMessage, Text: fmt.Sprintf("turn %d", i+2)}); err != nil {
			t.Fatalf("wake on %s: %v", k.sup.cfg.Replica, err)
		}
		waitRecordOf(t, st, r.ID, fmt.Sprintf("done with turn %d", i+2), func(r runs.Run) bool {
			return len(r.Turns) == i+2 && r.Turns[i+1].Status == runs.Succeeded
		})
		waitAsleep(t, st, k, r.ID)
	}
	want := "prompt:first\nprompt:turn 2\nprompt:turn 3\n"
	if got := readFile(t, filepath.Join(a.root, r.ID, "transcript.txt")); got != want {
		t.Errorf("back on a, the run's directory holds %q, want %q", got, want)
	}
}

// A wake takes a slot: a replica whose slots are all busy sends the
// message to the run's owner, which wakes it; an owner that is full too
// refuses it, the run still asleep.
func TestAWakeTakesASlot(t *testing.T) {
	t.Parallel() // each waits seconds for its runs to sleep
	st := runstest.Store(t)
	one := func(c *Config) { c.MaxConcurrent = 1 }
	b := startKeeper(t, st, "b", one)
	b.submit(t, st, runs.Spec{HibernateAfterSeconds: 3600, Prompt: "holds b"}) // b's one slot, awake
	a := startKeeper(t, st, "a", one)
	x := a.submit(t, st, runs.Spec{HibernateAfterSeconds: 5, Prompt: "x"})
	if r := waitAsleep(t, st, a, x.ID); r.Owner != "a" {
		t.Fatalf("x slept on %s, want a: b's one slot is busy", r.Owner)
	}

	if _, err := b.sup.Input(context.Background(), x.ID, runs.Input{Kind: runs.InputMessage, Text: "wake"}); err != nil {
		t.Fatalf("a message through the full replica b: %v", err)
	}
	woken := waitRecordOf(t, st, x.ID, "done with turn 2", func(r runs.Run) bool {
		return len(r.Turns) == 2 && r.Turns[1].Status == runs.Succeeded
	})
	if woken.Owner != "a" {
		t.Fatalf("woken on %s, want a, the owner with a free slot", woken.Owner)
	}
	waitAsleep(t, st, a, x.ID)

	z := a.submit(t, st, runs.Spec{HibernateAfterSeconds: 3600, Prompt: "holds a"}) // b is full: a takes it
	if r, _ := st.GetRun(context.Background(), z.ID); r.Owner != "a" {
		t.Fatalf("z runs on %s, want a", r.Owner)
	}
	for _, k := range []*keeper{a, b} {
		_, err := k.sup.Input(context.Background(), x.ID, runs.Input{Kind: runs.InputMessage, Text: "wake again"})
		if !errors.Is(err, runs.ErrCapacity) {
			t.Errorf("a message through %s, both replicas full: %v, want the capacity error", k.sup.cfg.Replica, err)
		}
	}
	if r, _ := st.GetRun(context.Background(), x.ID); r.Activity != runs.Hibernated || len(r.Turns) != 2 {
		t.Errorf("after the refused wakes the run is %s with %d turns, want hibernated with 2", r.Activity, len(r.Turns))
	}
}

// A sweep that read the live replicas before a replica started, and its
// runs after that replica claimed one, leaves the run alone: its owner's
// heartbeat, stored before its first claim, is looked up again.
func TestASweepLeavesTheRunsOfAReplicaThatJustStarted(t *testing.T) {
	st := runstest.Store(t)
	r := seedCutRun(t, st, st.(runs.Snapshots)) // owned by "dead", which now starts
	if err := st.Heartbeat(context.Background(), "dead"); err != nil {
		t.Fatal(err)
	}
	b := startKeeper(t, st, "b", func(c *Config) { c.ReplicaTTL = 0 }) // sweeps only when told
	if err := b.sup.sweepOrphans(context.Background(), map[string]bool{"b": true}); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetRun(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != "dead" || got.Status != runs.Running || got.Activity == runs.Hibernated {
		t.Fatalf("the run of a replica that just started was swept: owner %s, %s, %s", got.Owner, got.Status, got.Activity)
	}
}
