package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/unpack"
	"github.com/agentgate/agentgate/internal/workspace"
)

// keepingSessAdapter is sessAdapter whose CLI keeps session sess-1 in its
// home, as a HomeKeeper says, and whose events name that session.
type keepingSessAdapter struct{ sessAdapter }

func (keepingSessAdapter) Describe() runs.Description {
	d := sessAdapter{}.Describe()
	d.Fields = append(d.Fields, runs.FieldResumeSessionID)
	d.Interaction.ResumesSession = true
	return d
}
func (keepingSessAdapter) Command(inv runs.Invocation) (runs.Command, error) {
	return runs.Command{Env: []string{fakeAgentEnv + "=talk", "FAKE_SESSION=sess-1"}}, nil
}
func (keepingSessAdapter) BaseFiles() []string { return []string{"login"} }
func (keepingSessAdapter) SessionFiles(_ runs.CLIFiles, _, _, id string) ([]string, error) {
	return []string{"sessions/" + id}, nil
}
func (keepingSessAdapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	return &namingDecoder{sessDecoder: sessAdapter{}.NewDecoder(inv).(*sessDecoder), home: inv.Home}
}

// namingDecoder stamps its session on every event, and reports the home
// it runs in.
type namingDecoder struct {
	*sessDecoder
	home string
}

func (d *namingDecoder) Decode(line []byte) []runs.Event {
	evs := d.sessDecoder.Decode(line)
	for i := range evs {
		evs[i].SessionID = "sess-1"
	}
	return evs
}

// takeOverReplica starts a replica "b" beside the run seedCutRun left of
// a replica that died: b takes it over.
func takeOverReplica(t *testing.T) (st runs.Store, r runs.Run, h *harness, root, homes string) {
	t.Helper()
	st, root, homes = runstest.Store(t), t.TempDir(), t.TempDir()
	r = seedCutRun(t, st, st.(runs.Snapshots))
	return st, r, startTakingOver(t, st, root, homes), root, homes
}

// A run taken over from a replica that died between turns: its cut-off
// turn ends interrupted with its approval withdrawn, run.resumed says so,
// and the next message starts the CLI on the new replica as turn 3, in a
// home holding the session's files and a directory holding the run's, as
// the last finished turn left them.
func TestAnInteractiveRunIsTakenOverFromADeadReplica(t *testing.T) {
	st, r, h, root, homes := takeOverReplica(t)

	taken := waitRecordOf(t, st, r.ID, "taken over by b", func(r runs.Run) bool { return r.Owner == "b" && r.Activity == runs.Hibernated })
	if n := len(taken.Turns); n != 2 || taken.Turns[1].Status != runs.Cancelled || taken.Turns[1].Error == nil ||
		taken.Turns[1].Error.Class != runs.Interrupted || len(taken.PendingApprovals) != 0 {
		t.Fatalf("the cut-off turn, as recorded: %+v, pending %v", taken.Turns, taken.PendingApprovals)
	}
	// The record says taken over before run.resumed is stored: wait for
	// the event, which a loaded machine stores a moment later.
	evs := waitEventsOf(t, st, r.ID, runs.EventRunResumed)
	resumed := eventData[runs.RunResumedData](t, evs, runs.EventRunResumed)
	if resumed.Replica != "b" || resumed.PreviousReplica != "dead" || resumed.Turn != 1 || resumed.Reason != runs.ResumedReplicaLost {
		t.Fatalf("run.resumed = %+v", resumed)
	}
	if got := eventData[runs.ApprovalResolvedData](t, evs, runs.EventApprovalResolved); got.ID != "a1" || got.Reason != runs.ResolvedWithdrawn {
		t.Fatalf("approval.resolved = %+v", got)
	}

	res := h.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "again"})
	third := waitRecordOf(t, st, r.ID, "done with turn 3", func(r runs.Run) bool {
		n := len(r.Turns)
		return n == 3 && r.Turns[2].Status == runs.Succeeded && r.Activity == runs.Idle
	})
	if third.Turns[2].Turn != 3 || third.Turns[2].MessageID != res.MessageID {
		t.Fatalf("the woken turn is %+v, want turn 3 of message %s", third.Turns[2], res.MessageID)
	}
	home := filepath.Join(homes, r.ID)
	for name, want := range map[string]string{"login": "login", "sessions/sess-1": "turns 1 and 2\nprompt:again\n"} {
		if got, err := os.ReadFile(filepath.Join(home, filepath.FromSlash(name))); err != nil || string(got) != want {
			t.Errorf("the woken run's home has %s = %q (%v), want %q", name, got, err, want)
		}
	}
	if got, err := os.ReadFile(filepath.Join(root, r.ID, "notes.txt")); err != nil || string(got) != "from turn 1" {
		t.Errorf("the woken run's directory has notes.txt = %q (%v)", got, err)
	}
	if started := countType(runstest.StoredEvents(t, st, r.ID), runs.EventRunStarted); started != 1 {
		t.Errorf("the run has %d run.started, want the one of its start", started)
	}

	h.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	end := waitRecordOf(t, st, r.ID, "finished", func(r runs.Run) bool { return r.Status.Terminal() })
	if end.Status != runs.Succeeded {
		t.Fatalf("the run ended %s (%+v), want succeeded, the status of its last turn", end.Status, end.Error)
	}
}

