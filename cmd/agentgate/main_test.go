package main

// The harness of the end-to-end tests: the gateway, built once with `go
// build` and run as a process of its own on 127.0.0.1, running the real
// claude CLI against the mock Anthropic server, and the client's run()
// called in-process against it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
)

// suite holds what the tests share: the gateway binary and one gateway
// with its mock, started by the first test that needs them and stopped
// after the last.
var suite struct {
	buildOnce sync.Once
	buildDir  string
	bin       string
	buildErr  error

	sharedOnce sync.Once
	shared     *testGateway
	sharedErr  error
	sharedMock *anthropic.Server
}

func TestMain(m *testing.M) {
	code := m.Run()
	if suite.shared != nil {
		if err := suite.shared.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "shared gateway:", err)
			code = 1
		}
		os.RemoveAll(suite.shared.dir)
	}
	if suite.sharedMock != nil {
		suite.sharedMock.Close()
	}
	if suite.buildDir != "" {
		os.RemoveAll(suite.buildDir)
	}
	if code == 0 {
		// No goroutine of a client, a follower or a test proxy may
		// outlive its command.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// gatewayBinary builds the gateway once for the whole test binary.
func gatewayBinary(t testing.TB) string {
	t.Helper()
	suite.buildOnce.Do(func() {
		suite.buildDir, suite.buildErr = os.MkdirTemp("", "agentgate-cli-test-")
		if suite.buildErr != nil {
			return
		}
		bin := filepath.Join(suite.buildDir, "gateway")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/agentgate/agentgate/cmd/gateway")
		if out, err := cmd.CombinedOutput(); err != nil {
			suite.buildErr = fmt.Errorf("go build the gateway: %v\n%s", err, out)
			return
		}
		suite.bin = bin
	})
	if suite.buildErr != nil {
		t.Fatal(suite.buildErr)
	}
	return suite.bin
}

// Markers in a prompt that choose the mock's answer (see scenarios).
const (
	markFail = "[[fail]]" // every request is a 401: the run fails not_authenticated
	markLong = "[[long]]" // a Bash call that runs for a minute: for cancels and interrupts
	markTwo  = "[[two]]"  // two Bash calls in a row: for approvals
	markText = "[[text]]" // a text answer, no tool: for a follow-up turn
)

// textAnswer is what the mock answers a conversation marked markText.
const textAnswer = "Glad to help."

// scenarios answers each request by the marker in its conversation, so
// that one gateway and one mock serve every test; without a marker it is
// anthropic.ToolTurn: thinking, text, one Bash call, a final text.
func scenarios() anthropic.Scenario {
	tool := anthropic.ToolTurn("echo hello > out.txt", "I wrote out.txt.")
	long := anthropic.LongTool()
	fail := anthropic.Failure(401)
	two := anthropic.TwoTools("touch first.txt", "touch second.txt", "Both done.")
	text := anthropic.TextAnswer(textAnswer)
	return anthropic.Func(func(req *anthropic.Request) anthropic.Response {
		switch {
		case req.Contains(markFail):
			return fail.Respond(req)
		case req.Contains(markLong):
			return long.Respond(req)
		case req.Contains(markTwo):
			return two.Respond(req)
		case req.Contains(markText):
			return text.Respond(req)
		}
		return tool.Respond(req)
	})
}

// sharedGateway returns the gateway most tests use: no API keys, the
// scenarios mock.
func sharedGateway(t *testing.T) *testGateway {
	t.Helper()
	// Outside the Once: these fail the test, and a Once that a failed
	// test left would hand the next one no gateway.
	claude := agenttest.ClaudeBin(t)
	bin := gatewayBinary(t)
	suite.sharedOnce.Do(func() {
		suite.sharedMock, suite.sharedErr = anthropic.Start("127.0.0.1:0", scenarios())
		if suite.sharedErr != nil {
			return
		}
		suite.shared, suite.sharedErr = startGatewayProcess(bin, claude, suite.sharedMock, nil)
	})
	if suite.sharedErr != nil {
		t.Fatal(suite.sharedErr)
	}
	return suite.shared
}

// ownGateway starts a gateway for one test, with more settings.
func ownGateway(t *testing.T, settings map[string]string) *testGateway {
	t.Helper()
	claude := agenttest.ClaudeBin(t)
	bin := gatewayBinary(t)
	mock, err := anthropic.Start("127.0.0.1:0", scenarios())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mock.Close)
	g, err := startGatewayProcess(bin, claude, mock, settings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.stop(); err != nil {
			t.Errorf("gateway: %v", err)
		}
		os.RemoveAll(g.dir)
	})
	return g
}

// testGateway is a gateway process.
type testGateway struct {
	URL  string
	dir  string
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{} // closed once the process was waited for
	err  error         // of Wait, once done
}

