package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/artifacts"
	"github.com/agentgate/agentgate/internal/runs"
)

// Bounds of what a run's record keeps of its changes. The record travels
// as one store message (NATS allows 1 MiB): it keeps a bounded diff and a
// bounded list, says so (DiffTruncated, FilesTruncated), and the whole of
// both stays beside the run's snapshot for GET /v1/runs/{id}/diff and
// /files.
const (
	// MaxRecordedDiff bounds Run.Diff and run.completed's diff, in bytes.
	MaxRecordedDiff = 128 << 10
	// MaxRecordedFiles bounds Run.Files, in entries; maxRecordedPaths
	// bounds the bytes of their paths.
	MaxRecordedFiles = 1000
	maxRecordedPaths = 64 << 10
	// DefaultMaxArchiveBytes bounds the files of GET /v1/runs/{id}/archive.
	DefaultMaxArchiveBytes = 1 << 30
)

func artifactErr(code, format string, args ...any) error {
	return &runs.ArtifactError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// artifactDir is where the run's snapshot lives, or "" when the gateway
// keeps none.
func (s *Supervisor) artifactDir(id string) string {
	if s.cfg.ArtifactsDir == "" {
		return ""
	}
	return filepath.Join(s.cfg.ArtifactsDir, id)
}

// snapshotStart snapshots the run's directory just before its agent
// starts, or returns nil when the gateway keeps no snapshots. A directory
// that cannot be snapshotted (too many files) is a warning, and nil: the
// run goes on with the adapter's own diff, if any.
func (s *Supervisor) snapshotStart(t *task, log *zap.Logger) *artifacts.Snapshot {
	dir := s.artifactDir(t.run.ID)
	if dir == "" {
		return nil
	}
	_ = os.RemoveAll(dir) // left by an earlier attempt at the run
	snap, err := artifacts.Take(t.inv.Dir, dir, artifacts.Limits{})
	if err != nil {
		log.Warn("snapshot the run's directory", zap.Error(err))
		_ = os.RemoveAll(dir)
		s.emit(t, runs.NewEvent(runs.EventWarning, runs.WarningData{Code: "snapshot_failed",
			Message: "the run's changed files will not be recorded: " + err.Error()}))
		return nil
	}
	return snap
}

// snapshotEnd compares the run's directory, after its agent ended, with
// its snapshot, and puts the changes in the record and out: the gateway's
// diff replaces the adapter's. Without a snapshot the adapter's stays.
// The whole diff and list are kept beside the run only when the record
// cannot hold them: otherwise the record is the whole of them, and a run
// costs no file.
func (s *Supervisor) snapshotEnd(t *task, snap *artifacts.Snapshot, out *runs.Outcome, log *zap.Logger) {
	if snap != nil {
		// The kept diff is served as the record is: without the run's
		// secrets.
		var redact func(string) string
		if red := s.redactor(t); red != nil {
			redact = red.String
		}
		res, err := snap.Compare(t.inv.Dir, artifacts.Limits{}, redact)
		if err == nil {
			out.Diff = res.Diff
			files, cut := recordedFiles(res.Changes)
			t.mu.Lock()
			t.run.DiffTruncated, t.run.Files, t.run.FilesTruncated = res.Truncated, files, cut
			t.mu.Unlock()
			if cut || len(res.Diff) > MaxRecordedDiff {
				if err := artifacts.Keep(s.artifactDir(t.run.ID), res); err != nil {
					log.Warn("keep the run's whole diff", zap.Error(err))
					s.emit(t, runs.NewEvent(runs.EventWarning, runs.WarningData{Code: "snapshot_failed",
						Message: "the run's whole diff could not be kept; its record holds the start of it: " + err.Error()}))
				}
			}
		} else {
			log.Warn("compare the run's directory with its snapshot", zap.Error(err))
			s.emit(t, runs.NewEvent(runs.EventWarning, runs.WarningData{Code: "snapshot_failed",
				Message: "the run's changed files could not be found: " + err.Error()}))
		}
	}
	if len(out.Diff) > MaxRecordedDiff {
		out.Diff, _ = artifacts.Bound(out.Diff, MaxRecordedDiff)
		t.mu.Lock()
		t.run.DiffTruncated = true
		t.mu.Unlock()
	}
}

// recordedFiles converts changes for the record, bounded.
func recordedFiles(changes []artifacts.Change) ([]runs.ChangedFile, bool) {
	var files []runs.ChangedFile
	n := 0
	for _, c := range changes {
		if len(files) == MaxRecordedFiles || n+len(c.Path) > maxRecordedPaths {
			return files, true
		}
		n += len(c.Path)
		files = append(files, runs.ChangedFile{Path: c.Path, Kind: c.Kind, Size: c.Size, Binary: c.Binary})
	}
	return files, false
}

// RunDiff returns the whole unified diff of a finished run r, and whether
// it was bounded: from beside its snapshot when this replica kept it there
// (the record could not hold it), else from its record. A run that has not
// finished is a conflict (run_not_finished).
func (s *Supervisor) RunDiff(ctx context.Context, r runs.Run) (io.ReadCloser, bool, error) {
	if !r.Status.Terminal() {
		return nil, false, runs.Conflict(runs.ConflictRunNotFinished, fmt.Sprintf("the run is %s: its diff is made when it ends", r.Status))
	}
	if dir := s.artifactDir(r.ID); dir != "" {
		if _, path, truncated, err := artifacts.Load(dir); err == nil {
			if f, err := os.Open(path); err == nil {
				return f, truncated, nil
			}
		}
	}
	return io.NopCloser(strings.NewReader(r.Diff)), r.DiffTruncated, nil
}

// RunChanges returns the files a finished run r changed, and whether the
// list was bounded: the whole list when this replica kept it beside the
// run (the record could not hold it), else the record's. A run that has
// not finished is a conflict (run_not_finished).
func (s *Supervisor) RunChanges(ctx context.Context, r runs.Run) ([]runs.ChangedFile, bool, error) {
	if !r.Status.Terminal() {
		return nil, false, runs.Conflict(runs.ConflictRunNotFinished, fmt.Sprintf("the run is %s: its changes are found when it ends", r.Status))
	}
	if dir := s.artifactDir(r.ID); dir != "" {
		if changes, _, _, err := artifacts.Load(dir); err == nil {
			files := make([]runs.ChangedFile, 0, len(changes))
			for _, c := range changes {
				files = append(files, runs.ChangedFile{Path: c.Path, Kind: c.Kind, Size: c.Size, Binary: c.Binary})
			}
			return files, false, nil
		}
	}
	files := r.Files
	if files == nil {
		files = []runs.ChangedFile{}
	}
	return files, r.FilesTruncated, nil
}

// OpenRunFile opens the regular file path (relative, with forward
// slashes) of r's directory, as it is now: a running run's too. Errors
// are an *ArtifactError, a conflict (run_not_started), or the file
// system's.
func (s *Supervisor) OpenRunFile(ctx context.Context, r runs.Run, path string) (*os.File, fs.FileInfo, error) {
	if _, err := artifacts.CleanPath(path); err != nil {
		return nil, nil, artifactErr(runs.ArtifactInvalidPath, "the path %q is not a file's place in the run's directory: %s",
			clipPath(path), strings.TrimPrefix(err.Error(), artifacts.ErrInvalidPath.Error()+": "))
	}
	root, err := s.runRoot(r)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	f, fi, err := artifacts.Open(root, path)
	switch {
	case errors.Is(err, artifacts.ErrInvalidPath):
		return nil, nil, artifactErr(runs.ArtifactInvalidPath, "the path %q is not a file's place in the run's directory: %s",
			clipPath(path), strings.TrimPrefix(err.Error(), artifacts.ErrInvalidPath.Error()+": "))
	case errors.Is(err, artifacts.ErrFileNotFound):
		return nil, nil, artifactErr(runs.ArtifactFileNotFound, "no file %q in the run's directory", clipPath(path))
	case err != nil:
		return nil, nil, fmt.Errorf("open %q of run %s: %w", clipPath(path), r.ID, err)
	}
	return f, fi, nil
}

// ArchiveRun writes r's directory, as it is now, to w as a gzipped tar.
// A directory larger than DefaultMaxArchiveBytes is an *ArtifactError
// (archive_too_large) before anything is written; any error after the
// first write leaves the archive cut short.
func (s *Supervisor) ArchiveRun(ctx context.Context, r runs.Run, w io.Writer) error {
	root, err := s.runRoot(r)
	if err != nil {
		return err
	}
	defer root.Close()
	err = artifacts.Archive(w, root, DefaultMaxArchiveBytes)
	if errors.Is(err, artifacts.ErrTooLarge) {
		return &runs.ArtifactError{Code: runs.ArtifactArchiveTooLarge,
			Message: err.Error() + "; download its files one by one with GET /v1/runs/{id}/files/{path}"}
	}
	return err
}

// runRoot opens r's directory, confined to its tenant's workspace: a
// directory replaced since by a symlink that leads out is not followed.
func (s *Supervisor) runRoot(r runs.Run) (*os.Root, error) {
	if r.StartedAt == nil || r.Status == runs.Queued {
		return nil, runs.Conflict(runs.ConflictNotStarted, "the run has not started: it has no directory yet")
	}
	gone := func() error {
		if r.Owner != "" && r.Owner != s.cfg.Replica {
			return &runs.ArtifactError{Code: runs.ArtifactWorkspaceElsewhere, Replica: r.Owner,
				Message: fmt.Sprintf("the run's directory is on the gateway replica %s, not on this one (%s): ask that replica; the diff and the list of changed files are served by any", r.Owner, s.cfg.Replica)}
		}
		return artifactErr(runs.ArtifactWorkspaceExpired,
			"the run's directory is gone (workspace retention, or removed); its diff and list of changed files remain")
	}
	base, err := s.tenantRoot(r.Tenant)
	if err != nil {
		return nil, gone()
	}
	tr, err := os.OpenRoot(realPath(base))
	if err != nil {
		return nil, gone()
	}
	defer tr.Close()
	cwd := r.Spec.Cwd
	if cwd == "" {
		cwd = r.ID
	}
	root, err := tr.OpenRoot(cwd)
	if err != nil {
		return nil, gone()
	}
	return root, nil
}

func clipPath(p string) string {
	if len(p) > 200 {
		return p[:200] + "…"
	}
	return p
}

// removeArtifacts removes a run's snapshot and diff.
func (s *Supervisor) removeArtifacts(id string) {
	dir := s.artifactDir(id)
	if dir == "" {
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		s.log.Warn("remove a run's snapshot", zap.String("run_id", id), zap.Error(err))
	}
}

// sweepArtifacts removes the snapshots of runs older than
// Config.WorkspaceRetention, as their directories are: the diff and the
// list of changes then come from the record.
func (s *Supervisor) sweepArtifacts() {
	if s.cfg.ArtifactsDir == "" {
		return
	}
	entries, err := os.ReadDir(s.cfg.ArtifactsDir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("sweep snapshots", zap.Error(err))
		}
		return
	}
	cutoff := s.cfg.Now().Add(-s.cfg.WorkspaceRetention)
	for _, e := range entries {
		id, err := uuid.Parse(e.Name())
		if err != nil || id.Version() != 7 || id.String() != e.Name() {
			continue
		}
		sec, nsec := id.Time().UnixTime()
		if time.Unix(sec, nsec).After(cutoff) {
			continue
		}
		s.mu.Lock()
		_, active := s.tasks[e.Name()]
		s.mu.Unlock()
		if !active {
			s.removeArtifacts(e.Name())
		}
	}
}
