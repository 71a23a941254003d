package opencode

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/mock/chat"
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

// TestGivenImageRefused: with a model whose entry does not declare image
// input, a run with an image is refused before it starts, and an
// interactive run's message with one is refused, naming attachments,
// instead of OpenCode replacing the image with an error text. The same
// session's two turns of one model request each, model and effort set,
// report exactly what was billed for them, without a title request beside
// the first (the title agent is off in a Session run). Its third turn's
// request gets a 401, which fails the turn as not_authenticated, read from
// the API's message: OpenCode's ACP error drops the status.
func TestGivenImageRefused(t *testing.T) {
	t.Parallel()
	plain := func(url, key string) string { return mockConfigWith(url, key, `"attachment": true,`) }
	spec := runs.Spec{Prompt: "Remember 7.", Interactive: true, Model: "mock/mock-model", Effort: "high"}
	s := startSessionWith(t, sessionSetup{spec: spec, sc: unauthorizedOn("Fail now.", chat.Turns("noted")), config: plain})
	one, _ := s.WaitTurn(1, sessionWithin)
	first := s.srv.Ledger().Completions()
	err := s.Do(func(x runs.Session) error { return x.Send("And this?", []runs.Image{pngImage(t)}, false) })
	var fe *runs.FieldError
	if !errors.Is(err, runs.ErrUnsupported) || !errors.As(err, &fe) || fe.Field != runs.FieldAttachments {
		t.Errorf("Send with an image: %v, want unsupported attachments", err)
	}
	if err := s.Do(func(x runs.Session) error { return x.Send("What was it?", nil, false) }); err != nil {
		t.Fatal(err)
	}
	two, _ := s.WaitTurn(2, sessionWithin)
	all := s.srv.Ledger().Completions()
	if err := s.Do(func(x runs.Session) error { return x.Send("Fail now.", nil, false) }); err != nil {
		t.Fatal(err)
	}
	if three, _ := s.WaitTurn(3, sessionWithin); three.Status != runs.Failed || three.Error == nil || three.Error.Class != runs.NotAuthenticated {
		t.Errorf("turn 3 on a 401: %+v, error %+v", three, three.Error)
	}
	o := s.close(t)
	if len(first) != 1 || len(all) != 2 || s.srv.Ledger().Seen("And this?") || len(s.srv.Ledger().Titles()) != 0 {
		t.Fatalf("%d model requests after turn 1, %d in all, the refused message seen %v, %d title requests: want one a turn, none of the refused message",
			len(first), len(all), s.srv.Ledger().Seen("And this?"), len(s.srv.Ledger().Titles()))
	}
	if all[0].Request.ReasoningEffort != "high" || all[0].Request.Model != "mock-model" {
		t.Errorf("request: effort %q, model %q", all[0].Request.ReasoningEffort, all[0].Request.Model)
	}
	want1, want2 := normalized(chat.TurnUsage(1)), normalized(chat.TurnUsage(2))
	if one.Usage != want1 || two.Usage != want2 || o.Usage != want1.Add(want2) || o.NumTurns != 3 {
		t.Errorf("turns %+v, %+v, run %+v (%d turns); billed %+v, %+v", one.Usage, two.Usage, o.Usage, o.NumTurns, want1, want2)
	}
	wantCost(t, "turn 1", one.CostUSD, first)
	wantCost(t, "turn 2", two.CostUSD, all[1:])
	wantCost(t, "run", o.CostUSD, all)
	s.noWarnings(t)

	inv := runs.Invocation{Spec: runs.Spec{Prompt: "Describe it.", Attachments: []runs.Attachment{pngAttachment}}, Home: s.home, Dir: s.dir}
	if _, err := New().Command(inv); !errors.Is(err, runs.ErrUnsupported) || !errors.As(err, &fe) || fe.Field != runs.FieldAttachments {
		t.Errorf("Command with an image: %v, want unsupported attachments", err)
	}
}

// unauthorizedOn answers a request whose last user message holds prompt
// with a 401, and every other one as sc does.
func unauthorizedOn(prompt string, sc chat.Scenario) chat.Scenario {
	failure := chat.Failure(http.StatusUnauthorized)
	return chat.Func(func(req *chat.Request) chat.Response {
		if strings.Contains(req.LastUserText(), prompt) {
			return failure.Respond(req)
		}
		return sc.Respond(req)
	})
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
