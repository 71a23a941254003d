package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/agenttest"
)

// codexBinEnv names the variable that points the tests at a codex binary.
const codexBinEnv = "AGENTGATE_CODEX_BIN"

// codexBinPath is where scripts/install-agents.sh puts the native codex
// binary, relative to the repository root. The tests run it directly, not
// the Node launcher in node_modules/.bin.
var codexBinPath = filepath.Join("tools", "agents", "node_modules", "@openai", "codex-linux-x64",
	"vendor", "x86_64-unknown-linux-musl", "bin", "codex")

// codexBin returns the codex binary: $AGENTGATE_CODEX_BIN, else the
// installed one under the repository root. It fails the test, never
// skips it, when there is none.
func codexBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(codexBinEnv); p != "" {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
		t.Fatalf("$%s=%q is not an executable file; %s", codexBinEnv, p, agenttest.InstallHint)
	}
	root, err := agenttest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, codexBinPath)
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("the codex CLI is not installed at %s: %s, or set $%s", p, agenttest.InstallHint, codexBinEnv)
	}
	return p
}

// testKey is the dummy key codex reads from $MOCK_KEY and sends as a
// bearer token.
const testKey = "mock-key-1"

// codexConfig points codex at the mock and keeps it from talking to
// anything else: no analytics, no metrics export, no plugin or app sync,
// and no retries so that a failure shows at once.
func codexConfig(url string) []string {
	return []string{
		"-c", "model_provider=mock",
		"-c", fmt.Sprintf(`model_providers.mock={name="mock", base_url=%q, wire_api="responses", env_key="MOCK_KEY", `+
			`request_max_retries=0, stream_max_retries=0, stream_idle_timeout_ms=10000}`, url),
		"-c", "analytics.enabled=false",
		"-c", `otel.metrics_exporter="none"`,
		"--disable", "plugins", "--disable", "apps",
	}
}

// codexEnv is the whole environment codex runs with.
func codexEnv(home string) []string {
	return append(agenttest.MinimalEnv(home), "CODEX_HOME="+home, "TERM=dumb", "MOCK_KEY="+testKey)
}

// codexDeadline bounds one codex run; each takes a second or two.
const codexDeadline = 30 * time.Second

