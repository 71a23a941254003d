package openai

import (
	"testing"
)

func user(text string) InputItem { return InputItem{Type: "message", Role: "user", Text: text} }

func execCall(id, cmd string) InputItem {
	return InputItem{Type: "function_call", Name: "exec_command", CallID: id, Arguments: `{"cmd":"` + cmd + `"}`}
}

func output(id, out string) InputItem {
	return InputItem{Type: "function_call_output", CallID: id, Output: out}
}

// call returns the exec_command command a response asks for, or "".
func call(r Response) string {
	for _, it := range r.Items {
		if it.Type == "function_call" {
			return it.Name + " " + it.Arguments
		}
	}
	return ""
}

func text(r Response) string {
	for _, it := range r.Items {
		if it.Type == "message" {
			return it.Text
		}
	}
	return ""
}

func TestTwoTools(t *testing.T) {
	sc := TwoTools("touch a", "touch a", "done")
	r := sc.Respond(&Request{Input: []InputItem{user("go")}})
	if call(r) != `exec_command {"cmd":"touch a"}` || r.Usage != firstCallUsage() {
		t.Errorf("first = %+v", r)
	}
	running := &Request{Input: []InputItem{user("go"), execCall("c1", "touch a"), output("c1", "Process running with session ID 7")}}
	if r := sc.Respond(running); call(r) != `write_stdin {"chars":"","session_id":7,"yield_time_ms":300000}` {
		t.Errorf("running = %s", call(r))
	}
	second := &Request{Input: []InputItem{user("go"), execCall("c1", "touch a"), output("c1", "rejected by user")}}
	if r := sc.Respond(second); call(r) != `exec_command {"cmd":"touch a"}` {
		t.Errorf("after the first result = %+v", r)
	}
	both := &Request{Input: append(second.Input, execCall("c2", "touch a"), output("c2", "ok"))}
	if r := sc.Respond(both); text(r) != "done" {
		t.Errorf("after both = %+v", r)
	}
}

func TestTurns(t *testing.T) {
	sc := Turns("hi")
	for n := 1; n <= 3; n++ {
		if r := sc.Respond(&Request{}); text(r) != "hi" || r.Usage != TurnUsage(n) {
			t.Errorf("request %d = %+v", n, r)
		}
	}
	if TurnUsage(1) == TurnUsage(2) {
		t.Error("turns bill alike")
	}
}

func TestLongThenText(t *testing.T) {
	sc := LongThenText("sleep 60", "later")
	if r := sc.Respond(&Request{Input: []InputItem{user("go")}}); call(r) != `exec_command {"cmd":"sleep 60"}` {
		t.Errorf("first = %+v", r)
	}
	running := []InputItem{user("go"), execCall("c1", "sleep 60"), output("c1", "Process running with session ID 3")}
	if r := sc.Respond(&Request{Input: running}); call(r) == "" {
		t.Errorf("running, nothing steered = %+v, want a poll", r)
	}
	steered := &Request{Input: append(append([]InputItem(nil), running...), user("STEER"))}
	if r := sc.Respond(steered); text(r) != "later" {
		t.Errorf("steered = %+v", r)
	}
	next := &Request{Input: append(append([]InputItem(nil), running...), user("next turn"))}
	if r := sc.Respond(next); text(r) != "later" {
		t.Errorf("next turn = %+v", r)
	}
	if !steered.Contains("STEER") || steered.Contains("nowhere") || !(Ledger{{Request: *steered}}).Seen("sleep 60") {
		t.Error("Contains/Seen")
	}
}
