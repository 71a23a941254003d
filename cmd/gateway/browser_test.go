package main

// A real browser's EventSource against the whole gateway: headless
// Chromium (Debian's package, installed by scripts/install-browser.sh)
// loads a page that creates a run and follows its events, through a proxy
// that drops the stream once mid-way, so that the browser's own reconnect
// with Last-Event-ID and its stop on 204 are what is tested.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// chromiumBin is where Debian's chromium package puts its launcher.
const chromiumBin = "/usr/bin/chromium"

// browserTimeout bounds the browser's whole part: start, the run, both
// reconnects and the result. It is generous for a loaded 2-core machine.
const browserTimeout = 90 * time.Second

// dropAfter is the event after which the proxy cuts the first stream.
const dropAfter = 3

func TestBrowserEventSource(t *testing.T) {
	bin := chromiumBin
	if _, err := os.Stat(bin); err != nil {
		found, lookErr := exec.LookPath("chromium")
		if lookErr != nil {
			t.Fatalf("chromium is not installed (%v): run scripts/install-browser.sh (as root) first", err)
		}
		bin = found
	}

	mock := startMock(t, anthropic.ToolTurn("echo hi", "done"))
	settings := gatewayEnv(t, t.TempDir())
	// The browser waits this long before each reconnect; the default 2s
	// would only make the test slower.
	settings["AGENTGATE_SSE_RECONNECT_DELAY"] = "250ms"
	g := startGateway(t, settings, mockCreds(mock))

	target, err := url.Parse(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		FlushInterval: -1,
	}
	tap := &streamTaps{}
	results := make(chan []byte, 1)
	page := browserPage(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, page)
	})
	mux.HandleFunc("POST /result", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case results <- b:
		default: // only the first result counts
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/events") {
			proxy.ServeHTTP(tap.open(w, r), r)
			return
		}
		proxy.ServeHTTP(w, r)
	})
	site := httptest.NewServer(mux) // on 127.0.0.1
	t.Cleanup(site.Close)

	start := time.Now()
	b := startBrowser(t, bin, site.URL+"/")
	var raw []byte
	select {
	case raw = <-results:
	case <-b.exited:
		b.stop()
		t.Fatalf("chromium exited before the page reported: %s\nproxied streams: %s\n%s", b.exitErr, tap, b.log())
	case <-time.After(browserTimeout):
		b.stop()
		t.Fatalf("the page did not report within %s\nproxied streams: %s\n%s", browserTimeout, tap, b.log())
	}
	b.stop()
	t.Logf("browser part took %s", time.Since(start).Round(time.Millisecond))
	b.assertGone(t)

	var rec browserRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatalf("result %q: %v", raw, err)
	}
	if rec.Failure != "" {
		t.Fatalf("the page failed: %s\nproxied streams: %s\n%s", rec.Failure, tap, b.log())
	}
	if rec.RunID == "" {
		t.Fatal("the page reported no run id")
	}

	// The gateway's own log of the run, to compare with.
	code, want := g.stream(t, rec.RunID, "")
	if code != http.StatusOK {
		t.Fatalf("events of %s = %d", rec.RunID, code)
	}
	if len(want) <= dropAfter+1 {
		t.Fatalf("the run has %d events; the test needs more than %d to drop the stream mid-way", len(want), dropAfter+1)
	}

	// Every event exactly once, in seq order, with its id as lastEventId
	// and its name equal to the envelope's type.
	seen := make([]string, len(rec.Events))
	for i, e := range rec.Events {
		seen[i] = e.Type + "#" + e.LastEventID
	}
	if len(rec.Events) != len(want) {
		t.Fatalf("the browser saw %d events %v; the run has %d", len(rec.Events), seen, len(want))
	}
	completed := 0
	for i, e := range rec.Events {
		var env runs.Event
		if err := json.Unmarshal([]byte(e.Data), &env); err != nil {
			t.Fatalf("event %d: data %q is not an envelope: %v", i, e.Data, err)
		}
		seq := uint64(i + 1)
		if env.Seq != seq || e.LastEventID != strconv.FormatUint(seq, 10) {
			t.Fatalf("event %d has seq %d, lastEventId %q; want %d (browser saw %v)", i, env.Seq, e.LastEventID, seq, seen)
		}
		if string(env.Type) != e.Type || env.RunID != rec.RunID {
			t.Fatalf("event %d named %q carries type %q of run %q (run %q)", seq, e.Type, env.Type, env.RunID, rec.RunID)
		}
		if e.Type != want[i].Type || e.Data != want[i].Data {
			t.Fatalf("event %d in the browser: %s %s\nin the gateway's log: %s %s", seq, e.Type, e.Data, want[i].Type, want[i].Data)
		}
		if e.Type == string(runs.EventRunCompleted) {
			completed++
		}
	}
	if completed != 1 || rec.Events[len(rec.Events)-1].Type != string(runs.EventRunCompleted) {
		t.Fatalf("run.completed seen %d times; events %v", completed, seen)
	}

	// The browser stopped for good: CLOSED, after an error event for the
	// drop (CONNECTING), one for the end of the stream (CONNECTING) and
	// one for the 204 (CLOSED).
	if rec.ReadyState != 2 {
		t.Fatalf("final readyState = %d, want 2 (CLOSED)", rec.ReadyState)
	}
	if fmt.Sprint(rec.Errors) != "[0 0 2]" {
		t.Fatalf("readyState at each error event = %v, want [0 0 2]", rec.Errors)
	}

	// What went over the wire: the first stream was cut after the
	// dropAfter-th event; the browser resumed from the last id it got, was
	// given exactly the rest, and its reconnect after run.completed got 204.
	streams := tap.snapshot()
	last := strconv.Itoa(len(want))
	if len(streams) != 3 {
		t.Fatalf("proxied %d event streams, want 3 (first, resume, final 204): %s", len(streams), tap)
	}
	first, resume, final := streams[0], streams[1], streams[2]
	var firstIDs []string
	for i := 1; i <= dropAfter; i++ {
		firstIDs = append(firstIDs, strconv.Itoa(i))
	}
	if first.HasLastEventID || first.Status != http.StatusOK || !first.Dropped || fmt.Sprint(first.IDs) != fmt.Sprint(firstIDs) {
		t.Fatalf("first stream: %+v; want no Last-Event-ID, 200, ids %v, dropped", first, firstIDs)
	}
	if resume.LastEventID != first.IDs[len(first.IDs)-1] || resume.Status != http.StatusOK || resume.Dropped {
		t.Fatalf("reconnect: %+v; want Last-Event-ID %s (the last id before the drop), 200", resume, first.IDs[len(first.IDs)-1])
	}
	if len(resume.IDs) != len(want)-dropAfter || resume.IDs[0] != strconv.Itoa(dropAfter+1) || resume.IDs[len(resume.IDs)-1] != last {
		t.Fatalf("the reconnect delivered ids %v; want %d to %s", resume.IDs, dropAfter+1, last)
	}
	if final.LastEventID != last || final.Status != http.StatusNoContent || len(final.IDs) != 0 {
		t.Fatalf("final reconnect: %+v; want Last-Event-ID %s answered 204", final, last)
	}
	t.Logf("the browser saw %d events; proxied streams: %s; error readyStates %v", len(rec.Events), tap, rec.Errors)
	assertNoProcesses(t, rec.RunID)
}