// startTakingOver starts replica "b", which takes over what replica
// "dead" left in st, its workspaces under root and its homes under homes.
func startTakingOver(t *testing.T, st runs.Store, root, homes string) *harness {
	t.Helper()
	ctx := context.Background()
	base := t.TempDir()
	if err := os.WriteFile(filepath.Join(base, "login"), []byte("login"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Replica: "b", WorkspaceRoot: root, Path: os.Getenv("PATH"), Reaper: os.Args[0], KillGrace: 2 * time.Second,
		ReplicaTTL: time.Second, TempRoot: t.TempDir(), Snapshots: st.(runs.Snapshots), SessionLocks: st.(runs.SessionLocks), HomesDir: homes}
	agent := &Agent{Adapter: keepingSessAdapter{}, Bin: os.Args[0], Home: base}
	sup := New(cfg, st, []*Agent{agent}, runstest.NopObserver{}, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	loopCtx, cancel := context.WithCancel(ctx)
	if err := sup.Start(loopCtx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		defer scancel()
		_ = sup.Shutdown(sctx)
		cancel()
		sup.loops.Wait()
	})
	return &harness{sup: sup, root: root}
}

// A run taken over sleeps: a steer, with no turn to add to, is a 409
// run_hibernated, and a queued message wakes it as its next turn.
func TestASteerToARunTakenOverSaysItSleeps(t *testing.T) {
	st := runstest.Store(t)
	r := seedCutRun(t, st, st.(runs.Snapshots))
	h := startTakingOver(t, st, t.TempDir(), t.TempDir())
	waitRecordOf(t, st, r.ID, "taken over by b", func(r runs.Run) bool { return r.Owner == "b" && r.Activity == runs.Hibernated })

	_, err := h.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputMessage, Text: "again", Mode: runs.MessageSteer})
	var ce *runs.ConflictError
	if !errors.As(err, &ce) || ce.Code != runs.ConflictHibernated {
		t.Fatalf("a steer to the hibernated run: %v, want a conflict %s", err, runs.ConflictHibernated)
	}
	res := h.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "again"})
	third := waitRecordOf(t, st, r.ID, "done with turn 3", func(r runs.Run) bool {
		n := len(r.Turns)
		return n == 3 && r.Turns[2].Status != "" && r.Activity == runs.Idle
	})
	if got := third.Turns[2]; got.Turn != 3 || got.MessageID != res.MessageID || got.Status != runs.Succeeded {
		t.Fatalf("the woken turn is %+v, want turn 3 of message %s, succeeded", got, res.MessageID)
	}
}

// lastEventFailsOnce is a store whose first read of a run's last event
// fails, as a store does while its cluster elects a leader.
type lastEventFailsOnce struct {
	runs.Store
	runs.Snapshots
	runs.SessionLocks
	failed atomic.Bool
}

func (s *lastEventFailsOnce) LastEvent(ctx context.Context, id string) (runs.StoredEvent, error) {
	if s.failed.CompareAndSwap(false, true) {
		return runs.StoredEvent{}, errors.New("no leader")
	}
	return s.Store.LastEvent(ctx, id)
}

// A replica that cannot read the last event of a run it would take over
// leaves it for its next sweep: its events go on after the dead
// replica's, none of them in place of one already stored.
func TestATakeOverWaitsForTheRunsLastEvent(t *testing.T) {
	inner := runstest.Store(t)
	st := &lastEventFailsOnce{Store: inner, Snapshots: inner.(runs.Snapshots), SessionLocks: inner.(runs.SessionLocks)}
	r := seedCutRun(t, st, st)
	startTakingOver(t, st, t.TempDir(), t.TempDir())
	waitRecordOf(t, st, r.ID, "taken over by b", func(r runs.Run) bool { return r.Owner == "b" && r.Activity == runs.Hibernated })

	evs := runstest.StoredEvents(t, inner, r.ID)
	var types []runs.EventType
	for i, e := range evs {
		types = append(types, e.Type)
		if e.Seq != uint64(i+1) {
			t.Fatalf("stored events %v: position %d holds seq %d", types, i+1, e.Seq)
		}
	}
	if countType(evs, runs.EventRunResumed) != 1 || countType(evs, runs.EventTurnStarted) != 2 || countType(evs, runs.EventRunHibernated) != 1 {
		t.Fatalf("stored events %v: want the dead replica's 4 and then the takeover's, with one run.resumed", types)
	}
}

