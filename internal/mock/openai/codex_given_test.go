package openai

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMCPTurn calls the MCP tool as Codex takes it, once the request
// offers it, and answers its output; a request without the tool gets
// NoMCPToolText.
func TestMCPTurn(t *testing.T) {
	sc := MCPTurn("demo", "reverse_text", `{"text":"hi"}`, "done")
	offered := &Request{Tools: []string{"exec_command", "mcp__demo", "mcp__demo.reverse_text"},
		Input: []InputItem{{Type: "message", Role: "user", Text: "reverse hi"}}}
	r := sc.Respond(offered)
	if len(r.Items) != 2 || r.Items[1].Namespace != "mcp__demo" || r.Items[1].Name != "reverse_text" || r.Items[1].Arguments != `{"text":"hi"}` {
		t.Fatalf("first answer %+v", r.Items)
	}
	offered.Input = append(offered.Input,
		InputItem{Type: "function_call", Namespace: "mcp__demo", Name: "reverse_text", CallID: "c1"},
		InputItem{Type: "function_call_output", CallID: "c1", Output: "Wall time: 0.0 seconds\nOutput:\nreversed:ih"})
	if r := sc.Respond(offered); len(r.Items) != 1 || r.Items[0].Text != "done" {
		t.Errorf("answer to the output %+v", r.Items)
	}
	if r := sc.Respond(&Request{Tools: []string{"exec_command"}}); len(r.Items) != 1 || r.Items[0].Text != NoMCPToolText {
		t.Errorf("without the tool %+v", r.Items)
	}
}

func TestMCPTwice(t *testing.T) {
	sc := MCPTwice("demo", "reverse_text", `{"text":"hi"}`, "done")
	req := &Request{Tools: []string{"mcp__demo", "mcp__demo.reverse_text"}, Input: []InputItem{{Type: "message", Role: "user", Text: "twice"}}}
	for i, want := range []string{"reverse_text", "reverse_text", ""} {
		r := sc.Respond(req)
		last := r.Items[len(r.Items)-1]
		if last.Name != want || (want == "" && last.Text != "done") {
			t.Fatalf("answer %d: %+v", i, r.Items)
		}
		id := string(rune('a' + i))
		req.Input = append(req.Input, InputItem{Type: "function_call", Namespace: "mcp__demo", Name: "reverse_text", CallID: id},
			InputItem{Type: "function_call_output", CallID: id, Output: "reversed:ih"})
	}
}

// TestStartWithImages keeps the input_image URLs of the requests, and
// answers them as Start's server does.
func TestStartWithImages(t *testing.T) {
	srv, images, err := StartWithImages("127.0.0.1:0", TextAnswer("ok"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	body := `{"model":"m","stream":false,"input":[{"type":"message","role":"user","content":[` +
		`{"type":"input_text","text":"<image name=[Image #1]>"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="},` +
		`{"type":"input_text","text":"</image>"},{"type":"input_text","text":"what is it?"}]}]}`
	resp, err := http.Post(srv.URL+"/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"ok"`)) {
		t.Fatalf("answer %d %s", resp.StatusCode, b)
	}
	if !images.Seen("iVBORw0KGgo=") || len(images.URLs()) != 1 || images.Seen("what is it") {
		t.Errorf("images %q", images.URLs())
	}
	if l := srv.Ledger(); len(l) != 1 || !l.Seen("what is it?") {
		t.Errorf("ledger %+v", l)
	}
}

// FuzzImagesKeep: any body is kept or ignored, never a panic.
func FuzzImagesKeep(f *testing.F) {
	f.Add([]byte(`{"input":[{"content":[{"type":"input_image","image_url":"data:x"}]}]}`))
	f.Add([]byte(`{"input":[{"content":"text"},{"content":[1,2]},null]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var im Images
		im.keep(body)
		for _, u := range im.URLs() {
			if u == "" {
				t.Fatal("kept an empty URL")
			}
		}
	})
}
