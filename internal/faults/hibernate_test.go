package faults

// A hibernated interactive run belongs to no replica's processes: its
// session and files are in the cluster, and the next message wakes it on
// whichever replica takes the message, with the same conversation in the
// same files.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
)

// sleepAfter is the hibernate_after_seconds of the runs that fall asleep
// on their own: the shortest the domain allows.
const sleepAfter = 5

// TestAHibernatedRunWakesOnAnotherReplica runs turn 1 of an interactive
// claude run that hibernates after 5 idle seconds, which writes a file;
// once it sleeps (run.hibernated naming the replica that ran it, the
// record hibernated, no process of it left), turn 2 is sent straight to
// another replica: run.resumed says woken there from the first, the
// record names it the owner, turn 2 is numbered 2 and the model sees
// turn 1 and reads its file. The run falls asleep again on its new
// replica and a close ends it succeeded.
func TestAHibernatedRunWakesOnAnotherReplica(t *testing.T) {
	s := newHibernateRig(t, takeoverTTL)
	first := turn{Tag: "ws-hib-1"}
	first.ID = s.submitInteractive("write-file", first.Tag, sleepAfter)
	id := first.ID
	s.waitTurns(id, 1)
	ran := s.executor(id)
	if ran == 0 {
		t.Fatalf("run %s: no gateway's log says it started the run", id)
	}
	problems := s.checkAsleep(id, 1, ran, runs.HibernatedIdle, 1)

	// Straight to another replica, so that the test knows which wakes it.
	woken := ran%3 + 1
	second := turn{Tag: "ws-hib-2", ID: id}
	if status, raw := postMessage(s.Gateways[woken-1], id, "read-file "+second.Tag); status != http.StatusAccepted {
		t.Fatalf("POST %s to run %s on gateway %d = %d %s", second.Tag, id, woken, status, raw)
	}
	_, more := s.checkWoken(id, 1, woken, ran, 1)
	problems = append(problems, more...)
	problems = append(problems, s.checkSecondTurn(first, second)...)

	// It sleeps again where it woke, and closes from there.
	problems = append(problems, s.checkAsleep(id, 2, woken, runs.HibernatedIdle, 2)...)
	problems = append(problems, s.closeAndVerify(id, 1)...)
	report(t, append(problems, checkListing(s.Nginx, []string{id})...))
}

// TestAHibernatedRunOutlivesItsReplica lets a run fall asleep on its
// replica and kills that replica -9, twice. The first time a message
// goes through nginx at once, well within the replicas' TTL: a live
// replica wakes the run from the dead one. The second time, with the
// killed replica back, a live replica first adopts the sleeping run
// (the record names it, and still says hibernated), and a message wakes
// it from there. Either way turn 2 goes on from turn 1, and nothing of
// the run is marked interrupted.
func TestAHibernatedRunOutlivesItsReplica(t *testing.T) {
	// A message sent right after the kill reaches the run before any
	// replica can know its replica died.
	s := newHibernateRig(t, 15*time.Second)
	var problems, made []string
	for i, adopted := range []bool{false, true} {
		first := turn{Tag: fmt.Sprintf("ws-hib-kill-%d-1", i)}
		first.ID = s.submitInteractive("write-file", first.Tag, sleepAfter)
		id := first.ID
		made = append(made, id)
		s.waitTurns(id, 1)
		ran := s.executor(id)
		if ran == 0 {
			t.Fatalf("run %s: no gateway's log says it started the run", id)
		}
		problems = append(problems, s.checkAsleep(id, 1, ran, runs.HibernatedIdle, 1)...)
		s.do("kill-gateway", ran)
		problems = append(problems, s.wakeElsewhere(first, turn{Tag: fmt.Sprintf("ws-hib-kill-%d-2", i), ID: id}, ran, adopted)...)
		problems = append(problems, s.closeAndVerify(id, 1)...)
		s.do("start-gateway", ran)
	}
	report(t, append(problems, checkListing(s.Nginx, made)...))
}

// TestAnIdleRunHibernatesWhenItsReplicaStops stops (SIGTERM) the replica
// of an interactive run waiting idle for its next message: the run
// falls asleep (reason shutdown) rather than ending interrupted, and a
// message through nginx wakes it on another replica, where turn 2 goes
// on from turn 1.
func TestAnIdleRunHibernatesWhenItsReplicaStops(t *testing.T) {
	s := newHibernateRig(t, takeoverTTL)
	first := turn{Tag: "ws-hib-term-1"}
	// It would not fall asleep on its own while the test runs.
	first.ID = s.submitInteractive("write-file", first.Tag, 3600)
	id := first.ID
	s.waitTurns(id, 1)
	ran := s.owner(id)
	if ran == 0 {
		t.Fatalf("run %s: idle after turn 1, yet no gateway's process tree holds its CLI", id)
	}

	s.do("term-gateway", ran)
	problems := s.checkAsleep(id, 1, ran, runs.HibernatedShutdown, 1)
	problems = append(problems, s.wakeElsewhere(first, turn{Tag: "ws-hib-term-2", ID: id}, ran, true)...)
	problems = append(problems, s.closeAndVerify(id, 1)...)
	report(t, append(problems, checkListing(s.Nginx, []string{id})...))
}

