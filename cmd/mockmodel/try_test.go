package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mockText is the answer of every mock's text scenario, the one
// `try.sh --check` runs.
const mockText = "Hello from the mock."

// repoRoot is the repository's root: this package is cmd/mockmodel.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// sseEvent is one event of the gateway's stream, as try.sh prints it.
type sseEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// sseEvents parses the data lines of an SSE stream in out.
func sseEvents(t *testing.T, out []byte) []sseEvent {
	t.Helper()
	var events []sseEvent
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e sseEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Errorf("data line %q: %v", line, err)
			continue
		}
		events = append(events, e)
	}
	return events
}

// mockURLRE finds the mock's URL in try.sh's output.
var mockURLRE = regexp.MustCompile(`try: the mock model serves (http://127\.0\.0\.1:\d+)`)

// TestTryCheck runs `scripts/try.sh --check AGENT` for every agent, with
// its real CLI, and checks that the run it makes through the gateway
// succeeded with the mock's text, and that the script stopped the
// gateway and the mock when it ended. The CLIs are the ones
// scripts/install-agents.sh installs; the agents run one after another,
// for a 2-core machine.
func TestTryCheck(t *testing.T) {
	root := repoRoot(t)
	script := filepath.Join(root, "scripts", "try.sh")
	for _, agent := range []string{"claude", "codex", "copilot", "gemini", "opencode", "qwen", "cline"} {
		t.Run(agent, func(t *testing.T) {
			bin := filepath.Join(root, "tools", "agents", "node_modules", ".bin", agent)
			if _, err := os.Stat(bin); err != nil {
				t.Fatalf("the %s CLI is not installed (%v): run scripts/install-agents.sh", agent, err)
			}
			addr := freeAddr(t)
			out, err := runTry(t, script, root, addr, agent)
			if err != nil {
				t.Fatalf("try.sh --check %s: %v\n%s", agent, err, out)
			}
			var completed *sseEvent
			sawText := false
			for _, e := range sseEvents(t, out) {
				switch e.Type {
				case "message.completed":
					var m struct{ Text string }
					_ = json.Unmarshal(e.Data, &m)
					sawText = sawText || m.Text == mockText
				case "run.completed":
					completed = &e
				}
			}
			if completed == nil {
				t.Fatalf("no run.completed in the output:\n%s", out)
			}
			var done struct{ Status, Result string }
			if err := json.Unmarshal(completed.Data, &done); err != nil {
				t.Fatal(err)
			}
			if done.Status != "succeeded" || done.Result != mockText || !sawText {
				t.Errorf("run.completed = %s, message %q seen: %v", completed.Data, mockText, sawText)
			}
			// Both servers are gone: try.sh waited for them.
			m := mockURLRE.FindSubmatch(out)
			if m == nil {
				t.Fatalf("try.sh did not say where the mock serves:\n%s", out)
			}
			for _, a := range []string{addr, strings.TrimPrefix(string(m[1]), "http://")} {
				if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
					c.Close()
					t.Errorf("%s still accepts connections after try.sh ended", a)
				}
			}
		})
	}
}

// runTry runs try.sh --check agent with the gateway on addr and a data
// directory of the test's, and returns what it printed. A try.sh that
// hangs is stopped with its whole process group, as the script itself
// stops its children on SIGTERM; after it ends, whatever is left of the
// group is killed.
func runTry(t *testing.T, script, root, addr, agent string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "--check", agent)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "AGENTGATE_ADDR="+addr, "AGENTGATE_DATA_DIR="+t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	t.Logf("try.sh --check %s took %s", agent, time.Since(start).Round(time.Millisecond))
	return out.Bytes(), err
}
