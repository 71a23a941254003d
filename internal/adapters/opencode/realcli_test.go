package opencode

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
)

var record = flag.Bool("record", false, "TestRealCLI rewrites testdata/<case>.jsonl and .meta.json from the real CLI (then run TestGolden -update)")

// runDeadline bounds one real-CLI run against a hang, so that a CLI that
// hangs fails its test rather than the package's timeout; it is not a
// target. Every case takes seconds, but at load 25 (several suites at
// once on two cores) a CLI's start alone took minutes, so the bound is
// far above that.
const runDeadline = 8 * time.Minute

// testKey is the key the tests give the CLI, through the variable the
// configuration names.
const testKey = "sk-agentgate-test"

// homeKeyEnv is the key variable of the configuration written to the
// home: not one the adapter always passes, so that only its reading of
// that file can pass it.
const homeKeyEnv = "AGENTGATE_TEST_OPENCODE_KEY"

// opencodeBinPath returns the npm package's command, which the gateway
// finds on its PATH.
func opencodeBinPath(t testing.TB) string {
	t.Helper()
	return agenttest.Bin(t, "opencode")
}

// opencodeBin returns the CLI the tests run, resolved as the gateway
// resolves it.
func opencodeBin(t testing.TB) string {
	t.Helper()
	bin, err := New().ResolveBinary(opencodeBinPath(t))
	if err != nil {
		t.Fatalf("resolve the opencode binary: %v; %s", err, agenttest.InstallHint)
	}
	return bin
}

// TestRealCLI runs the installed opencode with the adapter's Command,
// after its pre-run check, against the mock Chat Completions API for
// every case, decodes its stdout with the adapter's decoder, and checks
// the events, the outcome, and that the usage agrees with what the mock
// billed.
func TestRealCLI(t *testing.T) {
	bin := opencodeBin(t)
	version := installedVersion(t, bin)
	for _, c := range cliCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			home, dir := t.TempDir(), t.TempDir()
			if c.before != nil {
				first := runCLI(t, bin, version, *c.before, home, dir)
				if first.outcome.Status != runs.Succeeded {
					t.Fatalf("first run: %+v (stderr %q)", first.outcome.Error, tail(first.res.Stderr, 300))
				}
				c.spec = withResume(c.spec, first.outcome.SessionID)
			}
			r := runCLI(t, bin, version, c, home, dir)
			checkRun(t, c, r)
			if c.check != nil {
				c.check(t, r)
			}
			if *record && !t.Failed() && r.started {
				writeRecording(t, c.name, r.res)
			}
		})
	}
}

func withResume(spec func(caseEnv) runs.Spec, session string) func(caseEnv) runs.Spec {
	return func(x caseEnv) runs.Spec {
		s := spec(x)
		s.ResumeSessionID = session
		return s
	}
}

func installedVersion(t *testing.T, bin string) string {
	t.Helper()
	// The conformance suite's probe of the same binary answers it.
	out, err := runstest.Versions.Output(context.Background(), bin, New().Describe().VersionArgs, agenttest.MinimalEnv(t.TempDir()))
	if err != nil {
		t.Fatalf("%s --version: %v (output %q)", bin, err, out)
	}
	v, err := New().ParseVersion(out)
	if err != nil {
		t.Fatalf("%s --version: %v (output %q)", bin, err, out)
	}
	if v != VerifiedVersion {
		t.Logf("installed opencode %s differs from the verified %s: failures below may be the CLI's changes", v, VerifiedVersion)
	}
	return v
}

// mockConfig is an OpenCode configuration whose default model is the
// mock's, priced so that OpenCode reports a cost and declaring image input
// (imageInput), with the key read from keyEnv and a header the operator
// set.
func mockConfig(url, keyEnv string) string { return mockConfigWith(url, keyEnv, imageInput) }

// imageInput is what a model's entry needs for OpenCode to send it images.
const imageInput = `"attachment": true, "modalities": {"input": ["text", "image"], "output": ["text"]},`

// mockConfigWith is mockConfig with model, JSON members ending in a comma,
// added to the model's entry in place of imageInput.
func mockConfigWith(url, keyEnv, model string) string {
	return fmt.Sprintf(`{
  // the operator's provider, as OpenCode documents it
  "model": "mock/mock-model",
  "provider": {
    "mock": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Mock",
      "options": {"baseURL": %q, "apiKey": "{env:%s}", "headers": {"X-Operator-Setting": "kept"}},
      "models": {"mock-model": {"name": "Mock Model", "tool_call": true, "reasoning": true, %s
        "cost": {"input": %v, "output": %v, "cache_read": %v}}},
    },
  },
}`, url, keyEnv, model, priceInput, priceOutput, priceCacheRead)
}

