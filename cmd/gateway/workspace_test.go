package main

// End-to-end tests of runs' workspaces: a repository cloned from a git
// server on 127.0.0.1 (internal/gittest, behind a token) with the
// operator's credentials file, an uploaded archive, and another run's
// directory, each worked on by the real Claude Code against the mock
// Anthropic server.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/gittest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
)

// commandPrefix starts a prompt whose rest is the command the mock has
// Claude Code run with its Bash tool.
const commandPrefix = "RUN: "

// promptedCommand answers a prompt "RUN: <command>" with a Bash tool call
// running the command, and the call's result with text: one scenario for
// every run of a test, each asking for its own command.
func promptedCommand() anthropic.Scenario {
	usage := anthropic.Usage{InputTokens: 100, OutputTokens: 20}
	return anthropic.Func(func(req *anthropic.Request) anthropic.Response {
		if len(req.ToolResults()) > 0 {
			return anthropic.Response{Message: anthropic.Message{Content: []anthropic.Block{anthropic.Text("Done.")}, Usage: usage}}
		}
		_, command, ok := strings.Cut(req.UserText(), commandPrefix)
		if !ok {
			return anthropic.Response{Message: anthropic.Message{Content: []anthropic.Block{anthropic.Text("No command asked for.")}, Usage: usage}}
		}
		command, _, _ = strings.Cut(command, "\n")
		return anthropic.Response{Message: anthropic.Message{
			Content: []anthropic.Block{anthropic.Text("Running it."), anthropic.Bash(command)},
			Usage:   usage,
		}}
	})
}

// runRequest is the body of a POST /v1/runs that has Claude Code run
// command, with the rest of the request's members in extra ("" for none,
// else starting with a comma).
func runRequest(command, extra string) string {
	prompt, _ := json.Marshal(commandPrefix + command)
	return `{"agent":"claude","permission":"workspace_write","prompt":` + string(prompt) + extra + `}`
}