// seedCutRun stores what a replica "dead" left of an interactive run it
// was running when it died: turn 1 finished, and kept its directory and
// its session's files; turn 2 was cut off waiting for an approval.
func seedCutRun(t *testing.T, st runs.Store, snaps runs.Snapshots) runs.Run {
	t.Helper()
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7()).String()
	now := time.Now().UTC()
	r := runs.Run{ID: id, Agent: "sess", Status: runs.Running, Owner: "dead", CreatedAt: now, StartedAt: &now,
		SessionID: "sess-1", Interactive: true, Activity: runs.AwaitingApproval,
		Spec: runs.Spec{Agent: "sess", Prompt: "first", Interactive: true, Cwd: id, WorkDir: id, Permission: runs.WorkspaceWrite},
		Turns: []runs.Turn{
			{Turn: 1, MessageID: "m1", StartedAt: now, FinishedAt: &now, Status: runs.Succeeded},
			{Turn: 2, MessageID: "m2", StartedAt: now},
		},
		PendingApprovals: []runs.Approval{{ID: "a1", Tool: "shell", Options: []runs.Decision{runs.Allow, runs.Deny}}},
	}
	if err := st.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	var batch []runs.StoredEvent
	for i, ev := range []runs.Event{
		runs.NewEvent(runs.EventRunStarted, runs.RunStartedData{Prompt: "first", Permission: runs.WorkspaceWrite, Cwd: id}),
		runs.NewEvent(runs.EventTurnStarted, runs.TurnStartedData{Turn: 1, MessageID: "m1", Text: "first"}),
		runs.NewEvent(runs.EventTurnCompleted, runs.TurnCompletedData{Turn: 1, Status: runs.Succeeded}),
		runs.NewEvent(runs.EventTurnStarted, runs.TurnStartedData{Turn: 2, MessageID: "m2", Text: "ask"}),
	} {
		ev.V, ev.RunID, ev.Seq, ev.Time, ev.Agent = runs.EnvelopeVersion, id, uint64(i+1), now, "sess"
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, runs.StoredEvent{Seq: ev.Seq, Type: ev.Type, JSON: b})
	}
	if err := st.AppendEvents(ctx, id, batch); err != nil {
		t.Fatal(err)
	}
	ws := workspace.NewStore(snaps, t.TempDir(), unpack.Limits{})
	dir, home := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("from turn 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "sessions", "sess-1"), []byte("turns 1 and 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.SaveDir(ctx, workspaceKey(r), dir, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.SavePaths(ctx, sessionKey("", "sess", "sess-1"), home, []string{"sessions/sess-1"}, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.SetSession(ctx, "sess", "sess-1", runs.SessionRecord{RunID: id, WorkDir: id, Cwd: id}); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitRecordOf waits until the run's stored record satisfies ok.
func waitRecordOf(t *testing.T, st runs.Store, id, what string, ok func(runs.Run) bool) runs.Run {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a hang guard: the run's events say when it is done
	for time.Now().Before(deadline) {
		r, err := st.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(r) {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	r, _ := st.GetRun(context.Background(), id)
	t.Fatalf("run %s: never %s; record %+v", id, what, r)
	return runs.Run{}
}

// waitEventsOf returns the run's stored events once one of type typ is
// among them.
func waitEventsOf(t *testing.T, st runs.Store, id string, typ runs.EventType) []runs.StoredEvent {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a hang guard, not a target
	for {
		evs := runstest.StoredEvents(t, st, id)
		if countType(evs, typ) > 0 || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countType(evs []runs.StoredEvent, typ runs.EventType) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// A cancel asked for on another replica reaches a hibernated run here,
// and ends it cancelled at once.
func TestAHibernatedRunIsCancelledFromAnotherReplica(t *testing.T) {
	st, r, _, _, _ := takeOverReplica(t)
	waitRecordOf(t, st, r.ID, "taken over by b", func(r runs.Run) bool { return r.Owner == "b" && r.Activity == runs.Hibernated })
	if err := st.RequestCancel(context.Background(), r.ID, runs.Actor{KeyID: "k1"}); err != nil {
		t.Fatal(err)
	}
	end := waitRecordOf(t, st, r.ID, "finished", func(r runs.Run) bool { return r.Status.Terminal() })
	if end.Status != runs.Cancelled || end.CancelledBy == nil || end.CancelledBy.KeyID != "k1" {
		t.Fatalf("the hibernated run cancelled from elsewhere ended %s, cancelled by %+v; want cancelled by k1", end.Status, end.CancelledBy)
	}
}

// A replica that cannot enforce a run's network policy does not take the
// run over: woken there, it would run on the host's network.
func TestNoTakeOverOfAPolicyThisReplicaCannotEnforce(t *testing.T) {
	st := runstest.Store(t)
	r := seedCutRun(t, st, st.(runs.Snapshots))
	cfg := Config{Replica: "b", WorkspaceRoot: t.TempDir(), TempRoot: t.TempDir(), Snapshots: st.(runs.Snapshots), HomesDir: t.TempDir()}
	agent := &Agent{Adapter: keepingSessAdapter{}, Bin: os.Args[0], Home: t.TempDir()}
	sup := New(cfg, st, []*Agent{agent}, runstest.NopObserver{}, zaptest.NewLogger(t))
	agent.info.Installed = true // as probed
	if !sup.canTakeOver(context.Background(), r) {
		t.Fatal("the run under network open is not taken over: the test's replica cannot take any")
	}
	r.Spec.Network = runs.NetworkModel
	if sup.canTakeOver(context.Background(), r) {
		t.Error("a replica without egress takes over a run under network model")
	}
}
