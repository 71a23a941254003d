package opencode

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
)

// testPNG is a 1×1 PNG.
var testPNG, _ = base64.StdEncoding.DecodeString(
	"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

// pngImage is testPNG as the supervisor hands it to the adapter.
func pngImage(t *testing.T) runs.Image {
	return runs.Image{Path: t.TempDir() + "/image.png", MediaType: "image/png", Data: testPNG}
}

// pngAttachment is testPNG as the run's spec names it.
var pngAttachment = runs.Attachment{FileID: "file-1", MediaType: "image/png", Size: int64(len(testPNG))}

// mcpSpec is a run given the test binary as its MCP server "demo", with
// secret as its token.
func mcpSpec(t *testing.T, prompt, secret string) runs.Spec {
	t.Helper()
	srv, err := mcptest.Server(secret)
	if err != nil {
		t.Fatal(err)
	}
	return runs.Spec{Prompt: prompt, MCPServers: map[string]runs.MCPServer{mcptest.Name: srv}}
}

// mcpCall is the mock model's call of the demo server's tool.
func mcpCall(tool, args string) chat.Call { return chat.OpenCodeMCPCall(mcptest.Name, tool, args) }

// toolEvents returns the run's tool_call.started and .completed of the
// call named name.
func toolEvents(t *testing.T, evs []runs.Event, name string) (runs.ToolCallStartedData, runs.ToolCallCompletedData) {
	t.Helper()
	var started runs.ToolCallStartedData
	for _, ev := range ofType(evs, runs.EventToolCallStarted) {
		if d := ev.Data.(runs.ToolCallStartedData); d.Name == name {
			started = d
		}
	}
	if started.ID == "" {
		t.Fatalf("no tool_call.started of %s in %s", name, typesOf(evs))
	}
	for _, ev := range ofType(evs, runs.EventToolCallCompleted) {
		if d := ev.Data.(runs.ToolCallCompletedData); d.ID == started.ID {
			return started, d
		}
	}
	t.Fatalf("no tool_call.completed of %s (%s)", name, started.ID)
	return started, runs.ToolCallCompletedData{}
}

func typesOf(evs []runs.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(string(ev.Type) + " ")
	}
	return b.String()
}

// TestGivenMCPTool: a run that is neither interactive nor asks, given
// the demo MCP server, runs over ACP; the model calls reverse_text as
// OpenCode offers it (demo_reverse_text), the call runs unasked, and its
// events name the server and the tool.
func TestGivenMCPTool(t *testing.T) {
	t.Parallel()
	s := startSessionWith(t, sessionSetup{
		spec: mcpSpec(t, "Reverse hello mcp.", "not-a-secret"),
		sc:   chat.ToolTurn(mcpCall("reverse_text", `{"text":"hello mcp"}`), "Reversed."),
	})
	turn, _ := s.WaitTurn(1, sessionWithin)
	o := s.close(t)
	if turn.Status != runs.Succeeded || o.Status != runs.Succeeded {
		t.Errorf("turn %+v, outcome %+v", turn, o)
	}
	started, done := toolEvents(t, s.Events(), "demo_reverse_text")
	if started.MCPServer != "demo" || started.MCPTool != "reverse_text" {
		t.Errorf("tool_call.started %+v: want mcp_server demo, mcp_tool reverse_text", started)
	}
	if done.IsError || !strings.Contains(done.Output, mcptest.Reversed("hello mcp")) || mcptest.Reversed("hello mcp") != "reversed:pcm olleh" {
		t.Errorf("tool_call.completed %+v", done)
	}
	l := s.srv.Ledger().Completions()
	if len(l) == 0 || !l[0].Request.HasTool("demo_reverse_text") {
		t.Errorf("the model was not offered demo_reverse_text")
	}
	if n := len(ofType(s.Events(), runs.EventApprovalRequested)); n != 0 {
		t.Errorf("%d approvals in a run without approvals", n)
	}
}

// TestGivenMCPSecret: the server's token, which show_token echoes, is in
// the Command's Secrets, so that the supervisor redacts it from every
// event: it reached the tool's output, and nothing is left of it once
// redacted.
func TestGivenMCPSecret(t *testing.T) {
	t.Parallel()
	const secret = "mcp-secret-6f1d2c9a7b"
	s := startSessionWith(t, sessionSetup{
		spec: mcpSpec(t, "Show the token.", secret),
		sc:   chat.ToolTurn(mcpCall("show_token", `{}`), "Shown."),
	})
	s.WaitTurn(1, sessionWithin)
	s.close(t)
	if !contains(s.cmd.Secrets, secret) {
		t.Fatalf("Command.Secrets %q lacks the server's env value", s.cmd.Secrets)
	}
	_, done := toolEvents(t, s.Events(), "demo_show_token")
	if !strings.Contains(done.Output, "token:"+secret) {
		t.Errorf("show_token's output %q: the server did not get its env", done.Output)
	}
	red, err := redact.New(redact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	red = red.With(s.cmd.Secrets...)
	for _, ev := range s.Events() {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(red.Bytes(b)), secret) {
			t.Errorf("the secret survives redaction in %s", b)
		}
	}
}

// TestGivenMCPAsk: with approvals ask, the MCP call is asked for like any
// tool, the request names the server, and the call runs once allowed.
func TestGivenMCPAsk(t *testing.T) {
	t.Parallel()
	spec := mcpSpec(t, "Reverse hello mcp.", "not-a-secret")
	spec.Approvals = runs.ApprovalsAsk
	s := startSessionWith(t, sessionSetup{spec: spec,
		sc: chat.ToolTurn(mcpCall("reverse_text", `{"text":"hello mcp"}`), "Reversed.")})
	req, _ := s.answer(t, 0, runs.Allow)
	if req.MCPServer != "demo" || req.Tool != "demo_reverse_text" {
		t.Errorf("approval %+v: want tool demo_reverse_text of server demo", req)
	}
	turn, _ := s.WaitTurn(1, sessionWithin)
	s.close(t)
	_, done := toolEvents(t, s.Events(), "demo_reverse_text")
	if turn.Status != runs.Succeeded || !strings.Contains(done.Output, "reversed:pcm olleh") {
		t.Errorf("turn %+v, tool output %q", turn, done.Output)
	}
}

