package main

// End-to-end: the client against a real gateway running the real claude
// CLI against the mock Anthropic server.

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentgate/agentgate/internal/auth"
)

// assertPlain fails when output meant for a pipe holds an escape
// sequence or a carriage return (a progress line).
func assertPlain(t *testing.T, what, s string) {
	t.Helper()
	if i := strings.IndexAny(s, "\x1b\r"); i >= 0 {
		t.Errorf("%s holds a control sequence at byte %d: %q", what, i, s[max(0, i-20):min(len(s), i+20)])
	}
}

// record returns the run's record as the client's get --json prints it.
func (g *testGateway) record(t *testing.T, id string) runRecord {
	t.Helper()
	res := g.cli(t, "get", "--json", id)
	if res.code != exitOK {
		t.Fatalf("get %s: %s", id, res)
	}
	var rec runRecord
	if err := json.Unmarshal([]byte(res.stdout), &rec); err != nil {
		t.Fatalf("get --json printed %q: %v", res.stdout, err)
	}
	return rec
}

func TestRunPrintsTextToolCallAndSummary(t *testing.T) {
	g := sharedGateway(t)
	res := g.cli(t, "run", "--permission", "workspace_write", "Write", "hello", "to", "out.txt")
	if res.code != exitOK {
		t.Fatalf("run: %s", res)
	}
	// The agent's text as it streams, the tool call as a line of its
	// own with its input, the final text; in this order, once each.
	want := []string{"Running the command.", "[tool] Bash: echo hello > out.txt", "I wrote out.txt."}
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("stdout:\n%s\nwant:\n%s", res.stdout, strings.Join(want, "\n"))
	}
	assertPlain(t, "stdout", res.stdout)
	assertPlain(t, "stderr", res.stderr)

	// stderr: the run's id first, the summary last, with the record's
	// own usage and cost.
	errLines := strings.Split(strings.TrimSuffix(res.stderr, "\n"), "\n")
	id, ok := strings.CutPrefix(errLines[0], "run ")
	id, _, _ = strings.Cut(id, " ")
	if !ok || id == "" {
		t.Fatalf("stderr does not begin with the run's id:\n%s", res.stderr)
	}
	rec := g.record(t, id)
	if rec.Status != "succeeded" || rec.CostUSD == nil || rec.Usage.total() == 0 {
		t.Fatalf("record = %+v", rec)
	}
	summary := errLines[len(errLines)-1]
	for _, part := range []string{
		"run " + id + " succeeded",
		groupDigits(rec.Usage.total()) + " tokens (" + groupDigits(rec.Usage.InputTokens) + " in, " + groupDigits(rec.Usage.OutputTokens) + " out)",
		formatCost(*rec.CostUSD),
		"1 file changed",
	} {
		if !strings.Contains(summary, part) {
			t.Errorf("summary %q lacks %q", summary, part)
		}
	}
}

func TestRunJSONIsNDJSONEndingInRunCompleted(t *testing.T) {
	g := sharedGateway(t)
	// The prompt from stdin, and the run's options from flags.
	prompt := "Write hello\nto out.txt"
	res := runCLIWithStdin(t, map[string]string{"AGENTGATE_URL": g.URL}, prompt,
		"--json", "run", "--metadata", "ticket=T-1", "--timeout", "2m", "--max-turns", "5", "-a", "claude", "-")
	if res.code != exitOK || res.stderr != "" {
		t.Fatalf("run --json: %s", res)
	}
	evs := eventLines(t, res.stdout)
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) || ev.RunID != evs[0].RunID || ev.V != 1 {
			t.Fatalf("line %d: seq %d run %s v %d; want seq %d of run %s", i, ev.Seq, ev.RunID, ev.V, i+1, evs[0].RunID)
		}
	}
	if evs[0].Type != "run.queued" || evs[len(evs)-1].Type != "run.completed" {
		t.Fatalf("events from %s to %s", evs[0].Type, evs[len(evs)-1].Type)
	}
	var done completedData
	if err := json.Unmarshal(evs[len(evs)-1].Data, &done); err != nil || done.Status != "succeeded" {
		t.Fatalf("run.completed = %s (%v)", evs[len(evs)-1].Data, err)
	}
	var started struct {
		Prompt string `json:"prompt"`
	}
	if err := json.Unmarshal(evs[1].Data, &started); err != nil || evs[1].Type != "run.started" || started.Prompt != prompt {
		t.Fatalf("event 2 = %s %s, want run.started with the prompt from stdin", evs[1].Type, evs[1].Data)
	}
	if rec := g.record(t, evs[0].RunID); rec.Metadata["ticket"] != "T-1" {
		t.Fatalf("record metadata = %v", rec.Metadata)
	}
}

