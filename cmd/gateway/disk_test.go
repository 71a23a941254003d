package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/api"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// fillCommand writes a file in the run's directory for ever: once the disk
// is full it keeps trying, as an agent that does not look at its errors
// would, so that only the gateway stopping the run ends it. perl, because
// Claude Code refuses a foreground sleep.
const fillCommand = `perl -e 'open(my $f, ">", "fill") or die "open: $!"; my $b = "x" x 1048576; while (1) { syswrite($f, $b) or select(undef, undef, undef, 0.05) }'`

// mountTmpfs mounts a tmpfs of size (mount's syntax, "64m") on a new
// directory and unmounts it when the test ends, after the gateway that
// uses it has stopped.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("this test needs to mount a %s tmpfs (as root, or with CAP_SYS_ADMIN): mount: %v: %s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
			exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// request does one request and returns its status, its headers and the
// error of its body, if it has one.
func request(t *testing.T, method, url, body string) (int, http.Header, api.ErrorDetail) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e api.ErrorResponse
	json.Unmarshal(b, &e)
	return resp.StatusCode, resp.Header, e.Error
}

// TestFullDisk is the worst case of a full disk: the store's files and the
// runs' workspaces on one small filesystem, and an agent that fills it and
// keeps writing. The run is stopped as disk_full and recorded as such, the
// gateway says it is not ready and refuses runs while the disk is full,
// and once the file is deleted it takes and finishes runs again, without
// a restart.
func TestFullDisk(t *testing.T) {
	disk := mountTmpfs(t, "64m")
	mock := startMock(t, anthropic.Func(func(req *anthropic.Request) anthropic.Response {
		if req.Contains("Fill the disk") {
			return anthropic.ToolTurn(fillCommand, "The disk is full.").Respond(req)
		}
		return anthropic.ToolTurn("echo hello > out.txt", "I wrote out.txt.").Respond(req)
	}))
	settings := gatewayEnv(t, filepath.Join(disk, "data"))
	settings["AGENTGATE_WORKSPACE_ROOT"] = filepath.Join(disk, "workspaces")
	if err := os.MkdirAll(settings["AGENTGATE_WORKSPACE_ROOT"], 0o700); err != nil {
		t.Fatal(err)
	}
	settings["AGENTGATE_RUN_TIMEOUT"] = "5m"
	g := startGateway(t, settings, mockCreds(mock))

	if code, _, e := request(t, http.MethodGet, g.URL+"/readyz", ""); code != http.StatusOK {
		t.Fatalf("/readyz on an empty disk = %d %+v", code, e)
	}

	r := g.post(t, `{"agent":"claude","prompt":"Fill the disk"}`)
	done := g.waitRun(t, r.ID, 12*time.Minute)
	if done.Status != runs.Failed || done.Error == nil || done.Error.Class != runs.DiskFull {
		t.Fatalf("the filling run ended %s %+v; want failed disk_full", done.Status, done.Error)
	}
	if done.FinishedAt == nil || done.Error.Message == "" {
		t.Fatalf("the filling run's record = %+v", done)
	}
	// The tool really filled the disk, in the run's own directory.
	fill := filepath.Join(settings["AGENTGATE_WORKSPACE_ROOT"], r.ID, "fill")
	st, err := os.Stat(fill)
	if err != nil || st.Size() < 32<<20 {
		t.Fatalf("the filler's file: %v %v", st, err)
	}
	assertNoProcesses(t, r.ID)

	// The stored log ends as the record does.
	_, evs := g.stream(t, r.ID, "")
	if !subsequence(types(evs), []string{"run.queued", "run.started", "tool_call.started", "run.completed"}) {
		t.Fatalf("events of the filling run: %v", types(evs))
	}
	for i, e := range evs {
		if e.ID != uint64(i+1) || e.Env.Seq != e.ID || e.Env.RunID != r.ID {
			t.Fatalf("event %d: id %d envelope %+v", i, e.ID, e.Env)
		}
	}
	var completed runs.RunCompletedData
	if err := evs[len(evs)-1].data(&completed); err != nil {
		t.Fatal(err)
	}
	if completed.Status != done.Status || completed.Error == nil || completed.Error.Class != done.Error.Class {
		t.Fatalf("run.completed says %s %+v, the record %s %+v", completed.Status, completed.Error, done.Status, done.Error)
	}

	// While the disk is full, the gateway is not ready and takes nothing.
	if code, _, e := request(t, http.MethodGet, g.URL+"/readyz", ""); code != http.StatusServiceUnavailable || e.Code != api.CodeNotReady {
		t.Fatalf("/readyz on a full disk = %d %+v; want 503 %s", code, e, api.CodeNotReady)
	}
	code, h, e := request(t, http.MethodPost, g.URL+"/v1/runs", `{"agent":"claude","prompt":"Write hello to out.txt"}`)
	if code != http.StatusServiceUnavailable || e.Code != api.CodeDiskFull || h.Get("Retry-After") == "" {
		t.Fatalf("POST /v1/runs on a full disk = %d %+v (Retry-After %q); want 503 %s", code, e, h.Get("Retry-After"), api.CodeDiskFull)
	}

	// Space back: the same gateway becomes ready by itself.
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, _, e := request(t, http.MethodGet, g.URL+"/readyz", "")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %+v 2m after the disk was freed", code, e)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// And runs end to end again.
	r2 := g.post(t, `{"agent":"claude","prompt":"Write hello to out.txt"}`)
	_, evs = g.stream(t, r2.ID, "")
	done = g.get(t, r2.ID)
	if done.Status != runs.Succeeded || done.Result != "I wrote out.txt." || done.Error != nil {
		t.Fatalf("the run after recovery = %s %+v; events %v", done.Status, done.Error, types(evs))
	}
	var completed2 runs.RunCompletedData
	if err := evs[len(evs)-1].data(&completed2); err != nil || completed2.Status != runs.Succeeded {
		t.Fatalf("run.completed of the run after recovery: %+v %v", completed2, err)
	}
	out, err := os.ReadFile(filepath.Join(settings["AGENTGATE_WORKSPACE_ROOT"], r2.ID, "out.txt"))
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Fatalf("the tool of the run after recovery: %q %v", out, err)
	}
	assertNoProcesses(t, r2.ID)
}
