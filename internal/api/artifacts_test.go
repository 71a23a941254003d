package api

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/artifacts"
	"github.com/agentgate/agentgate/internal/runs"
)

// artifactService is a fakeService with a run's directory and diff.
type artifactService struct {
	*fakeService
	dir       string
	diff      string
	truncated bool
	files     []runs.ChangedFile
	// dirErr, when set, is what the directory routes get.
	dirErr error
	paths  []string
	// patch is the run's patch; git, when set, its git result.
	patch string
	git   *runs.GitResult
}

// Record gives the run its git result.
func (a *artifactService) Record(ctx context.Context, id string) (runs.Run, error) {
	r, err := a.fakeService.Record(ctx, id)
	r.Git = a.git
	return r, err
}

func (a *artifactService) RunDiff(ctx context.Context, r runs.Run) (io.ReadCloser, bool, error) {
	if !r.Status.Terminal() {
		return nil, false, runs.Conflict(runs.ConflictRunNotFinished, "the run is running")
	}
	return io.NopCloser(strings.NewReader(a.diff)), a.truncated, nil
}

func (a *artifactService) RunChanges(ctx context.Context, r runs.Run) ([]runs.ChangedFile, bool, error) {
	if !r.Status.Terminal() {
		return nil, false, runs.Conflict(runs.ConflictRunNotFinished, "the run is running")
	}
	return a.files, a.truncated, nil
}