// newHibernateRig starts a rig whose replicas take a dead one's runs
// over within ttl, with the session scenario's mock model.
func newHibernateRig(t *testing.T, ttl time.Duration) *sessionRig {
	t.Helper()
	began := time.Now()
	mock, err := anthropic.Start("127.0.0.1:0", sessionScenario())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mock.Close)
	s := &sessionRig{rig: newRig(t, mock, rigOptions{Env: map[string]string{"AGENTGATE_REPLICA_TTL": ttl.String()}}), t: t, mock: mock}
	s.mustStart()
	t.Logf("rig up in %s", time.Since(began).Round(time.Millisecond))
	return s
}

// submitInteractive submits, through nginx, an interactive claude run of
// prompt and tag that hibernates after hibernateAfter idle seconds, and
// returns its id.
func (s *sessionRig) submitInteractive(prompt, tag string, hibernateAfter int) string {
	s.t.Helper()
	body, _ := json.Marshal(map[string]any{"agent": "claude", "prompt": prompt + " " + tag, "interactive": true,
		"hibernate_after_seconds": hibernateAfter, "metadata": map[string]string{"tag": tag}})
	sub, err := post(s.Nginx, string(body), "")
	if err != nil || sub.Status != http.StatusCreated {
		s.t.Fatalf("POST an interactive run through nginx = %d %s %v", sub.Status, sub.Raw, err)
	}
	s.track(sub.Run.ID)
	return sub.Run.ID
}

// checkAsleep waits for the run's nth run.hibernated and checks it: it
// names gateway on, reason and finished as the last finished turn; the
// record says hibernated with the event's closes_at, the last turn
// succeeded and gateway on as its owner (or, gateway on gone, the replica
// that adopted the run); and no process of the run is left, on that
// replica or any other.
func (s *sessionRig) checkAsleep(id string, nth, on int, reason string, finished int) []string {
	s.t.Helper()
	var slept runs.RunHibernatedData
	if !nthEvent(s.Nginx, id, ofType(runs.EventRunHibernated), nth, settleWithin, &slept) {
		s.t.Fatalf("run %s: no run.hibernated number %d within %s", id, nth, settleWithin)
	}
	s.t.Logf("run %s: run.hibernated %+v", id, slept)
	var problems []string
	if slept.Replica != gatewayName(on) || slept.Reason != reason || slept.Turn != finished || slept.ClosesAt.IsZero() {
		problems = append(problems, fmt.Sprintf("run %s: run.hibernated number %d = %+v, want replica %s, reason %s, turn %d and a closes_at",
			id, nth, slept, gatewayName(on), reason, finished))
	}
	// The event comes before the record is stored hibernated.
	var rec record
	var err error
	if !waitFor(time.Minute, func() bool {
		rec, _, err = getRun(s.Nginx, id)
		return err == nil && (rec.Activity == runs.Hibernated || rec.Status.Terminal())
	}) || rec.Activity != runs.Hibernated {
		s.t.Fatalf("run %s after run.hibernated number %d: the record is %s, %s (%v); want running, hibernated", id, nth, rec.Status, rec.Activity, err)
	}
	if rec.Status != runs.Running || rec.HibernatedAt == nil || rec.ClosesAt == nil || !rec.ClosesAt.Equal(slept.ClosesAt) {
		problems = append(problems, fmt.Sprintf("run %s hibernated: the record is %s with hibernated_at %v and closes_at %v; want running, both set, closes_at %s as run.hibernated says",
			id, rec.Status, rec.HibernatedAt, rec.ClosesAt, slept.ClosesAt))
	}
	if n := len(rec.Turns); n != finished || rec.Turns[n-1].Status != runs.Succeeded {
		problems = append(problems, fmt.Sprintf("run %s hibernated: turns %+v, want %d, the last succeeded", id, rec.Turns, finished))
	}
	// The CLI exited before the run was put to sleep: nothing of it may
	// wait to be reaped later.
	if pids, _ := proctree.New().Find(id); len(pids) > 0 {
		problems = append(problems, fmt.Sprintf("run %s hibernated on gateway %d, yet its processes live on: %s", id, on, describe(pids)))
	}
	// A replica that stopped may have had its sleeping run adopted by
	// another already.
	gone := !s.alive(fmt.Sprintf("GATEWAY%d", on))
	if owner, err := s.storedOwner(id); err != nil || owner != gatewayName(on) && (!gone || owner == "") {
		problems = append(problems, fmt.Sprintf("run %s hibernated on gateway %d: the stored record's owner is %q (%v)", id, on, owner, err))
	}
	return problems
}

