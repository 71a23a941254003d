package qwen

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// upSession is a session whose CLI answered initialize, session/new and
// set_mode, so that turn 1 runs.
func upSession(t *testing.T, spec runs.Spec) *session {
	t.Helper()
	s := newSession(runs.Invocation{Spec: spec, Dir: "/d", Home: "/h"})
	s.Open()
	for _, l := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S","models":{"currentModelId":"$runtime|openai|m-1(openai)"}}}`,
		`{"jsonrpc":"2.0","method":"qwen/notify/session/mode-update","params":{"v":1,"sessionId":"S","currentModeId":"yolo"}}`,
		`{"jsonrpc":"2.0","id":3,"result":{}}`,
	} {
		for _, ev := range s.Decode([]byte(l)) {
			if ev.Type == runs.EventAgentUnparsed || ev.Type == runs.EventWarning {
				t.Fatalf("%s: %+v", ev.Type, ev.Data)
			}
			if d, ok := ev.Data.(runs.SessionStartedData); ok && d.Model != "m-1" {
				t.Errorf("model %q, want the model's own name", d.Model)
			}
		}
	}
	if out, _ := s.Pending(); !bytes.Contains(out, []byte(`"session/prompt"`)) {
		t.Fatalf("turn 1 was not sent: %s", out)
	}
	return s
}

const drainLine = `{"jsonrpc":"2.0","id":0,"method":"craft/drainMidTurnQueue","params":{"sessionId":"S","todoStopGuardWatchQueuedPrompt":true}}`

// TestSteerDrain: a steered message goes in the answer to the CLI's next
// drain, once; a drain with nothing steered is answered at once with no
// message.
func TestSteerDrain(t *testing.T) {
	s := upSession(t, runs.Spec{Prompt: "p", Interactive: true})
	if err := s.Send("look at b.txt too", nil, true); err != nil {
		t.Fatal(err)
	}
	if evs := s.Decode([]byte(drainLine)); len(evs) != 0 {
		t.Errorf("events %+v", evs)
	}
	out, _ := s.Pending()
	want := `{"jsonrpc":"2.0","id":0,"result":{"messages":["look at b.txt too"],"hasQueuedPrompt":false}}`
	if !strings.Contains(string(out), want) {
		t.Errorf("wrote %s, want %s", out, want)
	}
	s.Decode([]byte(drainLine))
	out, _ = s.Pending()
	if !strings.Contains(string(out), `"messages":[]`) {
		t.Errorf("second drain: %s, want no message", out)
	}
	if err := s.Send("with a picture", []runs.Image{{MediaType: "image/png"}}, true); err == nil {
		t.Error("a steered image was taken")
	}
}

// TestSteerUndelivered: a steered message still waiting when the turn
// ends is reported, not lost without a word.
func TestSteerUndelivered(t *testing.T) {
	s := upSession(t, runs.Spec{Prompt: "p", Interactive: true})
	if err := s.Send("too late", nil, true); err != nil {
		t.Fatal(err)
	}
	evs := s.Decode([]byte(`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}`))
	var warned, ended bool
	for _, ev := range evs {
		if d, ok := ev.Data.(runs.WarningData); ok && d.Code == "steer_undelivered" {
			warned = !ended
		}
		ended = ended || ev.Type == runs.EventTurnCompleted
	}
	if !warned || !ended {
		t.Errorf("events %+v, want steer_undelivered before turn.completed", evs)
	}
}

// TestAllowSessionStaysInHome: allow_session picks the option whose rule
// goes into the run's home, never the one that writes into the run's
// directory.
func TestAllowSessionStaysInHome(t *testing.T) {
	s := upSession(t, runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk})
	req := `{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"S","options":[` +
		`{"optionId":"proceed_always_project","name":"Always Allow in project","kind":"allow_always"},` +
		`{"optionId":"proceed_always_user","name":"Always Allow for user","kind":"allow_always"},` +
		`{"optionId":"proceed_once","name":"Allow","kind":"allow_once"},{"optionId":"cancel","name":"Reject","kind":"reject_once"}],` +
		`"toolCall":{"toolCallId":"c1","status":"pending","title":"touch a","kind":"execute","rawInput":{"command":"touch a"},"_meta":{"toolName":"run_shell_command"}}}}`
	var id string
	for _, ev := range s.Decode([]byte(req)) {
		if d, ok := ev.Data.(runs.ApprovalRequestedData); ok {
			id = d.ID
		}
	}
	if id == "" {
		t.Fatal("no approval.requested")
	}
	if err := s.Answer(id, runs.AllowSession, ""); err != nil {
		t.Fatal(err)
	}
	out, _ := s.Pending()
	if !bytes.Contains(out, []byte(`"optionId":"proceed_always_user"`)) {
		t.Errorf("answered %s, want proceed_always_user", out)
	}
}
