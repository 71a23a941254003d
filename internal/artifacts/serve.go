package artifacts

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// The codes of an Error.
const (
	// CodeInvalidPath: the path is not a file's place in the run's
	// directory (absolute, "..", a directory, a device, a symlink out).
	CodeInvalidPath = "invalid_path"
	// CodeFileNotFound: nothing is at the path.
	CodeFileNotFound = "file_not_found"
	// CodeWorkspaceExpired: the run's directory is gone (retention, or
	// removed); its diff and list of changes are still in the record.
	CodeWorkspaceExpired = "workspace_expired"
	// CodeWorkspaceElsewhere: the run's directory is on the replica that
	// ran it, not on this one.
	CodeWorkspaceElsewhere = "workspace_on_other_replica"
	// CodeArchiveTooLarge: the directory is larger than the archive's
	// bound.
	CodeArchiveTooLarge = "archive_too_large"
	// CodeNoGitWorkspace: the run has no git workspace, so no patch.
	CodeNoGitWorkspace = "no_git_workspace"
)

// Error is why a run's files cannot be served. Code is one of the Code*
// constants; Replica names the replica that has the directory, for
// CodeWorkspaceElsewhere.
type Error struct {
	Code    string
	Message string
	Replica string
}

func (e *Error) Error() string { return e.Message }

func errorf(code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Diff returns the whole unified diff of a finished run r, and whether it
// was bounded: from beside its snapshot when this replica kept it there
// (the record could not hold it), else from its record. A run that has not
// finished is a conflict (run_not_finished).
func (k *Keeper) Diff(r runs.Run) (io.ReadCloser, bool, error) {
	if !r.Status.Terminal() {
		return nil, false, runs.Conflict(runs.ConflictRunNotFinished, fmt.Sprintf("the run is %s: its diff is made when it ends", r.Status))
	}
	if store := k.storeOf(r.ID); store != "" {
		if _, path, truncated, err := Load(store); err == nil {
			if f, err := os.Open(path); err == nil {
				return f, truncated, nil
			}
		}
	}
	return io.NopCloser(strings.NewReader(r.Diff)), r.DiffTruncated, nil
}

// Changes returns the files a finished run r changed, and whether the
// list was bounded: the whole list when this replica kept it beside the
// run (the record could not hold it), else the record's. A run that has
// not finished is a conflict (run_not_finished).
func (k *Keeper) Changes(r runs.Run) ([]runs.ChangedFile, bool, error) {
	if !r.Status.Terminal() {
		return nil, false, runs.Conflict(runs.ConflictRunNotFinished, fmt.Sprintf("the run is %s: its changes are found when it ends", r.Status))
	}
	if store := k.storeOf(r.ID); store != "" {
		if changes, _, _, err := Load(store); err == nil {
			files := make([]runs.ChangedFile, 0, len(changes))
			for _, c := range changes {
				files = append(files, changedFile(c))
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

// OpenFile opens the regular file path (relative, with forward slashes)
// of r's directory, as it is now: a running run's too. Errors are an
// *Error, a conflict (run_not_started), or the file system's.
func (k *Keeper) OpenFile(r runs.Run, path string) (*os.File, fs.FileInfo, error) {
	if _, err := CleanPath(path); err != nil {
		return nil, nil, invalidPath(path, err)
	}
	root, err := k.runRoot(r)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	return openIn(root, r, path)
}

// OpenFileIn opens the regular file path of dir, a copy of r's directory
// (restored from the cluster), as OpenFile opens it in the directory.
func (k *Keeper) OpenFileIn(dir string, r runs.Run, path string) (*os.File, fs.FileInfo, error) {
	if _, err := CleanPath(path); err != nil {
		return nil, nil, invalidPath(path, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, k.gone(r)
	}
	defer root.Close()
	return openIn(root, r, path)
}

func openIn(root *os.Root, r runs.Run, path string) (*os.File, fs.FileInfo, error) {
	f, fi, err := Open(root, path)
	switch {
	case errors.Is(err, ErrInvalidPath):
		return nil, nil, invalidPath(path, err)
	case errors.Is(err, ErrFileNotFound):
		return nil, nil, errorf(CodeFileNotFound, "no file %q in the run's directory", clip.Text(path, 200))
	case err != nil:
		return nil, nil, fmt.Errorf("open %q of run %s: %w", clip.Text(path, 200), r.ID, err)
	}
	return f, fi, nil
}

func invalidPath(path string, err error) error {
	return errorf(CodeInvalidPath, "the path %q is not a file's place in the run's directory: %s",
		clip.Text(path, 200), strings.TrimPrefix(err.Error(), ErrInvalidPath.Error()+": "))
}

// WriteArchive writes r's directory, as it is now, to w as a gzipped tar.
// A directory larger than KeeperConfig.MaxArchiveBytes is an *Error
// (archive_too_large) before anything is written; any error after the
// first write leaves the archive cut short.
func (k *Keeper) WriteArchive(r runs.Run, w io.Writer) error {
	root, err := k.runRoot(r)
	if err != nil {
		return err
	}
	defer root.Close()
	return k.archive(root, w)
}

// WriteArchiveIn writes dir, a copy of r's directory (restored from the
// cluster), as WriteArchive writes the directory.
func (k *Keeper) WriteArchiveIn(dir string, r runs.Run, w io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return k.gone(r)
	}
	defer root.Close()
	return k.archive(root, w)
}

func (k *Keeper) archive(root *os.Root, w io.Writer) error {
	err := Archive(w, root, k.cfg.MaxArchiveBytes)
	if errors.Is(err, ErrTooLarge) {
		return &Error{Code: CodeArchiveTooLarge,
			Message: err.Error() + "; download its files one by one with GET /v1/runs/{id}/files/{path}"}
	}
	return err
}

// runRoot opens r's directory, confined to its tenant's workspace: a
// directory replaced since by a symlink that leads out is not followed.
func (k *Keeper) runRoot(r runs.Run) (*os.Root, error) {
	if r.StartedAt == nil || r.Status == runs.Queued {
		return nil, runs.Conflict(runs.ConflictNotStarted, "the run has not started: it has no directory yet")
	}
	base, err := k.cfg.TenantRoot(r.Tenant)
	if err != nil {
		return nil, k.gone(r)
	}
	tr, err := os.OpenRoot(realPath(base))
	if err != nil {
		return nil, k.gone(r)
	}
	defer tr.Close()
	cwd := cmp.Or(r.Spec.WorkDir, r.Spec.Cwd, r.ID)
	root, err := tr.OpenRoot(cwd)
	if err != nil {
		return nil, k.gone(r)
	}
	return root, nil
}

// gone is why r's directory could not be opened here.
func (k *Keeper) gone(r runs.Run) error {
	if r.Owner != "" && r.Owner != k.cfg.Replica {
		return &Error{Code: CodeWorkspaceElsewhere, Replica: r.Owner,
			Message: fmt.Sprintf("the run's directory is on the gateway replica %s, not on this one (%s): ask that replica; the diff and the list of changed files are served by any", r.Owner, k.cfg.Replica)}
	}
	return errorf(CodeWorkspaceExpired,
		"the run's directory is gone (workspace retention, or removed); its diff and list of changed files remain")
}

func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
