package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/runs"
)

// mcpInput is what the model asks reverse_text to reverse.
const mcpInput = "hello mcp"

// mcpCases are the cases of a run's own MCP server, the test binary
// serving mcptest's tools, for an agent that takes them; for one that
// does not, a case checks that it refuses them by name. Either way the
// operator's allow-list is checked.
func (s *suite) mcpCases() []suiteCase {
	cases := []suiteCase{{"mcp_not_allowed", s.mcpNotAllowed}}
	if !slices.Contains(s.adapter.Describe().Fields, runs.FieldMCPServers) {
		return append(cases, suiteCase{"mcp_refused", s.mcpRefused})
	}
	return append(cases,
		suiteCase{"mcp_tool", s.mcpTool},
		suiteCase{"mcp_secret", s.mcpSecret},
		suiteCase{"mcp_approval", s.mcpApproval},
	)
}

// mcpServer is the suite's MCP server with secret as its token.
func mcpServer(t *testing.T, secret string) map[string]runs.MCPServer {
	t.Helper()
	srv, err := mcptest.Server(secret)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]runs.MCPServer{mcptest.Name: srv}
}

func newSecret() string { return "mcp-secret-" + strings.ReplaceAll(uuid.NewString(), "-", "") }

// mcpTool: the model calls reverse_text; the tool's result is in the
// events, and its call names the server and the tool.
func (s *suite) mcpTool(t *testing.T) {
	g := s.start(t, Scenario{Kind: MCPTool, MCPServer: mcptest.Name, MCPTool: "reverse_text",
		Input: `{"text":"` + mcpInput + `"}`, Text: "The tool answered."}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Reverse the text with the demo tool.", MCPServers: mcpServer(t, newSecret())})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	g.wantMCPCall(t, evs, "reverse_text", mcptest.Reversed(mcpInput))
	g.wantUsage(t, r)
}

// wantMCPCall checks that evs hold a tool_call.started of the demo
// server's tool, and a tool_call.completed of it whose output holds want.
func (g *gateway) wantMCPCall(t *testing.T, evs []runs.Event, tool, want string) {
	t.Helper()
	var id string
	for _, ev := range of(evs, runs.EventToolCallStarted) {
		var d runs.ToolCallStartedData
		decode(t, ev, &d)
		if d.MCPServer == mcptest.Name && d.MCPTool == tool {
			id = d.ID
		}
	}
	if id == "" {
		t.Errorf("no tool_call.started with mcp_server %q and mcp_tool %q: %s", mcptest.Name, tool, dump(evs, runs.EventToolCallStarted))
	}
	for _, ev := range of(evs, runs.EventToolCallCompleted) {
		var d runs.ToolCallCompletedData
		decode(t, ev, &d)
		if strings.Contains(d.Output, want) {
			if id != "" && d.ID != id {
				t.Errorf("the result %q is of tool call %s, not %s", want, d.ID, id)
			}
			return
		}
	}
	t.Errorf("no tool_call.completed with %q: %s", want, dump(evs, runs.EventToolCallCompleted))
}

func dump(evs []runs.Event, typ runs.EventType) string {
	var b strings.Builder
	for _, ev := range of(evs, typ) {
		raw, _ := ev.Data.(json.RawMessage)
		b.Write(raw)
		b.WriteByte(' ')
	}
	return b.String()
}

// mcpSecret: the model calls show_token, which answers with the server's
// secret env value; the value is in no event and not in the record.
func (s *suite) mcpSecret(t *testing.T) {
	secret := newSecret()
	g := s.start(t, Scenario{Kind: MCPTool, MCPServer: mcptest.Name, MCPTool: "show_token", Input: `{}`,
		Text: "The tool answered."}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Show the token with the demo tool.", MCPServers: mcpServer(t, secret)})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	g.wantMCPCall(t, evs, "show_token", "token:")
	for _, ev := range evs {
		raw, _ := json.Marshal(ev)
		if strings.Contains(string(raw), secret) {
			t.Errorf("event %d (%s) holds the MCP server's secret: %s", ev.Seq, ev.Type, raw)
		}
	}
	stored, err := g.store.GetRun(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(stored)
	if strings.Contains(string(raw), secret) {
		t.Errorf("the stored record holds the MCP server's secret: %s", raw)
	}
}

// mcpApproval: with approvals: ask, the MCP tool is asked like any other,
// naming its server; allowed, its result arrives.
func (s *suite) mcpApproval(t *testing.T) {
	g := s.start(t, Scenario{Kind: MCPTool, MCPServer: mcptest.Name, MCPTool: "reverse_text",
		Input: `{"text":"` + mcpInput + `"}`, Text: "The tool answered."}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Reverse the text with the demo tool.", MCPServers: mcpServer(t, newSecret()),
		Approvals: runs.ApprovalsAsk})
	a := g.approval(t, r.ID, 1)
	var req runs.ApprovalRequestedData
	decode(t, g.waitEvents(t, r.ID, runs.EventApprovalRequested, 1, quick)[0], &req)
	if req.MCPServer != mcptest.Name {
		t.Errorf("approval.requested = %+v, want mcp_server %q", req, mcptest.Name)
	}
	g.input(t, r.ID, runs.Input{Kind: runs.InputDecision, ApprovalID: a.ID, Decision: runs.Allow})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	g.wantMCPCall(t, evs, "reverse_text", mcptest.Reversed(mcpInput))
}

// mcpRefused: an agent that takes no MCP servers says so by name.
func (s *suite) mcpRefused(t *testing.T) {
	g := s.start(t, Scenario{Kind: Text, Text: "hi"}, credentials)
	_, err := g.sup.Submit(context.Background(), runs.Spec{Agent: s.adapter.Name(), Prompt: "hi", Model: g.backend.Model,
		MCPServers: mcpServer(t, newSecret())})
	wantFieldError(t, err, runs.FieldMCPServers, runs.ErrUnsupported)
}

// mcpNotAllowed: a command or URL the operator did not allow is refused
// at submission, naming it, whatever the agent.
func (s *suite) mcpNotAllowed(t *testing.T) {
	g := s.start(t, Scenario{Kind: Text, Text: "hi"}, credentials)
	takes := slices.Contains(s.adapter.Describe().Fields, runs.FieldMCPServers)
	for code, srv := range map[string]runs.MCPServer{
		runs.CodeMCPCommandNotAllowed: {Command: "/bin/sh", Args: []string{"-c", "id"}},
		runs.CodeMCPURLNotAllowed:     {URL: "http://127.0.0.1:9/mcp"},
	} {
		_, err := g.sup.Submit(context.Background(), runs.Spec{Agent: s.adapter.Name(), Prompt: "hi", Model: g.backend.Model,
			MCPServers: map[string]runs.MCPServer{"other": srv}})
		var fe *runs.FieldError
		switch {
		case !takes:
			wantFieldError(t, err, runs.FieldMCPServers, runs.ErrUnsupported)
		case !errors.As(err, &fe) || fe.Code != code || fe.Field != runs.FieldMCPServers:
			t.Errorf("%+v: %v, want %s", srv, err, code)
		case code == runs.CodeMCPCommandNotAllowed && !strings.Contains(fe.Reason, "/bin/sh"):
			t.Errorf("the refusal does not name the command: %v", err)
		}
	}
}

// wantFieldError checks that err is a FieldError of kind naming field.
func wantFieldError(t *testing.T, err error, field string, kind error) {
	t.Helper()
	var fe *runs.FieldError
	if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, kind) {
		t.Errorf("%v, want %v naming %s", err, kind, field)
	}
}
