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

// TestSessionEditApproval proves with the real CLI that OpenCode's own
// edit tools, write and edit, are asked under approvals: ask, that the
// approval names the tool and shows the path, that allow writes the file,
// and that deny leaves it as it was and ends the turn without a failure.
func TestSessionEditApproval(t *testing.T) {
	const before, after = "old line\n", "new line\n"
	for _, c := range []struct {
		name     string
		tool     string
		decision runs.Decision
	}{
		{"write/allow", "write", runs.Allow},
		{"write/deny", "write", runs.Deny},
		{"edit/allow", "edit", runs.Allow},
		{"edit/deny", "edit", runs.Deny},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "edited.txt")
			calls := []chat.Call{chat.FunctionCall("write", map[string]string{"filePath": path, "content": after})}
			if c.tool == "edit" {
				if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
					t.Fatal(err)
				}
				// edit refuses a file the session has not read.
				calls = []chat.Call{
					chat.FunctionCall("read", map[string]string{"filePath": path}),
					chat.FunctionCall("edit", map[string]string{"filePath": path, "oldString": "old line", "newString": "new line"}),
				}
			}
			s := startSessionIn(t, dir, runs.Spec{Prompt: "Edit the file.", Approvals: runs.ApprovalsAsk},
				chat.ToolChain(calls, "Edited."))
			a, _ := s.answer(t, 0, c.decision)
			// 1.18.33 sends the permission's own input: the path and a
			// unified diff of the change.
			var in struct {
				FilePath string `json:"filepath"`
				Diff     string `json:"diff"`
			}
			if err := json.Unmarshal(a.Input, &in); err != nil || a.Tool != c.tool || in.FilePath != path ||
				!strings.Contains(in.Diff, "+new line") || (c.tool == "edit" && !strings.Contains(in.Diff, "-old line")) {
				t.Errorf("approval %+v (input %s, %v), want %s of %s with its diff", a, a.Input, err, c.tool, path)
			}
			turn, _ := s.WaitTurn(1, sessionWithin)
			if turn.Status != runs.Succeeded {
				t.Errorf("turn %+v", turn)
			}
			if c.decision == runs.Allow && turn.Result != "Edited." {
				t.Errorf("allowed: turn result %q", turn.Result)
			}
			o := s.close(t)
			if o.Status != runs.Succeeded || o.NumTurns != 1 {
				t.Errorf("outcome %+v", o)
			}
			evs := s.Events()
			if n := len(acptest.Of(evs, runs.EventApprovalRequested)); n != 1 {
				t.Errorf("%d approvals, want 1", n)
			}
			var was *string // write makes the file, edit changes it
			if c.tool == "edit" {
				was = ptr(before)
			}
			agenttest.WantEdited(t, path, c.decision == runs.Allow, was, after)
		})
	}
}

func ptr[T any](v T) *T { return &v }
