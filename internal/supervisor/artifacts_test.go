package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/artifacts"
	"github.com/agentgate/agentgate/internal/runs"
)

// shellAdapter runs its run's prompt as a shell script in the run's
// directory, and decodes its output as the fake agent's.
type shellAdapter struct{ fakeAdapter }

func (shellAdapter) Describe() runs.Description {
	return runs.Description{Name: "fake", DefaultBin: "/bin/sh", VerifiedVersion: "1.2.3",
		VersionArgs: []string{"-c", "echo 1.2.3"}, Fields: []string{runs.FieldModel}}
}

func (shellAdapter) Command(inv runs.Invocation) (runs.Command, error) {
	return runs.Command{Args: []string{"-c", inv.Spec.Prompt}}, nil
}

func (shellAdapter) NewDecoder(runs.Invocation) runs.Decoder { return &fakeDecoder{} }

// newShellHarness is a harness whose agent is /bin/sh, keeping snapshots.
func newShellHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	cfg.ArtifactsDir = filepath.Join(t.TempDir(), "artifacts")
	cfg.WorkspaceRoot, cfg.Path, cfg.Reaper = t.TempDir(), os.Getenv("PATH"), os.Args[0]
	cfg.KillGrace, cfg.StoreRetry = 300*time.Millisecond, 500*time.Millisecond
	store := newMemStore()
	agent := &Agent{Adapter: shellAdapter{}, Bin: "/bin/sh", Home: t.TempDir()}
	sup := New(cfg, store, []*Agent{agent}, nopObserver{}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	startSupervisor(t, sup)
	return &harness{sup: sup, store: store, root: cfg.WorkspaceRoot}
}

// runScript runs script to its end and returns the run as stored.
func (h *harness) runScript(t *testing.T, spec runs.Spec) runs.Run {
	t.Helper()
	spec.Agent = "fake"
	r, err := h.sup.Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	r = h.wait(t, r.ID, 20*time.Second)
	h.waitFor(t, r.ID, runs.EventRunCompleted, "")
	if r.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v", r.Status, r.Error)
	}
	return r
}

