package conformance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/supervisor"
)

// hibernateAfter is the hibernate_after_seconds of the suite's runs: the
// least a run may ask, so that the case waits as little as it can.
const hibernateAfter = runs.MinHibernateAfter

// hibernatedFile is what the first turn's tool leaves in the run's
// directory, one line per time it runs.
const hibernatedFile = "hibernated.txt"

// hibernateCases are the suite's cases of runs that hibernate: for an
// agent whose runs can (a HomeKeeper that resumes sessions), one run put
// to sleep and woken with its real CLI; for one whose runs cannot, the
// refusal of hibernate_after_seconds by name.
func (s *suite) hibernateCases() []suiteCase {
	if s.hibernates() {
		return []suiteCase{{"hibernate_and_wake", s.hibernateAndWake}}
	}
	return []suiteCase{{"hibernate_refused", s.hibernateRefused}}
}

// hibernates reports whether the agent's runs hibernate on a gateway that
// keeps homes and sessions in the cluster, as the supervisor decides.
func (s *suite) hibernates() bool {
	_, keeps := s.adapter.(runs.HomeKeeper)
	d := s.adapter.Describe()
	return keeps && d.Interaction.ResumesSession && slices.Contains(d.Fields, runs.FieldResumeSessionID)
}

// sessionsInCluster gives the gateway CLI homes of their own and keeps
// their sessions and the runs' directories in its store, as a gateway
// whose runs hibernate does. homes, when not nil, is set to where the
// homes are.
func sessionsInCluster(t *testing.T, homes *string) func(*supervisor.Config, runs.Store) {
	return func(cfg *supervisor.Config, st runs.Store) {
		// Under the data directory, which the sandbox hides, as the
		// gateway keeps them.
		cfg.HomesDir = filepath.Join(filepath.Dir(cfg.ArtifactsDir), "homes")
		if homes != nil {
			*homes = cfg.HomesDir
		}
		cfg.Snapshots, _ = st.(runs.Snapshots)
		cfg.SessionLocks, _ = st.(runs.SessionLocks)
		if cfg.Snapshots == nil || cfg.SessionLocks == nil {
			t.Fatalf("the store %T keeps no snapshots or session locks", st)
		}
	}
}

// hibernateRefused: on a gateway that keeps sessions in the cluster, an
// agent that cannot resume them says its runs do not hibernate and
// refuses hibernate_after_seconds by name.
func (s *suite) hibernateRefused(t *testing.T) {
	g := s.start(t, Scenario{Kind: Text, Text: "hi"}, credentials, sessionsInCluster(t, nil))
	if in := g.sup.Agents()[0].Interaction; in != nil && in.Hibernate {
		t.Errorf("interaction.hibernate is true for an agent that cannot resume a kept session")
	}
	_, err := g.sup.Submit(context.Background(), runs.Spec{Agent: s.adapter.Name(), Prompt: "hi", Interactive: true,
		Permission: runs.WorkspaceWrite, HibernateAfterSeconds: int(hibernateAfter / time.Second)})
	var fe *runs.FieldError
	if !errors.As(err, &fe) || fe.Field != runs.FieldHibernateAfterSeconds || !errors.Is(err, runs.ErrUnsupported) {
		t.Errorf("hibernate_after_seconds: %v, want unsupported_option naming it", err)
	}
}

