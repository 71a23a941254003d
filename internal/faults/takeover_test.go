package faults

// An interactive run whose replica is killed between turns goes on on
// another replica: the same conversation, in the same files.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// takeoverTTL is the rig's REPLICA_TTL: how soon a dead replica's runs are
// taken over.
const takeoverTTL = 4 * time.Second

// TestInteractiveRunTakenOverAfterKill runs turn 1 of an interactive
// claude run, which writes a file, kills -9 the replica that holds the
// run's CLI while the run is idle, and sends turn 2 through nginx once
// another replica has taken the run over: turn 2 is numbered 2, the model
// sees turn 1's prompt and answers, its tool reads turn 1's file. The
// replica that took it over is killed in turn after turn 2, and the one
// after that in the middle of turn 4: each time the run goes on
// elsewhere, turn 4 ends cancelled, interrupted, and turn 5 is numbered 5.
// The run closes succeeded with no process left. (A one-shot run cut off
// mid-turn still ends failed, interrupted: TestReplicaKilledMidRun.)
func TestInteractiveRunTakenOverAfterKill(t *testing.T) {
	began := time.Now()
	mock, err := anthropic.Start("127.0.0.1:0", sessionScenario())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mock.Close)
	s := &sessionRig{rig: newRig(t, mock, rigOptions{Env: map[string]string{"AGENTGATE_REPLICA_TTL": takeoverTTL.String()}}), t: t, mock: mock}
	s.mustStart()
	t.Logf("rig up in %s", time.Since(began).Round(time.Millisecond))

	first := turn{Tag: "ws-take-1"}
	body, _ := json.Marshal(map[string]any{"agent": "claude", "prompt": "write-file " + first.Tag, "interactive": true,
		"metadata": map[string]string{"tag": first.Tag}})
	sub, err := post(s.Nginx, string(body), "")
	if err != nil || sub.Status != http.StatusCreated {
		t.Fatalf("POST an interactive run through nginx = %d %s %v", sub.Status, sub.Raw, err)
	}
	id := sub.Run.ID
	first.ID = id
	s.track(id)
	s.waitTurns(id, 1)

	// Killed between turns: the next turn goes on elsewhere.
	killed, _, problems := s.killAndTakeOver(id, 1, 1)
	second := turn{Tag: "ws-take-2", ID: id}
	problems = append(problems, s.nextTurn(second, "read-file", 2, first)...)
	if !s.modelReadFile(second.Tag) {
		problems = append(problems, fmt.Sprintf("turn 2 of run %s: the model never saw %s's content through the tool: the run's files did not follow it", id, sessionFile))
	}
	t.Logf("turn 2 done (%s so far)", time.Since(began).Round(time.Millisecond))

	// The replica that took it over dies too, between turns.
	s.do("start-gateway", killed)
	killed, _, more := s.killAndTakeOver(id, 2, 2)
	problems = append(problems, more...)
	third := turn{Tag: "ws-take-3", ID: id}
	problems = append(problems, s.nextTurn(third, "append-file", 3, first, second)...)
	t.Logf("turn 3 done (%s so far)", time.Since(began).Round(time.Millisecond))

	// And the next one dies in the middle of turn 4, its tool running.
	s.do("start-gateway", killed)
	problems = append(problems, s.cutTurn(id, turn{Tag: "ws-take-4", ID: id})...)
	fifth := turn{Tag: "ws-take-5", ID: id}
	problems = append(problems, s.nextTurn(fifth, "say hello", 5, first, second, third)...)

	if status, raw := postControl(s.Nginx, id, "close"); status != http.StatusAccepted {
		problems = append(problems, fmt.Sprintf("POST close to run %s = %d %s", id, status, raw))
	}
	problems = append(problems, s.verify(t, id, want{Status: runs.Succeeded}, settleWithin)...)
	// Its directory is as turns 1 and 3 left it, on whichever replica
	// serves it (a running run's is served by its owner only).
	for name, want := range map[string]string{sessionFile: sessionContent, turnsFile: third.Tag + "\n"} {
		if got, status := getFile(s.Nginx, id, name); status != http.StatusOK || got != want {
			problems = append(problems, fmt.Sprintf("run %s: GET its %s through nginx once it ended = %d %q, want 200 %q", id, name, status, got, want))
		}
	}

	cancelled := s.cancelTakenOver()
	problems = append(problems, s.verify(t, cancelled, want{Status: runs.Cancelled, Class: runs.ClassCancelled}, settleWithin)...)
	report(t, append(problems, checkListing(s.Nginx, []string{id, cancelled})...))
	t.Logf("the case took %s", time.Since(began).Round(time.Millisecond))
}

