package conformance

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/runs"
)

// artifactCases check what a run leaves: the files its tool changed, found
// by the gateway's snapshots whatever the agent reports, their diff, and
// the files themselves, downloaded from the run's directory.
func (s *suite) artifactCases() []suiteCase {
	return []suiteCase{
		{"artifact_new_file", s.artifactNewFile},
		{"artifact_modified_file", s.artifactModifiedFile},
	}
}

// artifactNewFile: a tool writes a new file in a fresh directory.
func (s *suite) artifactNewFile(t *testing.T) {
	g := s.start(t, Scenario{Kind: Tool, Command: `printf 'hello\n' > made.txt`, Text: "made"}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Write hello to made.txt."})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	g.wantChange(t, r, runs.ChangedFile{Path: "made.txt", Kind: runs.ChangeAdd, Size: 6},
		"diff --git a/made.txt b/made.txt\nnew file mode 100644\n--- /dev/null\n+++ b/made.txt\n@@ -0,0 +1 @@\n+hello\n")
	g.wantFile(t, r, "made.txt", "hello\n")
	g.wantArchived(t, r, "made.txt", "hello\n")
}

// artifactModifiedFile: a tool changes a file that was in the run's given
// directory before it started, and leaves another as it was.
func (s *suite) artifactModifiedFile(t *testing.T) {
	g := s.start(t, Scenario{Kind: Tool, Command: `printf 'one\n2\nthree\n' > notes.txt`, Text: "changed"}, credentials)
	cwd := "given-" + uuid.NewString()[:8]
	dir := filepath.Join(g.root, cwd)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"notes.txt": "one\ntwo\nthree\n", "keep.txt": "unchanged\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := g.submit(t, runs.Spec{Prompt: "Change two to 2 in notes.txt.", Cwd: cwd})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	g.wantChange(t, r, runs.ChangedFile{Path: "notes.txt", Kind: runs.ChangeUpdate, Size: 12},
		"diff --git a/notes.txt b/notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n")
	for _, f := range r.Files {
		if f.Path == "keep.txt" {
			t.Errorf("keep.txt is listed as changed: %+v", f)
		}
	}
	g.wantFile(t, r, "notes.txt", "one\n2\nthree\n")
	g.wantFile(t, r, "keep.txt", "unchanged\n")
}

// wantChange checks that the record, run.completed and the gateway's
// whole diff and list all have the change want, with diff in the diff.
func (g *gateway) wantChange(t *testing.T, r runs.Run, want runs.ChangedFile, diff string) {
	t.Helper()
	has := func(files []runs.ChangedFile) bool {
		for _, f := range files {
			if f == want {
				return true
			}
		}
		return false
	}
	if !has(r.Files) {
		t.Errorf("the record's files %+v lack %+v", r.Files, want)
	}
	var others []string
	for _, f := range r.Files {
		if f.Path != want.Path {
			others = append(others, f.Path+" ("+f.Kind+")")
		}
	}
	if len(others) > 0 {
		t.Logf("the agent also changed: %s", strings.Join(others, ", "))
	}
	if !strings.Contains(r.Diff, diff) {
		t.Errorf("the record's diff lacks\n%s\nit is:\n%s", diff, r.Diff)
	}
	// The record is stored before run.completed is.
	g.waitFor(t, r.ID, runs.EventRunCompleted, stopWithin)
	done := of(g.events(t, r.ID), runs.EventRunCompleted)
	if len(done) != 1 {
		t.Fatalf("%d run.completed", len(done))
	}
	var completed runs.RunCompletedData
	if err := json.Unmarshal(done[0].Data.(json.RawMessage), &completed); err != nil {
		t.Fatal(err)
	}
	if !has(completed.Files) || !strings.Contains(completed.Diff, diff) {
		t.Errorf("run.completed has files %+v and diff:\n%s", completed.Files, completed.Diff)
	}
	ctx := context.Background()
	files, truncated, err := g.sup.RunChanges(ctx, r)
	if err != nil || truncated || !has(files) {
		t.Errorf("RunChanges = %+v, %v, %v", files, truncated, err)
	}
	body, truncated, err := g.sup.RunDiff(ctx, r)
	if err != nil {
		t.Fatalf("RunDiff: %v", err)
	}
	defer body.Close()
	whole, _ := io.ReadAll(body)
	if truncated || !strings.Contains(string(whole), diff) {
		t.Errorf("RunDiff (truncated %v):\n%s", truncated, whole)
	}
}

// wantFile checks that the run's file p downloads with content.
func (g *gateway) wantFile(t *testing.T, r runs.Run, p, content string) {
	t.Helper()
	f, _, err := g.sup.OpenRunFile(context.Background(), r, p)
	if err != nil {
		t.Errorf("OpenRunFile(%s): %v", p, err)
		return
	}
	defer f.Close()
	if b, _ := io.ReadAll(f); string(b) != content {
		t.Errorf("%s downloads as %q, want %q", p, b, content)
	}
	if _, _, err := g.sup.OpenRunFile(context.Background(), r, "../"+p); err == nil {
		t.Errorf("OpenRunFile(../%s) opened it", p)
	}
}

// wantArchived checks that the run's archive holds p with content.
func (g *gateway) wantArchived(t *testing.T, r runs.Run, p, content string) {
	t.Helper()
	var buf bytes.Buffer
	if err := g.sup.ArchiveRun(context.Background(), r, &buf); err != nil {
		t.Fatalf("ArchiveRun: %v", err)
	}
	gz, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Errorf("the archive has no %s (%v)", p, err)
			return
		}
		if h.Name == p {
			if b, _ := io.ReadAll(tr); string(b) != content {
				t.Errorf("the archive's %s is %q", p, b)
			}
			return
		}
	}
}
