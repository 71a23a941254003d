package chat

import (
	"github.com/agentgate/agentgate/internal/mock/mocktest"
	"io"
	"testing"
)

// req builds a request summary with messages of the given roles; a tool
// message answers call_1.
func req(roles ...string) *Request {
	r := &Request{Tools: []string{BashTool}}
	for _, role := range roles {
		m := Message{Role: role, Text: role + " text"}
		if role == "tool" {
			m.ToolCallID = "call_1"
		}
		r.Messages = append(r.Messages, m)
	}
	return r
}

func TestToolThenText(t *testing.T) {
	sc := ToolThenText([]Call{Bash("echo a"), Bash("sleep 60")}, "after")
	if r := sc.Respond(&Request{Messages: []Message{{Role: "system", Text: "You are a title generator."}}}); r.Text != Title {
		t.Errorf("title request = %+v", r)
	}
	if r := sc.Respond(req("user")); len(r.Calls) != 2 || r.Calls[1].Arguments != `{"command":"sleep 60"}` {
		t.Errorf("first request = %+v", r)
	}
	// Every later request gets the text, whatever it carries: a steered
	// message, or the next turn after an interrupt left no result.
	for _, r := range []*Request{req("user", "assistant", "tool", "user"), req("user", "assistant", "user")} {
		if got := sc.Respond(r); got.Text != "after" || len(got.Calls) != 0 {
			t.Errorf("later request = %+v", got)
		}
	}
}

func TestTwoTools(t *testing.T) {
	sc := TwoTools(Bash("touch one"), Bash("touch two"), "both")
	if r := sc.Respond(req("user")); len(r.Calls) != 1 || r.Calls[0].Arguments != `{"command":"touch one"}` {
		t.Errorf("first = %+v", r)
	}
	if r := sc.Respond(req("user", "assistant", "tool")); len(r.Calls) != 1 || r.Calls[0].Arguments != `{"command":"touch two"}` {
		t.Errorf("second = %+v", r)
	}
	if r := sc.Respond(req("user", "assistant", "tool", "assistant", "tool")); r.Text != "both" {
		t.Errorf("answer = %+v", r)
	}
	// A new turn starts over: results of an earlier turn do not count.
	if r := sc.Respond(req("user", "assistant", "tool", "assistant", "tool", "assistant", "user")); len(r.Calls) != 1 {
		t.Errorf("next turn = %+v", r)
	}
}

func TestTurnsBilledApart(t *testing.T) {
	srv := start(t, Turns("noted"))
	c := mocktest.Client(t)
	for i := 0; i < 2; i++ {
		resp := post(t, c, srv.URL, []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true},`+
			`"tools":[{"type":"function","function":{"name":"bash"}}],"messages":[{"role":"user","content":"Remember SEEN-TEXT"}]}`))
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	l := srv.Ledger()
	if len(l) != 2 || l[0].Billed != TurnUsage(1) || l[1].Billed != TurnUsage(2) || TurnUsage(1) == TurnUsage(2) {
		t.Fatalf("ledger %+v", l)
	}
	if u := TurnUsage(1); u.PromptTokens <= u.CachedTokens || u.CompletionTokens <= u.ReasoningTokens || u.CachedTokens == 0 || u.ReasoningTokens == 0 {
		t.Errorf("TurnUsage(1) = %+v: every field must be set and tellable apart", u)
	}
	if !l.Seen("SEEN-TEXT") || l.Seen("NEVER-SENT") {
		t.Errorf("Seen: %v, %v", l.Seen("SEEN-TEXT"), l.Seen("NEVER-SENT"))
	}
}

func TestContains(t *testing.T) {
	r := &Request{Messages: []Message{
		{Role: "assistant", Reasoning: "thinking R1", ToolCalls: []ToolCall{{ID: "c", Name: "bash", Arguments: `{"command":"echo A1"}`}}},
		{Role: "tool", Text: "out T1", ToolCallID: "c"},
	}}
	for _, s := range []string{"R1", "A1", "T1", "bash"} {
		if !r.Contains(s) {
			t.Errorf("Contains(%q) = false", s)
		}
	}
	if r.Contains("nowhere") {
		t.Error("Contains(nowhere) = true")
	}
}
