package supervisor

import (
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestResumeWithAWorkspaceRunsInThatWorkspace(t *testing.T) {
	c := newWSCluster(t, shAdapter{})
	a := c.replica(t, "a")
	first := c.submit(t, a, runs.Spec{Prompt: "echo one > out.txt", Metadata: map[string]string{"session": "s1"},
		Workspace: &runs.WorkspaceSource{Archive: c.archive(t)}})
	r1, _ := c.wait(t, first.ID)
	succeeded(t, r1)
	second := c.submit(t, a, runs.Spec{Prompt: "test -f in.txt && test ! -e out.txt", ResumeSessionID: "s1",
		Workspace: &runs.WorkspaceSource{Archive: c.archive(t)}})
	r2, _ := c.wait(t, second.ID)
	succeeded(t, r2)
	if r2.Spec.Cwd != r2.ID {
		t.Fatalf("the resumed run with a workspace ran in %q, want its own workspace %q", r2.Spec.Cwd, r2.ID)
	}
}
