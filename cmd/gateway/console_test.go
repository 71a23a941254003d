package main

// The web console in a real browser against the whole gateway: Debian's
// Chromium, driven by playwright-core (tools/console-test/console.mjs),
// opens the page the gateway serves, types an API key, creates an
// interactive Claude run through the form, approves its tool call by
// keyboard, reads its answer, sends a follow-up, closes the session, opens
// the diff and downloads the changed file, while a proxy drops the event
// stream once and spoils the browser's own reconnect, so that the
// console's reconnect with a fresh stream token is what is tested. A
// second test runs the console on a gateway without keys.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/console"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// consoleScriptTimeout bounds the script: the browser's start, the run's
// two turns and the reconnect, on a loaded 2-core machine. The script
// bounds itself a little below this.
const consoleScriptTimeout = 170 * time.Second

// The interactive run the console drives, as the mock model plays it.
const (
	consolePrompt         = "Write hello to out.txt, then tell me."
	consoleCommand        = "echo hello > out.txt"
	consoleAnswer         = "I wrote **out.txt** with `echo`."
	consoleAnswerShown    = "I wrote out.txt with echo."
	consoleFollowUp       = "What does it say?"
	consoleFollowUpAnswer = "It says *hello*:\n\n- one line\n- nothing else"
	consoleFollowUpShown  = "It says hello:"
)

// consoleScenario asks for a Bash call that writes out.txt, answers its
// result in Markdown, and answers the follow-up.
func consoleScenario() anthropic.Scenario {
	return anthropic.Func(func(req *anthropic.Request) anthropic.Response {
		switch {
		case req.Contains(consoleFollowUp):
			return anthropic.Response{Message: anthropic.Message{Content: []anthropic.Block{anthropic.Text(consoleFollowUpAnswer)},
				Usage: anthropic.Usage{InputTokens: 300, CacheReadInputTokens: 9000, OutputTokens: 30}}}
		case len(req.ToolResults()) > 0:
			return anthropic.Response{Message: anthropic.Message{Content: []anthropic.Block{anthropic.Text(consoleAnswer)},
				Usage: anthropic.Usage{InputTokens: 150, CacheCreationInputTokens: 300, CacheReadInputTokens: 11500, OutputTokens: 25}}}
		}
		return anthropic.Response{Message: anthropic.Message{
			Content: []anthropic.Block{anthropic.Thinking("The user wants a file. I will use Bash."), anthropic.Text("Writing the file."),
				anthropic.Bash(consoleCommand)},
			Usage: anthropic.Usage{InputTokens: 1200, CacheCreationInputTokens: 9000, CacheReadInputTokens: 2500, OutputTokens: 80},
		}}
	})
}

// consoleReport is what console.mjs writes to report.json.
type consoleReport struct {
	OK          bool     `json:"ok"`
	Failures    []string `json:"failures"`
	RunID       string   `json:"runId"`
	Screenshots []string `json:"screenshots"`
	Steps       []struct {
		Name string `json:"name"`
		Ms   int    `json:"ms"`
	} `json:"steps"`
	Dom struct {
		KeyPrompted  bool     `json:"keyPrompted"`
		RunStatus    string   `json:"runStatus"`
		StreamState  string   `json:"streamState"`
		Reconnects   int      `json:"reconnects"`
		CostUSD      float64  `json:"costUSD"`
		InputTokens  int64    `json:"inputTokens"`
		OutputTokens int64    `json:"outputTokens"`
		UserMessages []string `json:"userMessages"`
		Messages     []struct {
			Text   string   `json:"text"`
			Strong []string `json:"strong"`
			Code   []string `json:"code"`
		} `json:"messages"`
		ToolCalls []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
			Input  string `json:"input"`
			Output string `json:"output"`
		} `json:"toolCalls"`
		Approvals []struct {
			State    string `json:"state"`
			Decision string `json:"decision"`
			Buttons  int    `json:"buttons"`
		} `json:"approvals"`
		DiffAdded       []string `json:"diffAdded"`
		DiffAddColoured bool     `json:"diffAddColoured"`
		Download        struct {
			Name    string  `json:"name"`
			Content *string `json:"content"`
		} `json:"download"`
		ListStatus      string `json:"listStatus"`
		ListPrompt      string `json:"listPrompt"`
		ListPromptTitle string `json:"listPromptTitle"`
		PromptKept      bool   `json:"promptKept"`
	} `json:"dom"`
	ConsoleErrors []string `json:"consoleErrors"`
	PageErrors    []string `json:"pageErrors"`
	CSPViolations []string `json:"cspViolations"`
}