// hibernateAndWake: an interactive run whose first turn left a file in its
// directory falls asleep once idle: its CLI and every process of it
// exit, nothing of it stays in the supervisor but the timer that closes
// it, and a steer or an interrupt is refused run_hibernated. A message
// wakes it: its CLI starts again resuming the session, so that the model
// sees the first turn in the second turn's request, in the directory the
// first turn left. Close then ends it succeeded.
//
// The model's answer is a token of the run's own: the first turn's
// requests cannot hold it (it is the answer to the last of them), so a
// request that does is one that carries the first turn back to the model.
func (s *suite) hibernateAndWake(t *testing.T) {
	answer := "ANSWER-" + uuid.NewString()
	line := "TURN1-" + uuid.NewString()
	g := s.start(t, Scenario{Kind: Tool, Command: "echo " + line + " >> " + hibernatedFile, Text: answer}, credentials, sessionsInCluster(t, nil))
	info := g.sup.Agents()[0]
	if info.Interaction == nil || !info.Interaction.Hibernate {
		t.Fatalf("interaction = %+v: an agent whose adapter keeps homes and resumes sessions must hibernate on a gateway that keeps them", info.Interaction)
	}
	r := g.submit(t, runs.Spec{Prompt: "Append " + line + " to " + hibernatedFile + ".", Interactive: true,
		HibernateAfterSeconds: int(hibernateAfter / time.Second)})
	if one := g.turnOfLiveRun(t, r.ID, 1); one.Status != runs.Succeeded {
		t.Fatalf("turn 1 = %+v; events %s", one, typesOf(g.events(t, r.ID)))
	}
	dir := g.cwdOf(t, r.ID)
	if got := linesOf(t, filepath.Join(dir, hibernatedFile)); len(got) != 1 || got[0] != line {
		t.Fatalf("turn 1 left %s = %q in %s, want the one line %s", hibernatedFile, got, dir, line)
	}

	slept := g.waitHibernated(t, r.ID)
	g.wantAsleep(t, r.ID)
	if g.backend.Seen(answer) {
		t.Fatal("the model's answer reached the mock before the run was woken: the case cannot tell a resumed conversation")
	}
	s.refusedWhileAsleep(t, g, r.ID)

	before := len(g.events(t, r.ID))
	msg := g.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "What did you append, and where?"})
	if msg.MessageID == "" {
		t.Fatalf("the waking message got no message_id: %+v", msg)
	}
	g.wantWoken(t, r.ID, slept)
	if two := g.turnOfLiveRun(t, r.ID, 2); two.Status != runs.Succeeded {
		t.Fatalf("turn 2, after the wake = %+v; events %s", two, typesOf(g.events(t, r.ID)))
	}
	if !g.backend.Seen(answer) {
		t.Errorf("no request of the woken turn carried the first turn's answer %s: the CLI did not resume the conversation", answer)
	}
	// A tool the woken turn ran again appends a line of its own.
	reran := len(of(g.events(t, r.ID)[before:], runs.EventToolCallCompleted))
	if got := linesOf(t, filepath.Join(dir, hibernatedFile)); len(got) != 1+reran || got[0] != line {
		t.Errorf("after the wake %s = %q in %s, want turn 1's line %s and %d of the woken turn's", hibernatedFile, got, dir, line, reran)
	}

	// The run may have fallen asleep again: a close ends it either way.
	g.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded || len(r.Turns) != 2 || r.Turns[1].MessageID != msg.MessageID {
		t.Fatalf("status %s, error %+v, turns %+v, want succeeded with the woken turn second; events %s", r.Status, r.Error, r.Turns, typesOf(evs))
	}
	// The run's usage is its two turns', asleep between them or not.
	g.wantUsage(t, r)
	wantNoProcesses(t, r.ID, "no-marker-"+r.ID)
}

