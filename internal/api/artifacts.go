package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/artifacts"
	"github.com/agentgate/agentgate/internal/runs"
)

// The codes of the artifact routes: a file's path, a directory that is
// gone or elsewhere, an archive too large.
const (
	// CodeInvalidPath: the path of GET /v1/runs/{id}/files/{path} is not
	// a file's place in the run's directory (400).
	CodeInvalidPath = artifacts.CodeInvalidPath
	// CodeFileNotFound: nothing is at that path (404).
	CodeFileNotFound = artifacts.CodeFileNotFound
	// CodeWorkspaceExpired: the run's directory is gone; its diff and
	// list of changes still are served (410).
	CodeWorkspaceExpired = artifacts.CodeWorkspaceExpired
	// CodeWorkspaceOnOtherReplica: the run's directory is on the replica
	// that ran it (409; the message names it).
	CodeWorkspaceOnOtherReplica = artifacts.CodeWorkspaceElsewhere
	// CodeArchiveTooLarge: the run's directory is larger than the
	// archive's bound (422).
	CodeArchiveTooLarge = artifacts.CodeArchiveTooLarge
	// CodeNoGitWorkspace: the run has no git workspace, so no patch
	// (404).
	CodeNoGitWorkspace = artifacts.CodeNoGitWorkspace
)

// Artifacts is what the artifact routes need from the service; the
// supervisor implements it. Each method gets the run as the route found
// it, its tenant's.
type Artifacts interface {
	// RunDiff returns the whole diff of a finished run and whether it was
	// bounded; a run that has not finished is a conflict
	// (run_not_finished).
	RunDiff(ctx context.Context, r runs.Run) (io.ReadCloser, bool, error)
	// RunChanges returns the files a finished run changed and whether the
	// list was bounded; a run that has not finished is a conflict.
	RunChanges(ctx context.Context, r runs.Run) ([]runs.ChangedFile, bool, error)
	// OpenRunFile opens one regular file of the run's directory, as it is
	// now. Errors are an *artifacts.Error, a conflict, or other.
	OpenRunFile(ctx context.Context, r runs.Run, path string) (*os.File, fs.FileInfo, error)
	// ArchiveRun writes the run's directory to w as a tar.gz. An error
	// before the first write can still be answered; one after it cuts
	// the archive short.
	ArchiveRun(ctx context.Context, r runs.Run, w io.Writer) error
	// RunPatch returns a finished git run's change as format-patch mail;
	// an *artifacts.Error with CodeNoGitWorkspace for a run without a
	// git workspace, a conflict for a run that has not finished.
	RunPatch(ctx context.Context, r runs.Run) (io.ReadCloser, error)
}

// ChangedFiles is the body of GET /v1/runs/{id}/files.
type ChangedFiles struct {
	Files []runs.ChangedFile `json:"files"`
	// Truncated says the list was bounded: only the run's record was at
	// hand, and it keeps at most artifacts.MaxRecordedFiles.
	Truncated bool `json:"truncated"`
}

// artifacts returns the service's Artifacts, or answers 404.
func (s *server) artifacts(w http.ResponseWriter, r *http.Request) (Artifacts, runs.Run, bool) {
	a, ok := s.svc.(Artifacts)
	run, found := ownedRun(r.Context())
	if !ok || !found {
		s.fail(w, r, edgeErr(http.StatusNotFound, CodeNotFound, "", "this gateway does not serve the files of runs"))
		return nil, runs.Run{}, false
	}
	return a, run, true
}

// artifactFailure gives an artifact error its status and code.
func artifactFailure(err error) error {
	var ae *artifacts.Error
	if !errors.As(err, &ae) {
		return err
	}
	status := map[string]int{
		CodeInvalidPath: http.StatusBadRequest, CodeFileNotFound: http.StatusNotFound,
		CodeWorkspaceExpired: http.StatusGone, CodeWorkspaceOnOtherReplica: http.StatusConflict,
		CodeArchiveTooLarge: http.StatusUnprocessableEntity, CodeNoGitWorkspace: http.StatusNotFound,
	}[ae.Code]
	if status == 0 {
		return err
	}
	return &edgeError{status: status, code: ae.Code, msg: ae.Message, cause: err}
}

