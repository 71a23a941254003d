package supervisor

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentgate/agentgate/internal/gitrepo"
	"github.com/agentgate/agentgate/internal/gittest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
	"github.com/agentgate/agentgate/internal/unpack"
	"github.com/agentgate/agentgate/internal/workspace"
)

// shAdapter runs its prompt as a shell script: a stand-in agent that
// changes files in its directory and home as a test says. Its run's
// session is the one it resumes, or metadata "session".
type shAdapter struct{}

func (shAdapter) Name() string { return "sh" }
func (shAdapter) Describe() runs.Description {
	return runs.Description{Name: "sh", DefaultBin: "/bin/sh", VerifiedVersion: "1.2.3", VersionArgs: []string{"-c", "echo 1.2.3"}}
}
func (shAdapter) ParseVersion(b []byte) (string, error) { return strings.TrimSpace(string(b)), nil }
func (shAdapter) Command(inv runs.Invocation) (runs.Command, error) {
	return runs.Command{Args: []string{"-c", inv.Spec.Prompt}}, nil
}
func (shAdapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	return &shDecoder{session: cmp.Or(inv.Spec.ResumeSessionID, inv.Spec.Metadata["session"])}
}

type shDecoder struct {
	fakeDecoder
	session string
}

func (d *shDecoder) Finish(exit runs.Exit, tail []byte) runs.Outcome {
	out := d.fakeDecoder.Finish(exit, tail)
	out.SessionID = d.session
	return out
}

// homeAdapter is shAdapter keeping homes: its base files are login.json
// and conf/, a session's files sessions/<id>.
type homeAdapter struct{ shAdapter }

func (homeAdapter) BaseFiles() []string { return []string{"login.json", "conf"} }
func (homeAdapter) SessionFiles(_ runs.CLIFiles, _, _, id string) ([]string, error) {
	return []string{"sessions/" + id}, nil
}

const wsToken = "tok-5be2d4a7"

// wsCluster is one store, git server and set of sources that replicas
// of a gateway share.
type wsCluster struct {
	st      runs.Store
	server  *gittest.Server
	repo    *gittest.Repo
	sources *workspace.Sources
	base    string // the agent's base home
	adapter runs.Adapter
	// replicaStore, when set, is the store replicas use in place of st.
	replicaStore runs.Store
}

