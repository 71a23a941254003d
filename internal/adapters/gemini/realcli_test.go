package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/googleai"
	"github.com/agentgate/agentgate/internal/mock/mocktest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/runs/runstest"
)

var record = flag.Bool("record", false, "TestRealCLI rewrites testdata/<case>.jsonl and .meta.json from the real CLI (then run TestGolden -update)")

// runDeadline bounds one real-CLI run against a hang, so that a CLI that
// hangs fails its test rather than the package's timeout; it is not a
// target. Every case takes a few seconds, but at load 25 (several suites at
// once on two cores) a CLI's start alone took minutes, so the bound is
// far above that.
const runDeadline = 5 * time.Minute

// TestRealCLI runs the installed gemini with the adapter's Command, in a
// home PrepareHome prepared, against the mock Gemini API for every case,
// decodes its stdout with the adapter's decoder, and checks the events,
// the outcome, and that the normalized usage agrees with what the server
// billed. The cases of oneHome share one home and directory, in one
// subtest; every other case has its own.
func TestRealCLI(t *testing.T) {
	bin := agenttest.Bin(t, "gemini")
	version := installedVersion(t, bin)
	shared := map[string]cliCase{}
	for _, c := range cliCases() {
		if slices.Contains(oneHome, c.name) {
			shared[c.name] = c
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			liveCase(t, bin, version, c, preparedHome(t), t.TempDir())
		})
	}
	t.Run("one_home", func(t *testing.T) {
		t.Parallel()
		runInOneHome(t, bin, version, shared)
	})
}

// runInOneHome runs the cases of oneHome in order, each in a subtest, in
// one home and directory, and checks that the settings PrepareHome wrote
// are as it wrote them after all.
func runInOneHome(t *testing.T, bin, version string, cases map[string]cliCase) {
	home, dir := preparedHome(t), t.TempDir()
	before, err := os.ReadFile(settingsPath(home))
	if err != nil {
		t.Fatal(err)
	}
	sessions := map[string]string{}
	for _, name := range oneHome {
		c, ok := cases[name]
		if !ok {
			t.Fatalf("oneHome names %s, which is no case", name)
		}
		t.Run(name, func(t *testing.T) {
			if c.resumes != "" {
				if c.spec.ResumeSessionID = sessions[c.resumes]; c.spec.ResumeSessionID == "" {
					t.Fatalf("%s recorded no session to resume", c.resumes)
				}
			}
			sessions[name] = liveCase(t, bin, version, c, home, dir).outcome.SessionID
		})
	}
	after, err := os.ReadFile(settingsPath(home))
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the runs changed settings.json:\n%s\nto\n%s (%v)", before, after, err)
	}
}

// liveCase runs c in home and dir, checks it, and records it with
// -record.
func liveCase(t *testing.T, bin, version string, c cliCase, home, dir string) *cliRun {
	t.Helper()
	r := runCLI(t, bin, version, c, home, dir)
	checkRun(t, c, r)
	if c.check != nil {
		c.check(t, r)
	}
	if *record && !t.Failed() {
		writeRecording(t, c.name, r.res)
	}
	return r
}

// preparedHome returns a fresh home that PrepareHome prepared.
func preparedHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	if err := New().PrepareHome(home); err != nil {
		t.Fatal(err)
	}
	return home
}

func installedVersion(t *testing.T, bin string) string {
	t.Helper()
	// The conformance suite's probe of the same binary answers it: a
	// start of Gemini's CLI costs seconds of CPU.
	out, err := runstest.Versions.Output(context.Background(), bin, New().Describe().VersionArgs, agenttest.MinimalEnv(t.TempDir()))
	if err != nil {
		t.Fatalf("%s --version: %v (output %q)", bin, err, out)
	}
	v, err := New().ParseVersion(out)
	if err != nil {
		t.Fatalf("%s --version: %v (output %q)", bin, err, out)
	}
	if v != VerifiedVersion {
		t.Logf("installed gemini %s differs from the verified %s: failures below may be the CLI's changes", v, VerifiedVersion)
	}
	return v
}

