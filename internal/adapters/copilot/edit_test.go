package copilot

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/acp/acptest"
	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestSessionEditApproval proves with the real CLI that Copilot's own
// file tools, create and edit, are asked under approvals: ask, that the
// approval names the edit and shows the path and the diff, that allow
// writes the file, and that deny leaves it as it was and ends the turn
// without a failure. The create call names its file relative to the
// run's directory, as a model does; the approval shows it absolute, and
// an allowed create reports one file.changed, at its completion, as the
// model named it.
func TestSessionEditApproval(t *testing.T) {
	const before, after = "old line\n", "new line\n"
	for _, c := range []struct {
		name     string
		tool     string
		decision runs.Decision
	}{
		{"create/allow", "create", runs.Allow},
		{"create/deny", "create", runs.Deny},
		{"edit/allow", "edit", runs.Allow},
		{"edit/deny", "edit", runs.Deny},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "edited.txt")
			args := map[string]string{"path": filepath.Base(path), "file_text": after}
			if c.tool == "edit" {
				if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
					t.Fatal(err)
				}
				args = map[string]string{"path": path, "old_str": "old line", "new_str": "new line"}
			}
			s := startSessionIn(t, dir, runs.Spec{Prompt: "Edit the file.", Approvals: runs.ApprovalsAsk},
				callsThen("Edited.", func() openai.Item { return openai.FunctionCall(c.tool, args) }), nil)
			a, _ := s.answer(t, 0, c.decision)
			// 1.0.102 names neither create nor edit on the wire: the
			// approval is the call's kind, its input the permission's
			// rawInput, the absolute path and a git diff of the change.
			var in struct {
				FileName string `json:"fileName"`
				Diff     string `json:"diff"`
			}
			if err := json.Unmarshal(a.Input, &in); err != nil || a.Tool != "edit" || in.FileName != path ||
				!strings.Contains(in.Diff, "+new line") || (c.tool == "edit" && !strings.Contains(in.Diff, "-old line")) {
				t.Errorf("approval %+v (input %s, %v), want an edit of %s with its diff", a, a.Input, err, path)
			}
			turn, _ := s.WaitTurn(1, sessionWithin)
			if turn.Status != runs.Succeeded || (c.decision == runs.Allow) != (turn.Result == "Edited.") {
				t.Errorf("turn %+v", turn)
			}
			// A deny ends the turn with no further model request
			// (DenyEndsTurn).
			if n, want := len(s.srv.Ledger().Responses()), map[runs.Decision]int{runs.Allow: 2, runs.Deny: 1}[c.decision]; n != want {
				t.Errorf("%d model requests after %s, want %d", n, c.decision, want)
			}
			o := s.close(t)
			if o.Status != runs.Succeeded || o.NumTurns != 1 {
				t.Errorf("outcome %+v", o)
			}
			evs := s.Events()
			if n := len(acptest.Of(evs, runs.EventApprovalRequested)); n != 1 {
				t.Errorf("%d approvals, want 1", n)
			}
			var was *string // create makes the file, edit changes it
			if c.tool == "edit" {
				was = ptr(before)
			}
			agenttest.WantEdited(t, path, c.decision == runs.Allow, was, after)
			fc := acptest.Of(evs, runs.EventFileChanged)
			if (c.decision == runs.Deny) != (len(fc) == 0) {
				t.Errorf("file.changed %d times after %s", len(fc), c.decision)
			}
			if c.tool == "create" && c.decision == runs.Allow {
				wantCreated(t, fc, args["path"], "+"+strings.TrimSuffix(after, "\n"))
			}
		})
	}
}

// wantCreated checks that an allowed create reported one file.changed,
// once it completed, adding path with the diff's line.
func wantCreated(t *testing.T, fc []runs.Event, path, line string) {
	t.Helper()
	if len(fc) != 1 {
		t.Fatalf("file.changed %d times, want once", len(fc))
	}
	if d := fc[0].Data.(runs.FileChangedData); d.Path != path || d.Kind != runs.ChangeAdd || d.Status != "completed" ||
		d.ToolCallID == "" || !strings.Contains(d.Diff, line) {
		t.Errorf("file.changed %+v, want the completed add of %s with %q", d, path, line)
	}
}

func ptr[T any](v T) *T { return &v }