func TestFailedRunExitsWithTheFailedCode(t *testing.T) {
	g := sharedGateway(t)
	res := g.cli(t, "run", markFail+" say hi")
	if res.code != exitFailed {
		t.Fatalf("run of a failing model: %s", res)
	}
	rec := g.record(t, strings.Fields(res.stderr)[1])
	if rec.Status != "failed" || rec.Error == nil {
		t.Fatalf("record = %+v", rec)
	}
	for _, want := range []string{" failed", "error: " + rec.Error.Class + ": "} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	if rec.Error.Class != "not_authenticated" {
		t.Errorf("error class %q, want not_authenticated from the mock's 401", rec.Error.Class)
	}
}

// cutProxy forwards to the gateway and breaks off the first event stream
// after n events, as a dropped connection does. It records the
// Last-Event-ID of every event stream asked for.
type cutProxy struct {
	target *url.URL
	n      int
	tr     *http.Transport
	rp     *httputil.ReverseProxy

	mu      sync.Mutex
	resumes []string
}

func newCutProxy(t *testing.T, gatewayURL string, n int) (*httptest.Server, *cutProxy) {
	t.Helper()
	target, err := url.Parse(gatewayURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{target: target, n: n, tr: &http.Transport{}}
	p.rp = httputil.NewSingleHostReverseProxy(target)
	p.rp.Transport = p.tr
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		srv.Close()
		p.tr.CloseIdleConnections()
	})
	return srv, p
}

func (p *cutProxy) streams() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.resumes...)
}

func (p *cutProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/events") {
		p.rp.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.resumes = append(p.resumes, r.Header.Get("Last-Event-ID"))
	first := len(p.resumes) == 1
	p.mu.Unlock()
	if !first {
		p.rp.ServeHTTP(w, r)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target.String()+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := p.tr.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	rd := bufio.NewReader(resp.Body)
	events, inEvent := 0, false
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		_, _ = io.WriteString(w, line)
		switch {
		case strings.HasPrefix(line, "data:"):
			inEvent = true
		case line == "\n" && inEvent:
			inEvent = false
			if events++; events == p.n {
				w.(http.Flusher).Flush()
				// The connection dies in the middle of the stream.
				panic(http.ErrAbortHandler)
			}
		}
	}
}

func TestWatchResumesAfterADroppedConnection(t *testing.T) {
	g := sharedGateway(t)
	full := g.cli(t, "--json", "run", "Write hello to out.txt")
	if full.code != exitOK {
		t.Fatalf("run: %s", full)
	}
	evs := eventLines(t, full.stdout)
	id := evs[0].RunID
	const cutAfter = 5

	// --json: the same lines as the run printed, each once.
	srv, proxy := newCutProxy(t, g.URL, cutAfter)
	res := runCLI(t, map[string]string{"AGENTGATE_URL": srv.URL}, "watch", "--json", id)
	if res.code != exitOK {
		t.Fatalf("watch through the proxy: %s", res)
	}
	if res.stdout != full.stdout {
		t.Fatalf("watch printed\n%s\nthe run printed\n%s", res.stdout, full.stdout)
	}
	if got := proxy.streams(); len(got) != 2 || got[0] != "" || got[1] != strconv.Itoa(cutAfter) {
		t.Fatalf("event streams asked for with Last-Event-ID %q, want a first without and one resumed after %d", got, cutAfter)
	}
	if !strings.Contains(res.stderr, "reconnecting") {
		t.Errorf("stderr does not tell of the reconnection:\n%s", res.stderr)
	}

	// Rendered: the text and the tool call once each, cut or not.
	srv, _ = newCutProxy(t, g.URL, cutAfter)
	res = runCLI(t, map[string]string{"AGENTGATE_URL": srv.URL}, "watch", id)
	if res.code != exitOK {
		t.Fatalf("watch through the proxy: %s", res)
	}
	if want := "Running the command.\n[tool] Bash: echo hello > out.txt\nI wrote out.txt.\n"; res.stdout != want {
		t.Fatalf("watch printed\n%q\nwant\n%q", res.stdout, want)
	}
	assertPlain(t, "stdout", res.stdout)
	assertPlain(t, "stderr", res.stderr)

	// After the last event the gateway answers 204: the record has the
	// outcome.
	res = g.cli(t, "watch", "--after", strconv.FormatUint(evs[len(evs)-1].Seq, 10), id)
	if res.code != exitOK || res.stdout != "" || !strings.Contains(res.stderr, "run "+id+" succeeded") {
		t.Fatalf("watch after the end: %s", res)
	}
}

