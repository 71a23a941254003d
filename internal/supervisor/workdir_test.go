package supervisor

import (
	"os"
	"path/filepath"
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

// A session that ran in a directory the client named (or the tenant's
// root) is resumed there: the directory is the client's, never kept in
// the cluster, and must not be replaced by a restore.
func TestResumeInANamedDirectoryLeavesItsFiles(t *testing.T) {
	c := newWSCluster(t, shAdapter{})
	a := c.replica(t, "a")
	proj := filepath.Join(a.root, "tenants", "acme", "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.root, "tenants", "acme", "beside.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for cwd, session := range map[string]string{"proj": "s-proj", ".": "s-root"} {
		first := c.submit(t, a, runs.Spec{Prompt: "echo one > mine-" + session, Cwd: cwd, Metadata: map[string]string{"session": session}})
		r1, _ := c.wait(t, first.ID)
		succeeded(t, r1)
		second := c.submit(t, a, runs.Spec{Prompt: "test -f mine-" + session, ResumeSessionID: session})
		r2, _ := c.wait(t, second.ID)
		succeeded(t, r2)
	}
	for _, f := range []string{"proj/mine-s-proj", "mine-s-root", "beside.txt"} {
		if _, err := os.Stat(filepath.Join(a.root, "tenants", "acme", f)); err != nil {
			t.Errorf("the client's file %s is gone after a resume: %v", f, err)
		}
	}
}
