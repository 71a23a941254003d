package codex

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/mockhttp"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
)

var record = flag.Bool("record", false, "TestRealCLI rewrites testdata/<case>.jsonl and .meta.json from the real CLI (then run TestGolden -update)")

// runDeadline bounds one real-CLI run against a hang, so that a CLI that
// hangs fails its test rather than the package's timeout; it is not a
// target. Every case takes about a second, but at load 25 (several suites at
// once on two cores) a CLI's start alone took minutes, so the bound is
// far above that.
const runDeadline = 5 * time.Minute

// testKeyEnv is the variable the mock provider reads its key from.
const testKeyEnv = "AGENTGATE_TEST_CODEX_KEY"

// testKey is the key the tests give the CLI.
const testKey = "sk-agentgate-test"

// codexBin returns the native codex the tests run, resolved from the
// npm launcher as the gateway resolves it.
func codexBin(t *testing.T) string {
	t.Helper()
	bin, err := New().ResolveBinary(agenttest.Bin(t, "codex"))
	if err != nil {
		t.Fatalf("resolve the native codex: %v; %s", err, agenttest.InstallHint)
	}
	return bin
}

// TestRealCLI runs the installed codex app-server through the adapter's
// Command and a conversation driven by its decoder, against the mock
// Responses API, for every case: it checks the events, the outcome, and
// that the usage agrees with what the mock billed.
func TestRealCLI(t *testing.T) {
	bin := codexBin(t)
	version := installedVersion(t, bin)
	for _, c := range cliCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			home, dir := t.TempDir(), t.TempDir()
			if c.before != nil {
				first := runCLI(t, bin, version, *c.before, home, dir)
				if first.outcome.Status != runs.Succeeded {
					t.Fatalf("first run: %+v", first.outcome.Error)
				}
				c.spec.ResumeSessionID = first.outcome.SessionID
				if c.beforeCheck != nil {
					c.beforeCheck(t, first)
				}
			}
			r := runCLI(t, bin, version, c, home, dir)
			checkRun(t, c, r)
			if c.check != nil {
				c.check(t, r)
			}
			if *record && !t.Failed() && recordedCase(c) {
				writeRecording(t, c.name, r.res)
			}
		})
	}
}

// installedVersion asks bin for its version through the cache the test
// binary's supervisors share, so that one start answers them all.
func installedVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := runstest.Versions.Output(context.Background(), bin, New().Describe().VersionArgs, agenttest.MinimalEnv(t.TempDir()))
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	v, err := New().ParseVersion(out)
	if err != nil {
		t.Fatal(err)
	}
	if v != VerifiedVersion {
		t.Logf("installed codex %s differs from the verified %s: failures below may be the CLI's changes", v, VerifiedVersion)
	}
	return v
}

// mockConfig is config.toml for a mock at url whose key is read from
// testKeyEnv, with extra lines in its table.
func mockConfig(url, extra string) string {
	return fmt.Sprintf(`model_provider = "mock"
[model_providers.mock]
name = "mock"
base_url = %q
wire_api = "responses"
env_key = %q
%s`, url, testKeyEnv, extra)
}

// runCLI runs one case in home and dir: the pre-run check, then the
// conversation, as the supervisor does.
func runCLI(t *testing.T, bin, version string, c cliCase, home, dir string) *cliRun {
	t.Helper()
	marker := "agentgate-test-" + uuid.NewString()
	first := mockhttp.NewFirstRequest(c.scenario(marker))
	srv, err := openai.Start("127.0.0.1:0", first)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	switch {
	case c.builtinProvider:
		_ = os.Remove(filepath.Join(home, "config.toml"))
	default:
		if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(mockConfig(srv.URL, c.providerExtra)), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: c.spec, Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{},
		Timeout: time.Minute, CLIVersion: version}
	if inv.Spec.Model == "" {
		inv.Spec.Model = openai.DefaultModel
	}
	a := &Adapter{extraArgs: c.extraArgs, methods: c.methods}
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	gateway := map[string]string{}
	if !c.noKey {
		gateway[testKeyEnv] = testKey
	}
	env := append(agenttest.MinimalEnv(home), cmd.Env...)
	for _, name := range cmd.PassEnv {
		if v, ok := gateway[name]; ok {
			env = append(env, name+"="+v)
		}
	}
	r := &cliRun{inv: inv, marker: marker, res: recorded{CLIVersion: version, Dir: dir}}
	if perr := a.Preflight(context.Background(), inv, env); perr != nil && !c.noPreflight {
		r.preflight = perr
		r.outcome = runs.Outcome{Status: runs.Failed, Error: perr}
		r.ledger = srv.Ledger()
		return r
	}
	dec := a.NewDecoder(inv).(*decoder)
	start := time.Now()
	held := func() bool {
		for _, e := range srv.Ledger() {
			if e.Hung {
				return true
			}
		}
		return false
	}
	conv := converse(t, bin, cmd.Args, env, dir, dec, c, marker, held)
	r.elapsed, r.stopping = time.Since(start), conv.stopping
	if at := first.At(); !at.IsZero() {
		r.failing = time.Since(at)
	}
	r.events, r.res.Exit, r.res.Stderr, r.res.stdout = conv.events, conv.exit, conv.stderr, conv.stdout
	r.outcome = dec.Finish(conv.exit, []byte(conv.stderr))
	r.events = append(r.events, r.outcome.Events...)
	r.ledger = srv.Ledger()
	return r
}