// OpenRunFile confines the open as the supervisor does: artifacts.Open
// in the run's directory.
func (a *artifactService) OpenRunFile(ctx context.Context, r runs.Run, p string) (*os.File, fs.FileInfo, error) {
	a.paths = append(a.paths, p)
	if a.dirErr != nil {
		return nil, nil, a.dirErr
	}
	root, err := os.OpenRoot(a.dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	f, fi, err := artifacts.Open(root, p)
	switch {
	case errors.Is(err, artifacts.ErrInvalidPath):
		return nil, nil, &artifacts.Error{Code: artifacts.CodeInvalidPath, Message: err.Error()}
	case errors.Is(err, artifacts.ErrFileNotFound):
		return nil, nil, &artifacts.Error{Code: artifacts.CodeFileNotFound, Message: err.Error()}
	}
	return f, fi, err
}

func (a *artifactService) ArchiveRun(ctx context.Context, r runs.Run, w io.Writer) error {
	if a.dirErr != nil {
		return a.dirErr
	}
	root, err := os.OpenRoot(a.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return artifacts.Archive(w, root, 1<<20)
}

// RunPatch serves patch for a run with a git workspace, as the
// supervisor does from the cluster.
func (a *artifactService) RunPatch(ctx context.Context, r runs.Run) (io.ReadCloser, error) {
	if r.Git == nil {
		return nil, &artifacts.Error{Code: artifacts.CodeNoGitWorkspace, Message: "the run has no git workspace"}
	}
	if !r.Status.Terminal() {
		return nil, runs.Conflict(runs.ConflictRunNotFinished, "the run is running")
	}
	return io.NopCloser(strings.NewReader(a.patch)), nil
}

const artifactRun = "0196f0c2-7e1a-7000-8000-0000000000aa"

func newArtifactHarness(t *testing.T, status runs.State) (*harness, *artifactService) {
	t.Helper()
	svc := newArtifactService(t, status)
	return newHarness(t, Config{}, svc), svc
}

func newArtifactService(t testing.TB, status runs.State) *artifactService {
	t.Helper()
	dir, outside := t.TempDir(), t.TempDir()
	for p, content := range map[string]string{"made.txt": "hello\n", "sub/inner.txt": "inner\n", "<b>.html": "<script>x</script>"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	svc := &artifactService{
		fakeService: &fakeService{get: func(ctx context.Context, id string) (runs.Run, error) {
			if id != artifactRun {
				return runs.Run{}, runs.ErrNotFound
			}
			now := time.Now()
			return runs.Run{ID: id, Status: status, StartedAt: &now}, nil
		}},
		dir:   dir,
		diff:  "diff --git a/made.txt b/made.txt\nnew file mode 100644\n--- /dev/null\n+++ b/made.txt\n@@ -0,0 +1 @@\n+hello\n",
		files: []runs.ChangedFile{{Path: "made.txt", Kind: runs.ChangeAdd, Size: 6}},
	}
	return svc
}

func fetchArtifact(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func wantCode(t *testing.T, resp *http.Response, body string, status int, code string) {
	t.Helper()
	var e ErrorResponse
	if resp.StatusCode != status || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("%s: %d %s, want %d %s", resp.Request.URL.Path, resp.StatusCode, body, status, code)
	}
}

func TestRunDiffAndFiles(t *testing.T) {
	h, svc := newArtifactHarness(t, runs.Succeeded)
	base := h.srv.URL + "/v1/runs/" + artifactRun
	resp, body := fetchArtifact(t, base+"/diff")
	if resp.StatusCode != 200 || body != svc.diff || resp.Header.Get("Content-Type") != "text/x-diff; charset=utf-8" ||
		resp.Header.Get("X-Diff-Truncated") != "false" {
		t.Errorf("diff: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	svc.truncated = true
	if resp, _ := fetchArtifact(t, base+"/diff"); resp.Header.Get("X-Diff-Truncated") != "true" {
		t.Errorf("a bounded diff says X-Diff-Truncated %q", resp.Header.Get("X-Diff-Truncated"))
	}
	resp, body = fetchArtifact(t, base+"/files")
	var list ChangedFiles
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Files) != 1 ||
		list.Files[0] != svc.files[0] || !list.Truncated {
		t.Errorf("files: %d %s", resp.StatusCode, body)
	}
	resp, body = fetchArtifact(t, h.srv.URL+"/v1/runs/0196f0c2-7e1a-7000-8000-0000000000bb/diff")
	wantCode(t, resp, body, 404, CodeNotFound)
}

func TestRunDiffWhileRunning(t *testing.T) {
	h, _ := newArtifactHarness(t, runs.Running)
	base := h.srv.URL + "/v1/runs/" + artifactRun
	for _, p := range []string{"/diff", "/files"} {
		resp, body := fetchArtifact(t, base+p)
		wantCode(t, resp, body, 409, CodeRunNotFinished)
	}
	// The directory as it is now is served while the run runs.
	if resp, body := fetchArtifact(t, base+"/files/made.txt"); resp.StatusCode != 200 || body != "hello\n" {
		t.Errorf("file of a running run: %d %q", resp.StatusCode, body)
	}
}

func TestRunFile(t *testing.T) {
	h, svc := newArtifactHarness(t, runs.Succeeded)
	base := h.srv.URL + "/v1/runs/" + artifactRun + "/files/"
	resp, body := fetchArtifact(t, base+"sub/inner.txt")
	if resp.StatusCode != 200 || body != "inner\n" || resp.Header.Get("Content-Type") != "application/octet-stream" ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("file: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	// An HTML file is bytes to download, never a page.
	if resp, _ := fetchArtifact(t, base+"%3Cb%3E.html"); resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("html file: %d %v", resp.StatusCode, resp.Header)
	}
	for p, want := range map[string]string{
		"escape":            CodeInvalidPath,
		"sub":               CodeInvalidPath,
		"%2e%2e/x":          CodeInvalidPath,
		"sub/%2e%2e/x":      CodeInvalidPath,
		"%2Fetc%2Fpasswd":   CodeInvalidPath,
		"sub%2F..%2Fescape": CodeInvalidPath,
		"nothing.txt":       CodeFileNotFound,
	} {
		resp, body := fetchArtifact(t, base+p)
		status := map[string]int{CodeInvalidPath: 400, CodeFileNotFound: 404}[want]
		wantCode(t, resp, body, status, want)
	}
	// A raw ".." in the URL never reaches the handler as anything else.
	req, _ := http.NewRequest(http.MethodGet, base+"x", nil)
	req.URL.Opaque = "/v1/runs/" + artifactRun + "/files/../../etc/passwd"
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("a raw .. got 200: %s", b)
		}
	}
	if n := len(svc.paths); n == 0 || svc.paths[0] != "sub/inner.txt" {
		t.Errorf("paths asked for: %q", svc.paths)
	}
	svc.dirErr = &artifacts.Error{Code: artifacts.CodeWorkspaceExpired, Message: "gone"}
	resp, body = fetchArtifact(t, base+"made.txt")
	wantCode(t, resp, body, 410, CodeWorkspaceExpired)
	svc.dirErr = &artifacts.Error{Code: artifacts.CodeWorkspaceElsewhere, Message: "on replica b", Replica: "b"}
	resp, body = fetchArtifact(t, base+"made.txt")
	wantCode(t, resp, body, 409, CodeWorkspaceOnOtherReplica)
}

func TestRunArchive(t *testing.T) {
	h, svc := newArtifactHarness(t, runs.Succeeded)
	url := h.srv.URL + "/v1/runs/" + artifactRun + "/archive"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/gzip" {
		t.Fatalf("archive: %d %v", resp.StatusCode, resp.Header)
	}
	gz, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	got := map[string]string{}
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[hd.Name] = fmt.Sprintf("%c:%s%s", hd.Typeflag, hd.Linkname, b)
	}
	if got["made.txt"] != "0:hello\n" || !strings.HasSuffix(got["escape"], "/secret") || strings.Contains(got["escape"], "secret\n") {
		t.Errorf("archive entries: %v", got)
	}
	svc.dirErr = &artifacts.Error{Code: artifacts.CodeArchiveTooLarge, Message: "too large"}
	r2, body := fetchArtifact(t, url)
	wantCode(t, r2, body, 422, CodeArchiveTooLarge)
}

