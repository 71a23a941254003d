package claude

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// editScenario has the model call its tools one after the other, one per
// request, then answer "Edited.": the n-th request (counted by the tool
// results it carries) gets calls[n].
func editScenario(calls ...anthropic.Block) anthropic.Scenario {
	return callsThenText("Edited.", calls...)
}

// callsThenText is editScenario with the closing text.
func callsThenText(text string, calls ...anthropic.Block) anthropic.Scenario {
	return anthropic.Func(func(req *anthropic.Request) anthropic.Response {
		n := 0
		for _, m := range req.Messages {
			for _, b := range m.Blocks {
				if b.Type == "tool_result" {
					n++
				}
			}
		}
		if n < len(calls) {
			return anthropic.Response{Message: anthropic.Message{Content: []anthropic.Block{calls[n]}}}
		}
		return anthropic.Response{Message: anthropic.Message{Content: []anthropic.Block{anthropic.Text(text)}}}
	})
}

// TestSessionEditApproval proves with the real CLI that a file edit
// through Claude's own Write and Edit tools (not a shell command) is asked
// under workspace_write + ask, that the approval names the tool and the
// path, that allow writes the file, and that deny leaves it unwritten
// while the turn goes on to a success.
func TestSessionEditApproval(t *testing.T) {
	const before, after = "old line\n", "new line\n"
	for _, c := range []struct {
		name     string
		tool     string
		decision runs.Decision
	}{
		{"write/allow", "Write", runs.Allow},
		{"write/deny", "Write", runs.Deny},
		{"edit/allow", "Edit", runs.Allow},
		{"edit/deny", "Edit", runs.Deny},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "edited.txt")
			var calls []anthropic.Block
			if c.tool == "Write" {
				calls = []anthropic.Block{anthropic.ToolUse("Write", map[string]string{"file_path": path, "content": after})}
			} else {
				if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
					t.Fatal(err)
				}
				// Edit refuses a file the session has not read.
				calls = []anthropic.Block{
					anthropic.ToolUse("Read", map[string]string{"file_path": path}),
					anthropic.ToolUse("Edit", map[string]string{"file_path": path, "old_string": "old line", "new_string": "new line"}),
				}
			}
			spec := askSpec("Edit the file.")
			spec.Permission = runs.WorkspaceWrite
			d := startSessionIn(t, dir, editScenario(calls...), spec)
			a := d.approval()
			var in struct {
				FilePath string `json:"file_path"`
			}
			if err := json.Unmarshal(a.Input, &in); err != nil || a.Tool != c.tool || in.FilePath != path {
				t.Errorf("approval = %+v (%v), want %s of %s", a, err, c.tool, path)
			}
			if err := d.answer(a.ID, c.decision, "not this file"); err != nil {
				t.Fatal(err)
			}
			turn := d.turn()
			if turn.Status != runs.Succeeded || turn.Result != "Edited." {
				t.Errorf("turn = %+v", turn)
			}
			o := d.close()
			if o.Status != runs.Succeeded || d.exit.Code != 0 {
				t.Errorf("outcome %+v, exit %+v", o, d.exit)
			}
			if n := d.count(runs.EventApprovalRequested); n != 1 {
				t.Errorf("%d approvals asked, want 1", n)
			}
			var was *string // Write makes the file, Edit changes it
			if c.tool == "Edit" {
				was = ptr(before)
			}
			agenttest.WantEdited(t, path, c.decision == runs.Allow, was, after)
			if c.decision == runs.Deny {
				reqs := d.srv.Ledger().Messages()
				tr := reqs[len(reqs)-1].Request.ToolResults()
				if len(tr) != 1 || !tr[0].IsError {
					t.Errorf("the model got %+v for the denied edit, want an error", tr)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
