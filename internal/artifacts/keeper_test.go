package artifacts

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/runs"
)

// newTestKeeper is a Keeper whose runs' directories are under workspace,
// for every tenant.
func newTestKeeper(t *testing.T, dir, workspace string) *Keeper {
	return NewKeeper(KeeperConfig{Dir: dir, Replica: "here",
		TenantRoot: func(string) (string, error) { return workspace, nil }}, zaptest.NewLogger(t))
}

func errorCode(err error) string {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	var ce *runs.ConflictError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return fmt.Sprint(err)
}

// TestKeeperWatchesARun: the changes made between Watch and Record are
// the record's, the run's files are served from its directory, and a run
// whose changes fit in its record leaves no file beside it.
func TestKeeperWatchesARun(t *testing.T) {
	store, workspace := t.TempDir(), t.TempDir()
	k := newTestKeeper(t, store, workspace)
	id := uuid.Must(uuid.NewV7()).String()
	dir := filepath.Join(workspace, id)
	write(t, dir, "kept.txt", "same\n")
	var warnings []string
	w := k.Watch(id, dir, zaptest.NewLogger(t), func(m string) { warnings = append(warnings, m) })
	write(t, dir, "made.txt", "hello\n")
	rec := w.Record("the adapter's diff", nil)
	if !rec.Found || len(rec.Files) != 1 || rec.Files[0].Path != "made.txt" || rec.FilesTruncated ||
		!strings.Contains(rec.Diff, "+hello\n") || rec.DiffTruncated || len(warnings) > 0 {
		t.Fatalf("record = %+v, warnings %q", rec, warnings)
	}
	now := time.Now()
	r := runs.Run{ID: id, Status: runs.Succeeded, StartedAt: &now, Diff: rec.Diff, Files: []runs.ChangedFile{{Path: "stale"}}}
	rec.ApplyTo(&r)
	if len(r.Files) != 1 || r.Files[0].Path != "made.txt" {
		t.Errorf("the record's files = %+v", r.Files)
	}
	if entries, err := os.ReadDir(store); err != nil || len(entries) > 0 {
		t.Errorf("the keeper's directory holds %d entries (%v), want none", len(entries), err)
	}
	f, _, err := k.OpenFile(r, "made.txt")
	if err != nil {
		t.Fatalf("OpenFile: %v", err)
	}
	defer f.Close()
	if b, err := io.ReadAll(f); err != nil || string(b) != "hello\n" {
		t.Errorf("OpenFile read %q, %v", b, err)
	}
	if _, _, err := k.OpenFile(r, "../x"); errorCode(err) != CodeInvalidPath {
		t.Errorf("OpenFile(../x) = %v, want %s", err, CodeInvalidPath)
	}
}

// TestKeeperWithoutSnapshots: a keeper without a directory bounds the
// adapter's diff and leaves the record's list alone.
func TestKeeperWithoutSnapshots(t *testing.T) {
	k := newTestKeeper(t, "", t.TempDir())
	big := strings.Repeat("+x\n", MaxRecordedDiff)
	for name, w := range map[string]*Watch{"no directory": k.Watch("run", t.TempDir(), zaptest.NewLogger(t), nil), "nil": nil} {
		rec := w.Record(big, nil)
		if rec.Found || !rec.DiffTruncated || len(rec.Diff) > MaxRecordedDiff+100 {
			t.Errorf("%s: found %v, truncated %v, %d bytes", name, rec.Found, rec.DiffTruncated, len(rec.Diff))
		}
		r := runs.Run{Files: []runs.ChangedFile{{Path: "the adapter's"}}}
		rec.ApplyTo(&r)
		if !r.DiffTruncated || len(r.Files) != 1 {
			t.Errorf("%s: the record has diff truncated %v, files %+v", name, r.DiffTruncated, r.Files)
		}
	}
}

// TestKeeperRunRootGone: a run not started has no directory; one whose
// directory is not here is expired, or elsewhere when another replica
// ran it.
func TestKeeperRunRootGone(t *testing.T) {
	k := NewKeeper(KeeperConfig{Replica: "here",
		TenantRoot: func(string) (string, error) { return "", errors.New("no workspace") }}, zaptest.NewLogger(t))
	now := time.Now()
	for _, c := range []struct {
		run  runs.Run
		want string
	}{
		{runs.Run{ID: "a", Status: runs.Queued}, runs.ConflictNotStarted},
		{runs.Run{ID: "b", Status: runs.Succeeded, StartedAt: &now}, CodeWorkspaceExpired},
		{runs.Run{ID: "c", Status: runs.Succeeded, StartedAt: &now, Owner: "there"}, CodeWorkspaceElsewhere},
	} {
		if err := k.WriteArchive(c.run, io.Discard); errorCode(err) != c.want {
			t.Errorf("WriteArchive(%s) = %v, want %s", c.run.ID, err, c.want)
		}
	}
}

// TestKeeperSweep: a sweep removes the snapshots of runs created before
// its cutoff, but not a busy run's, nor what is not a run's.
func TestKeeperSweep(t *testing.T) {
	store := t.TempDir()
	k := newTestKeeper(t, store, t.TempDir())
	old, busy := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
	for _, name := range []string{old, busy, "not-a-run"} {
		write(t, store, filepath.Join(name, "diff"), "x")
	}
	k.Sweep(time.Now().Add(-time.Hour), func(string) bool { return false })
	if entries, _ := os.ReadDir(store); len(entries) != 3 {
		t.Fatalf("a sweep before the runs were made left %d of 3 entries", len(entries))
	}
	k.Sweep(time.Now().Add(time.Hour), func(id string) bool { return id == busy })
	var left []string
	entries, _ := os.ReadDir(store)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if len(left) != 2 || !strings.Contains(strings.Join(left, " "), busy) || !strings.Contains(strings.Join(left, " "), "not-a-run") {
		t.Errorf("left %v, want the busy run's and not-a-run", left)
	}
}

func TestKeeperSweepRestoredByAge(t *testing.T) {
	dir := t.TempDir()
	k := NewKeeper(KeeperConfig{Dir: dir}, zaptest.NewLogger(t))
	old, fresh := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
	now := time.Now()
	for id, mtime := range map[string]time.Time{old: now.Add(-2 * time.Hour), fresh: now} {
		p := k.RestoredPath(id)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	k.SweepRestored(now.Add(-time.Hour))
	if _, err := os.Stat(k.RestoredPath(old)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a copy restored two hours ago is still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(k.RestoredPath(fresh), "f")); err != nil {
		t.Errorf("a copy restored just now was removed: %v", err)
	}
	k.Remove(fresh)
	if _, err := os.Stat(k.RestoredPath(fresh)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("removing the run left its restored copy (%v)", err)
	}
}