func readAll(t *testing.T, rc io.ReadCloser) string {
	t.Helper()
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func artifactCode(err error) string {
	var ae *artifacts.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	var ce *runs.ConflictError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return fmt.Sprint(err)
}

func TestArtifactsOfARun(t *testing.T) {
	h := newShellHarness(t, Config{})
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("outside\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := h.runScript(t, runs.Spec{Prompt: `printf 'hello\n' > made.txt && ln -s ` + outside + ` link && echo '{"text":"done"}'`})
	want := map[string]runs.ChangedFile{
		"made.txt": {Path: "made.txt", Kind: runs.ChangeAdd, Size: 6},
		"link":     {Path: "link", Kind: runs.ChangeAdd, Size: int64(len(outside))},
	}
	if len(r.Files) != 2 || r.Files[0] != want["link"] || r.Files[1] != want["made.txt"] || r.FilesTruncated {
		t.Errorf("files = %+v", r.Files)
	}
	if !strings.Contains(r.Diff, "+++ b/made.txt\n@@ -0,0 +1 @@\n+hello\n") || r.DiffTruncated || strings.Contains(r.Diff, "outside\n") {
		t.Errorf("diff = %q", r.Diff)
	}
	var completed runs.RunCompletedData
	evs := h.store.eventsOf(r.ID)
	if err := json.Unmarshal(evs[len(evs)-1].JSON, &struct {
		Data *runs.RunCompletedData `json:"data"`
	}{&completed}); err != nil || len(completed.Files) != 2 || completed.Diff != r.Diff {
		t.Errorf("run.completed: %+v, %v", completed, err)
	}
	ctx := context.Background()
	diff, truncated, err := h.sup.RunDiff(ctx, r)
	if err != nil || truncated || readAll(t, diff) != r.Diff {
		t.Errorf("RunDiff: %v %v", truncated, err)
	}
	files, truncated, err := h.sup.RunChanges(ctx, r)
	if err != nil || truncated || len(files) != 2 {
		t.Errorf("RunChanges = %+v, %v, %v", files, truncated, err)
	}
	f, _, err := h.sup.OpenRunFile(ctx, r, "made.txt")
	if err != nil || readAll(t, f) != "hello\n" {
		t.Errorf("OpenRunFile: %v", err)
	}
	for p, code := range map[string]string{"link": artifacts.CodeInvalidPath, "../x": artifacts.CodeInvalidPath, "/etc/passwd": artifacts.CodeInvalidPath, "none": artifacts.CodeFileNotFound} {
		if f, _, err := h.sup.OpenRunFile(ctx, r, p); artifactCode(err) != code {
			if f != nil {
				f.Close()
			}
			t.Errorf("OpenRunFile(%q) = %v, want %s", p, err, code)
		}
	}
	// While it runs, a run's diff is not made yet.
	running := r
	running.Status = runs.Running
	if _, _, err := h.sup.RunDiff(ctx, running); artifactCode(err) != runs.ConflictRunNotFinished {
		t.Errorf("RunDiff of a running run = %v", err)
	}
	if _, _, err := h.sup.RunChanges(ctx, running); artifactCode(err) != runs.ConflictRunNotFinished {
		t.Errorf("RunChanges of a running run = %v", err)
	}

	// A directory swapped for a symlink out after the run is not followed.
	dir := filepath.Join(h.root, r.ID)
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.sup.OpenRunFile(ctx, r, "secret"); artifactCode(err) != artifacts.CodeWorkspaceExpired {
		t.Errorf("OpenRunFile through a swapped directory = %v", err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	// Gone: the files are not served, the diff and list still are.
	if _, _, err := h.sup.OpenRunFile(ctx, r, "made.txt"); artifactCode(err) != artifacts.CodeWorkspaceExpired {
		t.Errorf("OpenRunFile of a gone directory = %v", err)
	}
	if err := h.sup.ArchiveRun(ctx, r, io.Discard); artifactCode(err) != artifacts.CodeWorkspaceExpired {
		t.Errorf("ArchiveRun of a gone directory = %v", err)
	}
	elsewhere := r
	elsewhere.Owner = "replica-b"
	if _, _, err := h.sup.OpenRunFile(ctx, elsewhere, "made.txt"); artifactCode(err) != artifacts.CodeWorkspaceElsewhere ||
		!strings.Contains(err.Error(), "replica-b") {
		t.Errorf("OpenRunFile of another replica's run = %v", err)
	}
	// Once its snapshot is gone too, the record answers.
	h.sup.artifacts.Remove(r.ID)
	if diff, _, err := h.sup.RunDiff(ctx, r); err != nil || readAll(t, diff) != r.Diff {
		t.Errorf("RunDiff from the record: %v", err)
	}
	if files, _, err := h.sup.RunChanges(ctx, r); err != nil || len(files) != 2 {
		t.Errorf("RunChanges from the record: %v %v", files, err)
	}
}

// TestArtifactsOfAGivenDirectory: a run in a directory that was there
// before records its change to a file, not the files it left alone.
func TestArtifactsOfAGivenDirectory(t *testing.T) {
	h := newShellHarness(t, Config{})
	dir := filepath.Join(h.root, "project")
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"notes.txt": "one\ntwo\nthree\n", "keep.txt": "same\n", ".git/HEAD": "x\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := h.runScript(t, runs.Spec{Cwd: "project", Prompt: `printf 'one\n2\nthree\n' > notes.txt && echo y > .git/HEAD && rm keep.txt && echo '{"text":"done"}'`})
	if len(r.Files) != 2 || r.Files[0] != (runs.ChangedFile{Path: "keep.txt", Kind: runs.ChangeDelete}) ||
		r.Files[1] != (runs.ChangedFile{Path: "notes.txt", Kind: runs.ChangeUpdate, Size: 12}) {
		t.Errorf("files = %+v", r.Files)
	}
	if !strings.Contains(r.Diff, "@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n") || !strings.Contains(r.Diff, "deleted file mode 100644") {
		t.Errorf("diff = %s", r.Diff)
	}
}

// TestArtifactsBoundedInTheRecord: a diff over the record's bound is cut
// there, with a mark, and served whole beside the snapshot.
func TestArtifactsBoundedInTheRecord(t *testing.T) {
	h := newShellHarness(t, Config{})
	r := h.runScript(t, runs.Spec{Prompt: `seq 1 60000 > big.txt && echo '{"text":"done"}'`})
	if !r.DiffTruncated || len(r.Diff) > artifacts.MaxRecordedDiff+100 || !strings.Contains(r.Diff, "[diff truncated: ") {
		t.Errorf("record diff: truncated %v, %d bytes", r.DiffTruncated, len(r.Diff))
	}
	diff, truncated, err := h.sup.RunDiff(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if whole := readAll(t, diff); truncated || !strings.HasSuffix(whole, "+60000\n") {
		t.Errorf("the whole diff: truncated %v, %d bytes", truncated, len(whole))
	}
}

// TestArtifactsGoWithTheRun: deletion and the janitor remove snapshots.
func TestArtifactsGoWithTheRun(t *testing.T) {
	var later atomic.Int64 // how far the clock is moved ahead
	h := newShellHarness(t, Config{WorkspaceRetention: time.Hour,
		Now: func() time.Time { return time.Now().Add(time.Duration(later.Load())) }})
	// Diffs larger than the record holds: only those are kept beside it.
	const big = `seq 1 60000 > big.txt && echo '{"text":"done"}'`
	r := h.runScript(t, runs.Spec{Prompt: big})
	kept := filepath.Join(h.sup.cfg.ArtifactsDir, r.ID)
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("no snapshot kept: %v", err)
	}
	if err := h.sup.Delete(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(kept); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the deleted run's snapshot is still there: %v", err)
	}
	r = h.runScript(t, runs.Spec{Prompt: big})
	kept = filepath.Join(h.sup.cfg.ArtifactsDir, r.ID)
	h.sup.sweepArtifacts()
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("a young run's snapshot was swept: %v", err)
	}
	// A run's task is let go just after its end is stored, and a sweep
	// spares the snapshots of runs still tracked: wait for that.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		h.sup.mu.Lock()
		_, tracked := h.sup.tasks[r.ID]
		h.sup.mu.Unlock()
		if !tracked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still tracked a minute after its end", r.ID)
		}
	}
	later.Store(int64(2 * time.Hour))
	h.sup.sweepArtifacts()
	if _, err := os.Stat(kept); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an old run's snapshot was not swept: %v", err)
	}
}