// cancelTakenOver runs turn 1 of another interactive run, kills the
// gateway holding it, and once another has taken it over cancels it on
// the third gateway, which must pass the cancel on to the run's new
// owner. It returns the run's id.
func (s *sessionRig) cancelTakenOver() string {
	s.t.Helper()
	body, _ := json.Marshal(map[string]any{"agent": "claude", "prompt": "say hello ws-take-cancel", "interactive": true})
	sub, err := post(s.Nginx, string(body), "")
	if err != nil || sub.Status != http.StatusCreated {
		s.t.Fatalf("POST another interactive run through nginx = %d %s %v", sub.Status, sub.Raw, err)
	}
	id := sub.Run.ID
	s.track(id)
	s.waitTurns(id, 1)
	killed, taker, _ := s.killAndTakeOver(id, 1, 1)
	defer s.do("start-gateway", killed)
	other := 6 - killed - taker // the gateway neither dead nor the owner
	if taker == 0 || other < 1 || other > 3 || other == killed || other == taker {
		s.t.Fatalf("run %s: taken over by gateway %d after gateway %d died: no third gateway to cancel it on", id, taker, killed)
	}
	if status, raw := postJSON(s.Gateways[other-1]+"/v1/runs/"+url.PathEscape(id)+"/cancel", "{}"); status != http.StatusOK {
		s.t.Fatalf("run %s: POST cancel on gateway %d = %d %s", id, other, status, raw)
	}
	s.t.Logf("run %s taken over by gateway %d, cancelled on gateway %d", id, taker, other)
	return id
}

// killAndTakeOver kills -9 the gateway whose process tree holds the run's
// CLI and waits for the run's nth run.resumed, which must name that
// gateway and finished as the last turn that finished. It returns the
// gateway killed and the gateway that took the run over (0 when unknown).
func (s *sessionRig) killAndTakeOver(id string, nth, finished int) (killed, taker int, problems []string) {
	s.t.Helper()
	// A turn's end keeps its session in the cluster a moment after the
	// record says so: a replica killed before that has left nothing to
	// take the run over from, and the run ends interrupted.
	if rec, _, err := getRun(s.Nginx, id); err != nil || !waitFor(settleWithin, func() bool { return s.sessionKeptFor("claude", rec.SessionID, id) }) {
		s.t.Fatalf("run %s: its session (%v) is never recorded kept by it", id, err)
	}
	killed = s.owner(id)
	if killed == 0 {
		s.t.Fatalf("run %s: no gateway's process tree holds its CLI before kill %d", id, nth)
	}
	s.do("kill-gateway", killed)
	at := time.Now()
	resumed, ok := waitResumed(s.Nginx, id, nth, settleWithin)
	if !ok {
		s.t.Fatalf("run %s: no run.resumed number %d within %s of kill -9 of gateway %d", id, nth, settleWithin, killed)
	}
	s.t.Logf("run.resumed %+v, %s after kill -9 of gateway %d", resumed, time.Since(at).Round(time.Millisecond), killed)
	fmt.Sscanf(resumed.Replica, "gateway-%d", &taker)
	if resumed.PreviousReplica != fmt.Sprintf("gateway-%d", killed) || resumed.Turn != finished ||
		resumed.Reason != runs.ResumedReplicaLost || resumed.Replica == resumed.PreviousReplica {
		problems = []string{fmt.Sprintf("run %s: run.resumed number %d = %+v, want previous_replica gateway-%d, turn %d, reason %s",
			id, nth, resumed, killed, finished, runs.ResumedReplicaLost)}
	}
	return killed, taker, problems
}

// nextTurn sends prompt and tr's tag as the run's next message through
// nginx and waits for it to finish: it must be turn number n, succeeded,
// and the model's first request of it must carry the earlier turns.
func (s *sessionRig) nextTurn(tr turn, prompt string, n int, earlier ...turn) []string {
	s.t.Helper()
	if status, raw := postMessage(s.Nginx, tr.ID, prompt+" "+tr.Tag); status != http.StatusAccepted {
		s.t.Fatalf("POST %s to run %s through nginx = %d %s", tr.Tag, tr.ID, status, raw)
	}
	rec := s.waitTurns(tr.ID, n)
	var problems []string
	if got := rec.Turns[len(rec.Turns)-1]; got.Turn != n || got.Status != runs.Succeeded {
		problems = append(problems, fmt.Sprintf("run %s: %s is recorded as %+v, want turn %d succeeded", tr.ID, tr.Tag, got, n))
	}
	for _, e := range earlier {
		problems = append(problems, s.continuedConversation(tr, e)...)
	}
	return problems
}