// runDiff serves GET /v1/runs/{id}/diff: the whole unified diff, as
// text/x-diff, with X-Diff-Truncated saying whether it was bounded.
func (s *server) runDiff(w http.ResponseWriter, r *http.Request) {
	a, run, ok := s.artifacts(w, r)
	if !ok {
		return
	}
	body, truncated, err := a.RunDiff(r.Context(), run)
	if err != nil {
		s.fail(w, r, artifactFailure(fmt.Errorf("diff of run %s: %w", run.ID, err)))
		return
	}
	w.Header().Set("X-Diff-Truncated", fmt.Sprint(truncated))
	s.writeText(w, r, run.ID, "text/x-diff; charset=utf-8", body)
}

// runPatch serves GET /v1/runs/{id}/patch: a git run's change as one
// format-patch message.
func (s *server) runPatch(w http.ResponseWriter, r *http.Request) {
	a, run, ok := s.artifacts(w, r)
	if !ok {
		return
	}
	body, err := a.RunPatch(r.Context(), run)
	if err != nil {
		s.fail(w, r, artifactFailure(fmt.Errorf("patch of run %s: %w", run.ID, err)))
		return
	}
	s.writeText(w, r, run.ID, "text/x-patch; charset=utf-8", body)
}

// writeText answers with body, a text of one of run's artifacts, never
// cached nor sniffed; it closes body.
func (s *server) writeText(w http.ResponseWriter, r *http.Request, runID, contentType string, body io.ReadCloser) {
	defer body.Close()
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, body); err != nil {
		s.log.Debug("write a run's text", zap.String("run_id", runID), zap.String("content_type", contentType), zap.Error(err))
	}
}

// runFiles serves GET /v1/runs/{id}/files: the files the run changed.
func (s *server) runFiles(w http.ResponseWriter, r *http.Request) {
	a, run, ok := s.artifacts(w, r)
	if !ok {
		return
	}
	files, truncated, err := a.RunChanges(r.Context(), run)
	if err != nil {
		s.fail(w, r, artifactFailure(fmt.Errorf("files of run %s: %w", run.ID, err)))
		return
	}
	if files == nil {
		files = []runs.ChangedFile{}
	}
	s.writeJSON(w, r, http.StatusOK, ChangedFiles{Files: files, Truncated: truncated})
}

// runFile serves GET /v1/runs/{id}/files/{path}: one file of the run's
// directory, as bytes, never as a page a browser would render.
func (s *server) runFile(w http.ResponseWriter, r *http.Request) {
	a, run, ok := s.artifacts(w, r)
	if !ok {
		return
	}
	p, err := filePathParam(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, fi, err := a.OpenRunFile(r.Context(), run, p)
	if err != nil {
		s.fail(w, r, artifactFailure(fmt.Errorf("file of run %s: %w", run.ID, err)))
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// filePathParam is the {path} of a file route, decoded once: chi matches
// the escaped path when the request has one.
func filePathParam(r *http.Request) (string, error) {
	p := chi.URLParam(r, "*")
	if r.URL.RawPath != "" {
		var err error
		if p, err = url.PathUnescape(p); err != nil {
			return "", edgeErr(http.StatusBadRequest, CodeInvalidPath, "", "the path is not validly escaped")
		}
	}
	return p, nil
}

// runArchive serves GET /v1/runs/{id}/archive: the run's directory as a
// tar.gz, streamed. A failure once the archive has begun cannot be
// answered with an error any more: the connection is cut, so that the
// client sees a broken transfer rather than a short archive it may take
// for whole.
func (s *server) runArchive(w http.ResponseWriter, r *http.Request) {
	a, run, ok := s.artifacts(w, r)
	if !ok {
		return
	}
	setHeaders := func() {
		h := w.Header()
		h.Set("Content-Type", "application/gzip")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": run.ID + ".tar.gz"}))
	}
	if r.Method == http.MethodHead {
		setHeaders()
		w.WriteHeader(http.StatusOK)
		return
	}
	lw := &lazyWriter{w: w, begin: func() { setHeaders(); w.WriteHeader(http.StatusOK) }}
	err := a.ArchiveRun(r.Context(), run, lw)
	switch {
	case err == nil && !lw.begun:
		lw.begin()
	case err != nil && !lw.begun:
		s.fail(w, r, artifactFailure(fmt.Errorf("archive of run %s: %w", run.ID, err)))
	case err != nil:
		s.log.Warn("archive cut short", zap.String("run_id", run.ID), zap.Error(err))
		panic(http.ErrAbortHandler) // net/http's way to cut the response
	}
}

// lazyWriter calls begin before its first write.
type lazyWriter struct {
	w     io.Writer
	begin func()
	begun bool
}

func (l *lazyWriter) Write(b []byte) (int, error) {
	if !l.begun {
		l.begun = true
		l.begin()
	}
	return l.w.Write(b)
}