func newWSCluster(t *testing.T, adapter runs.Adapter) *wsCluster {
	t.Helper()
	srv := gittest.NewServer(t, wsToken)
	repo := srv.NewRepo(t, "demo", map[string]string{"README.md": "hello\n"})
	cache, err := gitrepo.New(gitrepo.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := gitrepo.ParsePolicy([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := gitrepo.ParseCredentials(strings.NewReader(
		"acme good " + srv.URL + " " + wsToken + "\nacme bad " + srv.URL + " wrong-" + wsToken + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := runstest.Store(t)
	uploads := runstest.Uploads(t, st)
	sources := &workspace.Sources{Git: cache, Policy: policy, Credentials: creds, Archives: uploads,
		Unpack: unpack.DefaultLimits(), Store: workspace.NewStore(st.(runs.Snapshots), t.TempDir(), unpack.Limits{})}
	return &wsCluster{st: st, server: srv, repo: repo, sources: sources, base: t.TempDir(), adapter: adapter}
}

// wsReplica is one gateway replica of a cluster.
type wsReplica struct {
	sup      *Supervisor
	root     string
	homes    string
	stopOnce sync.Once
	stop     func()
}

// replica starts a supervisor of c named name.
func (c *wsCluster) replica(t *testing.T, name string) *wsReplica {
	t.Helper()
	root, homes := t.TempDir(), t.TempDir()
	cfg := Config{
		Replica: name, WorkspaceRoot: root, Path: os.Getenv("PATH"), Reaper: os.Args[0], KillGrace: 300 * time.Millisecond,
		StoreRetry: 500 * time.Millisecond, ArtifactsDir: t.TempDir(), TempRoot: t.TempDir(),
		Snapshots: c.st.(runs.Snapshots), SessionLocks: c.st.(runs.SessionLocks), Sources: c.sources, HomesDir: homes,
		Uploads: runstest.Uploads(t, c.st),
	}
	sup := New(cfg, cmp.Or(c.replicaStore, c.st), []*Agent{{Adapter: c.adapter, Bin: "/bin/sh", Home: c.base}}, runstest.NopObserver{},
		zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	ctx, cancel := context.WithCancel(context.Background())
	if err := sup.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &wsReplica{sup: sup, root: root, homes: homes}
	r.stop = func() {
		r.stopOnce.Do(func() {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			_ = sup.Shutdown(sctx)
			cancel()
			sup.loops.Wait()
		})
	}
	t.Cleanup(r.stop)
	return r
}

func (c *wsCluster) submit(t *testing.T, r *wsReplica, spec runs.Spec) runs.Run {
	t.Helper()
	spec.Agent = "sh"
	run, err := r.sup.Submit(as("acme", "k1"), spec)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return run
}

// wait waits for run id to end, with its run.completed stored.
func (c *wsCluster) wait(t *testing.T, id string) (runs.Run, []runs.StoredEvent) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang, not a target
	for time.Now().Before(deadline) {
		r, err := c.st.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Terminal() && runstest.Completed(t, c.st, id) {
			return r, runstest.StoredEvents(t, c.st, id)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s did not end within 2 minutes", id)
	return runs.Run{}, nil
}

func eventData[T any](t *testing.T, evs []runs.StoredEvent, typ runs.EventType) T {
	t.Helper()
	var v struct {
		Data T `json:"data"`
	}
	for _, e := range evs {
		if e.Type == typ {
			if err := json.Unmarshal(e.JSON, &v); err != nil {
				t.Fatalf("%s %s: %v", typ, e.JSON, err)
			}
			return v.Data
		}
	}
	t.Fatalf("no %s event", typ)
	return v.Data
}

func succeeded(t *testing.T, r runs.Run) {
	t.Helper()
	if r.Status != runs.Succeeded {
		t.Fatalf("run %s is %s: %+v", r.ID, r.Status, r.Error)
	}
}

func TestGitRunClonesChangesAndPushes(t *testing.T) {
	c := newWSCluster(t, shAdapter{})
	a := c.replica(t, "a")
	run := c.submit(t, a, runs.Spec{
		Prompt:    `test -f README.md && echo "changed by the agent" > README.md`,
		Workspace: &runs.WorkspaceSource{Git: &runs.GitSource{URL: c.repo.URL, Credential: "good"}},
		Push:      &runs.PushSpec{Branch: "agent/work", Message: "agent work"},
	})
	r, evs := c.wait(t, run.ID)
	succeeded(t, r)
	base := gittest.Branch(t, c.repo, "main")
	started := eventData[runs.RunStartedData](t, evs, runs.EventRunStarted)
	if w := started.Workspace; w == nil || w.Source != runs.SourceGit || w.Base != base || w.PrepareMS < 0 {
		t.Fatalf("run.started's workspace %+v, want source git at %s", w, base)
	}
	g := r.Git
	if g == nil || g.Base != base || g.Commit == "" || g.Branch != "agent/work" || !g.Pushed || g.Error != nil {
		t.Fatalf("the run's git %+v, want base %s, a commit pushed to agent/work", g, base)
	}
	completed := eventData[runs.RunCompletedData](t, evs, runs.EventRunCompleted)
	if completed.Git == nil || *completed.Git != *g {
		t.Fatalf("run.completed's git %+v, want the record's %+v", completed.Git, g)
	}
	if got := gittest.Branch(t, c.repo, "agent/work"); got != g.Commit {
		t.Fatalf("the remote's agent/work is at %q, want %s", got, g.Commit)
	}
	if got := gittest.Show(t, c.repo, "agent/work", "README.md"); got != "changed by the agent\n" {
		t.Fatalf("the pushed README.md is %q", got)
	}
	body, err := a.sup.RunPatch(context.Background(), r)
	if err != nil {
		t.Fatalf("RunPatch: %v", err)
	}
	patch, _ := io.ReadAll(body)
	body.Close()
	if !strings.Contains(string(patch), "Subject: [PATCH] agent work") || !strings.Contains(string(patch), "+changed by the agent") {
		t.Fatalf("RunPatch served:\n%s", patch)
	}
}

func tarGzOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func TestArchiveRunAndARunFromIt(t *testing.T) {
	c := newWSCluster(t, shAdapter{})
	a := c.replica(t, "a")
	f, err := runstest.Uploads(t, c.st).Upload(context.Background(), "acme", "src.tar.gz", "", tarGzOf(t, map[string]string{"in.txt": "from the archive\n"}))
	if err != nil {
		t.Fatal(err)
	}
	first := c.submit(t, a, runs.Spec{Prompt: `cat in.txt > out.txt && echo first >> out.txt`, Workspace: &runs.WorkspaceSource{Archive: f.ID}})
	r1, evs := c.wait(t, first.ID)
	succeeded(t, r1)
	if w := eventData[runs.RunStartedData](t, evs, runs.EventRunStarted).Workspace; w == nil || w.Source != runs.SourceArchive {
		t.Fatalf("run.started's workspace %+v, want source archive", w)
	}
	second := c.submit(t, a, runs.Spec{Prompt: `test "$(cat out.txt)" = "from the archive
first" && echo second >> out.txt`, Workspace: &runs.WorkspaceSource{FromRun: r1.ID}})
	r2, evs := c.wait(t, second.ID)
	succeeded(t, r2)
	if w := eventData[runs.RunStartedData](t, evs, runs.EventRunStarted).Workspace; w == nil || w.Source != runs.SourceFromRun || !w.Restored {
		t.Fatalf("run.started's workspace %+v, want source from_run, restored", w)
	}
	file, _, err := a.sup.OpenRunFile(context.Background(), r2, "out.txt")
	if err != nil {
		t.Fatalf("OpenRunFile: %v", err)
	}
	got, _ := io.ReadAll(file)
	file.Close()
	if string(got) != "from the archive\nfirst\nsecond\n" {
		t.Fatalf("the second run's out.txt is %q", got)
	}
	// The first run's directory is its own still.
	file, _, err = a.sup.OpenRunFile(context.Background(), r1, "out.txt")
	if err != nil {
		t.Fatalf("OpenRunFile of the first run: %v", err)
	}
	got, _ = io.ReadAll(file)
	file.Close()
	if string(got) != "from the archive\nfirst\n" {
		t.Fatalf("the first run's out.txt became %q", got)
	}
}

func TestGitRunWithAWrongTokenFailsWithoutTheToken(t *testing.T) {
	c := newWSCluster(t, shAdapter{})
	a := c.replica(t, "a")
	run := c.submit(t, a, runs.Spec{Prompt: "true", Workspace: &runs.WorkspaceSource{Git: &runs.GitSource{URL: c.repo.URL, Credential: "bad"}}})
	r, evs := c.wait(t, run.ID)
	if r.Status != runs.Failed || r.Error == nil || r.Error.Class != runs.GitAuthFailed {
		t.Fatalf("run %s with error %+v, want failed with %s", r.Status, r.Error, runs.GitAuthFailed)
	}
	record, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	seen := []string{string(record)}
	for _, e := range evs {
		seen = append(seen, string(e.JSON))
	}
	for _, s := range seen {
		if strings.Contains(s, wsToken) {
			t.Fatalf("the token is in what was stored: %s", s)
		}
	}
}

func TestAnotherReplicaServesARunsFiles(t *testing.T) {
	c := newWSCluster(t, shAdapter{})
	a := c.replica(t, "a")
	run := c.submit(t, a, runs.Spec{Prompt: `mkdir -p sub && echo made on a > sub/out.txt`, Workspace: &runs.WorkspaceSource{Archive: c.archive(t)}})
	r, _ := c.wait(t, run.ID)
	succeeded(t, r)
	a.stop() // so that b takes no run, and a's directory is not b's
	b := c.replica(t, "b")
	file, _, err := b.sup.OpenRunFile(context.Background(), r, "sub/out.txt")
	if err != nil {
		t.Fatalf("OpenRunFile on another replica: %v", err)
	}
	got, _ := io.ReadAll(file)
	file.Close()
	if string(got) != "made on a\n" {
		t.Fatalf("replica b served %q", got)
	}
	var buf bytes.Buffer
	if err := b.sup.ArchiveRun(context.Background(), r, &buf); err != nil {
		t.Fatalf("ArchiveRun on another replica: %v", err)
	}
	names := tarNames(t, buf.Bytes())
	if !strings.Contains(names, "sub/out.txt") || !strings.Contains(names, "in.txt") {
		t.Fatalf("replica b's archive of the run holds %s", names)
	}
}

// archive uploads a small archive of tenant acme and returns its id.
func (c *wsCluster) archive(t *testing.T) string {
	t.Helper()
	f, err := runstest.Uploads(t, c.st).Upload(context.Background(), "acme", "src.tar.gz", "", tarGzOf(t, map[string]string{"in.txt": "in\n"}))
	if err != nil {
		t.Fatal(err)
	}
	return f.ID
}

func tarNames(t *testing.T, data []byte) string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return strings.Join(names, " ")
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.TrimPrefix(filepath.Clean(h.Name), "./"))
	}
}

// A run whose record holds its changes only cut has them whole on every
// replica: they are kept in the cluster with its directory.
func TestAnotherReplicaServesTheWholeChanges(t *testing.T) {
	c := newWSCluster(t, shAdapter{})
	a := c.replica(t, "a")
	run := c.submit(t, a, runs.Spec{Prompt: `for i in $(seq 1200); do echo $i > f$i; done`, Workspace: &runs.WorkspaceSource{Archive: c.archive(t)}})
	r, _ := c.wait(t, run.ID)
	succeeded(t, r)
	if !r.FilesTruncated || len(r.Files) >= 1200 {
		t.Fatalf("the record holds %d files, truncated %v: want them cut", len(r.Files), r.FilesTruncated)
	}
	a.stop()
	b := c.replica(t, "b")
	files, truncated, err := b.sup.RunChanges(context.Background(), r)
	if err != nil || truncated || len(files) != 1200 {
		t.Fatalf("replica b serves %d changes, truncated %v (%v); want all 1200", len(files), truncated, err)
	}
}