// consoleTools finds what the browser test needs, or fails saying which
// script installs what is missing.
func consoleTools(t *testing.T) (node, script string) {
	t.Helper()
	if _, err := os.Stat(chromiumBin); err != nil {
		t.Fatalf("chromium is not installed at %s (%v): run scripts/install-browser.sh (as root) first", chromiumBin, err)
	}
	node, dir := nodeTools(t, "console-test", "playwright-core")
	return node, filepath.Join(dir, "console.mjs")
}

// artifactDir is where a test keeps its screenshots: under
// $AGENTGATE_TEST_ARTIFACTS when set, so that they outlive the test, else
// in a temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	root := os.Getenv("AGENTGATE_TEST_ARTIFACTS")
	if root == "" {
		return t.TempDir()
	}
	dir := filepath.Join(root, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runConsoleScript runs console.mjs on pageURL with plan, in a process
// group and a directory of its own (HOME and TMPDIR, where the browser's
// profile goes too), waits for it, makes sure no process of it or its
// browser is left, and returns its report.
func runConsoleScript(t *testing.T, pageURL, outDir string, plan map[string]any) consoleReport {
	t.Helper()
	node, script := consoleTools(t)
	planJSON, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b := &browser{dir: dir, logPath: filepath.Join(dir, "console-test.log"), exited: make(chan struct{})}
	out, err := os.Create(b.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	b.cmd = exec.Command(node, script, pageURL, outDir)
	b.cmd.Dir = filepath.Dir(script)
	b.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir, "LANG=C.UTF-8",
		"XDG_CONFIG_HOME=" + filepath.Join(dir, ".config"), "XDG_CACHE_HOME=" + filepath.Join(dir, ".cache"),
		"CONSOLE_TEST_PLAN=" + string(planJSON), "CONSOLE_TEST_CHROMIUM=" + chromiumBin,
	}
	b.cmd.Stdout, b.cmd.Stderr = out, out
	start := time.Now()
	b.start(t)
	select {
	case <-b.exited:
	case <-time.After(consoleScriptTimeout):
		b.stop()
		t.Fatalf("console.mjs did not finish within %s\n%s", consoleScriptTimeout, b.log())
	}
	b.stop()
	b.assertGone(t)
	t.Logf("console.mjs took %s", time.Since(start).Round(time.Millisecond))

	var rep consoleReport
	raw, err := os.ReadFile(filepath.Join(outDir, "report.json"))
	if err == nil {
		err = json.Unmarshal(raw, &rep)
	}
	for _, s := range rep.Screenshots {
		if fi, err := os.Stat(s); err != nil || fi.Size() == 0 {
			t.Errorf("screenshot %s: %v", s, err)
		} else {
			t.Logf("screenshot: %s", s)
		}
	}
	if err != nil {
		t.Fatalf("console.mjs left no report (exit %v): %v\n%s", b.exitErr, err, b.log())
	}
	if b.exitErr != nil || !rep.OK {
		t.Fatalf("console.mjs: exit %v, failures:\n  %s\nconsole errors: %q\npage errors: %q\n%s",
			b.exitErr, strings.Join(rep.Failures, "\n  "), rep.ConsoleErrors, rep.PageErrors, b.log())
	}
	if len(rep.Screenshots) < 2 || len(rep.PageErrors) != 0 || len(rep.CSPViolations) != 0 {
		t.Fatalf("report: %d screenshots, page errors %q, policy violations %q", len(rep.Screenshots), rep.PageErrors, rep.CSPViolations)
	}
	return rep
}

// TestConsoleInBrowser drives an interactive run through the console of a
// gateway with API keys.
func TestConsoleInBrowser(t *testing.T) {
	consoleTools(t) // fail before starting anything when a tool is missing
	mock := startMock(t, consoleScenario())
	dir := t.TempDir()
	keysFile := filepath.Join(dir, "api-keys")
	key := newTestKey(t, "console", "acme", auth.RoleWrite)
	writeKeys(t, keysFile, key)
	settings := gatewayEnv(t, filepath.Join(dir, "data"))
	settings["AGENTGATE_API_KEYS_FILE"] = keysFile
	// The browser waits this long before its own reconnect.
	settings["AGENTGATE_SSE_RECONNECT_DELAY"] = "250ms"
	g := startGateway(t, settings, mockCreds(mock))

	checkConsoleRoutes(t, g.URL, key)

	target, err := url.Parse(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // the page's origin, as a proxy in front keeps it
		},
		FlushInterval: -1,
	}
	taps := &consoleTaps{}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/runs/") && strings.HasSuffix(r.URL.Path, "/events") {
			taps.serve(proxy, w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(site.Close)

	out := artifactDir(t)
	rep := runConsoleScript(t, site.URL+"/", out, map[string]any{
		"flow": "interactive", "key": key.secret, "prompt": consolePrompt,
		"answer": consoleAnswerShown, "strong": "out.txt",
		"tool":     map[string]string{"name": "Bash", "command": consoleCommand},
		"followUp": consoleFollowUp, "followUpAnswer": consoleFollowUpShown,
		"file":      map[string]string{"path": "out.txt", "content": "hello\n"},
		"addedLine": "+hello", "expectReconnect": true,
	})
	t.Logf("steps: %+v", rep.Steps)

	// What the page showed, against the gateway's own record.
	st, b := call(t, http.MethodGet, g.URL+"/v1/runs/"+rep.RunID, key, "")
	if st != http.StatusOK {
		t.Fatalf("GET the console's run %s = %d %s", rep.RunID, st, b)
	}
	var run runs.Run
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	if run.Status != runs.Succeeded || !run.Interactive || run.Approvals != runs.ApprovalsAsk || len(run.Turns) != 2 ||
		run.CreatedBy == nil || run.CreatedBy.KeyID != key.id {
		t.Fatalf("the console's run: %s", b)
	}
	if run.CostUSD == nil || *run.CostUSD <= 0 || math.Abs(rep.Dom.CostUSD-*run.CostUSD) > 1e-9 {
		t.Fatalf("the page's cost %v, the run's %v", rep.Dom.CostUSD, run.CostUSD)
	}
	if rep.Dom.InputTokens != run.Usage.InputTokens || rep.Dom.OutputTokens != run.Usage.OutputTokens {
		t.Fatalf("the page's usage %d in, %d out; the run's %+v", rep.Dom.InputTokens, rep.Dom.OutputTokens, run.Usage)
	}
	if !mock.Ledger().Seen(consoleFollowUp) {
		t.Fatal("the follow-up never reached the model")
	}
	var texts []string
	strong := false
	for _, m := range rep.Dom.Messages {
		texts = append(texts, m.Text)
		strong = strong || slices.Contains(m.Strong, "out.txt") && slices.Contains(m.Code, "echo")
	}
	if !slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, consoleAnswerShown) }) ||
		!slices.ContainsFunc(texts, func(s string) bool { return strings.HasPrefix(s, consoleFollowUpShown) }) || !strong {
		t.Fatalf("messages on the page: %+v", rep.Dom.Messages)
	}
	if len(rep.Dom.ToolCalls) != 1 || rep.Dom.ToolCalls[0].Name != "Bash" || rep.Dom.ToolCalls[0].Status != "ok" ||
		!strings.Contains(rep.Dom.ToolCalls[0].Input, consoleCommand) {
		t.Fatalf("tool calls on the page: %+v", rep.Dom.ToolCalls)
	}
	if len(rep.Dom.Approvals) != 1 || rep.Dom.Approvals[0].Decision != "allow" || rep.Dom.Approvals[0].Buttons != 0 {
		t.Fatalf("approvals on the page: %+v", rep.Dom.Approvals)
	}
	if !slices.Contains(rep.Dom.DiffAdded, "+hello") || !rep.Dom.DiffAddColoured {
		t.Fatalf("diff on the page: added %q, coloured %v", rep.Dom.DiffAdded, rep.Dom.DiffAddColoured)
	}
	if c := rep.Dom.Download.Content; rep.Dom.Download.Name != "out.txt" || c == nil || *c != "hello\n" {
		t.Fatalf("downloaded %q: %v", rep.Dom.Download.Name, c)
	}
	if !rep.Dom.KeyPrompted || rep.Dom.Reconnects < 1 || rep.Dom.StreamState != "ended" || rep.Dom.ListStatus != "succeeded" {
		t.Fatalf("key prompted %v, reconnects %d, stream %q, list %q", rep.Dom.KeyPrompted, rep.Dom.Reconnects, rep.Dom.StreamState, rep.Dom.ListStatus)
	}
	// The runs list tells runs apart by their prompts.
	if shown := strings.TrimSuffix(rep.Dom.ListPrompt, "…"); shown == "" || !strings.HasPrefix(consolePrompt, shown) || rep.Dom.ListPromptTitle != consolePrompt {
		t.Fatalf("the runs list shows the prompt %q (title %q), want the start of %q", rep.Dom.ListPrompt, rep.Dom.ListPromptTitle, consolePrompt)
	}

	// What went over the wire: the first stream was cut after
	// approval.requested; the browser's own reconnect, from the last id it
	// had read, was refused (the proxy spoiled its token, as an expired
	// one would be); the console then asked for a new token and opened a
	// stream after that id, which ran to run.completed. Nothing else. (The
	// cut may lose what the browser had not read yet of the first stream:
	// the resumed stream must bring it.)
	streams := taps.snapshot()
	if len(streams) != 3 {
		t.Fatalf("%d event streams, want 3 (cut, refused, resumed): %s", len(streams), taps)
	}
	first, refused, resumed := streams[0], streams[1], streams[2]
	if first.LastEventID != "" || first.Status != http.StatusOK || !first.Dropped || len(first.IDs) == 0 ||
		first.Types[len(first.Types)-1] != string(runs.EventApprovalRequested) || first.Query.Get("token") == "" {
		t.Fatalf("first stream: %+v", first)
	}
	proxied, _ := strconv.Atoi(first.IDs[len(first.IDs)-1])
	seen, err := strconv.Atoi(refused.LastEventID)
	if err != nil || seen < 1 || seen > proxied || refused.Status != http.StatusUnauthorized || refused.Query.Get("token") != first.Query.Get("token") {
		t.Fatalf("the browser's reconnect: %+v; want Last-Event-ID at most %d with the first token, refused 401", refused, proxied)
	}
	_, all := g.streamWithKey(t, rep.RunID, key)
	var rest []string
	for i := seen + 1; i <= len(all); i++ {
		rest = append(rest, strconv.Itoa(i))
	}
	if resumed.Query.Get("after") != refused.LastEventID || resumed.Query.Get("token") == "" ||
		resumed.Query.Get("token") == first.Query.Get("token") || resumed.Status != http.StatusOK || resumed.Dropped ||
		!slices.Equal(resumed.IDs, rest) || resumed.Types[len(resumed.Types)-1] != string(runs.EventRunCompleted) {
		t.Fatalf("the console's new stream: %+v; want a new token, after=%d, events %d to %d (run.completed)", resumed, seen, seen+1, len(all))
	}
	t.Logf("event streams:%s", taps)
	assertNoProcesses(t, rep.RunID)
}