// FuzzRunFilePath: whatever the path, the file route answers 200 only
// with a file of the run's directory, and otherwise a 4xx with a code.
func FuzzRunFilePath(f *testing.F) {
	for _, s := range []string{"made.txt", "sub/inner.txt", "escape", "..", "%2e%2e/escape", "a%00b", "%ZZ", "sub/../made.txt", "//etc/passwd"} {
		f.Add(s)
	}
	srv := httptest.NewServer(New(Config{}, newArtifactService(f, runs.Succeeded), nil, nil, nil))
	f.Cleanup(srv.Close)
	f.Fuzz(func(t *testing.T, p string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/runs/"+artifactRun+"/files/x", nil)
		if err != nil {
			t.Fatal(err) // a constant URL: never
		}
		req.URL.Opaque = "/v1/runs/" + artifactRun + "/files/" + p
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return // the client refused the URL
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == 200:
			if s := string(b); s != "hello\n" && s != "inner\n" && s != "<script>x</script>" {
				t.Fatalf("%q served %q", p, b)
			}
		case resp.StatusCode >= 500:
			t.Fatalf("%q: %d %s", p, resp.StatusCode, b)
		case strings.HasPrefix(string(b), "400 Bad Request"):
			// net/http's own answer to a URL it cannot parse, before
			// any handler (the gateway's listener gives it a code).
		default:
			var e ErrorResponse
			if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
				t.Fatalf("%q: %d without a code: %s", p, resp.StatusCode, b)
			}
		}
	})
}

func TestRunPatch(t *testing.T) {
	h, svc := newArtifactHarness(t, runs.Succeeded)
	base := h.srv.URL + "/v1/runs/" + artifactRun
	resp, body := fetchArtifact(t, base+"/patch")
	wantCode(t, resp, body, 404, CodeNoGitWorkspace)

	svc.git = &runs.GitResult{Base: "abc", Commit: "def"}
	svc.patch = "From def Mon Sep 17 00:00:00 2001\nSubject: [PATCH] change\n"
	resp, body = fetchArtifact(t, base+"/patch")
	if resp.StatusCode != 200 || body != svc.patch || resp.Header.Get("Content-Type") != "text/x-patch; charset=utf-8" ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("patch: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	running, runningSvc := newArtifactHarness(t, runs.Running)
	runningSvc.git = svc.git
	resp, body = fetchArtifact(t, running.srv.URL+"/v1/runs/"+artifactRun+"/patch")
	wantCode(t, resp, body, 409, CodeRunNotFinished)
}
