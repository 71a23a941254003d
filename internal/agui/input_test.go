package agui

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

const sampleInput = `{
  "threadId": "thread-1", "runId": "run-1", "parentRunId": "run-0", "protocolVersion": "1.0",
  "state": {"run_id": "r"},
  "messages": [
    {"id": "s1", "role": "system", "content": "be brief"},
    {"id": "u1", "role": "user", "content": "first"},
    {"id": "a1", "role": "assistant", "content": "ok", "toolCalls": []},
    {"id": "u2", "role": "user", "content": [
      {"type": "text", "text": "look at"},
      {"type": "image", "source": {"type": "data", "value": "aGk=", "mimeType": "image/png"}},
      {"type": "image", "source": {"type": "file", "value": "file-abc"}},
      {"type": "binary", "mimeType": "image/jpeg", "data": "aGk="},
      {"type": "text", "text": "these", "metadata": {"x": 1}}
    ]}
  ],
  "tools": [{"name": "t", "description": "d", "parameters": {}}],
  "context": [{"description": "d", "value": "v"}],
  "forwardedProps": {"agent": "claude"},
  "resume": [{"interruptId": "i-1", "status": "resolved", "payload": {"approved": true}, "metadata": {"sig": "x"}}],
  "somethingNewer": 1
}`

func TestDecodeInput(t *testing.T) {
	in, err := DecodeInput([]byte(sampleInput))
	if err != nil {
		t.Fatal(err)
	}
	if in.ThreadID != "thread-1" || in.RunID != "run-1" || in.ParentRunID != "run-0" ||
		string(in.State) != `{"run_id": "r"}` || string(in.ForwardedProps) != `{"agent": "claude"}` {
		t.Errorf("input = %+v", in)
	}
	var roles []string
	for _, m := range in.Messages {
		roles = append(roles, m.Role)
	}
	if !slices.Equal(roles, []string{"system", "user", "assistant", "user"}) {
		t.Errorf("roles %v", roles)
	}
	if p := in.Messages[1].Parts; len(p) != 1 || p[0].Text != "first" || p[0].Field != "messages[1].content" {
		t.Errorf("string content = %+v", p)
	}
	p := in.Messages[3].Parts
	want := []Part{
		{Type: "text", Text: "look at", Field: "messages[3].content[0]"},
		{Type: "image", Data: "aGk=", MediaType: "image/png", Field: "messages[3].content[1]"},
		{Type: "image", FileID: "file-abc", Field: "messages[3].content[2]"},
		{Type: "image", Data: "aGk=", MediaType: "image/jpeg", Field: "messages[3].content[3]"},
		{Type: "text", Text: "these", Field: "messages[3].content[4]"},
	}
	if !slices.Equal(p, want) {
		t.Errorf("parts =\n%+v\nwant\n%+v", p, want)
	}
	if len(in.Resume) != 1 || in.Resume[0].InterruptID != "i-1" || in.Resume[0].Status != ResumeResolved ||
		string(in.Resume[0].Payload) != `{"approved": true}` {
		t.Errorf("resume = %+v", in.Resume)
	}
	// The minimal input of AG-UI 1.0: tools, context and the rest absent.
	in, err = DecodeInput([]byte(`{"threadId":"t","runId":"r","messages":[],"state":null,"forwardedProps":null}`))
	if err != nil || in.State != nil || in.ForwardedProps != nil || len(in.Messages) != 0 {
		t.Errorf("minimal input = %+v, %v", in, err)
	}
}

func TestDecodeInputRefuses(t *testing.T) {
	for _, c := range []struct{ body, field, reason string }{
		{``, "", "not valid JSON"},
		{`[]`, "", "JSON object"},
		{`{"threadId":"t","runId":"r","messages":[]} {}`, "", "after the JSON object"},
		{`{"runId":"r","messages":[]}`, "threadId", "required"},
		{`{"threadId":"","runId":"r","messages":[]}`, "threadId", "required"},
		{`{"threadId":"` + strings.Repeat("x", 257) + `","runId":"r","messages":[]}`, "threadId", "256"},
		{`{"threadId":1,"runId":"r","messages":[]}`, "threadId", "string"},
		{`{"threadId":"t","threadId":"u","runId":"r","messages":[]}`, "threadId", "more than once"},
		{`{"threadId":"t","runId":"r"}`, "messages", "required"},
		{`{"threadId":"t","runId":"r","messages":{}}`, "messages", "array"},
		{`{"threadId":"t","runId":"r","messages":[1]}`, "messages[0]", "object"},
		{`{"threadId":"t","runId":"r","messages":[{"role":"user","content":"x"}]}`, "messages[0].id", "required"},
		{`{"threadId":"t","runId":"r","messages":[{"id":"m","role":"robot"}]}`, "messages[0].role", "one of"},
		{`{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user"}]}`, "messages[0].content", "required"},
		{`{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":5}]}`, "messages[0].content", "string or an array"},
		{`{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", "required"},
		{`{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":[{"type":"audio","source":{}}]}]}`, "messages[0].content[0].type", "only text and image"},
		{`{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":[{"type":"image","source":{"type":"url","value":"http://x"}}]}]}`, "messages[0].content[0].source.type", "URL"},
		{`{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":[{"type":"image","source":{"type":"data"}}]}]}`, "messages[0].content[0].source.value", "required"},
		{`{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":[{"type":"binary","mimeType":"application/pdf","data":"x"}]}]}`, "messages[0].content[0].mimeType", "images"},
		{`{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":[{"type":"video"}]}]}`, "messages[0].content[0].type", "only text and image"},
		{`{"threadId":"t","runId":"r","messages":[],"tools":{}}`, "tools", "array"},
		{`{"threadId":"t","runId":"r","messages":[],"context":[3]}`, "context[0]", "object"},
		{`{"threadId":"t","runId":"r","messages":[],"resume":[{"status":"resolved"}]}`, "resume[0].interruptId", "required"},
		{`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"i","status":"done"}]}`, "resume[0].status", "resolved or cancelled"},
		{`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"i","status":"cancelled","metadata":[]}]}`, "resume[0].metadata", "object"},
	} {
		_, err := DecodeInput([]byte(c.body))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Reason, c.reason) {
			t.Errorf("%s:\n  error %v, want field %q saying %q", c.body, err, c.field, c.reason)
		}
	}
}

// FuzzDecodeInput: no panic, and what decodes keeps the promises of Input.
func FuzzDecodeInput(f *testing.F) {
	f.Add([]byte(sampleInput))
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"x/y","status":"cancelled"}]}`))
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":[{"type":"image","source":{"type":"file","value":"f"}}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := DecodeInput(body)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Reason == "" {
				t.Fatalf("error %v is not a FieldError with a reason", err)
			}
			return
		}
		if in.ThreadID == "" || in.RunID == "" || len(in.ThreadID) > maxIDBytes || len(in.RunID) > maxIDBytes {
			t.Fatalf("ids %q %q", in.ThreadID, in.RunID)
		}
		for _, m := range in.Messages {
			if !slices.Contains(roles, m.Role) || (m.Role != "user" && m.Parts != nil) {
				t.Fatalf("message %+v", m)
			}
			for _, p := range m.Parts {
				switch {
				case p.Type == "text":
				case p.Type == "image" && (p.Data != "") != (p.FileID != ""):
				default:
					t.Fatalf("part %+v", p)
				}
			}
		}
		for _, r := range in.Resume {
			if r.InterruptID == "" || (r.Status != ResumeResolved && r.Status != ResumeCancelled) {
				t.Fatalf("resume %+v", r)
			}
		}
	})
}