func TestInteractiveRunWithApprovals(t *testing.T) {
	g := sharedGateway(t)
	l := g.startCLI(t, "--json", "run", "--interactive", "--approvals", "ask", markTwo+" create first.txt, then second.txt")

	var ap approval
	first := l.nextEvent("approval.requested")
	if err := json.Unmarshal(first.Data, &ap); err != nil || ap.Tool != "Bash" {
		t.Fatalf("approval.requested = %s (%v)", first.Data, err)
	}
	id := first.RunID
	if res := g.cli(t, "approve", id, ap.ID); res.code != exitOK || res.stdout != "approval "+ap.ID+": allow\n" {
		t.Fatalf("approve: %s", res)
	}
	if res := g.cli(t, "approve", id, ap.ID); res.code != exitAPIError || !strings.HasPrefix(res.stderr, "error: approval_resolved: ") {
		t.Fatalf("approve again: %s", res)
	}

	second := l.nextEvent("approval.requested")
	var ap2 approval
	if err := json.Unmarshal(second.Data, &ap2); err != nil || ap2.ID == ap.ID {
		t.Fatalf("second approval.requested = %s (%v)", second.Data, err)
	}
	if res := g.cli(t, "deny", "--reason", "not that one", id, ap2.ID); res.code != exitOK || res.stdout != "approval "+ap2.ID+": deny\n" {
		t.Fatalf("deny: %s", res)
	}
	// The first's approval.resolved came before the second request.
	resolved := l.nextEvent("approval.resolved")
	var rd approval
	if err := json.Unmarshal(resolved.Data, &rd); err != nil || rd.ID != ap2.ID || rd.Decision != "deny" || rd.Message != "not that one" {
		t.Fatalf("approval.resolved = %s (%v)", resolved.Data, err)
	}
	l.nextEvent("turn.completed")

	if res := g.cli(t, "interrupt", id); res.code != exitAPIError || !strings.HasPrefix(res.stderr, "error: no_turn_running: ") {
		t.Fatalf("interrupt while idle: %s", res)
	}
	res := g.cli(t, "send", id, "Thanks.", "Anything", "else?")
	if res.code != exitOK || !strings.HasSuffix(res.stdout, ": queue\n") {
		t.Fatalf("send: %s", res)
	}
	msgID := strings.TrimSuffix(strings.TrimPrefix(res.stdout, "message "), ": queue\n")
	started := l.nextEvent("turn.started")
	var ts turnData
	if err := json.Unmarshal(started.Data, &ts); err != nil || ts.Turn != 2 || ts.Text != "Thanks. Anything else?" ||
		!strings.Contains(string(started.Data), `"message_id":"`+msgID+`"`) {
		t.Fatalf("turn.started = %s (%v), message %s", started.Data, err, msgID)
	}
	l.nextEvent("turn.completed")
	if res := g.cli(t, "close", id); res.code != exitOK || res.stdout != "run "+id+": closing\n" {
		t.Fatalf("close: %s", res)
	}
	l.nextEvent("run.completed")
	if code := l.wait(); code != exitOK {
		t.Fatalf("the interactive run's command exited %d; stderr:\n%s", code, l.stderr)
	}
	if rec := g.record(t, id); rec.Status != "succeeded" || !rec.Interactive {
		t.Fatalf("record = %+v", rec)
	}
	if res := g.cli(t, "send", id, "late"); res.code != exitAPIError || !strings.HasPrefix(res.stderr, "error: run_ended: ") {
		t.Fatalf("send after the end: %s", res)
	}
}