// startGatewayProcess runs the gateway binary with an explicit
// environment: nothing of the test's own reaches it but PATH.
func startGatewayProcess(bin, claude string, mock *anthropic.Server, settings map[string]string) (*testGateway, error) {
	dir, err := os.MkdirTemp("", "agentgate-cli-gateway-")
	if err != nil {
		return nil, err
	}
	env := map[string]string{
		"PATH":                     os.Getenv("PATH"),
		"HOME":                     filepath.Join(dir, "home"),
		"AGENTGATE_ADDR":           "127.0.0.1:0",
		"AGENTGATE_DATA_DIR":       filepath.Join(dir, "data"),
		"AGENTGATE_AGENTS":         "claude",
		"AGENTGATE_CLAUDE_BIN":     claude,
		"AGENTGATE_REPLICA_ID":     "cli-test",
		"AGENTGATE_KILL_GRACE":     "1s",
		"AGENTGATE_SHUTDOWN_GRACE": "2s",
		"AGENTGATE_LOG_LEVEL":      "warn",
		"AGENTGATE_RUN_TIMEOUT":    "2m",
		// The store's reserve is for a full disk, which these tests do
		// not make: a gateway per test need not allocate 64 MiB.
		"AGENTGATE_STORE_RESERVE": "-1",
		"ANTHROPIC_BASE_URL":      mock.URL,
		"ANTHROPIC_API_KEY":       "test-key",
	}
	for k, v := range settings {
		env[k] = v
	}
	cmd := exec.Command(bin)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// A test binary that dies takes its gateway with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	g := &testGateway{dir: dir, cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = g.logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	url := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "agentgate listening on "); ok {
				url <- u
				continue
			}
			fmt.Fprintln(g.logs, sc.Text())
		}
	}()
	go func() {
		<-scanned // Wait closes the pipe: read all of it first
		g.err = cmd.Wait()
		close(g.done)
	}()
	select {
	case g.URL = <-url:
		return g, nil
	case <-g.done:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the gateway exited before it listened: %v\n%s", g.err, g.logs)
	case <-time.After(90 * time.Second):
		_ = g.stop()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("the gateway did not listen within 90s\n%s", g.logs)
	}
}

// stop ends the gateway with SIGTERM, as an operator would, and with
// SIGKILL if it has not gone after its shutdown grace and a margin.
func (g *testGateway) stop() error {
	select {
	case <-g.done:
		return nil
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
		return fmt.Errorf("the gateway did not stop within 30s of SIGTERM\n%s", g.logs)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// cliResult is one finished command.
type cliResult struct {
	code           int
	stdout, stderr string
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// envOf is the client's environment in a test: only what the test gives.
func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// cliTimeout is the hang guard of one command.
const cliTimeout = 3 * time.Minute

// cli runs the client to its end with the gateway's URL in its
// environment, stdin empty.
func (g *testGateway) cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLI(t, map[string]string{"AGENTGATE_URL": g.URL}, args...)
}

func runCLI(t *testing.T, vars map[string]string, args ...string) cliResult {
	t.Helper()
	return runCLIWithStdin(t, vars, "", args...)
}

func runCLIWithStdin(t *testing.T, vars map[string]string, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, strings.NewReader(stdin), &stdout, &stderr, envOf(vars))
	if ctx.Err() != nil {
		t.Fatalf("agentgate %s did not end within %s:\n%s\n%s", strings.Join(args, " "), cliTimeout, &stdout, &stderr)
	}
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// liveCLI is a command still running, whose stdout the test reads line
// by line while it runs.
type liveCLI struct {
	t      *testing.T
	lines  chan string
	stderr *syncBuffer
	code   chan int
	cancel context.CancelFunc // an interrupt (Ctrl-C)
	seen   []string
}

// startCLI runs the client in the background; the test must read its
// lines until it ends (wait does).
func (g *testGateway) startCLI(t *testing.T, args ...string) *liveCLI {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	l := &liveCLI{t: t, lines: make(chan string, 1<<14), stderr: &syncBuffer{}, code: make(chan int, 1), cancel: cancel}
	go func() {
		code := run(ctx, args, strings.NewReader(""), pw, l.stderr, envOf(map[string]string{"AGENTGATE_URL": g.URL}))
		pw.Close()
		l.code <- code
	}()
	go func() {
		defer close(l.lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 32<<20)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		// A test that failed half-way still leaves nothing running.
		cancel()
		for range l.lines {
		}
	})
	return l
}

// nextEvent reads NDJSON lines until an envelope of type typ and returns
// it; the lines read are kept in seen.
func (l *liveCLI) nextEvent(typ string) envelope {
	l.t.Helper()
	deadline := time.After(cliTimeout)
	for {
		select {
		case line, ok := <-l.lines:
			if !ok {
				l.t.Fatalf("the command ended before a %s event; stderr:\n%s\nlines:\n%s", typ, l.stderr, strings.Join(l.seen, "\n"))
			}
			l.seen = append(l.seen, line)
			var env envelope
			if err := json.Unmarshal([]byte(line), &env); err != nil {
				l.t.Fatalf("line %q is not an envelope: %v", line, err)
			}
			if env.Type == typ {
				return env
			}
		case <-deadline:
			l.t.Fatalf("no %s event within %s; lines:\n%s", typ, cliTimeout, strings.Join(l.seen, "\n"))
		}
	}
}

// nextLine reads lines until one contains s.
func (l *liveCLI) nextLine(s string) string {
	l.t.Helper()
	deadline := time.After(cliTimeout)
	for {
		select {
		case line, ok := <-l.lines:
			if !ok {
				l.t.Fatalf("the command ended before a line with %q; stderr:\n%s\nlines:\n%s", s, l.stderr, strings.Join(l.seen, "\n"))
			}
			l.seen = append(l.seen, line)
			if strings.Contains(line, s) {
				return line
			}
		case <-deadline:
			l.t.Fatalf("no line with %q within %s; lines:\n%s", s, cliTimeout, strings.Join(l.seen, "\n"))
		}
	}
}

// wait reads the rest of the output and returns the exit code.
func (l *liveCLI) wait() int {
	l.t.Helper()
	deadline := time.After(cliTimeout)
	for {
		select {
		case line, ok := <-l.lines:
			if !ok {
				return <-l.code
			}
			l.seen = append(l.seen, line)
		case <-deadline:
			l.t.Fatalf("the command did not end within %s; stderr:\n%s\nlines:\n%s", cliTimeout, l.stderr, strings.Join(l.seen, "\n"))
		}
	}
}

// eventLines decodes NDJSON output into envelopes.
func eventLines(t *testing.T, out string) []envelope {
	t.Helper()
	var evs []envelope
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var env envelope
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		evs = append(evs, env)
	}
	return evs
}