// TestArtifactsInTheRecordAlone: a run whose diff and list of changes fit
// in its record keeps no file beside it, and its diff and changes are
// served from the record, whole.
func TestArtifactsInTheRecordAlone(t *testing.T) {
	h := newShellHarness(t, Config{})
	ctx := context.Background()
	for prompt, changed := range map[string]int{
		`echo '{"text":"done"}'`:                               0,
		`printf 'a\nb\n' > made.txt && echo '{"text":"done"}'`: 1,
	} {
		r := h.runScript(t, runs.Spec{Prompt: prompt})
		if len(r.Files) != changed || (changed > 0) != strings.Contains(r.Diff, "+++ b/made.txt") {
			t.Errorf("%s: the record has files %+v and diff %q", prompt, r.Files, r.Diff)
		}
		if _, err := os.Stat(filepath.Join(h.sup.cfg.ArtifactsDir, r.ID)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: a snapshot store was left: %v", prompt, err)
		}
		diff, truncated, err := h.sup.RunDiff(ctx, r)
		if err != nil || truncated || readAll(t, diff) != r.Diff {
			t.Errorf("%s: RunDiff: truncated %v, %v", prompt, truncated, err)
		}
		files, cut, err := h.sup.RunChanges(ctx, r)
		if err != nil || cut || len(files) != len(r.Files) {
			t.Errorf("%s: RunChanges = %+v, %v, %v; the record has %+v", prompt, files, cut, err, r.Files)
		}
	}
	if entries, err := os.ReadDir(h.sup.cfg.ArtifactsDir); err == nil && len(entries) > 0 {
		t.Errorf("the artifacts directory holds %d entries, want none", len(entries))
	}
}