// browserRecord is what the page posts to /result.
type browserRecord struct {
	RunID  string `json:"runId"`
	Events []struct {
		Type        string `json:"type"`
		LastEventID string `json:"lastEventId"`
		Data        string `json:"data"`
	} `json:"events"`
	// Errors is the readyState at each error event.
	Errors     []int  `json:"errors"`
	ReadyState int    `json:"readyState"`
	Failure    string `json:"failure"`
}

// browserPage is the page the browser loads. It listens to every event
// type by name, keeps the EventSource open after run.completed so that the
// browser reconnects by itself, and reports once the browser has given up
// (readyState CLOSED), which a 204 does.
func browserPage(t *testing.T) string {
	t.Helper()
	typeList, err := json.Marshal(runs.EventTypes)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string]string{
		"agent": "claude", "prompt": "Say hi with echo", "permission": "workspace_write",
	})
	if err != nil {
		t.Fatal(err)
	}
	// json.Marshal escapes <, > and &, so both are safe inside <script>.
	return fmt.Sprintf(`<!doctype html>
<html><head><meta charset="utf-8"><title>agentgate event stream</title></head>
<body><pre id="log"></pre>
<script>
"use strict";
const types = %s;
const runBody = %s;
const rec = {runId: "", events: [], errors: [], readyState: -1, failure: ""};
let reported = false;
let es = null;
function report() {
  if (reported) return;
  reported = true;
  fetch("/result", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(rec)});
}
function fail(msg) {
  if (es) es.close();
  rec.failure = rec.failure ? rec.failure + "; " + msg : msg;
  report();
}
function log(line) { document.getElementById("log").textContent += line + "\n"; }
window.addEventListener("error", (e) => fail("page error: " + e.message));
window.addEventListener("unhandledrejection", (e) => fail("page error: " + e.reason));
(async () => {
  const resp = await fetch("/v1/runs", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(runBody)});
  const text = await resp.text();
  if (resp.status !== 201) { fail("POST /v1/runs = " + resp.status + " " + text); return; }
  rec.runId = JSON.parse(text).id;
  es = new EventSource("/v1/runs/" + encodeURIComponent(rec.runId) + "/events");
  let next = 1;
  const record = (e) => {
    rec.events.push({type: e.type, lastEventId: e.lastEventId, data: e.data});
    log(e.lastEventId + " " + e.type);
    // Report a gap or a repeat at once rather than at the timeout.
    if (e.lastEventId !== String(next)) fail("event " + e.type + " has id " + e.lastEventId + ", expected " + next);
    next++;
  };
  for (const t of types) es.addEventListener(t, record);
  // An event without a name would arrive as "message": record it so that
  // the test sees it.
  es.onmessage = record;
  // Not closed on run.completed: the browser reconnects after the stream
  // ends, and stops only when that reconnect is answered 204.
  es.onerror = () => {
    rec.errors.push(es.readyState);
    log("error, readyState " + es.readyState);
    if (es.readyState === EventSource.CLOSED) {
      rec.readyState = es.readyState;
      report();
    } else if (rec.errors.length > 5) {
      rec.readyState = es.readyState;
      es.close();
      fail("the browser reconnected " + rec.errors.length + " times and was never answered 204");
    }
  };
})();
</script></body></html>
`, typeList, body)
}

