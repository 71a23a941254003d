package faults

// The rig driver: scripts/rig.sh does the starting, stopping and killing;
// this file runs it, reads what it recorded and finds which replica runs
// what from /proc.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/proctree"
)

// binDir holds the gateway, nats-server and mockmodel binaries, built once
// by TestMain for every case.
var binDir string

// buildErr is why they could not be built; each test fails with it.
var buildErr error

func TestMain(m *testing.M) {
	// FAULTS_BIN names binaries built elsewhere, from another commit, to
	// run the same faults against it.
	if dir := os.Getenv("FAULTS_BIN"); dir != "" {
		binDir = dir
		for _, name := range []string{"agentgate", "nats-server", "mockmodel"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				buildErr = fmt.Errorf("FAULTS_BIN: %w", err)
			}
		}
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "faults-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	buildErr = build(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles what the rig runs. The gateway is built without -race:
// the rig measures its behaviour under faults, and the race detector's
// slowdown would only stretch every wait.
func build(dir string) error {
	root, err := agenttest.RepoRoot()
	if err != nil {
		return err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	for name, pkg := range map[string]string{
		"agentgate":   "./cmd/gateway",
		"nats-server": "github.com/nats-io/nats-server/v2",
		"mockmodel":   "./cmd/mockmodel",
	} {
		cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, name), pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return nil
}

// rig is one running scripts/rig.sh deployment.
type rig struct {
	t      *testing.T
	dir    string
	script string
	env    []string
	// Gateways and Nginx are base URLs; Gateways[0] is gateway 1.
	Gateways []string
	Nginx    string

	mu   sync.Mutex
	runs map[string]bool // every run id the test saw, checked for processes at the end
}

// rigOptions say how to start a rig.
type rigOptions struct {
	// Parallel starts the 3 gateways at once; otherwise each starts after
	// the one before is ready.
	Parallel bool
	// Env is passed to every gateway (AGENTGATE_*).
	Env map[string]string
}

// requireTools fails the test when something the rig needs is missing.
func requireTools(t *testing.T) {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, tool := range []string{"bash", "curl", "setsid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: %v", tool, err)
		}
	}
	if _, err := exec.LookPath("nginx"); err != nil {
		if _, err := os.Stat("/usr/sbin/nginx"); err != nil {
			t.Fatal("nginx is missing; on Debian: apt-get install -y nginx-light")
		}
	}
}

// newRig prepares a rig in a fresh directory and arranges its stop and the
// check that nothing of it is left. start starts it.
func newRig(t *testing.T, mock *anthropic.Server, o rigOptions) *rig {
	t.Helper()
	requireTools(t)
	root, err := agenttest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "faults-rig-")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dir: filepath.Join(dir, "rig"), script: filepath.Join(root, "scripts", "rig.sh"), runs: map[string]bool{}}
	r.env = append(os.Environ(),
		"RIG_BIN="+binDir,
		"RIG_ANTHROPIC_BASE_URL="+mock.URL,
		"AGENTGATE_CLAUDE_BIN="+agenttest.ClaudeBin(t),
		"RIG_TIMEOUT=90",
		// Should this test binary die (its -timeout), the rig stops itself.
		"RIG_WATCH_PID="+strconv.Itoa(os.Getpid()),
	)
	if !o.Parallel {
		// The cold start has a case of its own; the others start the
		// gateways one by one and again, as a restart policy would, when
		// one fails to open the store on the new cluster.
		r.env = append(r.env, "RIG_START=serial", "RIG_START_RETRIES=3")
	}
	for k, v := range o.Env {
		r.env = append(r.env, k+"="+v)
	}
	t.Cleanup(func() {
		if t.Failed() {
			r.logTails()
		}
		r.stop()
		if t.Failed() && os.Getenv("FAULTS_KEEP") != "" {
			t.Logf("rig kept in %s", r.dir)
			return
		}
		os.RemoveAll(dir)
	})
	return r
}

// start runs `rig.sh start`; its error says what did not come up.
func (r *rig) start() error {
	out, err := r.sh(3*time.Minute, "start", r.dir)
	r.readEnv()
	if err != nil {
		return fmt.Errorf("rig.sh start: %v\n%s", err, out)
	}
	if strings.Contains(out, "again") {
		r.t.Logf("rig.sh start:\n%s", out)
	}
	return nil
}

