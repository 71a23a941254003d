package copilot

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/mockhttp"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

var record = flag.Bool("record", false, "TestRealCLI rewrites testdata/<case>.jsonl and .meta.json from the real CLI (then run TestGolden -update)")

// runDeadline bounds one real-CLI run against a hang, so that a CLI that
// hangs fails its test rather than the package's timeout; it is not a
// target. Most take about two seconds, the persistent 500 about
// twenty, but at load 25 (several suites at
// once on two cores) a CLI's start alone took minutes, so the bound is
// far above that.
const runDeadline = 5 * time.Minute

// recorded is a recording's meta data: what Finish needs besides stdout.
// Usage is the usage file the CLI wrote, absent when it wrote none.
type recorded struct {
	RunID      string          `json:"run_id"`
	Home       string          `json:"home"`
	Dir        string          `json:"dir"`
	Exit       runs.Exit       `json:"exit"`
	Stderr     string          `json:"stderr"`
	CLIVersion string          `json:"cli_version"`
	Usage      json.RawMessage `json:"usage,omitempty"`
	stdout     [][]byte
}

// copilotBin returns the native copilot the tests run, resolved from the
// npm launcher as the gateway resolves it.
func copilotBin(t *testing.T) string {
	t.Helper()
	bin, err := New().ResolveBinary(agenttest.Bin(t, "copilot"))
	if err != nil {
		t.Fatalf("resolve the native copilot: %v; %s", err, agenttest.InstallHint)
	}
	return bin
}

// TestRealCLI runs the installed copilot through the adapter's Command
// and decoder against the mock Responses API, for every case: it checks
// the events, the outcome, that the usage agrees with what the mock
// billed, and that the usage file is gone afterwards.
func TestRealCLI(t *testing.T) {
	bin := copilotBin(t)
	cache := testCache
	version := installedVersion(t, bin, cache) // also unpacks the cache once, before the parallel runs
	for _, c := range cliCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, bin, version, cache, c)
			checkRun(t, c, r)
			if c.check != nil && !t.Failed() {
				c.check(t, r)
			}
			if t.Failed() {
				t.Logf("stdout of the failed run:\n%s", bytes.Join(r.res.stdout, []byte("\n")))
			}
			if *record && !t.Failed() {
				writeRecording(t, c.name, r.res)
			}
		})
	}
}

func installedVersion(t *testing.T, bin, cache string) string {
	t.Helper()
	cmd := exec.Command(bin, New().Describe().VersionArgs...)
	cmd.Env = append(agenttest.MinimalEnv(t.TempDir()), "COPILOT_CACHE_HOME="+cache)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	v, err := New().ParseVersion(out)
	if err != nil {
		t.Fatal(err)
	}
	if v != VerifiedVersion {
		t.Logf("installed copilot %s differs from the verified %s: failures below may be the CLI's changes", v, VerifiedVersion)
	}
	return v
}

// keptFiles is the real file system, keeping what the decoder read, for
// the recording.
type keptFiles struct {
	runs.HostFiles
	read []byte
}

func (f *keptFiles) ReadFile(name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	if filepath.Base(filepath.Dir(name)) == usageDir {
		f.read = b // not the session's record, which the decoder reads as the run goes
	}
	return b, err
}

// runCLI runs one case as the supervisor would: the command's arguments,
// environment and stdin, then the decoder over stdout and Finish.
func runCLI(t *testing.T, bin, version, cache string, c cliCase) *cliRun {
	t.Helper()
	home, dir := c.home, c.dir
	if home == "" {
		home, dir = t.TempDir(), t.TempDir()
	}
	marker := "agentgate-test-" + uuid.NewString()
	first := mockhttp.NewFirstRequest(c.scenario(marker))
	srv, err := openai.Start("127.0.0.1:0", first, openai.RequireKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: c.spec, Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{},
		Timeout: time.Minute, CLIVersion: version}
	a := &Adapter{extraArgs: c.extraArgs}
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	gateway := providerEnv(srv.URL)
	if c.env != nil {
		gateway = c.env(srv.URL)
	}
	env := append(agenttest.MinimalEnv(home), "TERM=dumb", "COPILOT_CACHE_HOME="+cache)
	env = append(env, cmd.Env...)
	for _, name := range cmd.PassEnv {
		if v, ok := gateway[name]; ok {
			env = append(env, name+"="+v)
		}
	}
	r := &cliRun{inv: inv, marker: marker, res: recorded{RunID: inv.RunID, Home: home, Dir: dir, CLIVersion: version}}
	if c.ownTemp {
		tmp := filepath.Join(home, "tmp")
		r.outside = outsidePath(marker)
		if err := errors.Join(os.MkdirAll(tmp, 0o700), os.MkdirAll(filepath.Dir(r.outside), 0o700)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(filepath.Dir(r.outside)) })
		env = append(env, "TMPDIR="+tmp)
	}

	var signalled atomic.Int64 // unix nanoseconds of the stop signal
	p := agenttest.Start(t, bin, cmd.Args, env, dir, cmd.Stdin)
	killer := time.AfterFunc(runDeadline, p.Kill)
	defer killer.Stop()
	if c.signal != 0 {
		go func() {
			for l := range p.Lines() {
				if bytes.Contains(l, []byte(`"type":"tool.execution_start"`)) {
					if !waitFor(marker, 10*time.Second) {
						t.Errorf("the command carrying %s never started", marker)
					}
					signalled.Store(time.Now().UnixNano())
					_ = p.Signal(c.signal)
					return
				}
			}
		}()
	}
	res := p.Wait()
	if at := first.At(); !at.IsZero() {
		r.failing = time.Since(at)
	}
	if at := signalled.Load(); at != 0 {
		r.stopping = time.Since(time.Unix(0, at))
	}
	r.res.Exit, r.res.Stderr, r.res.stdout = res.Exit, string(res.Stderr), res.Stdout

	files := &keptFiles{}
	dec := newDecoder(inv, files)
	for _, l := range res.Stdout {
		r.events = append(r.events, dec.Decode(l)...)
	}
	r.outcome = dec.Finish(res.Exit, res.Stderr)
	r.events = append(r.events, r.outcome.Events...)
	r.res.Usage = files.read
	if _, err := os.Stat(UsagePath(inv)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the usage file %s is still there after Finish (%v)", UsagePath(inv), err)
	}
	r.ledger = srv.Ledger()
	return r
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