// TestConsoleWithoutKeys runs the console on a gateway without keys: no
// key is asked for, and a one-shot run streams into the page.
func TestConsoleWithoutKeys(t *testing.T) {
	consoleTools(t)
	// A long answer, streamed a word at a time, with text that looks like
	// HTML and must stay text.
	const literal = `<img src=x onerror="alert(1)"> and <script>alert(2)</script>`
	answer := "Hello from the **mock**.\n\n" + strings.Repeat("Words stream in one at a time, and the page only appends. ", 40) +
		"\n\n" + literal + "\n\n```sh\necho hi\n```"
	mock := startMock(t, anthropic.TextAnswer(answer))
	g := startGateway(t, gatewayEnv(t, t.TempDir()), mockCreds(mock))
	rep := runConsoleScript(t, g.URL+"/", artifactDir(t), map[string]any{
		"flow": "oneshot", "prompt": "Say hello", "answer": "Hello from the mock.", "strong": "mock", "literal": literal,
	})
	r := g.get(t, rep.RunID)
	if r.Status != runs.Succeeded || rep.Dom.RunStatus != "succeeded" || rep.Dom.KeyPrompted {
		t.Fatalf("run %+v; the page: %+v", r, rep.Dom)
	}
	if len(rep.Dom.Messages) != 1 || !slices.Contains(rep.Dom.Messages[0].Code, "echo hi") ||
		!strings.Contains(rep.Dom.Messages[0].Text, literal) {
		t.Fatalf("messages on the page: %+v", rep.Dom.Messages)
	}
	if !rep.Dom.PromptKept {
		t.Fatal("the transcript was redrawn while the answer streamed")
	}
	assertNoProcesses(t, rep.RunID)
}

