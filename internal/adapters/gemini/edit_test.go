package gemini

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/acp/acptest"
	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/googleai"
	"github.com/agentgate/agentgate/internal/runs"
)

// editCall has the model call tool with args on a turn's first request
// and answer text once the request carries that tool's response (a
// refused call's error response counts).
func editCall(tool string, args map[string]any, text string) googleai.Scenario {
	return googleai.Func(func(req *googleai.Request) googleai.Response {
		if req.Router() {
			return googleai.RouterAnswer(10)
		}
		for _, fr := range req.FunctionResponses() {
			if fr.Name == tool {
				return googleai.Response{Parts: []googleai.Part{googleai.Text(text)}}
			}
		}
		return googleai.Response{Parts: []googleai.Part{googleai.Text("Editing."), googleai.Call(tool, args)}}
	})
}

// TestSessionEditApproval proves with the real CLI that Gemini's own edit
// tools, write_file and replace, are asked under approvals: ask, that the
// approval names the tool and shows the path, that allow writes the file,
// and that deny leaves it as it was while the turn goes on to a success.
func TestSessionEditApproval(t *testing.T) {
	const before, after = "old line\n", "new line\n"
	for _, c := range []struct {
		name     string
		tool     string
		decision runs.Decision
	}{
		{"write_file/allow", "write_file", runs.Allow},
		{"write_file/deny", "write_file", runs.Deny},
		{"replace/allow", "replace", runs.Allow},
		{"replace/deny", "replace", runs.Deny},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "edited.txt")
			args := map[string]any{"file_path": path, "content": after}
			if c.tool == "replace" {
				if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
					t.Fatal(err)
				}
				args = map[string]any{"file_path": path, "old_string": "old line", "new_string": "new line",
					"instruction": "Change the old line to the new one."}
			}
			s := startSessionIn(t, dir, runs.Spec{Prompt: "Edit the file.", Approvals: runs.ApprovalsAsk},
				editCall(c.tool, args, "Edited."), nil)
			a, _ := s.answer(t, 0, c.decision)
			var in struct {
				Title   string
				Kind    string
				Changes []struct {
					Path    string
					OldText *string `json:"old_text"`
					NewText string  `json:"new_text"`
				}
			}
			if err := json.Unmarshal(a.Input, &in); err != nil || a.Tool != c.tool || in.Kind != "edit" ||
				!strings.Contains(in.Title, "edited.txt") || len(in.Changes) != 1 ||
				in.Changes[0].Path != path || in.Changes[0].NewText != after {
				t.Errorf("approval %+v (input %s, %v), want %s of %s with its diff", a, a.Input, err, c.tool, path)
			} else if old := in.Changes[0].OldText; c.tool == "replace" && (old == nil || *old != before) {
				t.Errorf("replace's old text %v, want %q", old, before)
			}
			turn, _ := s.WaitTurn(1, sessionWithin)
			if turn.Status != runs.Succeeded || turn.Result != "Edited." {
				t.Errorf("turn %+v", turn)
			}
			o := s.close(t)
			if o.Status != runs.Succeeded || o.NumTurns != 1 {
				t.Errorf("outcome %+v", o)
			}
			evs := s.Events()
			if n := len(acptest.Of(evs, runs.EventApprovalRequested)); n != 1 {
				t.Errorf("%d approvals, want 1", n)
			}
			var was *string // write_file makes the file, replace changes it
			if c.tool == "replace" {
				was = ptr(before)
			}
			agenttest.WantEdited(t, path, c.decision == runs.Allow, was, after)
			done := acptest.Of(evs, runs.EventToolCallCompleted)
			if len(done) != 1 || done[0].Data.(runs.ToolCallCompletedData).IsError != (c.decision == runs.Deny) {
				t.Errorf("tool calls %v, want one, failed only when denied", acptest.Types(evs))
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