// TestCodexToolTurn runs the real codex exec against ToolTurn: the CLI
// must accept the streamed reasoning and exec_command call, run the
// command, send its output back, accept the answer, and report the usage
// the ledger billed.
func TestCodexToolTurn(t *testing.T) {
	bin := codexBin(t)
	s := start(t, ToolTurn("echo hello > out.txt", "I wrote out.txt."))
	home, dir := t.TempDir(), t.TempDir()
	args := append([]string{"exec", "--json", "--ephemeral", "--skip-git-repo-check", "--sandbox", "workspace-write",
		"-m", "mock-model"}, codexConfig(s.URL)...)
	args = append(args, "Write hello to out.txt.")
	p := agenttest.Start(t, bin, args, codexEnv(home), dir, nil)
	deadline := time.AfterFunc(codexDeadline, p.Kill)
	defer deadline.Stop()
	res := p.Wait()
	if res.Exit.Code != 0 || res.Exit.Signal != "" {
		t.Fatalf("codex exit %+v; stderr %s; stdout %s", res.Exit, res.Stderr, bytes.Join(res.Stdout, []byte("\n")))
	}

	var threadID, answer string
	var command struct {
		Command  string `json:"command"`
		ExitCode *int   `json:"exit_code"`
	}
	var usage struct {
		Input     int64 `json:"input_tokens"`
		Cached    int64 `json:"cached_input_tokens"`
		Output    int64 `json:"output_tokens"`
		Reasoning int64 `json:"reasoning_output_tokens"`
	}
	var types []string
	for _, line := range res.Stdout {
		var ev struct {
			Type     string          `json:"type"`
			ThreadID string          `json:"thread_id"`
			Item     json.RawMessage `json:"item"`
			Usage    json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		var item struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(ev.Item, &item)
		types = append(types, strings.TrimSuffix(ev.Type+"/"+item.Type, "/"))
		switch {
		case ev.Type == "thread.started":
			threadID = ev.ThreadID
		case ev.Type == "item.completed" && item.Type == "agent_message":
			answer = item.Text
		case ev.Type == "item.completed" && item.Type == "command_execution":
			_ = json.Unmarshal(ev.Item, &command)
		case ev.Type == "turn.completed":
			_ = json.Unmarshal(ev.Usage, &usage)
		}
	}
	want := "thread.started,item.completed/error,turn.started,item.completed/reasoning,item.started/command_execution," +
		"item.completed/command_execution,item.completed/agent_message,turn.completed"
	if got := strings.Join(types, ","); got != want {
		t.Errorf("events = %s\nwant %s", got, want)
	}
	if answer != "I wrote out.txt." || !strings.Contains(command.Command, "echo hello > out.txt") ||
		command.ExitCode == nil || *command.ExitCode != 0 {
		t.Errorf("answer %q, command %+v", answer, command)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("out.txt = %q, %v", b, err)
	}

	l := s.Ledger()
	if len(l) != 2 {
		t.Fatalf("ledger has %d entries, want 2: %+v", len(l), l)
	}
	billed := l.Billed()
	if want := firstCallUsage().Add(followUpUsage()); billed != want {
		t.Errorf("billed %+v, want %+v", billed, want)
	}
	if usage.Input != billed.InputTokens || usage.Cached != billed.CachedTokens ||
		usage.Output != billed.OutputTokens || usage.Reasoning != billed.ReasoningTokens {
		t.Errorf("codex reported %+v, the ledger billed %+v", usage, billed)
	}
	first, second := l[0].Request, l[1].Request
	for _, r := range []Request{first, second} {
		if r.Path != "/v1/responses" || !r.Stream || r.Model != "mock-model" || r.ParseError != "" ||
			r.Header.Get("Authorization") != "Bearer "+testKey || r.ThreadID() != threadID ||
			r.SessionID() != threadID || r.SubAgent() || r.PromptCacheKey != threadID || r.Summary != "auto" {
			t.Errorf("request %d = %+v", r.Seq, r)
		}
		if r.LastUserText() != "Write hello to out.txt." || !strings.Contains(r.Developer(), "Codex CLI") {
			t.Errorf("request %d: prompt %q, developer %.80q", r.Seq, r.LastUserText(), r.Developer())
		}
		if !r.HasTool("exec_command") || !r.HasTool(AgentNamespace+".spawn_agent") || !r.HasTool("web_search") {
			t.Errorf("request %d: tools %v", r.Seq, r.Tools)
		}
	}
	if first.HasFunctionOutput() {
		t.Errorf("first request has outputs %+v", first.FunctionOutputs())
	}
	out, call, ok := second.LastOutput()
	if !ok || call.Name != "exec_command" || call.Arguments != `{"cmd":"echo hello > out.txt"}` ||
		!strings.HasPrefix(call.CallID, "call_mock_") || !strings.Contains(out.Output, "Process exited with code 0") {
		t.Errorf("follow-up: output %+v of call %+v", out, call)
	}
	if ids := second.AnsweredCalls(); len(ids) != 1 || ids[0] != call.CallID {
		t.Errorf("answered calls %v", ids)
	}
	if len(second.Input) < 3 || second.Input[len(second.Input)-3].Type != "reasoning" ||
		second.Input[len(second.Input)-3].Text != "The user wants a command run. I will use exec_command." {
		t.Errorf("follow-up does not replay the reasoning: %+v", second.Input)
	}
}

// appServer is a codex app-server run by a test: one JSON object per line
// each way.
type appServer struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan []byte
	seen  [][]byte
}

