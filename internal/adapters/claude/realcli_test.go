package claude

import (
	"bytes"
	"encoding/json"
	"flag"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

var slow = flag.Bool("slow", false, "TestRealCLI runs the cases that wait half a minute or more too")

var record = flag.Bool("record", false, "TestRealCLI rewrites testdata/<case>.jsonl and .meta.json from the real CLI (then run TestGolden -update)")

// runDeadline bounds one real-CLI run against a hang, so that a CLI that
// hangs fails its test rather than the package's timeout; it is not a
// target. Every case takes a few seconds but long_tool, which
// waits 31 s, but at load 25 (several suites at
// once on two cores) a CLI's start alone took minutes, so the bound is
// far above that.
const runDeadline = 5 * time.Minute

// TestRealCLI runs the installed claude with the adapter's Command against
// the mock model server for every case but those a conformance case
// covers (cliCase.coveredBy), decodes its stdout with the
// adapter's decoder, and checks the events, the outcome, and that the
// normalized usage and cost agree with what the server billed and what
// the CLI reported.
func TestRealCLI(t *testing.T) {
	bin := agenttest.ClaudeBin(t)
	version := installedVersion(t, bin)
	for _, c := range cliCases() {
		t.Run(c.name, func(t *testing.T) {
			if c.slow && !*slow && !*record {
				t.Skip("a slow case: run with -slow (its recording is replayed by TestGolden)")
			}
			if c.coveredBy != "" && !*record {
				t.Skip("TestConformance/" + c.coveredBy + " runs this scenario live (its recording is replayed by TestGolden; -record runs it)")
			}
			t.Parallel()
			home, dir := t.TempDir(), t.TempDir()
			if c.before != nil {
				first := runCLI(t, bin, version, *c.before, home, dir)
				if first.outcome.Status != runs.Succeeded {
					t.Fatalf("first run: %+v", first.outcome.Error)
				}
			}
			r := runCLI(t, bin, version, c, home, dir)
			checkRun(t, c, r)
			if c.check != nil {
				c.check(t, r)
			}
			if *record && !t.Failed() {
				writeRecording(t, c.name, r.res)
			}
		})
	}
}

func installedVersion(t *testing.T, bin string) string {
	t.Helper()
	p := agenttest.Start(t, bin, New().Describe().VersionArgs, agenttest.MinimalEnv(t.TempDir()), t.TempDir(), nil)
	res := p.Wait()
	out := bytes.Join(res.Stdout, []byte("\n"))
	v, err := New().ParseVersion(out)
	if err != nil {
		t.Fatalf("%s --version: %v (stderr %q)", bin, err, res.Stderr)
	}
	if v != VerifiedVersion {
		t.Logf("installed claude %s differs from the verified %s: failures below may be the CLI's changes", v, VerifiedVersion)
	}
	return v
}

// runCLI runs one case in home and dir and decodes it.
func runCLI(t *testing.T, bin, version string, c cliCase, home, dir string) *cliRun {
	t.Helper()
	marker := "agentgate-test-" + uuid.NewString()
	srv, err := anthropic.Start("127.0.0.1:0", c.scenario(marker))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	id := c.runID
	if id == "" {
		id = uuid.Must(uuid.NewV7()).String()
	}
	inv := runs.Invocation{RunID: id, Spec: c.spec, Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{}, Timeout: c.timeout, CLIVersion: version}
	if c.cliVersion != "" {
		inv.CLIVersion = c.cliVersion
	}
	if inv.Timeout == 0 {
		inv.Timeout = time.Minute
	}
	a := New()
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	// What the supervisor copies from the gateway's environment: only
	// the names the adapter lists in PassEnv.
	gateway := map[string]string{"ANTHROPIC_BASE_URL": srv.URL}
	if !c.noKey {
		gateway["ANTHROPIC_API_KEY"] = testKey
	}
	env := append(agenttest.MinimalEnv(home), cmd.Env...)
	for _, name := range cmd.PassEnv {
		if v, ok := gateway[name]; ok {
			env = append(env, name+"="+v)
		}
	}

	start := time.Now()
	p := agenttest.Start(t, bin, append(cmd.Args, c.extraArgs...), env, dir, cmd.Stdin)
	deadline := time.AfterFunc(runDeadline, p.Kill)
	defer deadline.Stop()
	if c.interrupt {
		// Interrupt once the tool's process runs: the case is about
		// stopping a running tool, not a stream.
		lines := p.Lines()
		for len(agenttest.ProcessesMatching(marker)) == 0 {
			select {
			case _, ok := <-lines:
				if !ok {
					t.Fatal("claude's output ended before the tool's process started")
				}
			case <-time.After(20 * time.Millisecond):
			}
		}
		if err := p.Signal(syscall.Signal(cmd.InterruptSignal)); err != nil {
			t.Fatalf("interrupt: %v", err)
		}
	}
	res := p.Wait()
	elapsed := time.Since(start)
	if c.interrupt {
		// The test plays the supervisor, which records why it stopped
		// the process.
		res.Exit.Reason = "cancelled"
		if left := agenttest.WaitGone(marker, 3*time.Second); len(left) > 0 {
			t.Errorf("tool processes left after the interrupt: %v", left)
		}
	}

	r := &cliRun{inv: inv, ledger: srv.Ledger(), elapsed: elapsed,
		res: recorded{Exit: res.Exit, Stderr: string(res.Stderr), CLIVersion: inv.CLIVersion, stdout: res.Stdout}}
	dec := a.NewDecoder(inv)
	for _, line := range res.Stdout {
		r.events = append(r.events, dec.Decode(line)...)
		if bytes.Contains(line, []byte(`"type":"result"`)) {
			var l wireLine
			if json.Unmarshal(line, &l) == nil && l.Type == "result" {
				r.resultLine = &l
			}
		}
	}
	r.outcome = dec.Finish(res.Exit, res.Stderr)
	r.events = append(r.events, r.outcome.Events...)
	return r
}

// checkRun asserts what every case shares: status, class, event order,
// usage against the ledger, cost against the result line.
func checkRun(t *testing.T, c cliCase, r *cliRun) {
	t.Helper()
	o := r.outcome
	if o.Status != c.wantStatus {
		t.Errorf("status = %s, want %s (error %+v; exit %+v; stderr %q)", o.Status, c.wantStatus, o.Error, r.res.Exit, tail(r.res.Stderr, 300))
	}
	switch {
	case c.wantClass == "" && o.Error != nil:
		t.Errorf("error = %+v, want none", o.Error)
	case c.wantClass != "" && (o.Error == nil || o.Error.Class != c.wantClass):
		t.Errorf("error = %+v, want class %s", o.Error, c.wantClass)
	}
	if t.Failed() {
		for _, l := range r.res.stdout[max(len(r.res.stdout)-3, 0):] {
			t.Logf("stdout ends with: %s", tail(string(l), 300))
		}
	}
	if got := collapse(r.events); !slices.Equal(got, c.wantTypes) {
		t.Errorf("event types =\n  %v\nwant\n  %v", got, c.wantTypes)
	}
	for _, ev := range r.events {
		if ev.Type == runs.EventAgentUnparsed {
			t.Errorf("unparsed line: %+v", ev.Data)
		}
		if _, err := json.Marshal(ev); err != nil {
			t.Errorf("event %s does not marshal: %v", ev.Type, err)
		}
	}

	billed := fromAnthropic(r.ledger.Billed())
	if o.Usage != billed {
		t.Errorf("usage = %+v, want the ledger's billed %+v", o.Usage, billed)
	}
	checkUsageUpdates(t, r.events, o)
	if o.CostUSD != nil {
		t.Errorf("run cost %v: the CLI reports the session's, which the supervisor turns into the run's", *o.CostUSD)
	}
	if r.resultLine == nil {
		if o.SessionCostUSD != nil {
			t.Errorf("session cost %v without a result line", *o.SessionCostUSD)
		}
		return
	}
	want := resultCost(t, r.res.stdout)
	if o.SessionCostUSD == nil || *o.SessionCostUSD != want {
		t.Errorf("session cost = %v, want the result line's %v", o.SessionCostUSD, want)
	}
	if !billed.IsZero() && want <= 0 {
		t.Errorf("billed %+v but the CLI reported cost %v", billed, want)
	}
}

// resultCost reads total_cost_usd from the result line without the
// decoder's types.
func resultCost(t *testing.T, stdout [][]byte) float64 {
	t.Helper()
	for _, line := range stdout {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["type"] == "result" {
			c, _ := m["total_cost_usd"].(float64)
			return c
		}
	}
	t.Fatal("no result line")
	return 0
}

// fromAnthropic is the usage convention's definition, applied to the
// ledger: input includes both cache counts.
func fromAnthropic(u anthropic.Usage) runs.Usage {
	return runs.Usage{
		InputTokens:      u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
		OutputTokens:     u.OutputTokens,
	}
}

func writeRecording(t *testing.T, name string, rec recorded) {
	t.Helper()
	agenttest.WriteRecording(t, name, rec.stdout, rec)
}