func TestCancelEndsARunningRun(t *testing.T) {
	g := sharedGateway(t)
	l := g.startCLI(t, "--json", "run", markLong+" wait a minute")
	ev := l.nextEvent("tool_call.started")
	res := g.cli(t, "cancel", ev.RunID)
	if res.code != exitOK || !strings.HasPrefix(res.stdout, "run "+ev.RunID+": cancelling") {
		t.Fatalf("cancel: %s", res)
	}
	done := l.nextEvent("run.completed")
	if code := l.wait(); code != exitCancelled {
		t.Fatalf("the cancelled run's command exited %d, want %d; run.completed %s", code, exitCancelled, done.Data)
	}
	// Cancelling again is idempotent: the run as it is.
	if res := g.cli(t, "cancel", ev.RunID); res.code != exitOK || res.stdout != "run "+ev.RunID+": cancelled\n" {
		t.Fatalf("cancel again: %s", res)
	}
}

func TestInterruptStopsWatchingAndTheRunGoesOn(t *testing.T) {
	g := sharedGateway(t)
	l := g.startCLI(t, "run", markLong+" wait a minute")
	l.nextLine("[tool] Bash")
	l.cancel() // Ctrl-C
	if code := l.wait(); code != exitInterrupted {
		t.Fatalf("interrupted run exited %d; stderr:\n%s", code, l.stderr)
	}
	id := strings.Fields(l.stderr.String())[1]
	if want := "agentgate watch " + id; !strings.Contains(l.stderr.String(), want) {
		t.Fatalf("stderr does not say %q:\n%s", want, l.stderr)
	}
	if rec := g.record(t, id); rec.Status != "running" {
		t.Fatalf("the run stopped with its watcher: %+v", rec)
	}
	// Resume watching in the background, cancel, and it ends cancelled.
	w := g.startCLI(t, "watch", id)
	w.nextLine("[tool] Bash")
	if res := g.cli(t, "cancel", id); res.code != exitOK {
		t.Fatalf("cancel: %s", res)
	}
	if code := w.wait(); code != exitCancelled {
		t.Fatalf("watch of the cancelled run exited %d; stderr:\n%s", code, w.stderr)
	}
}

func TestCancelOnInterruptCancelsTheRun(t *testing.T) {
	g := sharedGateway(t)
	l := g.startCLI(t, "run", "--cancel-on-interrupt", markLong+" wait a minute")
	l.nextLine("[tool] Bash")
	l.cancel() // Ctrl-C
	if code := l.wait(); code != exitCancelled {
		t.Fatalf("run --cancel-on-interrupt exited %d; stderr:\n%s", code, l.stderr)
	}
	id := strings.Fields(l.stderr.String())[1]
	if !strings.Contains(l.stderr.String(), "cancelling run "+id) || !strings.Contains(l.stderr.String(), "run "+id+" cancelled") {
		t.Fatalf("stderr:\n%s", l.stderr)
	}
	if rec := g.record(t, id); rec.Status != "cancelled" {
		t.Fatalf("record = %+v", rec)
	}
}