// runCLI runs one case in home and dir and decodes it.
func runCLI(t *testing.T, bin, version string, c cliCase, home, dir string) *cliRun {
	t.Helper()
	marker := "agentgate-test-" + uuid.NewString()
	srv, err := googleai.Start("127.0.0.1:0", c.scenario(marker))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	if c.setup != nil {
		c.setup(t, dir)
	}
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: c.spec, Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{}, Timeout: time.Minute, CLIVersion: version}
	if c.cliVersion != "" {
		inv.CLIVersion = c.cliVersion
	}
	a := &Adapter{extraArgs: c.extraArgs}
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	// What the supervisor copies from the gateway's environment: only
	// the names the adapter lists in PassEnv.
	gateway := map[string]string{"GOOGLE_GEMINI_BASE_URL": srv.URL}
	if !c.noKey {
		gateway["GEMINI_API_KEY"] = testKey
	}
	maps.Copy(gateway, c.env)
	env := append(agenttest.MinimalEnv(home), cmd.Env...)
	for _, name := range cmd.PassEnv {
		if v, ok := gateway[name]; ok {
			env = append(env, name+"="+v)
		}
	}

	// elapsed counts from the CLI's first model call: its start before
	// that is Node loading the CLI, which a busy machine stretches.
	first := mocktest.WatchFirstRequest(t, func() int { return len(srv.Ledger().Calls()) })
	p := agenttest.Start(t, bin, cmd.Args, env, dir, cmd.Stdin)
	deadline := time.AfterFunc(runDeadline, p.Kill)
	defer deadline.Stop()
	if c.killOnHung {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for !hung(srv.Ledger()) {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			p.Kill()
		}()
	}
	r := &cliRun{inv: inv}
	if c.signal != 0 {
		t.Cleanup(func() { killMatching(marker) })
		for line := range p.Lines() {
			if bytes.Contains(line, []byte(`"type":"tool_use"`)) {
				// Let the tool's process start first: the signal must
				// come mid-tool, which is the case.
				if !waitFor(func() bool { return len(agenttest.ProcessesMatching(marker)) > 0 }, time.Minute) {
					t.Fatalf("the tool's process did not start within a minute of its tool_use line")
				}
				if err := p.Signal(c.signal); err != nil {
					t.Fatalf("signal: %v", err)
				}
				break
			}
		}
	}
	res := p.Wait()
	r.elapsed = time.Since(first())
	if c.signal != 0 {
		r.toolOutlived = len(agenttest.ProcessesMatching(marker)) > 0
		killMatching(marker)
	}
	r.ledger = srv.Ledger()
	r.res = recorded{Exit: res.Exit, Stderr: string(res.Stderr), CLIVersion: inv.CLIVersion, stdout: res.Stdout}
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
// usage against the ledger.
func checkRun(t *testing.T, c cliCase, r *cliRun) {
	t.Helper()
	o := r.outcome
	if o.Status != c.wantStatus {
		t.Errorf("status = %s, want %s (error %+v; exit %+v; stderr …%q)", o.Status, c.wantStatus, o.Error, r.res.Exit, tail(r.res.Stderr, 300))
	}
	switch {
	case c.wantClass == "" && o.Error != nil:
		t.Errorf("error = %+v, want none", o.Error)
	case c.wantClass != "" && (o.Error == nil || o.Error.Class != c.wantClass):
		t.Errorf("error = %+v, want class %s", o.Error, c.wantClass)
	case o.Error != nil && (o.Error.Message == "" || o.Error.Retryable != o.Error.Class.Retryable()):
		t.Errorf("error = %+v", o.Error)
	}
	if got := collapse(r.events); !reflect.DeepEqual(got, c.wantTypes) {
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
	billed := normalized(r.ledger.Billed())
	if c.usageLost {
		if billed.IsZero() || !o.Usage.IsZero() {
			t.Errorf("usage = %+v with %+v billed: the case no longer loses the usage", o.Usage, billed)
		}
		billed = runs.Usage{}
	}
	if o.Usage != billed {
		t.Errorf("usage = %+v, want the ledger's billed %+v", o.Usage, billed)
	}
	// usage.updated grows to the outcome's: the last one is the result
	// line's, those before it the chat recording's so far.
	var last *runs.Usage
	for _, ev := range r.events {
		if ev.Type == runs.EventUsageUpdated {
			u := ev.Data.(runs.UsageData).Usage
			if u.InputTokens > o.Usage.InputTokens || u.OutputTokens > o.Usage.OutputTokens || last != nil && u.InputTokens < last.InputTokens {
				t.Errorf("usage.updated = %+v after %+v, outcome %+v", u, last, o.Usage)
			}
			last = &u
		}
	}
	if last != nil && *last != o.Usage {
		t.Errorf("last usage.updated = %+v, outcome %+v", *last, o.Usage)
	}
	if o.CostUSD != nil || o.SessionCostUSD != nil {
		t.Errorf("cost %v / %v: the CLI reports none", o.CostUSD, o.SessionCostUSD)
	}
}

// normalized is the usage convention's definition, applied to the
// ledger: input includes cached tokens (as Gemini's prompt count does),
// output includes the thoughts.
func normalized(u googleai.Usage) runs.Usage {
	return runs.Usage{
		InputTokens:     u.PromptTokenCount,
		CacheReadTokens: u.CachedContentTokenCount,
		OutputTokens:    u.CandidatesTokenCount + u.ThoughtsTokenCount,
		ReasoningTokens: u.ThoughtsTokenCount,
	}
}

// hung reports whether the ledger holds a request left unanswered.
func hung(l googleai.Ledger) bool {
	for _, e := range l {
		if e.Hung {
			return true
		}
	}
	return false
}

// killMatching SIGKILLs the processes whose command line carries marker:
// the tool a killed CLI left behind.
func killMatching(marker string) {
	for _, pid := range agenttest.ProcessesMatching(marker) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	agenttest.WaitGone(marker, 30*time.Second)
}

// waitFor waits until cond holds, and reports whether it did within.
func waitFor(cond func() bool, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

func writeRecording(t *testing.T, name string, rec recorded) {
	t.Helper()
	agenttest.WriteRecording(t, name, rec.stdout, rec)
}
