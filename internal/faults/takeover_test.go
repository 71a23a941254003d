package faults

// An interactive run whose replica is killed between turns goes on on
// another replica: the same conversation, in the same files.

import (
	"context"
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
// sees turn 1's prompt and answer, its tool reads turn 1's file, and the
// run closes succeeded with no process left. (A one-shot run cut off
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
	s.track(id)
	rec := s.waitTurns(id, 1)
	first.ID, first.Session = id, rec.SessionID
	killed := s.owner(id)
	if killed == 0 {
		t.Fatalf("run %s is idle after turn 1, but no gateway's process tree holds its CLI", id)
	}
	t.Logf("turn 1 of run %s done on gateway %d (%s so far)", id, killed, time.Since(began).Round(time.Millisecond))

	s.do("kill-gateway", killed)
	at := time.Now()
	var problems []string
	resumed, ok := waitResumed(s.Nginx, id, settleWithin)
	switch {
	case !ok:
		t.Fatalf("no run.resumed for run %s within %s of kill -9 of gateway %d", id, settleWithin, killed)
	case resumed.PreviousReplica != fmt.Sprintf("gateway-%d", killed) || resumed.Turn != 1 ||
		resumed.Reason != runs.ResumedReplicaLost || resumed.Replica == resumed.PreviousReplica:
		problems = append(problems, fmt.Sprintf("run.resumed = %+v, want previous_replica gateway-%d, turn 1, reason %s", resumed, killed, runs.ResumedReplicaLost))
	}
	t.Logf("run.resumed %+v, %s after the kill", resumed, time.Since(at).Round(time.Millisecond))

	second := turn{Tag: "ws-take-2", ID: id}
	if status, raw := postMessage(s.Nginx, id, "read-file "+second.Tag); status != http.StatusAccepted {
		t.Fatalf("POST a message to run %s through nginx after the takeover = %d %s", id, status, raw)
	}
	rec = s.waitTurns(id, 2)
	if tr := rec.Turns[1]; tr.Turn != 2 || tr.Status != runs.Succeeded {
		problems = append(problems, fmt.Sprintf("turn 2 is recorded as %+v, want turn 2 succeeded", tr))
	}
	problems = append(problems, s.continuedConversation(second, first)...)
	if !s.modelReadFile(second.Tag) {
		problems = append(problems, fmt.Sprintf("turn 2 of run %s: the model never saw %s's content through the tool: the run's files did not follow it", id, sessionFile))
	}

	if status, raw := postControl(s.Nginx, id, "close"); status != http.StatusAccepted {
		problems = append(problems, fmt.Sprintf("POST close to run %s = %d %s", id, status, raw))
	}
	problems = append(problems, s.verify(t, id, want{Status: runs.Succeeded}, settleWithin)...)
	if got, status := getFile(s.Nginx, id, sessionFile); status != http.StatusOK || got != sessionContent {
		problems = append(problems, fmt.Sprintf("run %s: GET its %s through nginx once it ended = %d %q, want 200 %q", id, sessionFile, status, got, sessionContent))
	}
	report(t, append(problems, checkListing(s.Nginx, []string{id})...))
	t.Logf("the case took %s", time.Since(began).Round(time.Millisecond))
}

// waitTurns waits, through nginx, until the run is idle with n turns
// recorded and the last one finished, and returns its record; it fails the
// test when the run ends or the wait is over.
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
		return rec.Activity == runs.Idle && k == n && rec.Turns[k-1].FinishedAt != nil
	})
	if !done || rec.Status.Terminal() {
		s.t.Fatalf("run %s: waiting for turn %d to finish, the record is %s, %s, turns %+v, error %+v (%v)",
			id, n, rec.Status, rec.Activity, rec.Turns, rec.Error, err)
	}
	return rec
}

// waitResumed follows the run's stream on base until its run.resumed,
// and returns that event's data; false when the run ended or within
// passed first.
func waitResumed(base, id string, within time.Duration) (runs.RunResumedData, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var last uint64
	for ctx.Err() == nil {
		seg := readSSEUntil(ctx, base, id, last, func(e event) bool {
			return e.Type == string(runs.EventRunResumed) || e.Type == string(runs.EventRunCompleted)
		})
		for _, e := range seg.Events {
			switch e.Type {
			case string(runs.EventRunResumed):
				var env struct{ Data runs.RunResumedData }
				err := json.Unmarshal([]byte(e.Data), &env)
				return env.Data, err == nil
			case string(runs.EventRunCompleted):
				return runs.RunResumedData{}, false
			}
			last = max(last, e.Seq)
		}
		// The stream was cut (its replica died): open it again where it
		// stopped, as an EventSource would.
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return runs.RunResumedData{}, false
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