// checkWoken waits for the run's nth run.resumed and checks that a
// message woke the run on gateway on (any gateway when 0), from gateway
// from, after turn finished, and that the record names the replica that
// woke it as its owner. It returns that gateway.
func (s *sessionRig) checkWoken(id string, nth, on, from, finished int) (int, []string) {
	s.t.Helper()
	var resumed runs.RunResumedData
	if !nthEvent(s.Nginx, id, ofType(runs.EventRunResumed), nth, settleWithin, &resumed) {
		s.t.Fatalf("run %s: no run.resumed number %d within %s of the message that should wake it", id, nth, settleWithin)
	}
	s.t.Logf("run %s: run.resumed %+v", id, resumed)
	var woke int
	fmt.Sscanf(resumed.Replica, "gateway-%d", &woke)
	var problems []string
	if resumed.Reason != runs.ResumedWoken || resumed.PreviousReplica != gatewayName(from) || resumed.Turn != finished ||
		woke == 0 || on != 0 && woke != on {
		want := "a gateway"
		if on != 0 {
			want = gatewayName(on)
		}
		problems = append(problems, fmt.Sprintf("run %s: run.resumed number %d = %+v, want reason %s, replica %s, previous_replica %s, turn %d",
			id, nth, resumed, runs.ResumedWoken, want, gatewayName(from), finished))
	}
	if owner, err := s.storedOwner(id); err != nil || owner != resumed.Replica {
		problems = append(problems, fmt.Sprintf("run %s woken on %s: the stored record's owner is %q (%v)", id, resumed.Replica, owner, err))
	}
	return woke, problems
}

// wakeElsewhere sends the second turn through nginx to the sleeping run
// of the first, whose gateway dead is gone: it wakes the run on a live
// replica, and goes on from the first turn. When adopted, it first waits
// until a live replica adopted the run (the record names the adopter,
// and still says hibernated), which is then the replica it wakes from.
func (s *sessionRig) wakeElsewhere(first, second turn, dead int, adopted bool) []string {
	s.t.Helper()
	id := first.ID
	var problems []string
	from := dead
	if adopted {
		var owner string
		var err error
		if !waitFor(settleWithin, func() bool {
			owner, err = s.storedOwner(id)
			return err == nil && owner != gatewayName(dead)
		}) {
			s.t.Fatalf("run %s: still owned by the dead gateway %d %s after it went (%v)", id, dead, settleWithin, err)
		}
		s.t.Logf("run %s: adopted by %s once gateway %d went", id, owner, dead)
		if rec, _, err := getRun(s.Nginx, id); err != nil || rec.Status != runs.Running || rec.Activity != runs.Hibernated {
			problems = append(problems, fmt.Sprintf("run %s adopted by %s: the record is %s, %s (%v), want running, hibernated", id, owner, rec.Status, rec.Activity, err))
		}
		fmt.Sscanf(owner, "gateway-%d", &from)
	}
	if status, raw := postMessage(s.Nginx, id, "read-file "+second.Tag); status != http.StatusAccepted {
		s.t.Fatalf("POST %s to run %s through nginx = %d %s", second.Tag, id, status, raw)
	}
	woke, more := s.checkWoken(id, 1, 0, from, 1)
	if woke == dead {
		problems = append(problems, fmt.Sprintf("run %s: woken on gateway %d, which is gone", id, dead))
	}
	problems = append(problems, more...)
	return append(problems, s.checkSecondTurn(first, second)...)
}

// checkSecondTurn waits for the second turn to finish and checks that it
// is turn 2, succeeded, that the model's first request of it carries the
// first turn, and that its tool read the first turn's file.
func (s *sessionRig) checkSecondTurn(first, second turn) []string {
	s.t.Helper()
	rec := s.waitTurns(second.ID, 2)
	var problems []string
	if got := rec.Turns[1]; got.Turn != 2 || got.Status != runs.Succeeded {
		problems = append(problems, fmt.Sprintf("run %s: %s is recorded as %+v, want turn 2 succeeded", second.ID, second.Tag, got))
	}
	problems = append(problems, s.continuedConversation(second, first)...)
	if !s.modelReadFile(second.Tag) {
		problems = append(problems, fmt.Sprintf("%s of run %s: the model never saw %s's content through the tool: the woken run's directory lacks the first turn's file",
			second.Tag, second.ID, sessionFile))
	}
	return problems
}