// conversation is what converse saw.
type conversation struct {
	events []runs.Event
	stdout [][]byte
	stderr string
	exit   runs.Exit
	// stoppedAt is when the deadline's interrupt was sent (unix
	// nanoseconds, 0 if never), and stopping how long the CLI took from
	// there to exit.
	stoppedAt atomic.Int64
	stopping  time.Duration
}

// converse runs the CLI and holds the decoder's conversation on its
// stdin, the way the supervisor's process runner does: Open first, then
// whatever Pending returns after each line, and stdin closed when the
// decoder says so. A case that interrupts sends the decoder's Interrupt
// once a command runs; one with a deadline sends it then, and kills the
// process group a grace period later.
func converse(t *testing.T, bin string, args, env []string, dir string, dec *decoder, c cliCase, marker string, held func() bool) *conversation {
	t.Helper()
	conv := &conversation{}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // guards writes to stdin
	closed := false
	write := func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		if len(b) > 0 && !closed {
			_, _ = stdin.Write(b)
		}
	}
	closeIn := func() {
		mu.Lock()
		defer mu.Unlock()
		if !closed {
			closed = true
			stdin.Close()
		}
	}
	var exited atomic.Bool // the process was reaped: no signal may reach its reused pid
	kill := func() {
		if !exited.Load() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	stopper := time.AfterFunc(runDeadline, func() {
		conv.stoppedAt.CompareAndSwap(0, time.Now().UnixNano())
		write(dec.Interrupt())
		time.AfterFunc(3*time.Second, kill)
	})
	defer stopper.Stop()
	hardStop := time.AfterFunc(runDeadline+5*time.Second, kill)
	defer hardStop.Stop()
	if c.deadline > 0 {
		// A case's deadline counts from the state it is about, the
		// mock holding the CLI's request, not from the start, which
		// takes seconds more on a loaded machine.
		go func() {
			for !held() {
				if exited.Load() {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			stopper.Reset(c.deadline)
		}()
	}

	write(dec.Open())
	interrupted := false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := bytes.Clone(sc.Bytes())
		conv.stdout = append(conv.stdout, line)
		conv.events = append(conv.events, dec.Decode(line)...)
		out, done := dec.Pending()
		write(out)
		if done {
			closeIn()
		}
		if c.interrupt && !interrupted && bytes.Contains(line, []byte(`"type":"commandExecution"`)) {
			interrupted = true
			go func() {
				// Let the command's process start, then stop the turn.
				if !waitFor(marker, 5*time.Second) {
					t.Errorf("the command carrying %s never started", marker)
				}
				write(dec.Interrupt())
			}()
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	exited.Store(true)
	if at := conv.stoppedAt.Load(); at != 0 {
		conv.stopping = time.Since(time.Unix(0, at))
	}
	closeIn()
	conv.stderr = stderr.String()
	conv.exit = exitOf(cmd.ProcessState, err)
	return conv
}

// waitFor waits until a process whose command line holds marker runs.
func waitFor(marker string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if len(agenttest.ProcessesMatching(marker)) > 0 {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func exitOf(ps *os.ProcessState, err error) runs.Exit {
	if ps == nil {
		return runs.Exit{Code: -1, Reason: fmt.Sprint(err)}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return runs.Exit{Code: -1, Signal: unix.SignalName(ws.Signal())}
	}
	return runs.Exit{Code: ps.ExitCode()}
}

func writeRecording(t *testing.T, name string, rec recorded) {
	t.Helper()
	agenttest.WriteRecording(t, name, rec.stdout, rec)
}