// logLines is a gateway's stdout, its log, kept for a test to search.
type logLines struct {
	mu        sync.Mutex
	b         strings.Builder
	listening chan string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if _, rest, ok := strings.Cut(string(p), "agentgate listening on "); ok {
		url, _, _ := strings.Cut(rest, "\n")
		select {
		case l.listening <- url:
		default:
		}
	}
	return len(p), nil
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startLoggedGateway is startGateway keeping everything the gateway logs,
// at debug level, so that a test can look for what must never be logged.
func startLoggedGateway(t *testing.T, settings, passEnv map[string]string) (*gateway, *logLines) {
	t.Helper()
	settings["AGENTGATE_LOG_LEVEL"] = "debug"
	for k, v := range settings {
		t.Setenv(k, v)
	}
	getenv := func(k string) string {
		if v, ok := passEnv[k]; ok {
			return v
		}
		return settings[k]
	}
	logs := &logLines{listening: make(chan string, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runWith(ctx, seams{versionOutput: runstest.Versions.Output}, nil, getenv, logs) }()
	var stopped bool
	t.Cleanup(func() {
		cancel()
		if !stopped {
			if err := <-done; err != nil {
				t.Errorf("gateway stopped with %v", err)
			}
		}
	})
	g := &gateway{DataDir: settings["AGENTGATE_DATA_DIR"]}
	select {
	case g.URL = <-logs.listening:
	case err := <-done:
		stopped = true
		t.Fatalf("gateway did not start: %v", err)
	case <-time.After(startGuard):
		t.Fatalf("gateway did not start within %s", startGuard)
	}
	return g, logs
}

// gitGateway starts a gateway that runs claude on workspaces cloned from
// server, whose repositories the credentials "good" (the server's token)
// and "stale" (another) open for every tenant.
func gitGateway(t *testing.T, server *gittest.Server, staleToken string) (*gateway, *logLines) {
	t.Helper()
	creds := filepath.Join(t.TempDir(), "git-credentials")
	lines := fmt.Sprintf("* good %s/ %s\n* stale %s/ %s\n", server.URL, server.Token, server.URL, staleToken)
	if err := os.WriteFile(creds, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	settings := gatewayEnv(t, t.TempDir())
	settings["AGENTGATE_AGENTS"] = "claude"
	settings["AGENTGATE_GIT_CREDENTIALS_FILE"] = creds
	settings["AGENTGATE_GIT_ALLOW_HOSTS"] = "127.0.0.1"
	mock := startMock(t, promptedCommand())
	return startLoggedGateway(t, settings, mockCreds(mock))
}

// runEvents is a finished run's record, its events and the raw bytes of
// both, for a search of what must never be in them.
type runEvents struct {
	run    runs.Run
	events []sseEvent
	raw    string
}

// finish waits for run id to end and reads its record and events.
func (g *gateway) finish(t *testing.T, id string) runEvents {
	t.Helper()
	g.waitRun(t, id, 12*time.Minute)
	_, record := httpDo(t, http.MethodGet, g.URL+"/v1/runs/"+id, "", nil)
	var out runEvents
	if err := json.Unmarshal(record, &out.run); err != nil {
		t.Fatalf("run %s record: %v: %s", id, err, record)
	}
	_, out.events = g.stream(t, id, "")
	raw := &strings.Builder{}
	raw.Write(record)
	for _, e := range out.events {
		raw.WriteString(e.Data)
	}
	out.raw = raw.String()
	return out
}

// started is the run's run.started payload.
func (r runEvents) started(t *testing.T) runs.RunStartedData {
	t.Helper()
	for _, e := range r.events {
		if e.Type == string(runs.EventRunStarted) {
			var d runs.RunStartedData
			if err := e.data(&d); err != nil {
				t.Fatalf("run.started: %v: %s", err, e.Data)
			}
			return d
		}
	}
	t.Fatalf("run %s has no run.started: %v", r.run.ID, types(r.events))
	return runs.RunStartedData{}
}

// toolOutput is what the run's tool calls returned, joined.
func (r runEvents) toolOutput(t *testing.T) string {
	t.Helper()
	var out strings.Builder
	for _, e := range r.events {
		if e.Type == string(runs.EventToolCallCompleted) {
			var d runs.ToolCallCompletedData
			if err := e.data(&d); err != nil {
				t.Fatalf("tool_call.completed: %v: %s", err, e.Data)
			}
			out.WriteString(d.Output)
		}
	}
	return out.String()
}

// TestWorkspaceGitEndToEnd clones a repository from a git server that asks
// for a token, has Claude Code read and change it, and pushes the change
// to a new branch: the branch holds it on the run's base, the patch
// applies to a fresh clone of the base, and a second run is served by
// the replica's cache.
func TestWorkspaceGitEndToEnd(t *testing.T) {
	server := gittest.NewServer(t, "git-token-5d1e7b")
	repo := server.NewRepo(t, "demo", map[string]string{"README.md": "the demo repository\n"})
	g, _ := gitGateway(t, server, "stale-token-a93c02")
	git := `,"workspace":{"git":{"url":"` + repo.URL + `","ref":"main","credential":"good"}}`

	// The agent reads the repository and its history, then edits a file,
	// removes one and adds one in a new directory.
	r := g.post(t, runRequest("cat README.md && git log -1 --format=head=%H && cat .git/config && "+
		"printf 'edited by the agent\\n' >> README.md && rm CHANGES.md && mkdir docs && printf 'new\\n' > docs/new.md",
		git+`,"push":{"branch":"agent/readme"}`))
	first := g.finish(t, r.ID)
	if first.run.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v; events %v", first.run.Status, first.run.Error, types(first.events))
	}
	base := gittest.Branch(t, repo, "main")
	if out := first.toolOutput(t); !strings.Contains(out, "the demo repository") || !strings.Contains(out, "head="+base) {
		t.Errorf("the agent did not see the repository's README and history at %s; its tool said %q", base, out)
	} else if strings.Contains(out, server.Token) {
		t.Errorf("the token is in the workspace's .git/config: %q", out)
	}
	if ws := first.started(t).Workspace; ws == nil || ws.Source != runs.SourceGit || ws.Base != base {
		t.Errorf("run.started's workspace = %+v, want source git on base %s", ws, base)
	}
	res := first.run.Git
	if res == nil || !res.Pushed || res.Base != base || res.Branch != "agent/readme" || res.Commit == "" || res.Error != nil {
		t.Fatalf("the run's git = %+v, want pushed to agent/readme on %s", res, base)
	}
	wantFiles := []runs.ChangedFile{{Path: "CHANGES.md", Kind: runs.ChangeDelete}, {Path: "README.md", Kind: runs.ChangeUpdate, Size: 40},
		{Path: "docs/new.md", Kind: runs.ChangeAdd, Size: 4}}
	if !slices.Equal(first.run.Files, wantFiles) {
		t.Errorf("the run's files = %+v, want %+v (and nothing of .git)", first.run.Files, wantFiles)
	}
	checkPushed(t, repo, *res)
	checkPatchApplies(t, g, server, repo, first.run)

	// A commit pushed since is in the next run's clone, which the cache
	// serves by fetching it.
	head := gittest.Commit(t, repo, "main", map[string]string{"CHANGES.md": "third\n"})
	r = g.post(t, runRequest("cat CHANGES.md", git))
	second := g.finish(t, r.ID)
	if ws := second.started(t).Workspace; second.run.Status != runs.Succeeded || ws == nil || !ws.CacheHit || ws.Base != head {
		t.Errorf("a second clone of the repository: %s %+v, workspace %+v; want served by the cache at %s", second.run.Status, second.run.Error, ws, head)
	}
	if out := second.toolOutput(t); !strings.Contains(out, "third") {
		t.Errorf("the second run's clone lacks the newest commit; its tool said %q", out)
	}
	if second.run.Git == nil || second.run.Git.Commit != "" || second.run.Git.Pushed {
		t.Errorf("a run that changed nothing and asked for no push: git %+v", second.run.Git)
	}
}

// checkPushed reads the pushed branch back from the server: one commit on
// the run's base, holding the agent's edit.
func checkPushed(t *testing.T, repo *gittest.Repo, res runs.GitResult) {
	t.Helper()
	if got := gittest.Branch(t, repo, res.Branch); got != res.Commit {
		t.Fatalf("branch %s on the server is at %q, the run says %s", res.Branch, got, res.Commit)
	}
	if parent := gittest.Git(t, repo.Dir, "rev-parse", res.Commit+"^"); parent != res.Base {
		t.Errorf("the pushed commit's parent is %s, want the run's base %s", parent, res.Base)
	}
	if got, want := gittest.Show(t, repo, res.Commit, "README.md"), "the demo repository\nedited by the agent\n"; got != want {
		t.Errorf("README.md on the pushed branch = %q, want %q", got, want)
	}
	changes := gittest.Git(t, repo.Dir, "diff", "--name-status", res.Base, res.Commit)
	if want := "D\tCHANGES.md\nM\tREADME.md\nA\tdocs/new.md"; changes != want {
		t.Errorf("the pushed commit changes\n%s\nwant\n%s", changes, want)
	}
}

// checkPatchApplies applies the run's patch with git am to a fresh clone
// of its base and finds the agent's edit.
func checkPatchApplies(t *testing.T, g *gateway, server *gittest.Server, repo *gittest.Repo, run runs.Run) {
	t.Helper()
	code, patch := httpDo(t, http.MethodGet, g.URL+"/v1/runs/"+run.ID+"/patch", "", nil)
	if code != http.StatusOK || !bytes.Contains(patch, []byte("+edited by the agent")) {
		t.Fatalf("GET /patch = %d %q", code, patch)
	}
	work := t.TempDir()
	gittest.Git(t, work, "clone", "-q", repo.Dir, ".")
	gittest.Git(t, work, "checkout", "-q", run.Git.Base)
	path := filepath.Join(t.TempDir(), "run.patch")
	if err := os.WriteFile(path, patch, 0o600); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, work, "am", "-q", path)
	got, err := os.ReadFile(filepath.Join(work, "README.md"))
	if err != nil || string(got) != "the demo repository\nedited by the agent\n" {
		t.Errorf("README.md after git am = %q (%v)", got, err)
	}
}

// TestWorkspaceGitFailuresEndToEnd: a push the server refuses leaves the
// run succeeded with the refusal in its git result, and a credential the
// server refuses (or none) fails the run as git_auth_failed although the
// replica's cache holds the repository, with neither token anywhere the
// gateway writes.
func TestWorkspaceGitFailuresEndToEnd(t *testing.T) {
	const token, stale = "git-token-88e2f4", "stale-token-0c7d19"
	server := gittest.NewServer(t, token)
	repo := server.NewRepo(t, "demo", map[string]string{"README.md": "the demo repository\n"})
	refusing := server.NewRepo(t, "guarded", map[string]string{"README.md": "guarded\n"})
	gittest.RefusePushes(t, refusing, "pushes are closed")
	// A branch at the run's base, which a plain push would fast-forward.
	gittest.Git(t, repo.Dir, "branch", "released", "main")
	released := gittest.Branch(t, repo, "released")
	g, logs := gitGateway(t, server, stale)
	checkRefusals(t, g, repo.URL)

	for _, c := range []struct {
		name, url, branch string
	}{
		{"a branch that exists", repo.URL, "released"},
		{"a server that refuses every push", refusing.URL, "agent/change"},
	} {
		r := g.post(t, runRequest("printf 'more\\n' >> README.md",
			`,"workspace":{"git":{"url":"`+c.url+`","ref":"main","credential":"good"}},"push":{"branch":"`+c.branch+`"}`))
		done := g.finish(t, r.ID)
		res := done.run.Git
		if done.run.Status != runs.Succeeded || res == nil || res.Pushed || res.Commit == "" ||
			res.Error == nil || res.Error.Class != runs.PushRejected {
			t.Errorf("%s: run %s %+v, git %+v; want succeeded, not pushed, push_rejected", c.name, done.run.Status, done.run.Error, res)
		}
		if got := gittest.Branch(t, repo, "released"); got != released {
			t.Errorf("%s: branch released moved from %s to %s", c.name, released, got)
		}
		if strings.Contains(done.raw, token) {
			t.Errorf("%s: the token is in the run's record or events", c.name)
		}
	}

	// The repository is in the replica's cache now: a run with a token the
	// server refuses, or with none, is refused all the same.
	var denied strings.Builder
	for name, credential := range map[string]string{"a token the server refuses": `,"credential":"stale"`, "no credential": ""} {
		r := g.post(t, runRequest("cat README.md", `,"workspace":{"git":{"url":"`+repo.URL+`"`+credential+`}}`))
		done := g.finish(t, r.ID)
		if done.run.Status != runs.Failed || done.run.Error == nil || done.run.Error.Class != runs.GitAuthFailed {
			t.Errorf("a clone with %s: %s %+v, want failed as git_auth_failed", name, done.run.Status, done.run.Error)
		}
		denied.WriteString(done.raw)
	}
	for name, secret := range map[string]string{"the good token": token, "the stale token": stale} {
		if strings.Contains(denied.String(), secret) {
			t.Errorf("%s is in a failed run's record or events", name)
		}
		if strings.Contains(logs.String(), secret) {
			t.Errorf("%s is in the gateway's log", name)
		}
	}
}

// checkRefusals submits workspaces and pushes the gateway must refuse
// with a 400 whose code and field say why, before any run is queued.
func checkRefusals(t *testing.T, g *gateway, url string) {
	t.Helper()
	gitOf := func(src string) string { return `,"workspace":{"git":` + src + `}` }
	for _, c := range []struct {
		name, extra, code, field, says string
	}{
		{"plain http to a host not allowed", gitOf(`{"url":"http://git.example.com/demo.git"}`),
			"invalid_field", "workspace.git.url", "AGENTGATE_GIT_ALLOW_HOSTS"},
		{"an internal address not allowed", gitOf(`{"url":"https://10.1.2.3/demo.git"}`),
			"git_url_refused", "workspace.git.url", "internal address"},
		{"a file URL", gitOf(`{"url":"file:///etc/demo.git"}`),
			"invalid_field", "workspace.git.url", "https"},
		{"a credential the tenant lacks", gitOf(`{"url":"` + url + `","credential":"nosuch"}`),
			"unknown_credential", "workspace.git.credential", "nosuch"},
		{"a push without a git workspace", `,"push":{"branch":"agent/x"}`,
			"invalid_field", "push", "git workspace"},
		{"a push to the ref the run starts from", gitOf(`{"url":"`+url+`","ref":"main","credential":"good"}`) + `,"push":{"branch":"main"}`,
			"invalid_field", "push.branch", "new branch"},
	} {
		status, b := g.postJSON(t, "/v1/runs", runRequest("true", c.extra))
		var e struct {
			Error struct{ Code, Message, Field string }
		}
		json.Unmarshal(b, &e)
		if status != http.StatusBadRequest || e.Error.Code != c.code || e.Error.Field != c.field || !strings.Contains(e.Error.Message, c.says) {
			t.Errorf("%s: POST /v1/runs = %d %s, want 400 %s on %s saying %q", c.name, status, b, c.code, c.field, c.says)
		}
	}
}

// TestWorkspaceArchiveAndFromRunEndToEnd: a run works on an uploaded
// tar.gz, a second run starts from the first's directory, and an archive
// with an entry out of its directory fails its run, writing nothing.
func TestWorkspaceArchiveAndFromRunEndToEnd(t *testing.T) {
	settings := gatewayEnv(t, t.TempDir())
	settings["AGENTGATE_AGENTS"] = "claude"
	g := startGateway(t, settings, mockCreds(startMock(t, promptedCommand())))

	id := upload(t, g, tarGz(t, map[string]string{"notes.txt": "notes from the archive\n", "src/main.go": "package main\n"}))
	// The run also leaves a file that packs far better than source does
	// (as a build's zero-filled blobs or sparse files do).
	r := g.post(t, runRequest("cat notes.txt && cp notes.txt seen.txt && head -c 16777216 /dev/zero > zeros.bin",
		`,"workspace":{"archive":"`+id+`"}`))
	first := g.finish(t, r.ID)
	if first.run.Status != runs.Succeeded || !strings.Contains(first.toolOutput(t), "notes from the archive") {
		t.Fatalf("a run on an archive: %s %+v; its tool said %q", first.run.Status, first.run.Error, first.toolOutput(t))
	}
	if ws := first.started(t).Workspace; ws == nil || ws.Source != runs.SourceArchive {
		t.Errorf("run.started's workspace = %+v, want source archive", ws)
	}
	if code, b := httpDo(t, http.MethodGet, g.URL+"/v1/runs/"+r.ID+"/files/src/main.go", "", nil); code != http.StatusOK || string(b) != "package main\n" {
		t.Errorf("GET /files/src/main.go = %d %q", code, b)
	}

	r = g.post(t, runRequest("cat seen.txt", `,"workspace":{"from_run":"`+first.run.ID+`"}`))
	second := g.finish(t, r.ID)
	if second.run.Status != runs.Succeeded || !strings.Contains(second.toolOutput(t), "notes from the archive") {
		t.Errorf("a run from the first's directory: %s %+v; its tool said %q", second.run.Status, second.run.Error, second.toolOutput(t))
	}
	if ws := second.started(t).Workspace; ws == nil || ws.Source != runs.SourceFromRun || !ws.Restored {
		t.Errorf("run.started's workspace = %+v, want source from_run, restored", ws)
	}

	id = upload(t, g, tarGz(t, map[string]string{"ok.txt": "fine\n", "../escaped.txt": "out of the directory\n"}))
	r = g.post(t, runRequest("ls", `,"workspace":{"archive":"`+id+`"}`))
	bad := g.finish(t, r.ID)
	if bad.run.Status != runs.Failed || bad.run.Error == nil || bad.run.Error.Class != runs.WorkspaceFailed {
		t.Errorf("a run on an archive with ../: %s %+v, want failed as workspace_failed", bad.run.Status, bad.run.Error)
	}
	filepath.WalkDir(g.DataDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "escaped.txt" {
			t.Errorf("the archive's ../ entry was written to %s", path)
		}
		return nil
	})
}