// streamRecord is what the proxy saw of one event stream request.
type streamRecord struct {
	LastEventID    string
	HasLastEventID bool
	tappedStream
}

// streamTaps records every event stream the proxy passes on; the first is
// cut after dropAfter events.
type streamTaps struct {
	mu      sync.Mutex
	streams []*streamRecord
}

func (s *streamTaps) open(w http.ResponseWriter, r *http.Request) *sseTap {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := &streamRecord{}
	if v, ok := r.Header["Last-Event-Id"]; ok {
		rec.HasLastEventID = true
		rec.LastEventID = strings.Join(v, ",")
	}
	tap := &sseTap{ResponseWriter: w, mu: &s.mu, rec: &rec.tappedStream}
	if len(s.streams) == 0 {
		tap.cutAfter = func(events int, _ string) bool { return events == dropAfter }
	}
	s.streams = append(s.streams, rec)
	return tap
}

func (s *streamTaps) snapshot() []streamRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]streamRecord, len(s.streams))
	for i, r := range s.streams {
		out[i] = *r
		out[i].tappedStream = r.tappedStream.clone()
	}
	return out
}

func (s *streamTaps) String() string {
	b, _ := json.Marshal(s.snapshot())
	return string(b)
}

// browser is one headless Chromium, in its own process group, with its
// profile, HOME and output under one directory of its own.
type browser struct {
	cmd     *exec.Cmd
	dir     string
	logPath string
	exited  chan struct{}
	exitErr error
	once    sync.Once
}

func startBrowser(t *testing.T, bin, pageURL string) *browser {
	t.Helper()
	dir := t.TempDir() // removed after the Cleanup below has killed everything
	b := &browser{dir: dir, logPath: filepath.Join(dir, "chromium.log"), exited: make(chan struct{})}
	out, err := os.Create(b.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// These flags keep Chromium off the network (background services,
	// component updates, sync, QUIC); --no-sandbox because tests run as
	// root. Chromium's crash handler leaves the process group, so HOME is
	// the browser's own directory too: every process of it names the
	// directory, which is how stop finds them all.
	b.cmd = exec.Command(bin,
		"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--no-proxy-server", "--enable-logging=stderr", "--v=0",
		"--user-data-dir="+filepath.Join(dir, "profile"), pageURL)
	b.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(dir, ".cache"), "LANG=C.UTF-8", "TMPDIR=" + dir,
	}
	// A file, not a pipe: a leftover process holding a pipe would keep
	// Wait waiting.
	b.cmd.Stdout, b.cmd.Stderr = out, out
	b.start(t)
	return b
}

// start starts b.cmd in a process group of its own, reaps it in the
// background (closing exited) and has stop kill all of it when the test
// ends.
func (b *browser) start(t *testing.T) {
	t.Helper()
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", b.cmd.Path, err)
	}
	go func() {
		b.exitErr = b.cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(b.stop)
}

// stop kills the browser's process group and every other process that
// names its directory, and waits for the browser to be reaped.
func (b *browser) stop() {
	b.once.Do(func() {
		pgid := b.cmd.Process.Pid
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-b.exited
		// Kill until nothing is left: a process forked while the group
		// was being killed shows up in the next pass.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			left := b.processes()
			if len(left) == 0 {
				return
			}
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}

// assertGone fails the test when a process of the browser is still alive.
func (b *browser) assertGone(t *testing.T) {
	t.Helper()
	if left := b.processes(); len(left) > 0 {
		t.Fatalf("chromium processes left after stop: %v", left)
	}
}

// processes lists the live (not zombie) processes of the browser: those in
// its process group and those whose command line or environment names its
// directory.
func (b *browser) processes() []int {
	pgid := b.cmd.Process.Pid
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone
		}
		// The fields after the command name, which is in parentheses and
		// may hold anything: state, ppid, pgrp, …
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			out = append(out, pid)
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if bytes.Contains(cmdline, []byte(b.dir)) || bytes.Contains(environ, []byte(b.dir)) {
			out = append(out, pid)
		}
	}
	return out
}

// log returns what Chromium printed that helps explain a failure: the
// page's console and errors, without the noise about D-Bus.
func (b *browser) log() string {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return "chromium log: " + err.Error()
	}
	var keep []string
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.Contains(line, "dbus") || strings.Contains(line, "D-Bus") {
			continue
		}
		keep = append(keep, line)
	}
	if len(keep) > 60 {
		keep = keep[len(keep)-60:]
	}
	return "chromium log (last lines):\n" + strings.Join(keep, "\n")
}