// checkConsoleRoutes checks how a gateway with keys serves the console:
// its files without a key, only for GET and HEAD; the API still needs one.
func checkConsoleRoutes(t *testing.T, base string, key testKey) {
	t.Helper()
	none := testKey{}
	for _, c := range []struct{ path, contentType string }{
		{"/", "text/html; charset=utf-8"},
		{"/console/app.js", "text/javascript; charset=utf-8"},
		{"/console/console.css", "text/css; charset=utf-8"},
	} {
		resp, err := http.Get(base + c.path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != c.contentType ||
			resp.Header.Get("Content-Security-Policy") != console.ContentSecurityPolicy || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("GET %s without a key = %d, %q, CSP %q", c.path, resp.StatusCode, resp.Header.Get("Content-Type"),
				resp.Header.Get("Content-Security-Policy"))
		}
	}
	if st, b := call(t, http.MethodGet, base+"/console/nope.js", none, ""); st != http.StatusNotFound || errCode(b) != "not_found" {
		t.Errorf("GET /console/nope.js = %d %s", st, b)
	}
	if st, b := call(t, http.MethodPost, base+"/", key, "{}"); st != http.StatusMethodNotAllowed || errCode(b) != "method_not_allowed" {
		t.Errorf("POST / with a key = %d %s", st, b)
	}
	if st, b := call(t, http.MethodPost, base+"/", none, "{}"); st != http.StatusUnauthorized {
		t.Errorf("POST / without a key = %d %s", st, b)
	}
	if st, b := call(t, http.MethodGet, base+"/v1/runs", none, ""); st != http.StatusUnauthorized {
		t.Errorf("GET /v1/runs without a key = %d %s", st, b)
	}
}