func writeRecording(t *testing.T, name string, rec recorded) {
	t.Helper()
	agenttest.WriteRecording(t, name, rec.stdout, rec)
}

// stdoutLines splits a recording into its lines.
func stdoutLines(b []byte) [][]byte {
	var lines [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(strings.TrimSpace(string(l))) > 0 {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestRealCLIResume resumes a session with the real CLI: it keeps the
// session's id and history, and its usage file counts the whole session,
// which the decoder reports as the session's usage for the supervisor to
// subtract the first run's from.
func TestRealCLIResume(t *testing.T) {
	bin := copilotBin(t)
	version := installedVersion(t, bin, testCache)
	home, dir := t.TempDir(), t.TempDir()
	first := runCLI(t, bin, version, testCache, cliCase{name: "resume_first", home: home, dir: dir,
		scenario: func(string) openai.Scenario { return openai.TextAnswer("First.") }, spec: runs.Spec{Prompt: "remember the word apricot"}})
	if first.outcome.Status != runs.Succeeded || first.outcome.SessionID != first.inv.RunID ||
		first.outcome.SessionUsage == nil || *first.outcome.SessionUsage != first.outcome.Usage {
		t.Fatalf("first run: %+v %+v", first.outcome, first.outcome.Error)
	}
	second := runCLI(t, bin, version, testCache, cliCase{name: "resume", home: home, dir: dir,
		scenario: func(string) openai.Scenario { return openai.TextAnswer("Resumed.") },
		spec:     runs.Spec{Prompt: "which word?", ResumeSessionID: first.outcome.SessionID}})
	o := second.outcome
	if o.Status != runs.Succeeded || o.SessionID != first.outcome.SessionID || o.Result != "Resumed." {
		t.Fatalf("resumed run: %+v %+v", o, o.Error)
	}
	own := normalized(second.ledger.Billed())
	if o.SessionUsage == nil || o.SessionUsage.Sub(first.outcome.Usage) != own || !o.Usage.IsZero() {
		t.Errorf("session usage %+v, run usage %+v: want the session's total, whose growth over the first run's %+v is this run's billing %+v",
			o.SessionUsage, o.Usage, first.outcome.Usage, own)
	}
	reqs := second.ledger.Responses()
	if len(reqs) == 0 || !strings.Contains(inputText(reqs[0].Request), "apricot") {
		t.Error("the resumed request does not carry the first prompt")
	}
	// Usage during the run counts only this run's own requests (those its
	// assistant messages name), never the session's total.
	for _, ev := range second.events {
		if ev.Type != runs.EventUsageUpdated {
			continue
		}
		if d, ok := ev.Data.(runs.UsageData); !ok || d.Usage != own {
			t.Errorf("a resumed run emitted usage.updated %+v, want its own billing %+v, not the session's total", ev.Data, own)
		}
	}

	gone := runCLI(t, bin, version, testCache, cliCase{name: "resume_unknown", home: home, dir: dir,
		scenario: func(string) openai.Scenario { return openai.TextAnswer("never") },
		spec:     runs.Spec{Prompt: "hi", ResumeSessionID: "0196f0c2-7e1a-7000-8000-00000000dead"}})
	if e := gone.outcome.Error; e == nil || e.Class != runs.SessionNotFound || !strings.Contains(e.Hint, "resume_session_id") {
		t.Errorf("an unknown session: %+v", e)
	}
}

func inputText(r openai.Request) string {
	var b strings.Builder
	for _, it := range r.Input {
		b.WriteString(it.Text)
		b.WriteByte('\n')
	}
	return b.String()
}