// TestGivenImage: a run's PNG reaches the model, as an image_url part
// with its base64, over ACP.
func TestGivenImage(t *testing.T) {
	t.Parallel()
	s := startSessionWith(t, sessionSetup{
		spec:   runs.Spec{Prompt: "Describe the image.", Attachments: []runs.Attachment{pngAttachment}},
		sc:     chat.TextAnswer("A dot."),
		images: []runs.Image{pngImage(t)},
	})
	turn, _ := s.WaitTurn(1, sessionWithin)
	s.close(t)
	if turn.Status != runs.Succeeded {
		t.Errorf("turn %+v", turn)
	}
	if !s.srv.Ledger().Seen(base64.StdEncoding.EncodeToString(testPNG)) {
		t.Error("the model did not receive the image's bytes")
	}
	if s.srv.Ledger().Seen("does not support image input") {
		t.Error("OpenCode replaced the image with its error text")
	}
}

// TestGivenImageMessage: an interactive run's follow-up message carries
// an image to the model.
func TestGivenImageMessage(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "Hello.", Interactive: true}, chat.Turns("Seen."))
	s.WaitTurn(1, sessionWithin)
	b64 := base64.StdEncoding.EncodeToString(testPNG)
	if s.srv.Ledger().Seen(b64) {
		t.Fatal("the image reached the model before it was sent")
	}
	if err := s.Do(func(x runs.Session) error { return x.Send("And this?", []runs.Image{pngImage(t)}, false) }); err != nil {
		t.Fatal(err)
	}
	two, _ := s.WaitTurn(2, sessionWithin)
	s.close(t)
	if two.Status != runs.Succeeded || !s.srv.Ledger().Seen(b64) {
		t.Errorf("turn 2 %+v; image seen: %v", two, s.srv.Ledger().Seen(b64))
	}
}

// TestGivenImageRefused: with a model whose entry does not declare image
// input, a run with an image is refused before it starts, and an
// interactive run's message with one is refused, naming attachments,
// instead of OpenCode replacing the image with an error text.
func TestGivenImageRefused(t *testing.T) {
	t.Parallel()
	plain := func(url, key string) string { return mockConfigWith(url, key, `"attachment": true,`) }
	s := startSessionWith(t, sessionSetup{spec: runs.Spec{Prompt: "Hello.", Interactive: true}, sc: chat.Turns("Seen."), config: plain})
	s.WaitTurn(1, sessionWithin)
	err := s.Do(func(x runs.Session) error { return x.Send("And this?", []runs.Image{pngImage(t)}, false) })
	var fe *runs.FieldError
	if !errors.Is(err, runs.ErrUnsupported) || !errors.As(err, &fe) || fe.Field != runs.FieldAttachments {
		t.Errorf("Send with an image: %v, want unsupported attachments", err)
	}
	s.close(t)
	if n := len(s.srv.Ledger().Completions()); n != 1 {
		t.Errorf("%d model requests, want turn 1's only", n)
	}

	inv := runs.Invocation{Spec: runs.Spec{Prompt: "Describe it.", Attachments: []runs.Attachment{pngAttachment}}, Home: s.home, Dir: s.dir}
	if _, err := New().Command(inv); !errors.Is(err, runs.ErrUnsupported) || !errors.As(err, &fe) || fe.Field != runs.FieldAttachments {
		t.Errorf("Command with an image: %v, want unsupported attachments", err)
	}
}

// TestGivenUsageMidTurn: in a Session run whose model calls a tool on
// every request, usage.updated comes during the turn, before it ends, with
// its cost so far, and grows, so that the gateway's token budget can stop a turn that never
// ends by itself; the store is read for it (no warning).
func TestGivenUsageMidTurn(t *testing.T) {
	t.Parallel()
	s := startSession(t, runs.Spec{Prompt: "Loop.", Interactive: true}, chat.AlwaysTool(chat.Bash("echo again")))
	var first runs.UsageData
	i := 0
	for n := 0; n < 2; n++ {
		ev, j := s.WaitType(i, sessionWithin, runs.EventUsageUpdated)
		u := ev.Data.(runs.UsageData)
		if n == 0 {
			first = u
		} else if u.Usage.InputTokens <= first.Usage.InputTokens {
			t.Errorf("usage did not grow: %+v then %+v", first.Usage, u.Usage)
		}
		i = j + 1
	}
	if first.Usage.InputTokens == 0 || first.Usage.OutputTokens == 0 || first.CostUSD == nil || *first.CostUSD <= 0 {
		t.Errorf("first usage.updated %+v, cost %v: want the turn's tokens and cost so far", first.Usage, first.CostUSD)
	}
	if n := len(ofType(s.Events(), runs.EventTurnCompleted)); n != 0 {
		t.Fatalf("%d turns completed: the scenario never ends a turn", n)
	}
	if err := s.Do(func(x runs.Session) error { return x.InterruptTurn() }); err != nil {
		t.Fatal(err)
	}
	s.WaitTurn(1, sessionWithin)
	o := s.close(t)
	if o.Usage.InputTokens < first.Usage.InputTokens {
		t.Errorf("the run's usage %+v fell below what was reported during it, %+v", o.Usage, first.Usage)
	}
	s.noWarnings(t)
}