// streamWithKey reads the run's whole NDJSON log with key.
func (g *gateway) streamWithKey(t *testing.T, id string, key testKey) (int, []runs.Event) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.URL+"/v1/runs/"+id+"/events", nil)
	req.Header.Set("Accept", "application/x-ndjson")
	req.Header.Set("Authorization", "Bearer "+key.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	var out []runs.Event
	for {
		var ev runs.Event
		if err := dec.Decode(&ev); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("events of %s: %v", id, err)
			}
			break
		}
		out = append(out, ev)
	}
	return resp.StatusCode, out
}

// consoleStream is what the proxy saw of one event stream request.
type consoleStream struct {
	Query       url.Values
	LastEventID string
	tappedStream
}

// consoleTaps passes the page's event streams on: the first is cut right
// after its approval.requested event; the browser's reconnect that
// follows gets its token spoiled, so that the gateway refuses it as it
// would an expired one; the rest pass untouched.
type consoleTaps struct {
	mu      sync.Mutex
	streams []*consoleStream
}

func (c *consoleTaps) serve(proxy http.Handler, w http.ResponseWriter, r *http.Request) {
	rec := &consoleStream{Query: r.URL.Query(), LastEventID: r.Header.Get("Last-Event-ID")}
	c.mu.Lock()
	n := len(c.streams)
	c.streams = append(c.streams, rec)
	c.mu.Unlock()
	tap := &sseTap{ResponseWriter: w, mu: &c.mu, rec: &rec.tappedStream}
	switch n {
	case 0:
		tap.cutAfter = func(_ int, typ string) bool { return typ == string(runs.EventApprovalRequested) }
	case 1:
		q := r.URL.Query()
		q.Set("token", q.Get("token")+"spoiled")
		r = r.Clone(r.Context())
		r.URL.RawQuery = q.Encode()
	}
	proxy.ServeHTTP(tap, r)
}

func (c *consoleTaps) snapshot() []consoleStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]consoleStream, len(c.streams))
	for i, s := range c.streams {
		out[i] = *s
		out[i].tappedStream = s.tappedStream.clone()
	}
	return out
}

func (c *consoleTaps) String() string {
	var b strings.Builder
	for i, s := range c.snapshot() {
		fmt.Fprintf(&b, "\n  %d: after=%q last-event-id=%q status=%d dropped=%v ids=%v types=%v",
			i, s.Query.Get("after"), s.LastEventID, s.Status, s.Dropped, s.IDs, s.Types)
	}
	return b.String()
}