// upload posts a tar.gz with POST /v1/files and returns its id.
func upload(t *testing.T, g *gateway, archive []byte) string {
	t.Helper()
	code, b := httpDo(t, http.MethodPost, g.URL+"/v1/files", "application/gzip", archive)
	var file struct{ ID string }
	if err := json.Unmarshal(b, &file); code != http.StatusCreated || err != nil || file.ID == "" {
		t.Fatalf("POST /v1/files = %d %s", code, b)
	}
	return file.ID
}

// tarGz is a gzipped tar of files, in the order of their names.
func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestWorkspaceTenantsEndToEnd: on a gateway with keys, a tenant's git
// credential, pushed run, directory, patch and archive are its own.
func TestWorkspaceTenantsEndToEnd(t *testing.T) {
	server := gittest.NewServer(t, "git-token-acme-41f0")
	repo := server.NewRepo(t, "demo", map[string]string{"README.md": "the demo repository\n"})
	dir := t.TempDir()
	acme := newTestKey(t, "acme-write", "acme", auth.RoleWrite)
	globex := newTestKey(t, "globex-write", "globex", auth.RoleWrite)
	writeKeys(t, filepath.Join(dir, "api-keys"), acme, globex)
	creds := filepath.Join(dir, "git-credentials")
	if err := os.WriteFile(creds, []byte("acme repo "+server.URL+"/ "+server.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	settings := gatewayEnv(t, filepath.Join(dir, "data"))
	settings["AGENTGATE_AGENTS"] = "claude"
	settings["AGENTGATE_API_KEYS_FILE"] = filepath.Join(dir, "api-keys")
	settings["AGENTGATE_GIT_CREDENTIALS_FILE"] = creds
	settings["AGENTGATE_GIT_ALLOW_HOSTS"] = "127.0.0.1"
	g := startGateway(t, settings, mockCreds(startMock(t, promptedCommand())))
	git := `,"workspace":{"git":{"url":"` + repo.URL + `","ref":"main","credential":"repo"}}`

	if st, b := call(t, "POST", g.URL+"/v1/runs", globex, runRequest("true", git)); st != http.StatusBadRequest || errCode(b) != "unknown_credential" {
		t.Errorf("another tenant's credential: %d %s, want 400 unknown_credential", st, b)
	}
	first := postWith(t, g, acme, runRequest("printf 'acme was here\\n' >> README.md", git+`,"push":{"branch":"acme/change"}`))
	done := g.waitRunWith(t, first, acme, waitFloor)
	if done.Status != runs.Succeeded || done.Git == nil || !done.Git.Pushed {
		t.Fatalf("acme's git run: %s %+v, git %+v", done.Status, done.Error, done.Git)
	}
	if got := gittest.Show(t, repo, "acme/change", "README.md"); got != "the demo repository\nacme was here\n" {
		t.Errorf("README.md on acme's branch = %q", got)
	}
	fromFirst := runRequest("cat README.md", `,"workspace":{"from_run":"`+first+`"}`)
	if st, b := call(t, "POST", g.URL+"/v1/runs", globex, fromFirst); st != http.StatusBadRequest || errCode(b) != "invalid_field" {
		t.Errorf("a run from another tenant's run: %d %s, want 400 invalid_field", st, b)
	}
	if st, b := call(t, "GET", g.URL+"/v1/runs/"+first+"/patch", globex, ""); st != http.StatusNotFound {
		t.Errorf("another tenant's patch: %d %s, want 404", st, b)
	}
	if st, b := call(t, "GET", g.URL+"/v1/runs/"+first+"/patch", acme, ""); st != http.StatusOK || !strings.Contains(string(b), "+acme was here") {
		t.Errorf("the tenant's own patch: %d %q", st, b)
	}
	second := postWith(t, g, acme, fromFirst)
	if done := g.waitRunWith(t, second, acme, waitFloor); done.Status != runs.Succeeded {
		t.Fatalf("acme's run from its git run: %s %+v", done.Status, done.Error)
	}
	if st, b := call(t, "GET", g.URL+"/v1/runs/"+second+"/files/README.md", acme, ""); st != http.StatusOK || string(b) != "the demo repository\nacme was here\n" {
		t.Errorf("README.md of the run from acme's git run = %d %q", st, b)
	}
}

// postWith submits body with key and returns the run's id.
func postWith(t *testing.T, g *gateway, key testKey, body string) string {
	t.Helper()
	st, b := call(t, "POST", g.URL+"/v1/runs", key, body)
	var r runs.Run
	if err := json.Unmarshal(b, &r); st != http.StatusCreated || err != nil {
		t.Fatalf("POST /v1/runs = %d %s", st, b)
	}
	return r.ID
}
