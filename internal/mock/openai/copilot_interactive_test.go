package openai

import (
	"strings"
	"testing"
)

func userMsg(text string) InputItem { return InputItem{Type: "message", Role: "user", Text: text} }

func bashItem(id, command string) InputItem {
	return InputItem{Type: "function_call", Name: BashTool, CallID: id, Arguments: BashCall(command).Arguments}
}

func outItem(id, output string) InputItem {
	return InputItem{Type: "function_call_output", CallID: id, Output: output}
}

func TestBashTwoTools(t *testing.T) {
	sc := BashTwoTools("touch a", "touch b", "both")
	done := "\n<shellId: 0 completed with exit code 0>"
	r := sc.Respond(&Request{Input: []InputItem{userMsg("go")}})
	if len(r.Items) != 2 || !strings.Contains(r.Items[1].Arguments, `"command":"touch a"`) || r.Usage != firstCallUsage() {
		t.Errorf("first = %+v", r)
	}
	r = sc.Respond(&Request{Input: []InputItem{userMsg("go"), bashItem("c1", "touch a"), outItem("c1", done)}})
	if len(r.Items) != 1 || !strings.Contains(r.Items[0].Arguments, `"command":"touch b"`) || r.Usage != followUpUsage() {
		t.Errorf("second = %+v", r)
	}
	// A command still running is waited for, and counts once.
	r = sc.Respond(&Request{Input: []InputItem{userMsg("go"), bashItem("c1", "touch a"), outItem("c1", "<shellId: 4 still running>")}})
	if len(r.Items) != 1 || r.Items[0].Name != ReadBashTool || !strings.Contains(r.Items[0].Arguments, `"shellId":"4"`) {
		t.Errorf("poll = %+v", r)
	}
	r = sc.Respond(&Request{Input: []InputItem{userMsg("go"), bashItem("c1", "touch a"), outItem("c1", done),
		bashItem("c2", "touch b"), outItem("c2", "The user rejected this tool call.")}})
	if len(r.Items) != 1 || r.Items[0].Type != "message" || r.Items[0].Text != "both" {
		t.Errorf("answer = %+v", r)
	}
	// The next turn starts over.
	r = sc.Respond(&Request{Input: []InputItem{userMsg("go"), bashItem("c1", "touch a"), outItem("c1", done), userMsg("again")}})
	if len(r.Items) != 2 || r.Items[1].Name != BashTool {
		t.Errorf("next turn = %+v", r)
	}
}

func TestBashLongThenText(t *testing.T) {
	sc := BashLongThenText("sleep 60; echo m", "after")
	r := sc.Respond(&Request{Input: []InputItem{userMsg("go")}})
	if len(r.Items) != 2 || !strings.Contains(r.Items[1].Arguments, "sleep 60; echo m") {
		t.Errorf("first = %+v", r)
	}
	call := bashItem("c1", "sleep 60; echo m")
	r = sc.Respond(&Request{Input: []InputItem{userMsg("go"), call, outItem("c1", "<shellId: 0 still running after 30 seconds>")}})
	if len(r.Items) != 1 || r.Items[0].Name != ReadBashTool {
		t.Errorf("poll = %+v", r)
	}
	// After an interrupt the next prompt, with the call replayed, gets
	// the text, as does a prompt that cancelled the running one.
	for _, in := range [][]InputItem{
		{userMsg("go"), call, outItem("c1", "The execution of this tool, or a previous tool was interrupted."), userMsg("next")},
		{userMsg("go"), call, userMsg("next")},
	} {
		if r := sc.Respond(&Request{Input: in}); len(r.Items) != 1 || r.Items[0].Text != "after" || r.Usage != followUpUsage() {
			t.Errorf("later = %+v", r)
		}
	}
}
