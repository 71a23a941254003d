package artifacts

import (
	"os"

	"go.uber.org/zap"

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
)

// Watch finds what one run changes in its directory: it holds the
// snapshot taken before the run's agent started.
type Watch struct {
	store  string    // where the snapshot lives
	dir    string    // the run's directory
	snap   *Snapshot // nil when there is none
	limits Limits
	log    *zap.Logger
	warn   func(message string)
}

// Watch snapshots dir, the directory of the run id, just before its
// agent starts. A directory that cannot be snapshotted (too many files)
// is logged to log and told to warn, in a sentence for the run's client:
// the run goes on with the adapter's own diff, if any. warn is called
// again by Record when the changes cannot be found or kept.
func (k *Keeper) Watch(id, dir string, log *zap.Logger, warn func(message string)) *Watch {
	w := &Watch{store: k.storeOf(id), dir: dir, limits: k.cfg.Limits, log: log, warn: warn}
	if w.store == "" {
		return w
	}
	_ = os.RemoveAll(w.store) // left by an earlier attempt at the run
	snap, err := Take(dir, w.store, w.limits)
	if err != nil {
		log.Warn("snapshot the run's directory", zap.Error(err))
		_ = os.RemoveAll(w.store)
		warn("the run's changed files will not be recorded: " + err.Error())
		return w
	}
	w.snap = snap
	return w
}

// Recorded is what a run's record keeps of its changes.
type Recorded struct {
	Diff          string
	DiffTruncated bool
	// Found says the gateway found the changes itself: Files and
	// FilesTruncated are their list, which replaces the record's.
	Found          bool
	Files          []runs.ChangedFile
	FilesTruncated bool
}

// ApplyTo puts rec's bounds and list in r, the run's record; the caller
// puts rec.Diff where the record's diff comes from.
func (rec Recorded) ApplyTo(r *runs.Run) {
	switch {
	case rec.Found:
		r.DiffTruncated, r.Files, r.FilesTruncated = rec.DiffTruncated, rec.Files, rec.FilesTruncated
	case rec.DiffTruncated:
		r.DiffTruncated = true
	}
}

// Record compares the run's directory, after its agent ended, with its
// snapshot, and returns what the run's record keeps of its changes: the
// gateway's diff replaces diff, the adapter's, which stays (bounded)
// without a snapshot or a nil w. redact, when set, is applied to the diff
// as it is made, so that the diff kept beside the run is as free of the
// run's secrets as the record. The whole diff and list are kept beside
// the run only when the record cannot hold them: otherwise the record is
// the whole of them, and a run costs no file.
func (w *Watch) Record(diff string, redact func(string) string) Recorded {
	rec := Recorded{Diff: diff}
	if w != nil && w.snap != nil {
		rec = w.compare(diff, redact)
	}
	if len(rec.Diff) > MaxRecordedDiff {
		rec.Diff, _ = Bound(rec.Diff, MaxRecordedDiff)
		rec.DiffTruncated = true
	}
	return rec
}

// compare finds the run's changes; when it cannot, the adapter's diff
// stays.
func (w *Watch) compare(diff string, redact func(string) string) Recorded {
	res, err := w.snap.Compare(w.dir, w.limits, redact)
	if err != nil {
		w.log.Warn("compare the run's directory with its snapshot", zap.Error(err))
		w.warn("the run's changed files could not be found: " + err.Error())
		return Recorded{Diff: diff}
	}
	files, cut := recordedFiles(res.Changes)
	if cut || len(res.Diff) > MaxRecordedDiff {
		if err := Keep(w.store, res); err != nil {
			w.log.Warn("keep the run's whole diff", zap.Error(err))
			w.warn("the run's whole diff could not be kept; its record holds the start of it: " + err.Error())
		}
	}
	return Recorded{Diff: res.Diff, DiffTruncated: res.Truncated, Found: true, Files: files, FilesTruncated: cut}
}

// recordedFiles converts changes for the record, bounded.
func recordedFiles(changes []Change) ([]runs.ChangedFile, bool) {
	var files []runs.ChangedFile
	n := 0
	for _, c := range changes {
		if len(files) == MaxRecordedFiles || n+len(c.Path) > maxRecordedPaths {
			return files, true
		}
		n += len(c.Path)
		files = append(files, changedFile(c))
	}
	return files, false
}

func changedFile(c Change) runs.ChangedFile {
	return runs.ChangedFile{Path: c.Path, Kind: c.Kind, Size: c.Size, Binary: c.Binary}
}
