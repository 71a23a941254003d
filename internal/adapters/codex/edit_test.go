package codex

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestSessionEditApproval proves with the real CLI that a patch the model
// applies (apply_patch through exec_command, which Codex turns into a
// file change) is asked as item/fileChange/requestApproval: the approval
// is tool apply_patch with the change's path and diff; accept writes the
// file, decline leaves it unwritten and the turn goes on to its answer.
func TestSessionEditApproval(t *testing.T) {
	for _, c := range []struct {
		name     string
		decision runs.Decision
	}{
		{"allow", runs.Allow},
		{"deny", runs.Deny},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := startSession(t, "edit_"+c.name, ask, fixed(openai.ToolTurn(patchCommand, "Added hello.txt.")))
			a := d.next(runs.EventApprovalRequested).Data.(runs.ApprovalRequestedData)
			var in struct {
				Changes []struct{ Path, Kind, Diff string }
			}
			if err := json.Unmarshal(a.Input, &in); err != nil || a.Tool != "apply_patch" || a.ToolCallID == "" ||
				len(in.Changes) != 1 || in.Changes[0].Path != "hello.txt" || in.Changes[0].Kind != "add" ||
				!strings.Contains(in.Changes[0].Diff, "hi there") {
				t.Errorf("approval = %+v (input %s, %v), want apply_patch adding hello.txt", a, a.Input, err)
			}
			if err := d.act(action{Kind: "answer", ID: a.ID, Decision: c.decision}); err != nil {
				t.Fatal(err)
			}
			tc := d.turn()
			if tc.Status != runs.Succeeded || tc.Result != "Added hello.txt." {
				t.Errorf("turn = %+v", tc)
			}
			d.act(action{Kind: "close"})
			o := d.end()
			if o.Status != runs.Succeeded || o.NumTurns != 1 {
				t.Errorf("outcome = %+v", o)
			}
			if n := d.count(runs.EventApprovalRequested); n != 1 {
				t.Errorf("%d approvals asked, want 1", n)
			}
			got, err := os.ReadFile(filepath.Join(d.inv.Dir, "hello.txt"))
			if c.decision == runs.Allow && string(got) != "hi there\n" {
				t.Errorf("allowed: hello.txt = %q (%v), want %q", got, err, "hi there\n")
			}
			if c.decision == runs.Deny && !os.IsNotExist(err) {
				t.Errorf("declined: hello.txt = %q (%v), want none", got, err)
			}
			var res *runs.ToolCallCompletedData
			for _, ev := range d.events {
				if r, ok := ev.Data.(runs.ToolCallCompletedData); ok && ev.Type == runs.EventToolCallCompleted {
					res = &r
				}
			}
			if res == nil || res.IsError != (c.decision == runs.Deny) {
				t.Errorf("tool_call.completed = %+v, want an error only when declined", res)
			}
		})
	}
}