func TestListAndAgents(t *testing.T) {
	g := sharedGateway(t)
	var ids []string
	for range 2 {
		res := g.cli(t, "run", "--detach", "Write hello to out.txt")
		if res.code != exitOK {
			t.Fatalf("run --detach: %s", res)
		}
		ids = append(ids, strings.TrimSpace(res.stdout))
	}
	for _, id := range ids {
		if res := g.cli(t, "watch", id); res.code != exitOK {
			t.Fatalf("watch %s: %s", id, res)
		}
	}

	// Newest first, one page at a time.
	res := g.cli(t, "ls", "--limit", "1", "--agent", "claude")
	if res.code != exitOK || !strings.Contains(res.stdout, ids[1]) || strings.Contains(res.stdout, ids[0]) {
		t.Fatalf("ls --limit 1: %s", res)
	}
	cursor, ok := strings.CutPrefix(strings.TrimSpace(res.stderr), "more: agentgate ls --cursor ")
	if !ok {
		t.Fatalf("ls --limit 1 did not print the next cursor: %s", res)
	}
	if res := g.cli(t, "ls", "--limit", "1", "--cursor", cursor); res.code != exitOK || !strings.Contains(res.stdout, ids[0]) {
		t.Fatalf("ls --cursor: %s", res)
	}
	res = g.cli(t, "--json", "ls", "--status", "succeeded", "--limit", "500")
	var page runList
	if err := json.Unmarshal([]byte(res.stdout), &page); res.code != exitOK || err != nil || len(page.Runs) < 2 {
		t.Fatalf("ls --json: %s (%v)", res, err)
	}
	for _, r := range page.Runs {
		if r.Status != "succeeded" {
			t.Fatalf("ls --status succeeded listed %s %s", r.ID, r.Status)
		}
	}
	if res := g.cli(t, "ls", "--status", "finished"); res.code != exitAPIError || !strings.HasPrefix(res.stderr, "error: invalid_field: ") {
		t.Fatalf("ls --status finished: %s", res)
	}

	res = g.cli(t, "--json", "agents")
	var list struct {
		Agents []agentInfo `json:"agents"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &list); res.code != exitOK || err != nil || len(list.Agents) != 1 || !list.Agents[0].Installed {
		t.Fatalf("agents --json: %s (%v)", res, err)
	}
	res = g.cli(t, "agents")
	rows := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if res.code != exitOK || len(rows) != 2 || strings.Join(strings.Fields(rows[1])[:5], " ") !=
		strings.Join([]string{"claude", "yes", list.Agents[0].Version, list.Agents[0].Compatibility, list.Agents[0].Enforcement}, " ") {
		t.Fatalf("agents: %s", res)
	}
}

func TestFilesOfARun(t *testing.T) {
	g := sharedGateway(t)
	res := g.cli(t, "run", "--detach", "Write hello to out.txt")
	id := strings.TrimSpace(res.stdout)
	if res.code != exitOK {
		t.Fatalf("run: %s", res)
	}
	if res := g.cli(t, "watch", id); res.code != exitOK {
		t.Fatalf("watch: %s", res)
	}

	if res := g.cli(t, "files", id); res.code != exitOK || res.stdout != "add  6  out.txt\n" {
		t.Fatalf("files: %s", res)
	}
	if res := g.cli(t, "files", id, "out.txt"); res.code != exitOK || res.stdout != "hello\n" {
		t.Fatalf("files out.txt: %s", res)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "copy.txt")
	if res := g.cli(t, "files", id, "out.txt", "-o", out); res.code != exitOK || res.stdout != "" {
		t.Fatalf("files -o: %s", res)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "hello\n" {
		t.Fatalf("-o wrote %q (%v)", b, err)
	}
	if res := g.cli(t, "files", "--diff", id); res.code != exitOK || !strings.Contains(res.stdout, "+++ b/out.txt\n") || !strings.Contains(res.stdout, "\n+hello\n") {
		t.Fatalf("files --diff: %s", res)
	}
	archive := filepath.Join(dir, "run.tar.gz")
	if res := g.cli(t, "files", "--archive", id, "-o", archive); res.code != exitOK {
		t.Fatalf("files --archive: %s", res)
	}
	if names := tarNames(t, archive); !strings.Contains(strings.Join(names, " "), "out.txt") {
		t.Fatalf("archive holds %v", names)
	}
	if res := g.cli(t, "files", id, "nothing-here.txt", "-o", filepath.Join(dir, "none")); res.code != exitAPIError || !strings.HasPrefix(res.stderr, "error: file_not_found: ") {
		t.Fatalf("files of a missing path: %s", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed download left a file: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("the downloads left %d entries in the directory, want 2", len(entries))
	}

	// A run that has not finished has no list or diff yet.
	res = g.cli(t, "run", "--detach", markLong+" wait a minute")
	if res.code != exitOK {
		t.Fatalf("run: %s", res)
	}
	long := strings.TrimSpace(res.stdout)
	t.Cleanup(func() { g.cli(t, "cancel", long) })
	for _, args := range [][]string{{"files", long}, {"files", "--diff", long}} {
		if res := g.cli(t, args...); res.code != exitAPIError || !strings.HasPrefix(res.stderr, "error: run_not_finished: ") {
			t.Errorf("%v of a running run: %s", args, res)
		}
	}
}

func tarNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

func TestAPIKeys(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "api-keys")
	writer, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	reader, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	file := "# test keys\n" + auth.Line("acme-write", "acme", auth.RoleWrite, writer) + "\n" +
		auth.Line("acme-read", "acme", auth.RoleRead, reader) + "\n"
	if err := os.WriteFile(keys, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	g := ownGateway(t, map[string]string{"AGENTGATE_API_KEYS_FILE": keys})
	as := func(key string, args ...string) cliResult {
		t.Helper()
		return runCLI(t, map[string]string{"AGENTGATE_URL": g.URL, "AGENTGATE_API_KEY": key}, args...)
	}

	for _, args := range [][]string{{"ls"}, {"agents"}, {"watch", "0196a7c8-5a3e-7b1e-9d0a-2f4c6b8e1a3d"}} {
		if res := as("", args...); res.code != exitAPIError || !strings.HasPrefix(res.stderr, "error: unauthenticated: ") {
			t.Errorf("%v without a key: %s", args, res)
		}
	}
	if res := as("agk_not-a-key", "ls"); res.code != exitAPIError || !strings.HasPrefix(res.stderr, "error: unauthenticated: ") {
		t.Errorf("ls with an unknown key: %s", res)
	}
	if res := as(reader, "run", "say hi"); res.code != exitAPIError || !strings.HasPrefix(res.stderr, "error: forbidden: ") {
		t.Errorf("run with a read key: %s", res)
	}
	// The key from the environment, and from --api-key over it.
	res := as(writer, "run", "--detach", "Write hello to out.txt")
	if res.code != exitOK {
		t.Fatalf("run with a write key: %s", res)
	}
	id := strings.TrimSpace(res.stdout)
	if res := as("agk_not-a-key", "--api-key", reader, "ls"); res.code != exitOK || !strings.Contains(res.stdout, id) {
		t.Fatalf("ls --api-key over a wrong $AGENTGATE_API_KEY: %s", res)
	}
	if res := as(reader, "watch", id); res.code != exitOK {
		t.Fatalf("watch with a read key: %s", res)
	}
}

func TestCannotConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{{"ls"}, {"watch", "0196a7c8-5a3e-7b1e-9d0a-2f4c6b8e1a3d"}, {"run", "hi"}} {
		res := runCLI(t, map[string]string{"AGENTGATE_URL": gone}, args...)
		if res.code != exitUnreachable || !strings.HasPrefix(res.stderr, "error: cannot_connect: ") || res.stdout != "" {
			t.Errorf("%v against a closed port: %s", args, res)
		}
	}
}

func TestCommandLine(t *testing.T) {
	none := map[string]string{}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // a part of it
		stderr string // a part of it
	}{
		{args: nil, code: exitUsage, stderr: "Commands:"},
		{args: []string{"-h"}, code: exitOK, stdout: "Exit codes:"},
		{args: []string{"help"}, code: exitOK, stdout: "agentgate [global flags] COMMAND"},
		{args: []string{"help", "run"}, code: exitOK, stdout: "--cancel-on-interrupt"},
		{args: []string{"run", "-h"}, code: exitOK, stdout: "Usage: agentgate run"},
		{args: []string{"files", "--help"}, code: exitOK, stdout: "--archive"},
		{args: []string{"version"}, code: exitOK, stdout: "agentgate "},
		{args: []string{"frobnicate"}, code: exitUsage, stderr: `unknown command "frobnicate"`},
		{args: []string{"run"}, code: exitUsage, stderr: "a prompt is needed"},
		{args: []string{"run", "--max-turns", "many", "hi"}, code: exitUsage, stderr: "max-turns"},
		{args: []string{"run", "--timeout", "soon", "hi"}, code: exitUsage, stderr: "want seconds or a duration"},
		{args: []string{"watch"}, code: exitUsage, stderr: "want one run ID"},
		{args: []string{"approve", "x"}, code: exitUsage, stderr: "want a run ID and an approval ID"},
		{args: []string{"files", "x", "--diff", "--archive"}, code: exitUsage, stderr: "not both"},
		{args: []string{"--url", "ftp://example", "ls"}, code: exitUsage, stderr: "gateway URL"},
	} {
		res := runCLI(t, none, tc.args...)
		if res.code != tc.code || !strings.Contains(res.stdout, tc.stdout) || !strings.Contains(res.stderr, tc.stderr) {
			t.Errorf("agentgate %s: %s\nwant exit %d, stdout with %q, stderr with %q", strings.Join(tc.args, " "), res, tc.code, tc.stdout, tc.stderr)
		}
	}
}

// Schedules and triggers from the command line, against a real gateway
// and the real CLI: a schedule fired now runs to its end, a trigger's
// secret is printed once and a token delivery starts its run.
func TestScheduleAndTriggerCommands(t *testing.T) {
	g := sharedGateway(t)
	res := g.cli(t, "--json", "schedule", "create", "--name", "hourly hello", "--every", "1h", "Write hello to out.txt")
	var sc struct {
		ID         string `json:"id"`
		NextFireAt string `json:"next_fire_at"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &sc); res.code != exitOK || err != nil || sc.ID == "" || sc.NextFireAt == "" {
		t.Fatalf("schedule create: %s (%v)", res, err)
	}
	res = g.cli(t, "--json", "schedule", "fire", sc.ID)
	var fire struct {
		Outcome string `json:"outcome"`
		RunID   string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &fire); res.code != exitOK || err != nil || fire.Outcome != "started" || fire.RunID == "" {
		t.Fatalf("schedule fire: %s (%v)", res, err)
	}
	if res := g.cli(t, "watch", fire.RunID); res.code != exitOK {
		t.Fatalf("watch the fire's run: %s", res)
	}
	if res := g.cli(t, "schedule", "ls"); res.code != exitOK || !strings.Contains(res.stdout, "hourly hello") {
		t.Fatalf("schedule ls: %s", res)
	}
	if res := g.cli(t, "schedule", "fires", sc.ID); res.code != exitOK || !strings.Contains(res.stdout, fire.RunID) {
		t.Fatalf("schedule fires: %s", res)
	}
	if res := g.cli(t, "schedule", "pause", sc.ID); res.code != exitOK {
		t.Fatalf("schedule pause: %s", res)
	}
	if res := g.cli(t, "schedule", "set", sc.ID, "--every", "5s"); res.code != exitAPIError || !strings.Contains(res.stderr, "every") {
		t.Fatalf("schedule set --every 5s: %s", res)
	}
	if res := g.cli(t, "schedule", "rm", sc.ID); res.code != exitOK {
		t.Fatalf("schedule rm: %s", res)
	}

	res = g.cli(t, "--json", "trigger", "create", "--name", "alerts", "--verify", "token", "Say what {{.payload.alert}} means")
	var tr struct {
		URL    string `json:"url"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &tr); res.code != exitOK || err != nil || tr.Secret == "" || !strings.HasPrefix(tr.URL, g.URL) {
		t.Fatalf("trigger create: %s (%v)", res, err)
	}
	req, _ := http.NewRequest("POST", tr.URL, strings.NewReader(`{"alert":"disk full"}`))
	req.Header.Set("Authorization", "Bearer "+tr.Secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		RunID string `json:"run_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&d)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || err != nil || d.RunID == "" {
		t.Fatalf("a token delivery = %d (%v)", resp.StatusCode, err)
	}
	if res := g.cli(t, "watch", d.RunID); res.code != exitOK {
		t.Fatalf("watch the delivery's run: %s", res)
	}
	id := strings.TrimSuffix(strings.TrimPrefix(tr.URL, g.URL+"/v1/triggers/"), "/deliveries")
	if res := g.cli(t, "trigger", "deliveries", id); res.code != exitOK || !strings.Contains(res.stdout, d.RunID) {
		t.Fatalf("trigger deliveries: %s", res)
	}
}
