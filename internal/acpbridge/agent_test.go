package acpbridge

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestContentOf(t *testing.T) {
	blocks := []json.RawMessage{
		json.RawMessage(`{"type":"text","text":"Fix the bug"}`),
		json.RawMessage(`{"type":"resource_link","name":"main.go","uri":"file:///p/main.go"}`),
		json.RawMessage(`{"type":"resource","resource":{"uri":"file:///p/a.go","text":"package a"}}`),
		json.RawMessage(`{"type":"image","mimeType":"image/png","data":"iVBORw=="}`),
	}
	c, err := contentOf(blocks)
	if err != nil {
		t.Fatal(err)
	}
	want := "Fix the bug\n\n[main.go](file:///p/main.go)\n\n<resource uri=\"file:///p/a.go\">\npackage a\n</resource>"
	if c.text != want || len(c.images) != 1 || c.images[0].mediaType != "image/png" || len(c.images[0].data) != 4 {
		t.Fatalf("content %q %+v", c.text, c.images)
	}
	for _, bad := range []string{
		`{"type":"audio","data":"AA==","mimeType":"audio/wav"}`,
		`{"type":"resource","resource":{"uri":"file:///b","blob":"AA=="}}`,
		`{"type":"image","mimeType":"image/png","data":"not base64!"}`,
	} {
		if _, err := contentOf([]json.RawMessage{json.RawMessage(`{"type":"text","text":"x"}`), json.RawMessage(bad)}); err == nil {
			t.Errorf("%s was taken", bad)
		}
	}
	if _, err := contentOf([]json.RawMessage{json.RawMessage(`{"type":"image","mimeType":"image/png","data":"iVBORw=="}`)}); err == nil {
		t.Error("a prompt of an image alone, with no text, was taken")
	}
}

func TestMCPServersOf(t *testing.T) {
	got, err := mcpServersOf([]json.RawMessage{
		json.RawMessage(`{"name":"files","command":"/opt/mcp/files","args":["--stdio"],"env":[{"name":"TOKEN","value":"s"}]}`),
		json.RawMessage(`{"type":"http","name":"docs","url":"https://mcp.example.com/","headers":[{"name":"Authorization","value":"Bearer x"}]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if want := `{"docs":{"url":"https://mcp.example.com/","headers":{"Authorization":"Bearer x"}},"files":{"command":"/opt/mcp/files","args":["--stdio"],"env":{"TOKEN":"s"}}}`; string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	if _, err := mcpServersOf([]json.RawMessage{json.RawMessage(`{"type":"sse","name":"old","url":"https://x/"}`)}); err == nil || !strings.Contains(err.Error(), "old") {
		t.Fatalf("an sse server: %v", err)
	}
}

func TestToolTitleAndKind(t *testing.T) {
	cases := []struct{ name, input, title, kind string }{
		{"Bash", `{"command":"go test\n  ./..."}`, "Bash: go test ./...", "execute"},
		{"Write", `{"file_path":"a.txt","content":"x"}`, "Write: a.txt", "edit"},
		{"Read", `{"file_path":"a.txt"}`, "Read: a.txt", "read"},
		{"Grep", `{"pattern":"TODO"}`, "Grep: TODO", "search"},
		{"WebFetch", `{"url":"https://example.com"}`, "WebFetch: https://example.com", "fetch"},
		{"TodoWrite", `{"todos":[]}`, "TodoWrite", "think"},
		{"mystery", `not json`, "mystery", "other"},
	}
	for _, c := range cases {
		if got := toolTitle(c.name, json.RawMessage(c.input)); got != c.title {
			t.Errorf("toolTitle(%s) = %q, want %q", c.name, got, c.title)
		}
		if got := toolKind(c.name); got != c.kind {
			t.Errorf("toolKind(%s) = %q, want %q", c.name, got, c.kind)
		}
	}
}

func TestDecisionOf(t *testing.T) {
	for in, want := range map[string]string{
		`{"outcome":{"outcome":"selected","optionId":"allow"}}`:         "allow",
		`{"outcome":{"outcome":"selected","optionId":"allow_session"}}`: "allow_session",
		`{"outcome":{"outcome":"selected","optionId":"deny"}}`:          "deny",
		`{"outcome":{"outcome":"selected","optionId":"made_up"}}`:       "deny",
		`{"outcome":{"outcome":"cancelled"}}`:                           "deny",
		`nonsense`:                                                      "deny",
	} {
		if got := decisionOf(json.RawMessage(in)); got != want {
			t.Errorf("decisionOf(%s) = %q, want %q", in, got, want)
		}
	}
}