func startAppServer(t *testing.T, bin, url, home, dir string) *appServer {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"app-server"}, codexConfig(url)...)...)
	cmd.Dir, cmd.Env = dir, codexEnv(home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &appServer{t: t, cmd: cmd, stdin: stdin, lines: make(chan []byte, 4096)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(a.lines)
		br := bufio.NewReader(stdout)
		for {
			line, err := br.ReadBytes('\n')
			if l := bytes.TrimSpace(line); len(l) > 0 {
				a.lines <- l
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		timer := time.AfterFunc(5*time.Second, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		<-read
		err := cmd.Wait()
		timer.Stop()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if err != nil && !t.Failed() {
			t.Errorf("app-server: %v; stderr %s", err, stderr.Bytes())
		}
	})
	return a
}

func (a *appServer) send(msg map[string]any) {
	a.t.Helper()
	b, _ := json.Marshal(msg)
	if _, err := a.stdin.Write(append(b, '\n')); err != nil {
		a.t.Fatalf("write %s: %v", b, err)
	}
}

// rpcMessage is a line from the app-server: a response (ID set) or a
// notification (Method set).
type rpcMessage struct {
	ID     *int            `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// until reads lines until one satisfies stop and returns it; it fails the
// test at EOF or after the deadline.
func (a *appServer) until(deadline time.Time, stop func(m rpcMessage) bool) rpcMessage {
	a.t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case line, ok := <-a.lines:
			if !ok {
				a.t.Fatalf("app-server stdout ended; seen:\n%s", bytes.Join(a.seen, []byte("\n")))
			}
			a.seen = append(a.seen, line)
			var m rpcMessage
			if err := json.Unmarshal(line, &m); err != nil {
				a.t.Fatalf("app-server line %q: %v", line, err)
			}
			if m.Error != nil {
				a.t.Fatalf("app-server error: %s", line)
			}
			if stop(m) {
				return m
			}
		case <-timer.C:
			a.t.Fatalf("app-server: no expected line in time; seen:\n%s", bytes.Join(a.seen, []byte("\n")))
		}
	}
}

func isResponse(id int) func(rpcMessage) bool {
	return func(m rpcMessage) bool { return m.ID != nil && *m.ID == id && m.Method == "" }
}

// turnEvent is what the test keeps of a notification.
type turnEvent struct {
	method, thread, turn, status, itemType, text string
	// last is thread/tokenUsage/updated's usage of one request.
	last Usage
}

func parseEvent(m rpcMessage) turnEvent {
	var p struct {
		ThreadID string `json:"threadId"`
		TurnID   string `json:"turnId"`
		Turn     struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"turn"`
		Item struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"item"`
		TokenUsage struct {
			Last struct {
				Input     int64 `json:"inputTokens"`
				Cached    int64 `json:"cachedInputTokens"`
				Output    int64 `json:"outputTokens"`
				Reasoning int64 `json:"reasoningOutputTokens"`
			} `json:"last"`
		} `json:"tokenUsage"`
	}
	_ = json.Unmarshal(m.Params, &p)
	u := p.TokenUsage.Last
	ev := turnEvent{method: m.Method, thread: p.ThreadID, turn: p.TurnID, status: p.Turn.Status, itemType: p.Item.Type, text: p.Item.Text,
		last: Usage{InputTokens: u.Input, CachedTokens: u.Cached, OutputTokens: u.Output, ReasoningTokens: u.Reasoning}}
	if p.Turn.ID != "" {
		ev.turn = p.Turn.ID
	}
	return ev
}

// TestCodexHelperThread drives the real codex app-server, as the gateway
// does, against HelperThread: the root turn spawns a sub-agent, the
// sub-agent's turn completes first, and only then does the root turn
// complete with the root's answer.
func TestCodexHelperThread(t *testing.T) {
	bin := codexBin(t)
	s := start(t, HelperThread("The helper is done.", "The root is done."))
	home, dir := t.TempDir(), t.TempDir()
	a := startAppServer(t, bin, s.URL, home, dir)
	deadline := time.Now().Add(codexDeadline)

	a.send(map[string]any{"id": 1, "method": "initialize", "params": map[string]any{
		"clientInfo": map[string]any{"name": "agentgate_test", "title": "agentgate test", "version": "0.0.1"}}})
	a.until(deadline, isResponse(1))
	a.send(map[string]any{"method": "initialized"})
	a.send(map[string]any{"id": 2, "method": "thread/start", "params": map[string]any{
		"cwd": dir, "model": "mock-model", "sandbox": "workspace-write", "approvalPolicy": "never", "ephemeral": true}})
	var started struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	if err := json.Unmarshal(a.until(deadline, isResponse(2)).Result, &started); err != nil || started.Thread.ID == "" {
		t.Fatalf("thread/start result: %v", err)
	}
	root := started.Thread.ID
	a.send(map[string]any{"id": 3, "method": "turn/start", "params": map[string]any{
		"threadId": root, "input": []any{map[string]any{"type": "text", "text": "Ask a helper, then answer."}}}})

	var events []turnEvent
	a.until(deadline, func(m rpcMessage) bool {
		if m.Method == "" {
			return false
		}
		ev := parseEvent(m)
		events = append(events, ev)
		return ev.method == "turn/completed" && ev.thread == root
	})

	var helper string
	var completed []turnEvent
	var rootMessages []string
	var reported Usage
	for _, ev := range events {
		switch {
		case ev.method == "thread/tokenUsage/updated":
			reported = reported.Add(ev.last)
		case ev.method == "turn/started" && ev.thread != root:
			helper = ev.thread
		case ev.method == "turn/completed":
			completed = append(completed, ev)
		case ev.method == "item/completed" && ev.itemType == "agentMessage" && ev.thread == root:
			rootMessages = append(rootMessages, ev.text)
		}
	}
	if helper == "" {
		t.Fatalf("no sub-agent turn started; events %+v", events)
	}
	if len(completed) != 2 || completed[0].thread != helper || completed[0].status != "completed" ||
		completed[1].thread != root || completed[1].status != "completed" {
		t.Errorf("turn/completed order = %+v, want the helper's (%s) then the root's (%s)", completed, helper, root)
	}
	if strings.Join(rootMessages, "|") != "The root is done." {
		t.Errorf("root messages %q", rootMessages)
	}

	l := s.Ledger()
	var helperReqs, rootReqs, lateNews int
	for _, e := range l {
		r := e.Request
		if r.SessionID() != root || e.Status != 200 {
			t.Errorf("request %d: session %q, status %d", r.Seq, r.SessionID(), e.Status)
		}
		switch {
		case r.SubAgent():
			helperReqs++
			if r.ThreadID() != helper || r.LastUserText() != HelperPrompt || r.HasTool(AgentNamespace+".spawn_agent") {
				t.Errorf("helper request %d: thread %q, prompt %q, tools %v", r.Seq, r.ThreadID(), r.LastUserText(), r.Tools)
			}
		case r.answeredAfterOutputs():
			// The helper's notification came after the root's last
			// request had gone out; Codex samples once more.
			lateNews++
			t.Logf("request %d: the helper's notification came after the root's answer", r.Seq)
			if last := r.Input[len(r.Input)-1]; !last.Injected() || !strings.HasPrefix(last.Text, "<subagent_notification>") {
				t.Errorf("late request %d ends with %+v", r.Seq, last)
			}
		default:
			rootReqs++
			if r.ThreadID() != root || !r.HasTool(AgentNamespace+".wait_agent") {
				t.Errorf("root request %d: thread %q, tools %v", r.Seq, r.ThreadID(), r.Tools)
			}
		}
	}
	if helperReqs != 1 || rootReqs != 3 || lateNews > 1 {
		for _, e := range l {
			t.Logf("request %d: thread %s, input %+v", e.Request.Seq, e.Request.ThreadID(), e.Request.Input)
		}
		t.Errorf("%d helper, %d root and %d late requests, want 1, 3 and at most 1", helperReqs, rootReqs, lateNews)
	}
	if billed := l.Billed(); reported != billed {
		t.Errorf("thread/tokenUsage/updated last summed over both threads = %+v, the ledger billed %+v", reported, billed)
	}
}