// cutTurn sends tr as a turn whose tool sleeps, kills -9 the gateway
// running it once the tool runs, and waits until another takes the run
// over: the turn is recorded cancelled, interrupted. The killed gateway
// starts again, which ends what its tool left running.
func (s *sessionRig) cutTurn(id string, tr turn) []string {
	s.t.Helper()
	if status, raw := postMessage(s.Nginx, id, "run the tool sleep:60 "+tr.Tag); status != http.StatusAccepted {
		s.t.Fatalf("POST %s to run %s through nginx = %d %s", tr.Tag, id, status, raw)
	}
	if !waitFor(90*time.Second, func() bool { return perlRuns(id) }) {
		s.t.Fatalf("run %s: the tool of %s never ran", id, tr.Tag)
	}
	killed, _, problems := s.killAndTakeOver(id, 3, 3)
	// run.resumed and run.hibernated are emitted before the record is
	// stored hibernated: a run taken over sleeps until its next message.
	var rec record
	var err error
	if !waitFor(30*time.Second, func() bool {
		rec, _, err = getRun(s.Nginx, id)
		return err == nil && rec.Activity == runs.Hibernated
	}) || len(rec.Turns) != 4 || rec.Turns[3].Status != runs.Cancelled || rec.Turns[3].Error == nil ||
		rec.Turns[3].Error.Class != runs.Interrupted {
		problems = append(problems, fmt.Sprintf("run %s once taken over in %s: %s, turns %+v (%v); want turn 4 cancelled, interrupted, and the run hibernated",
			id, tr.Tag, rec.Activity, rec.Turns, err))
	}
	s.do("start-gateway", killed)
	return problems
}

// waitTurns waits, through nginx, until the run has n turns recorded,
// the last one finished, and waits for a message (idle, or asleep: a run
// that hibernates soon after its turn may skip idle on a busy machine),
// and returns its record; it fails the test when the run ends or the wait
// is over.
func (s *sessionRig) waitTurns(id string, n int) record {
	s.t.Helper()
	var rec record
	var err error
	done := waitFor(settleWithin, func() bool {
		rec, _, err = getRun(s.Nginx, id)
		if err != nil || rec.Status.Terminal() {
			return err == nil
		}
		k := len(rec.Turns)
		return (rec.Activity == runs.Idle || rec.Activity == runs.Hibernated) && k == n && rec.Turns[k-1].FinishedAt != nil
	})
	if !done || rec.Status.Terminal() {
		s.t.Fatalf("run %s: waiting for turn %d to finish, the record is %s, %s, turns %+v, error %+v (%v)",
			id, n, rec.Status, rec.Activity, rec.Turns, rec.Error, err)
	}
	return rec
}

// waitResumed follows the run's stream on base until its nth run.resumed
// of a run taken over from a dead replica (reason replica_lost; a message
// that wakes the run asleep is another), and returns that event's data;
// false when the run ended or within passed first.
func waitResumed(base, id string, nth int, within time.Duration) (runs.RunResumedData, bool) {
	var d runs.RunResumedData
	takenOver := func(e event) bool {
		var r runs.RunResumedData
		return e.Type == string(runs.EventRunResumed) && decodeData(e, &r) == nil && r.Reason == runs.ResumedReplicaLost
	}
	ok := nthEvent(base, id, takenOver, nth, within, &d)
	return d, ok
}

// continuedConversation checks the mock's requests of tr's turn: the
// first already carries the earlier turn's prompt, the text the model
// answered it with before its tool ran, and its final answer.
func (s *sessionRig) continuedConversation(tr, earlier turn) []string {
	for _, e := range s.mock.Ledger().Messages() {
		if !requestOfTurn(&e.Request, tr.Tag) {
			continue
		}
		var problems []string
		for _, want := range []string{earlier.Tag, "Running the command.", "Done with the tool."} {
			if !e.Request.Contains(want) {
				problems = append(problems, fmt.Sprintf("%s of run %s: the model's first request of the turn lacks %q of turn %s: the conversation did not continue",
					tr.Tag, tr.ID, want, earlier.Tag))
			}
		}
		return problems
	}
	return []string{fmt.Sprintf("%s of run %s: the model received no request of the turn", tr.Tag, tr.ID)}
}

// postMessage sends text to the run on base as its next message.
func postMessage(base, id, text string) (int, string) {
	b, _ := json.Marshal(map[string]string{"text": text})
	return postJSON(base+"/v1/runs/"+url.PathEscape(id)+"/messages", string(b))
}

// postControl posts an empty body to one of the run's controls (close,
// interrupt, cancel).
func postControl(base, id, control string) (int, string) {
	return postJSON(base+"/v1/runs/"+url.PathEscape(id)+"/"+control, "{}")
}

func postJSON(u, body string) (int, string) {
	resp, err := client.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