// mustStart starts the rig or fails the test.
func (r *rig) mustStart() {
	r.t.Helper()
	if err := r.start(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) sh(within time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{r.script}, args...)...)
	cmd.Env = r.env
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// do runs a verb on gateway or nats node n (from 1) and fails the test
// when the script does.
func (r *rig) do(verb string, n int) {
	r.t.Helper()
	start := time.Now()
	out, err := r.sh(3*time.Minute, verb, strconv.Itoa(n), r.dir)
	r.t.Logf("rig: %s %d (%s) %s", verb, n, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	if err != nil {
		r.t.Fatalf("rig.sh %s %d: %v\n%s", verb, n, err, out)
	}
}

// stop stops the rig and checks that none of its processes, and no
// process of any run it served, is left.
func (r *rig) stop() {
	r.t.Helper()
	if _, err := os.Stat(filepath.Join(r.dir, "rig.env")); err != nil {
		return
	}
	if out, err := r.sh(5*time.Minute, "stop", r.dir); err != nil {
		r.t.Errorf("rig.sh stop: %v\n%s", err, out)
	}
	if out, err := r.sh(time.Minute, "leftovers", r.dir); err != nil {
		r.t.Errorf("processes of the rig left after it stopped:\n%s", out)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.runs {
		if pids, _ := proctree.New().Find(id); len(pids) > 0 {
			r.t.Errorf("run %s: processes %v left after the rig stopped", id, describe(pids))
			proctree.New().Kill(context.Background(), id)
		}
	}
}

// readEnv loads rig.env and sets the rig's URLs from it; only start calls
// it, before anything else reads them.
func (r *rig) readEnv() {
	env := r.loadEnv()
	r.Gateways = nil
	for i := 1; i <= 3; i++ {
		r.Gateways = append(r.Gateways, env[fmt.Sprintf("GATEWAY%d_URL", i)])
	}
	r.Nginx = env["NGINX_URL"]
}

// loadEnv reads rig.env: one KEY='VALUE' a line.
func (r *rig) loadEnv() map[string]string {
	env := map[string]string{}
	b, err := os.ReadFile(filepath.Join(r.dir, "rig.env"))
	if err != nil {
		return env
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			env[k] = strings.Trim(v, "'")
		}
	}
	return env
}

// pid is the recorded pid of role ("GATEWAY2", "NATS1"), 0 when none.
func (r *rig) pid(role string) int {
	n, _ := strconv.Atoi(r.loadEnv()[role+"_PID"])
	return n
}

// track records a run id, to be checked for processes when the rig stops.
func (r *rig) track(id string) {
	r.mu.Lock()
	r.runs[id] = true
	r.mu.Unlock()
}

// owner returns the gateway (1-3) whose process tree holds the run's
// processes, 0 when none does.
func (r *rig) owner(id string) int {
	pids, _ := proctree.New().Find(id)
	gateways := map[int]int{}
	for i := 1; i <= 3; i++ {
		gateways[r.pid(fmt.Sprintf("GATEWAY%d", i))] = i
	}
	for _, pid := range pids {
		for p := pid; p > 1; p = ppid(p) {
			if n, ok := gateways[p]; ok {
				return n
			}
		}
	}
	return 0
}

// ppid reads a process's parent from /proc, 0 when it is gone.
func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// describe names processes by pid and command line, for failure messages.
func describe(pids []int) string {
	var parts []string
	for _, pid := range pids {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		parts = append(parts, fmt.Sprintf("%d(%s)", pid, strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))))
	}
	return strings.Join(parts, ", ")
}

// logTails logs the end of every gateway's and nats node's log and the
// errors nginx logged, for a failed case.
func (r *rig) logTails() {
	for _, name := range []string{"gateway1", "gateway2", "gateway3", "nats1", "nats2", "nats3"} {
		b, err := os.ReadFile(filepath.Join(r.dir, name, "log"))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		var keep []string
		for _, l := range lines {
			// Warnings and errors tell what went wrong; info lines are
			// the run transitions.
			if strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"warn"`) ||
				strings.Contains(l, "[ERR]") || strings.Contains(l, "[WRN]") || !strings.HasPrefix(l, "{") && !strings.Contains(l, "[INF]") {
				keep = append(keep, l)
			}
		}
		if len(keep) > 25 {
			keep = keep[len(keep)-25:]
		}
		if len(keep) > 0 {
			r.t.Logf("%s log (warnings and errors, last %d):\n%s", name, len(keep), strings.Join(keep, "\n"))
		}
	}
}

// logged returns when the gateway of role ("gateway1") first logged msg
// at or after since, as its log line's own time says.
func (r *rig) logged(role, msg string, since time.Time) (time.Time, bool) {
	b, err := os.ReadFile(filepath.Join(r.dir, role, "log"))
	if err != nil {
		return time.Time{}, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		var line struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == msg && !line.Time.Before(since) {
			return line.Time, true
		}
	}
	return time.Time{}, false
}

// leader returns the nats node (1-3) that leads stream, as the nodes'
// monitoring endpoint tells, 0 when no live node knows.
func (r *rig) leader(stream string) int {
	env := r.loadEnv()
	for i := 1; i <= 3; i++ {
		resp, err := client.Get("http://127.0.0.1:" + env[fmt.Sprintf("NATS%d_MONITOR_PORT", i)] + "/jsz?accounts=true&streams=true")
		if err != nil {
			continue
		}
		var jsz struct {
			AccountDetails []struct {
				Streams []struct {
					Name    string `json:"name"`
					Cluster *struct {
						Leader string `json:"leader"`
					} `json:"cluster"`
				} `json:"stream_detail"`
			} `json:"account_details"`
		}
		err = json.NewDecoder(resp.Body).Decode(&jsz)
		resp.Body.Close()
		if err != nil {
			continue
		}
		for _, a := range jsz.AccountDetails {
			for _, st := range a.Streams {
				// The rig names its nodes n1, n2 and n3.
				if st.Name == stream && st.Cluster != nil && len(st.Cluster.Leader) == 2 && st.Cluster.Leader[0] == 'n' {
					if n := int(st.Cluster.Leader[1] - '0'); n >= 1 && n <= 3 {
						return n
					}
				}
			}
		}
	}
	return 0
}
