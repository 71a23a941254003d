package opencode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/acp/acptest"
	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/runs"
)

// editTurn is one turn of TestSessionEditApproval: the tool the model
// calls on its file, and the client's answer.
type editTurn struct {
	tool     string
	decision runs.Decision
}

// editTurns are the four combinations, one turn each, in one session: a
// deny ends only its turn, so the next turn is asked afresh.
var editTurns = []editTurn{{"write", runs.Allow}, {"write", runs.Deny}, {"edit", runs.Allow}, {"edit", runs.Deny}}

const editBefore, editAfter = "old line\n", "new line\n"

// editPrompt is the prompt of turn i, which the mock answers with that
// turn's calls.
func editPrompt(i int) string { return "Edit file " + string(rune('a'+i)) + "." }

// mcpPrompt is the prompt of the turn after the edit turns, which the mock
// answers with a call of the demo MCP server's reverse_text, as OpenCode
// offers it (demo_reverse_text).
const mcpPrompt = "Reverse hello mcp."

// editScenario answers each edit turn's prompt with its turn's calls on
// paths[i] (edit reads the file first: it refuses a file the session has
// not read), then "Edited.", and mcpPrompt with the MCP call.
func editScenario(paths []string) chat.Scenario {
	byPrompt := map[string]chat.Scenario{mcpPrompt: chat.ToolTurn(mcpCall("reverse_text", `{"text":"hello mcp"}`), "Reversed.")}
	for i, c := range editTurns {
		calls := []chat.Call{chat.FunctionCall("write", map[string]string{"filePath": paths[i], "content": editAfter})}
		if c.tool == "edit" {
			calls = []chat.Call{
				chat.FunctionCall("read", map[string]string{"filePath": paths[i]}),
				chat.FunctionCall("edit", map[string]string{"filePath": paths[i], "oldString": "old line", "newString": "new line"}),
			}
		}
		byPrompt[editPrompt(i)] = chat.ToolChain(calls, "Edited.")
	}
	return chat.Func(func(req *chat.Request) chat.Response {
		for prompt, sc := range byPrompt {
			if strings.Contains(req.LastUserText(), prompt) {
				return sc.Respond(req)
			}
		}
		return chat.Response{Text: "No such turn."}
	})
}

// TestSessionEditApproval proves with the real CLI that OpenCode's own
// edit tools, write and edit, are asked under approvals: ask, that the
// approval names the tool and shows the path, that allow writes the file,
// and that deny leaves it as it was and ends the turn without a failure.
// Each combination is a turn of one interactive session. Its last turn
// calls an MCP tool (see mcpApprovalTurn).
func TestSessionEditApproval(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	paths := make([]string, len(editTurns))
	for i, c := range editTurns {
		paths[i] = filepath.Join(dir, "edited-"+string(rune('a'+i))+".txt")
		if c.tool == "edit" {
			if err := os.WriteFile(paths[i], []byte(editBefore), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	spec := mcpSpec(t, editPrompt(0), "not-a-secret")
	spec.Interactive, spec.Approvals = true, runs.ApprovalsAsk
	s := startSessionIn(t, dir, spec, editScenario(paths))
	next := 0
	for i, c := range editTurns {
		if i > 0 {
			if err := s.Do(func(x runs.Session) error { return x.Send(editPrompt(i), nil, false) }); err != nil {
				t.Fatal(err)
			}
		}
		next = s.editTurn(t, next, i+1, c, paths[i])
	}
	s.mcpApprovalTurn(t, next, len(editTurns)+1)
	o := s.close(t)
	if o.Status != runs.Succeeded || o.NumTurns != len(editTurns)+1 {
		t.Errorf("outcome %+v", o)
	}
	if n := len(acptest.Of(s.Events(), runs.EventApprovalRequested)); n != len(editTurns)+1 {
		t.Errorf("%d approvals, want one a turn", n)
	}
	for i, c := range editTurns {
		var was *string // write makes the file, edit changes it
		if c.tool == "edit" {
			was = ptr(editBefore)
		}
		agenttest.WantEdited(t, paths[i], c.decision == runs.Allow, was, editAfter)
	}
}

// editTurn answers turn n's approval of c on path from event index from,
// checks it and the turn, and returns the index after the turn.
func (s *session) editTurn(t *testing.T, from, n int, c editTurn, path string) int {
	t.Helper()
	a, _ := s.answer(t, from, c.decision)
	// 1.18.33 sends the permission's own input: the path and a unified
	// diff of the change.
	var in struct {
		FilePath string `json:"filepath"`
		Diff     string `json:"diff"`
	}
	if err := json.Unmarshal(a.Input, &in); err != nil || a.Tool != c.tool || in.FilePath != path ||
		!strings.Contains(in.Diff, "+new line") || (c.tool == "edit" && !strings.Contains(in.Diff, "-old line")) {
		t.Errorf("turn %d: approval %+v (input %s, %v), want %s of %s with its diff", n, a, a.Input, err, c.tool, path)
	}
	turn, i := s.WaitTurn(n, sessionWithin)
	if turn.Status != runs.Succeeded {
		t.Errorf("turn %d (%s, %s): %+v", n, c.tool, c.decision, turn)
	}
	if c.decision == runs.Allow && turn.Result != "Edited." {
		t.Errorf("turn %d allowed: result %q", n, turn.Result)
	}
	return i + 1
}

// mcpApprovalTurn sends mcpPrompt as turn n: with approvals ask, the MCP
// call is asked for like any tool, the request names the server and the
// tool as OpenCode offers it, and the call runs once allowed. The
// conformance suite's mcp_tool, mcp_secret and mcp_approval run the rest
// of MCP through the supervisor.
func (s *session) mcpApprovalTurn(t *testing.T, from, n int) {
	t.Helper()
	if err := s.Do(func(x runs.Session) error { return x.Send(mcpPrompt, nil, false) }); err != nil {
		t.Fatal(err)
	}
	req, _ := s.answer(t, from, runs.Allow)
	if req.MCPServer != "demo" || req.Tool != "demo_reverse_text" {
		t.Errorf("approval %+v: want tool demo_reverse_text of server demo", req)
	}
	turn, _ := s.WaitTurn(n, sessionWithin)
	_, done := toolEvents(t, s.Events(), "demo_reverse_text")
	if turn.Status != runs.Succeeded || !strings.Contains(done.Output, "reversed:pcm olleh") {
		t.Errorf("turn %+v, tool output %q", turn, done.Output)
	}
	if l := s.srv.Ledger().Completions(); len(l) == 0 || !l[0].Request.HasTool("demo_reverse_text") {
		t.Errorf("the model was not offered demo_reverse_text")
	}
}

func ptr[T any](v T) *T { return &v }
