package workspace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/gitrepo"
	"github.com/agentgate/agentgate/internal/gittest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/unpack"
)

const gitToken = "tok-9c1e77"

type sourcesFixture struct {
	src     *Sources
	server  *gittest.Server
	repo    *gittest.Repo
	uploads *files.Uploads
}

// newSources is Sources as the gateway makes them, over a git server on
// 127.0.0.1 whose token tenant "acme" has as credential "good", and
// a wrong one as "bad".
func newSources(t *testing.T) *sourcesFixture {
	t.Helper()
	srv := gittest.NewServer(t, gitToken)
	repo := srv.NewRepo(t, "demo", map[string]string{"README.md": "hello\n", "src/main.go": "package main\n"})
	cache, err := gitrepo.New(gitrepo.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := gitrepo.ParsePolicy([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := gitrepo.ParseCredentials(strings.NewReader(
		"acme good " + srv.URL + " " + gitToken + "\nacme bad " + srv.URL + " not-the-token\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := runstest.Store(t)
	uploads := runstest.Uploads(t, st)
	src := &Sources{Git: cache, Policy: policy, Credentials: creds, Archives: uploads, Unpack: unpack.DefaultLimits(),
		Store: NewStore(st.(runs.Snapshots), t.TempDir(), unpack.Limits{})}
	return &sourcesFixture{src: src, server: srv, repo: repo, uploads: uploads}
}

func (f *sourcesFixture) git(cred string) runs.WorkspaceSource {
	return runs.WorkspaceSource{Git: &runs.GitSource{URL: f.repo.URL, Credential: cred}}
}

// tarGz is a gzipped tar of hdrs, each regular file holding body.
func tarGz(t *testing.T, hdrs []tar.Header, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(body))
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func (f *sourcesFixture) upload(t *testing.T, tenant, name string, data []byte) string {
	t.Helper()
	file, err := f.uploads.Upload(context.Background(), tenant, name, "", data)
	if err != nil {
		t.Fatalf("upload %s: %v", name, err)
	}
	return file.ID
}

func pngBytes(t *testing.T) []byte {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func fieldCode(err error) string {
	var fe *runs.FieldError
	var rf *files.Refusal
	switch {
	case errors.As(err, &fe):
		return fe.Code
	case errors.As(err, &rf):
		return rf.Code
	}
	return ""
}

func TestSourcesCheck(t *testing.T) {
	f := newSources(t)
	ctx := context.Background()
	image := f.upload(t, "acme", "pic.png", pngBytes(t))
	archive := f.upload(t, "acme", "a.tar.gz", tarGz(t, []tar.Header{{Typeflag: tar.TypeReg, Name: "a.txt", Mode: 0o644}}, "a"))
	cases := []struct {
		name, tenant string
		src          runs.WorkspaceSource
		wantCode     string
		wantOK       bool
	}{
		{"git with its credential", "acme", f.git("good"), "", true},
		{"git without credential", "acme", f.git(""), "", true},
		{"unknown credential", "acme", f.git("nope"), gitrepo.CodeUnknownCredential, false},
		{"another tenant's credential", "globex", f.git("good"), gitrepo.CodeUnknownCredential, false},
		{"credential for another URL", "acme", runs.WorkspaceSource{Git: &runs.GitSource{URL: "https://example.com/x.git", Credential: "good"}}, gitrepo.CodeCredentialNotForURL, false},
		{"http to a host not allowed", "acme", runs.WorkspaceSource{Git: &runs.GitSource{URL: "http://10.1.2.3/x.git"}}, gitrepo.CodeGitURLRefused, false},
		{"file url", "acme", runs.WorkspaceSource{Git: &runs.GitSource{URL: "file:///etc"}}, "", false},
		{"archive", "acme", runs.WorkspaceSource{Archive: archive}, "", true},
		{"another tenant's archive", "globex", runs.WorkspaceSource{Archive: archive}, files.NotFound, false},
		{"archive not found", "acme", runs.WorkspaceSource{Archive: "file_nope"}, files.NotFound, false},
		{"image, not an archive", "acme", runs.WorkspaceSource{Archive: image}, files.NotAnArchive, false},
	}
	for _, c := range cases {
		err := f.src.Check(ctx, c.tenant, c.src)
		if c.wantOK != (err == nil) {
			t.Errorf("%s: Check: %v, want ok=%v", c.name, err, c.wantOK)
			continue
		}
		if c.wantCode != "" && fieldCode(err) != c.wantCode {
			t.Errorf("%s: Check: %v (code %q), want code %q", c.name, err, fieldCode(err), c.wantCode)
		}
		if err != nil && strings.Contains(err.Error(), gitToken) {
			t.Errorf("%s: the error %q holds the token", c.name, err)
		}
	}
}

func TestSourcesPrepareGit(t *testing.T) {
	f := newSources(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ws")
	p, runErr := f.src.Prepare(ctx, "acme", f.git("good"), dir)
	if runErr != nil {
		t.Fatalf("Prepare: %v", runErr)
	}
	main := gittest.Branch(t, f.repo, "main")
	if p.Info.Source != runs.SourceGit || p.Info.Base != main || p.Info.CacheHit {
		t.Fatalf("first clone's info %+v, want source git, base %s, no cache hit", p.Info, main)
	}
	if p.Git == nil || p.Git.Base != main || p.Git.URL != f.repo.URL || p.Git.Credential != "good" {
		t.Fatalf("first clone's git work %+v", p.Git)
	}
	sameTree(t, "the clone", withoutGit(readTree(t, dir)), map[string]string{"README.md": "hello\n", "src/main.go": "package main\n", "CHANGES.md": "second\n"})
	p2, runErr := f.src.Prepare(ctx, "acme", f.git("good"), filepath.Join(t.TempDir(), "ws2"))
	if runErr != nil {
		t.Fatalf("second Prepare: %v", runErr)
	}
	if !p2.Info.CacheHit || p2.Info.Base != main {
		t.Fatalf("second clone's info %+v, want a cache hit at %s", p2.Info, main)
	}
}

func withoutGit(tree map[string]string) map[string]string {
	for k := range tree {
		if strings.HasPrefix(k, ".git/") {
			delete(tree, k)
		}
	}
	return tree
}

func TestSourcesPrepareArchive(t *testing.T) {
	f := newSources(t)
	id := f.upload(t, "acme", "src.tar.gz", tarGz(t, []tar.Header{
		{Typeflag: tar.TypeDir, Name: "pkg/", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: "pkg/a.go", Mode: 0o644},
	}, "package pkg\n"))
	dir := filepath.Join(t.TempDir(), "ws")
	p, runErr := f.src.Prepare(context.Background(), "acme", runs.WorkspaceSource{Archive: id}, dir)
	if runErr != nil {
		t.Fatalf("Prepare: %v", runErr)
	}
	if p.Info.Source != runs.SourceArchive || p.Git != nil {
		t.Fatalf("prepared %+v", p)
	}
	sameTree(t, "the unpacked archive", readTree(t, dir), map[string]string{"pkg/a.go": "package pkg\n"})
}

func TestSourcesPrepareFromRun(t *testing.T) {
	f := newSources(t)
	ctx := context.Background()
	prev := t.TempDir()
	writeTree(t, prev, map[string]string{"out.txt": "made by run 1"})
	if _, err := f.src.Store.SaveDir(ctx, wsKey("run-1"), prev, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ws")
	p, runErr := f.src.Prepare(ctx, "acme", runs.WorkspaceSource{FromRun: "run-1"}, dir)
	if runErr != nil {
		t.Fatalf("Prepare: %v", runErr)
	}
	if p.Info.Source != runs.SourceFromRun || !p.Info.Restored {
		t.Fatalf("prepared %+v", p.Info)
	}
	sameTree(t, "the restored run", readTree(t, dir), map[string]string{"out.txt": "made by run 1"})
	_, runErr = f.src.Prepare(ctx, "acme", runs.WorkspaceSource{FromRun: "run-gone"}, filepath.Join(t.TempDir(), "ws"))
	if runErr == nil || runErr.Class != runs.WorkspaceFailed {
		t.Fatalf("Prepare from a run not kept: %v, want %s", runErr, runs.WorkspaceFailed)
	}
}

func TestSourcesPrepareErrorsAreClassed(t *testing.T) {
	f := newSources(t)
	unsafe := f.upload(t, "acme", "evil.tar.gz", tarGz(t, []tar.Header{{Typeflag: tar.TypeReg, Name: "../evil", Mode: 0o644}}, "x"))
	cases := []struct {
		name string
		src  runs.WorkspaceSource
		want runs.Class
	}{
		{"wrong token", f.git("bad"), runs.GitAuthFailed},
		{"no credential for a protected repository", f.git(""), runs.GitAuthFailed},
		{"no such repository", runs.WorkspaceSource{Git: &runs.GitSource{URL: f.server.RepoURL("nope"), Credential: "good"}}, runs.GitNotFound},
		{"no such ref", runs.WorkspaceSource{Git: &runs.GitSource{URL: f.repo.URL, Ref: "no-such-branch", Credential: "good"}}, runs.GitNotFound},
		{"unsafe archive", runs.WorkspaceSource{Archive: unsafe}, runs.WorkspaceFailed},
	}
	for _, c := range cases {
		parent := t.TempDir()
		_, runErr := f.src.Prepare(context.Background(), "acme", c.src, filepath.Join(parent, "ws"))
		if runErr == nil || runErr.Class != c.want {
			t.Errorf("%s: Prepare: %v, want class %s", c.name, runErr, c.want)
			continue
		}
		if strings.Contains(runErr.Message, gitToken) || strings.Contains(runErr.Message, "not-the-token") {
			t.Errorf("%s: the run's error %q holds a token", c.name, runErr.Message)
		}
		if _, err := os.Stat(filepath.Join(parent, "evil")); err == nil {
			t.Errorf("%s: an unsafe archive wrote outside its directory", c.name)
		}
	}
}

// cloned is a git workspace of the fixture's repository, prepared.
func (f *sourcesFixture) cloned(t *testing.T) (GitWork, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	p, runErr := f.src.Prepare(context.Background(), "acme", f.git("good"), dir)
	if runErr != nil {
		t.Fatalf("Prepare: %v", runErr)
	}
	return *p.Git, dir
}

func TestConcludeCommitsPushesAndMakesThePatch(t *testing.T) {
	f := newSources(t)
	gw, dir := f.cloned(t)
	writeTree(t, dir, map[string]string{"README.md": "changed by the agent\n", "new.txt": "new\n"})
	push := &runs.PushSpec{Branch: "agent/change", Message: "The agent's change"}
	c := f.src.Conclude(context.Background(), "acme", gw, push, dir, "run-1")
	res := c.Result
	if res.Error != nil || !res.Pushed || res.Commit == "" || res.Branch != "agent/change" || res.Base != gw.Base || res.URL != f.repo.URL {
		t.Fatalf("Conclude: %+v (error %v)", res, res.Error)
	}
	if got := gittest.Branch(t, f.repo, "agent/change"); got != res.Commit {
		t.Fatalf("the remote's branch is at %q, want %s", got, res.Commit)
	}
	if got := gittest.Show(t, f.repo, "agent/change", "README.md"); got != "changed by the agent\n" {
		t.Fatalf("the pushed README.md is %q", got)
	}
	if parent := gittest.Git(t, f.repo.Dir, "rev-parse", res.Commit+"^"); parent != gw.Base {
		t.Fatalf("the commit's parent is %s, want the base %s", parent, gw.Base)
	}
	patch := string(c.Patch)
	if !strings.Contains(patch, "Subject: [PATCH] The agent's change") || !strings.Contains(patch, "+changed by the agent") {
		t.Fatalf("the patch is not the change as mail:\n%s", patch)
	}
}

func TestConcludeOfARefusedPush(t *testing.T) {
	f := newSources(t)
	gw, dir := f.cloned(t)
	gittest.RefusePushes(t, f.repo, "protected by policy")
	writeTree(t, dir, map[string]string{"README.md": "changed\n"})
	c := f.src.Conclude(context.Background(), "acme", gw, &runs.PushSpec{Branch: "agent/x"}, dir, "run-1")
	res := c.Result
	if res.Error == nil || res.Error.Class != runs.PushRejected || res.Pushed || res.Commit == "" {
		t.Fatalf("Conclude of a refused push: %+v (error %v), want push_rejected, not pushed, with a commit", res, res.Error)
	}
	if len(c.Patch) == 0 {
		t.Fatal("no patch of a change whose push was refused")
	}
	if gittest.Branch(t, f.repo, "agent/x") != "" {
		t.Fatal("the refused branch is on the remote")
	}
}

func TestConcludeOfNoChange(t *testing.T) {
	f := newSources(t)
	gw, dir := f.cloned(t)
	c := f.src.Conclude(context.Background(), "acme", gw, &runs.PushSpec{Branch: "agent/none"}, dir, "run-1")
	if c.Result.Commit != "" || c.Result.Pushed || c.Result.Error != nil || c.Patch != nil {
		t.Fatalf("Conclude of no change: %+v (error %v), patch %d bytes", c.Result, c.Result.Error, len(c.Patch))
	}
	if gittest.Branch(t, f.repo, "agent/none") != "" {
		t.Fatal("a branch was pushed of no change")
	}
}

func TestConcludeWithoutPushCommitsAndPatchesOnly(t *testing.T) {
	f := newSources(t)
	gw, dir := f.cloned(t)
	writeTree(t, dir, map[string]string{"x.txt": "x\n"})
	c := f.src.Conclude(context.Background(), "acme", gw, nil, dir, "run-7")
	if c.Result.Commit == "" || c.Result.Pushed || c.Result.Error != nil || !strings.Contains(string(c.Patch), "Changes of agentgate run run-7") {
		t.Fatalf("Conclude without push: %+v (error %v), patch:\n%s", c.Result, c.Result.Error, c.Patch)
	}
	if gittest.Git(t, f.repo.Dir, "for-each-ref", "--format=%(refname)", "refs/heads") != "refs/heads/dev\nrefs/heads/main" {
		t.Fatal("Conclude without push changed the remote's branches")
	}
}