// closeAndVerify closes the run through nginx and verifies it as every
// run of the rig: it ends succeeded, and its whole log holds woken
// run.resumed events only, that many, and nothing interrupted: no turn
// cut off, no run taken over from a replica that died.
func (s *sessionRig) closeAndVerify(id string, woken int) []string {
	s.t.Helper()
	if status, raw := postControl(s.Nginx, id, "close"); status != http.StatusAccepted {
		return []string{fmt.Sprintf("POST close to run %s = %d %s", id, status, raw)}
	}
	problems := s.verify(s.t, id, want{Status: runs.Succeeded}, settleWithin)
	f := follow(s.Nginx, id, time.Minute)
	problems = append(problems, f.Problems...)
	var resumed []runs.RunResumedData
	for _, e := range f.Events {
		switch runs.EventType(e.Type) {
		case runs.EventRunResumed:
			var d runs.RunResumedData
			decodeData(e, &d)
			resumed = append(resumed, d)
		case runs.EventRunHibernated:
			var d runs.RunHibernatedData
			if decodeData(e, &d); d.Reason == runs.HibernatedReplicaLost {
				problems = append(problems, fmt.Sprintf("run %s: event %d, run.hibernated %+v: taken over as if cut off", id, e.Seq, d))
			}
		case runs.EventTurnCompleted:
			var d runs.TurnCompletedData
			if decodeData(e, &d); d.Status != runs.Succeeded || d.Error != nil {
				problems = append(problems, fmt.Sprintf("run %s: event %d, turn.completed %+v, want every turn succeeded", id, e.Seq, d))
			}
		}
	}
	for _, d := range resumed {
		if d.Reason != runs.ResumedWoken {
			problems = append(problems, fmt.Sprintf("run %s: run.resumed %+v, want every one woken", id, d))
		}
	}
	if len(resumed) != woken {
		problems = append(problems, fmt.Sprintf("run %s: %d run.resumed events, want %d", id, len(resumed), woken))
	}
	return problems
}

// nthEvent follows the run's stream on base until its nth event that
// match takes, and decodes that event's data into data; false when the
// run ended first or within passed.
func nthEvent(base, id string, match func(event) bool, nth int, within time.Duration, data any) bool {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var last uint64
	var seen []event
	for ctx.Err() == nil {
		seg := readSSEUntil(ctx, base, id, last, func(e event) bool {
			if e.Seq <= last {
				return false
			}
			last = e.Seq
			if match(e) {
				seen = append(seen, e)
			}
			return len(seen) == nth || e.Type == string(runs.EventRunCompleted)
		})
		if len(seen) == nth {
			return decodeData(seen[nth-1], data) == nil
		}
		if n := len(seg.Events); n > 0 && seg.Events[n-1].Type == string(runs.EventRunCompleted) || seg.Status == http.StatusNoContent {
			return false
		}
		// The stream was cut (its replica went): open it again where it
		// stopped, as an EventSource would.
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return false
}

// decodeData decodes the data of e's envelope into data.
// ofType matches the events of type typ.
func ofType(typ runs.EventType) func(event) bool {
	return func(e event) bool { return e.Type == string(typ) }
}

func decodeData(e event, data any) error {
	var env struct{ Data json.RawMessage }
	if err := json.Unmarshal([]byte(e.Data), &env); err != nil {
		return err
	}
	return json.Unmarshal(env.Data, data)
}

// gatewayName is gateway n's replica id, as the rig names it.
func gatewayName(n int) string { return fmt.Sprintf("gateway-%d", n) }

// storedOwner reads the run's record from the rig's NATS cluster and
// returns the replica it names as its owner, which the API does not show.
func (r *rig) storedOwner(id string) (string, error) {
	var rec struct {
		Owner string `json:"owner"`
	}
	err := r.storedEntry("agentgate_runs", id, &rec)
	return rec.Owner, err
}

// sessionKeptFor reports whether the rig's store records the agent's
// session as kept by the run id: its files and directory are in the
// cluster, and a replica can take the run over from them.
func (r *rig) sessionKeptFor(agent, session, id string) bool {
	var rec struct {
		RunID string `json:"run_id"`
	}
	return session != "" && r.storedEntry("agentgate_sessions", agent+"."+session, &rec) == nil && rec.RunID == id
}

// storedEntry reads key of the store's KV bucket from the rig's NATS
// cluster into v: what the leader has, as the store reads a record
// before a compare-and-set, since a follower may not have the newest
// yet. The buckets and the records' shapes are the store's
// (internal/store).
func (r *rig) storedEntry(bucket, key string, v any) error {
	nc, err := nats.Connect(r.loadEnv()["NATS_URL"], nats.Timeout(10*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + bucket + "." + key})
	reply, err := nc.Request("$JS.API.STREAM.MSG.GET.KV_"+bucket, req, 30*time.Second)
	if err != nil {
		return err
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message struct {
			Data []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return resp.Error
	}
	return json.Unmarshal(resp.Message.Data, v)
}