// runCLI runs one case in home and dir: the pre-run check, then the CLI,
// as the supervisor does.
func runCLI(t *testing.T, bin, version string, c cliCase, home, dir string) *cliRun {
	t.Helper()
	x := caseEnv{marker: "agentgate-test-" + uuid.NewString(), outside: t.TempDir()}
	first := &firstRequest{sc: c.scenario(x)}
	srv, err := chat.Start("127.0.0.1:0", first)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	// What the operator gave the gateway.
	gateway := map[string]string{}
	keyEnv := "OPENAI_API_KEY"
	if c.homeConfig {
		keyEnv = homeKeyEnv
		cfgDir := configDir(home)
		if err := os.MkdirAll(cfgDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, "opencode.json"), []byte(mockConfig(srv.URL, keyEnv)), 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		gateway["OPENCODE_CONFIG_CONTENT"] = mockConfig(srv.URL, keyEnv)
	}
	if !c.noKey {
		gateway[keyEnv] = testKey
	}

	spec := c.spec(x)
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{},
		Timeout: time.Minute, CLIVersion: version}
	if c.cliVersion != "" {
		inv.CLIVersion = c.cliVersion
	}
	a := &Adapter{extraArgs: c.extraArgs, titles: c.titles}
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	// The supervisor's environment: a minimal base, the variables the
	// adapter passes through (only those), its own settings.
	env := append(agenttest.MinimalEnv(home), "TERM=dumb")
	for _, name := range cmd.PassEnv {
		if v, ok := gateway[name]; ok {
			env = append(env, name+"="+v)
		}
	}
	env = append(env, cmd.Env...)

	r := &cliRun{inv: inv, env: x, cmdEnv: env, res: recorded{CLIVersion: inv.CLIVersion, Dir: dir, Spec: spec}}
	if perr := a.Preflight(context.Background(), inv, env); perr != nil && !c.noPreflight {
		r.preflight = perr
		r.outcome = runs.Outcome{Status: runs.Failed, Error: perr}
		r.ledger = srv.Ledger()
		return r
	}
	r.started = true
	p := agenttest.Start(t, bin, cmd.Args, env, dir, cmd.Stdin)
	deadline := time.AfterFunc(runDeadline, p.Kill)
	defer deadline.Stop()
	if c.cancel {
		stopMidTool(t, p, x.marker, cmd)
	}
	res := p.Wait()
	if at := first.at(); !at.IsZero() {
		r.failing = time.Since(at)
	}
	r.res.Exit, r.res.Stderr, r.res.stdout = res.Exit, string(res.Stderr), res.Stdout
	dec := a.NewDecoder(inv)
	for _, line := range res.Stdout {
		r.events = append(r.events, dec.Decode(line)...)
	}
	r.outcome = dec.Finish(res.Exit, res.Stderr)
	r.events = append(r.events, r.outcome.Events...)
	r.ledger = srv.Ledger()
	return r
}

// firstRequest is a scenario that notes when its first request came.
type firstRequest struct {
	sc    chat.Scenario
	mu    sync.Mutex
	first time.Time
}

func (f *firstRequest) Respond(req *chat.Request) chat.Response {
	f.mu.Lock()
	if f.first.IsZero() {
		f.first = time.Now()
	}
	f.mu.Unlock()
	return f.sc.Respond(req)
}

// at returns when the first request came, or zero.
func (f *firstRequest) at() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

// stopMidTool waits for the first finished tool call and for the long
// command's process, then sends the signal the supervisor starts a stop
// with (SIGTERM, as the Command asks for no other).
func stopMidTool(t *testing.T, p *agenttest.Proc, marker string, cmd runs.Command) {
	t.Helper()
	for line := range p.Lines() {
		if bytes.Contains(line, []byte(`"type":"tool_use"`)) {
			break
		}
	}
	if !waitFor(marker, 10*time.Second) {
		t.Errorf("the command carrying %s never started", marker)
	}
	sig := syscall.SIGTERM
	if cmd.InterruptSignal != 0 {
		sig = syscall.Signal(cmd.InterruptSignal)
	}
	if err := p.Signal(sig); err != nil {
		t.Errorf("signal: %v", err)
	}
	t.Cleanup(func() { killAll(agenttest.ProcessesMatching(marker)) })
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

// killAll kills the process group of each of pids, and waits for the
// groups to be gone: a tool's shell leads a group of its own, and killing
// only the shell would leave its sleep running.
func killAll(pids []int) {
	var groups []int
	for _, pid := range pids {
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			groups = append(groups, pgid)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(30 * time.Second) // against a hang
	for _, g := range groups {
		for syscall.Kill(-g, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func writeRecording(t *testing.T, name string, rec recorded) {
	t.Helper()
	agenttest.WriteRecording(t, name, rec.stdout, rec)
}
