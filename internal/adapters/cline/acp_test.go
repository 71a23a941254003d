package cline

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// rpcOut is one message the client wrote.
type rpcOut struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
}

// written splits what the session wrote into messages.
func written(t *testing.T, b []byte) []rpcOut {
	t.Helper()
	var out []rpcOut
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var m rpcOut
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// handshake plays Cline's answers to initialize and session/new (shapes
// of 3.0.65's) and returns what the session wrote after session/new.
func handshake(t *testing.T, s runs.Session) []rpcOut {
	t.Helper()
	open := written(t, s.Open())
	if len(open) != 1 || open[0].Method != "initialize" {
		t.Fatalf("open = %+v", open)
	}
	s.Decode([]byte(`{"jsonrpc":"2.0","id":` + string(open[0].ID) + `,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"agentInfo":{"name":"cline","version":"3.0.65"}}}`))
	out, _ := s.Pending()
	msgs := written(t, out)
	if len(msgs) != 1 || msgs[0].Method != "session/new" {
		t.Fatalf("after initialize: %+v", msgs)
	}
	s.Decode([]byte(`{"jsonrpc":"2.0","id":` + string(msgs[0].ID) + `,"result":{"sessionId":"1796549785826_-TdBF_cli","modes":{"availableModes":[{"id":"plan"},{"id":"act"}],"currentModeId":"act"},"models":{"availableModels":[{"modelId":"gpt-4o"}]}}}`))
	out, _ = s.Pending()
	return written(t, out)
}

// The model and auto_approve are set, one at a time, before turn 1's
// prompt goes: a boolean with its type, as 3.0.65 requires.
func TestSessionSetsOptionsBeforeThePrompt(t *testing.T) {
	s := newSessionDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "hi", Model: "mock-model", Interactive: true, Permission: runs.WorkspaceWrite}})
	msgs := handshake(t, s)
	if len(msgs) != 1 || msgs[0].Method != "session/set_config_option" || !strings.Contains(string(msgs[0].Params), `"sessionId":"1796549785826_-TdBF_cli","configId":"model","value":"mock-model"`) {
		t.Fatalf("after session/new: %+v", msgs)
	}
	s.Decode([]byte(`{"jsonrpc":"2.0","id":` + string(msgs[0].ID) + `,"result":{"configOptions":[]}}`))
	out, _ := s.Pending()
	msgs = written(t, out)
	if len(msgs) != 1 || !strings.Contains(string(msgs[0].Params), `"sessionId":"1796549785826_-TdBF_cli","configId":"auto_approve","type":"boolean","value":true`) {
		t.Fatalf("second option: %+v", msgs)
	}
	s.Decode([]byte(`{"jsonrpc":"2.0","id":` + string(msgs[0].ID) + `,"result":{"configOptions":[]}}`))
	out, _ = s.Pending()
	msgs = written(t, out)
	if len(msgs) != 1 || msgs[0].Method != "session/prompt" {
		t.Fatalf("after the options: %+v", msgs)
	}
}

// After allow_session, the same call is allowed without asking the
// client again; another call is asked.
func TestSessionRemembersAllowSession(t *testing.T) {
	s := newSessionDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "hi", Interactive: true, Approvals: runs.ApprovalsAsk}})
	msgs := handshake(t, s)
	if len(msgs) != 1 || msgs[0].Method != "session/prompt" {
		t.Fatalf("after session/new: %+v", msgs)
	}
	ask := func(id int, command string) []runs.Event {
		return s.Decode([]byte(`{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"method":"session/request_permission","params":{"sessionId":"1796549785826_-TdBF_cli",` +
			`"toolCall":{"toolCallId":"call_` + string(rune('0'+id)) + `","kind":"execute","status":"pending","title":"run_commands: ` + command + `","rawInput":{"commands":["` + command + `"]}},` +
			`"options":[{"optionId":"allow_once","name":"Allow once","kind":"allow_once"},{"optionId":"allow_always","name":"Allow always","kind":"allow_always"},{"optionId":"reject_once","name":"Reject","kind":"reject_once"}]}}`))
	}
	var approval string
	for _, ev := range ask(1, "touch same.txt") {
		if a, ok := ev.Data.(runs.ApprovalRequestedData); ok {
			approval = a.ID
		}
	}
	if approval == "" {
		t.Fatal("the first request was not asked")
	}
	if err := s.Answer(approval, runs.AllowSession, ""); err != nil {
		t.Fatal(err)
	}
	s.Pending()
	if evs := ask(2, "touch same.txt"); len(evs) != 0 {
		t.Errorf("the same call again gave %+v, want no events", evs)
	}
	out, _ := s.Pending()
	msgs = written(t, out)
	if len(msgs) != 1 || string(msgs[0].ID) != "2" || !strings.Contains(string(msgs[0].Result), `"optionId":"allow_once"`) {
		t.Errorf("answer to the same call: %+v", msgs)
	}
	asked := false
	for _, ev := range ask(3, "touch other.txt") {
		asked = asked || ev.Type == runs.EventApprovalRequested
	}
	if !asked {
		t.Error("another call was not asked")
	}
}

// TestSessionLoadNotFound: a session the restored home lacks is answered
// -32002 "Resource not found: <id>" by 3.0.65 (seen with the session's
// folder kept without its index row): session_not_found.
func TestSessionLoadNotFound(t *testing.T) {
	const id = "1796563160132_axrVY_cli"
	s := newSessionDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "hi", Interactive: true, ResumeSessionID: id}})
	open := written(t, s.Open())
	s.Decode([]byte(`{"jsonrpc":"2.0","id":` + string(open[0].ID) + `,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`))
	out, _ := s.Pending()
	msgs := written(t, out)
	if len(msgs) != 1 || msgs[0].Method != "session/load" || !strings.Contains(string(msgs[0].Params), `"sessionId":"`+id+`"`) {
		t.Fatalf("after initialize: %+v", msgs)
	}
	evs := s.Decode([]byte(`{"jsonrpc":"2.0","id":` + string(msgs[0].ID) + `,"error":{"code":-32002,"message":"Resource not found: ` + id + `","data":{"uri":"` + id + `"}}}`))
	var turn *runs.TurnCompletedData
	for _, ev := range evs {
		if d, ok := ev.Data.(runs.TurnCompletedData); ok {
			turn = &d
		}
	}
	if turn == nil || turn.Status != runs.Failed || turn.Error == nil || turn.Error.Class != runs.SessionNotFound {
		t.Errorf("events %+v", evs)
	}
}