// turnOfLiveRun waits for the run's nth turn.completed, as turn does, but
// fails as soon as the run ends without it: a wake that fails ends the
// run.
func (g *gateway) turnOfLiveRun(t *testing.T, id string, n int) runs.TurnCompletedData {
	t.Helper()
	deadline := time.Now().Add(quick)
	for len(of(g.events(t, id), runs.EventTurnCompleted)) < n {
		rec, err := g.store.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status.Terminal() || time.Now().After(deadline) {
			t.Fatalf("no turn %d: the run is %s (%+v); events %s", n, rec.Status, rec.Error, typesOf(g.events(t, id)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return g.turn(t, id, n)
}

// cwdOf is the directory the run started in, from its run.started.
func (g *gateway) cwdOf(t *testing.T, id string) string {
	t.Helper()
	started := of(g.events(t, id), runs.EventRunStarted)
	if len(started) != 1 {
		t.Fatalf("%d run.started: %s", len(started), typesOf(g.events(t, id)))
	}
	var d struct {
		Cwd string `json:"cwd"`
	}
	decode(t, started[0], &d)
	if d.Cwd == "" {
		t.Fatalf("run.started names no cwd: %s", started[0].Data)
	}
	return d.Cwd
}

// linesOf returns the lines of the file at path.
func linesOf(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return strings.Fields(string(b))
}

// waitHibernated waits until the run's record says hibernated and its log
// holds run.hibernated, and returns the event's data.
func (g *gateway) waitHibernated(t *testing.T, id string) runs.RunHibernatedData {
	t.Helper()
	deadline := time.Now().Add(quick)
	for {
		rec, err := g.store.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status.Terminal() {
			t.Fatalf("the run ended %s (%+v) instead of hibernating: %s", rec.Status, rec.Error, typesOf(g.events(t, id)))
		}
		if evs := of(g.events(t, id), runs.EventRunHibernated); rec.Activity == runs.Hibernated && len(evs) > 0 {
			var d runs.RunHibernatedData
			decode(t, evs[0], &d)
			if len(evs) != 1 || d.Turn != 1 || d.Reason != runs.HibernatedIdle || d.Replica == "" || d.ClosesAt.IsZero() {
				t.Fatalf("run.hibernated = %+v (%d of them), want one after turn 1, reason idle", d, len(evs))
			}
			if rec.HibernatedAt == nil || rec.ClosesAt == nil || !rec.ClosesAt.Equal(d.ClosesAt) {
				t.Errorf("hibernated record: hibernated_at %v, closes_at %v, run.hibernated's closes_at %v", rec.HibernatedAt, rec.ClosesAt, d.ClosesAt)
			}
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("not hibernated within %s of turn 1 (activity %q): %s", quick, rec.Activity, typesOf(g.events(t, id)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wantAsleep checks that nothing of the hibernated run is left: no
// process, nothing in the supervisor but the timer that closes it.
func (g *gateway) wantAsleep(t *testing.T, id string) {
	t.Helper()
	// The record is stored hibernated once the CLI exited: no waiting.
	pids, err := proctree.New().Find(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) > 0 {
		t.Errorf("processes of the hibernated run are left: %v", pids)
	}
	counts := g.sup.ActivityCounts()
	for activity, n := range counts {
		want := 0
		if activity == runs.Hibernated {
			want = 1
		}
		if n != want {
			t.Errorf("the supervisor counts %v: want the hibernated run's close timer and no run it holds", counts)
			break
		}
	}
}

// refusedWhileAsleep: a steer (for an agent that steers) and an interrupt
// have no turn to act on and are refused run_hibernated, without waking
// the run.
func (s *suite) refusedWhileAsleep(t *testing.T, g *gateway, id string) {
	t.Helper()
	refused := map[string]runs.Input{"interrupt": {Kind: runs.InputInterrupt}}
	if s.adapter.Describe().Interaction.Steer {
		refused["steer"] = runs.Input{Kind: runs.InputMessage, Text: "steer a sleeping run", Mode: runs.MessageSteer}
	}
	for name, in := range refused {
		_, err := g.sup.Input(context.Background(), id, in)
		var ce *runs.ConflictError
		if !errors.As(err, &ce) || ce.Code != runs.ConflictHibernated {
			t.Errorf("%s of a hibernated run: %v, want the conflict %s", name, err, runs.ConflictHibernated)
		}
	}
	rec, err := g.store.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Activity != runs.Hibernated {
		t.Errorf("after a refused steer and interrupt the run's activity is %q, want it still hibernated", rec.Activity)
	}
}

// wantWoken waits for the run.resumed of the wake and checks it.
func (g *gateway) wantWoken(t *testing.T, id string, slept runs.RunHibernatedData) {
	t.Helper()
	evs := g.waitEvents(t, id, runs.EventRunResumed, 1, quick)
	var d runs.RunResumedData
	decode(t, evs[0], &d)
	if len(evs) != 1 || d.Reason != runs.ResumedWoken || d.Turn != 1 || d.PreviousReplica != slept.Replica || d.Replica != slept.Replica {
		t.Errorf("run.resumed = %+v (%d of them), want one woken after turn 1 on and from replica %s", d, len(evs), slept.Replica)
	}
	if q := of(g.events(t, id), runs.EventMessageQueued); len(q) != 1 || q[0].Seq < evs[0].Seq {
		t.Errorf("message.queued of the waking message: %s", typesOf(g.events(t, id)))
	}
}
