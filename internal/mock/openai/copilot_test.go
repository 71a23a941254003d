package openai

import (
	"encoding/json"
	"github.com/agentgate/agentgate/internal/mock/mocktest"
	"io"
	"strings"
	"testing"
)

// copilotBody is a request in GitHub Copilot CLI's shape: the system
// prompt as instructions, the prompt as the one user message, then extra
// items.
func copilotBody(extra ...map[string]any) []byte {
	input := []any{
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text",
			"text": "<current_datetime>2026-11-29T22:28:19.137+00:00</current_datetime>\n\ncreate out.txt"}}},
	}
	for _, e := range extra {
		input = append(input, e)
	}
	b, _ := json.Marshal(map[string]any{
		"model": "mock-model", "stream": true, "input": input, "instructions": "You are the GitHub Copilot CLI.",
		"reasoning": map[string]any{"summary": "auto"}, "store": false, "parallel_tool_calls": true,
		"tools": []any{map[string]any{"type": "function", "name": "bash"}, map[string]any{"type": "function", "name": "read_bash"}},
	})
	return b
}

func TestBashTurn(t *testing.T) {
	s := start(t, BashTurn("echo hi > out.txt", "done"))
	c := mocktest.Client(t)
	fs := readSSE(t, post(t, c, s.URL, copilotBody()).Body)
	out := field(fs[len(fs)-1].data, "response", "output").([]any)
	call := out[len(out)-1].(map[string]any)
	callID, _ := call["call_id"].(string)
	if len(out) != 2 || out[0].(map[string]any)["type"] != "reasoning" || call["name"] != BashTool ||
		call["arguments"] != `{"command":"echo hi > out.txt","description":"Run the command"}` || callID == "" {
		t.Fatalf("first answer = %v", out)
	}
	r := s.Ledger()[0].Request
	if r.Instructions != "You are the GitHub Copilot CLI." || !strings.HasSuffix(r.LastUserText(), "create out.txt") || !r.HasTool("read_bash") {
		t.Errorf("request = %+v", r)
	}

	// Copilot's follow-up replays the call and adds its output.
	follow := copilotBody(callItem(callID, BashTool, call["arguments"].(string)),
		outputItem(callID, "\n<shellId: 0 completed with exit code 0>"))
	fs = readSSE(t, post(t, c, s.URL, follow).Body)
	if got := field(fs[len(fs)-1].data, "response", "output").([]any); len(got) != 1 ||
		field(got[0].(map[string]any)["content"].([]any)[0].(map[string]any), "text") != "done" {
		t.Errorf("follow-up output = %v", got)
	}
	// A command still running is waited for with read_bash.
	running := copilotBody(callItem(callID, BashTool, call["arguments"].(string)),
		outputItem(callID, "<shellId: 3 still running after 30 seconds>"))
	fs = readSSE(t, post(t, c, s.URL, running).Body)
	poll := field(fs[len(fs)-1].data, "response", "output").([]any)[0].(map[string]any)
	var args map[string]any
	_ = json.Unmarshal([]byte(poll["arguments"].(string)), &args)
	if poll["name"] != ReadBashTool || args["shellId"] != "3" || args["delay"] != float64(bashPollWait) {
		t.Errorf("poll = %v", poll)
	}
	// The poll's output, once the command is done, gets the answer.
	polled := copilotBody(callItem(callID, BashTool, call["arguments"].(string)), outputItem(callID, "<shellId: 3 still running>"),
		callItem("call_p", ReadBashTool, poll["arguments"].(string)), outputItem("call_p", "<shellId: 3 completed with exit code 0>"))
	fs = readSSE(t, post(t, c, s.URL, polled).Body)
	if got := field(fs[len(fs)-1].data, "response", "output").([]any); len(got) != 1 || got[0].(map[string]any)["type"] != "message" {
		t.Errorf("answer after the poll = %v", got)
	}
	// Another command's output is not this turn's: a new call.
	other := copilotBody(callItem("c9", BashTool, `{"command":"ls"}`), outputItem("c9", "x"))
	fs = readSSE(t, post(t, c, s.URL, other).Body)
	if got := field(fs[len(fs)-1].data, "response", "output").([]any); len(got) != 2 {
		t.Errorf("foreign output answered with %v", got)
	}
	if got, want := s.Ledger().Billed(), firstCallUsage().Add(followUpUsage()).Add(followUpUsage()).Add(followUpUsage()).Add(firstCallUsage()); got != want {
		t.Errorf("billed = %+v, want %+v", got, want)
	}
}

func TestRequireKey(t *testing.T) {
	s := start(t, TextAnswer("hi"), RequireKey("k1"))
	c := mocktest.Client(t)
	if resp := post(t, c, s.URL, copilotBody()); resp.StatusCode != 200 {
		t.Errorf("the right key got %d", resp.StatusCode)
	} else {
		// The answer is billed once the stream ends: read it all.
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	resp := post(t, c, s.URL, copilotBody(), "Authorization", "Bearer wrong")
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 401 || body.Error.Code != "invalid_api_key" {
		t.Errorf("a wrong key got %d %+v", resp.StatusCode, body)
	}
	l := s.Ledger()
	if len(l) != 2 || l[1].Status != 401 || l[1].Billed != (Usage{}) || l.Billed() != textUsage() {
		t.Errorf("ledger = %+v", l)
	}
}

func TestNamedBash(t *testing.T) {
	sc, err := Named("bash-tool", "touch x")
	if err != nil {
		t.Fatal(err)
	}
	if r := sc.Respond(&Request{}); r.Items[1].Name != BashTool || !strings.Contains(r.Items[1].Arguments, `"command":"touch x"`) {
		t.Errorf("bash-tool = %+v", r.Items)
	}
	sc, _ = Named("bash-long-tool", "")
	if r := sc.Respond(&Request{}); !strings.Contains(r.Items[1].Arguments, LongCommand) {
		t.Errorf("bash-long-tool = %+v", r.Items)
	}
}
