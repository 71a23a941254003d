package proctree_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/proctree/proctreetest"
)

// buildGateway compiles the gateway's binary, the reaper a gateway falls
// back to when the light one is not installed beside it: with cgo ("1"),
// as go build makes it where there is a C compiler, it carries the light
// reaper's C; without ("0"), as the Docker image builds it, it is the Go
// runtime and every package of the gateway started again.
func buildGateway(b *testing.B, cgo string) string {
	b.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(b.TempDir(), "agentgate")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "cmd", "gateway")
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build the gateway: %v\n%s", err, out)
	}
	return bin
}

// reap runs argv under reaper, as the supervisor does, and returns how
// long it took from the start to the reaper's exit.
func reap(b *testing.B, reaper, id string, g *proctree.Cgroup, argv ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(reaper, proctree.ReaperArgs(argv)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), proctree.Cookie(id)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: proctree.DeathSignal}
	if g != nil {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, g.FD()
	}
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", reaper, err, out)
	}
	return time.Since(start)
}

// memoryOf starts reaper running a shell that waits on its stdin, waits
// until the shell runs below it, and returns the reaper's resident memory
// and the anonymous part of it, in KiB: what each run's reaper costs while
// its agent runs.
func memoryOf(b *testing.B, reaper string) (rss, anon float64) {
	b.Helper()
	cmd := exec.Command(reaper, proctree.ReaperArgs([]string{"/bin/sh", "-c", "read x"})...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: proctree.DeathSignal}
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	deadline := time.Now().Add(time.Minute)
	for {
		if len(childrenOf(pid)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the reaper started no agent within a minute")
		}
		time.Sleep(time.Millisecond)
	}
	st := proctreetest.Status(b, pid)
	return float64(st["VmRSS"]), float64(st["RssAnon"])
}

// BenchmarkReaperStart runs an agent that exits at once directly and
// under each reaper a gateway may use, in turns: the light reaper as it
// ships (C before the Go runtime, static), the same built without cgo (Go's
// proctree.Reap), and the gateway's own binary with cgo and without. It
// reports the time from start to exit of each, each reaper's memory while
// its agent runs, and the ratios of the Go reaper's figures to the C one's.
//
//	go test -run XXX -bench BenchmarkReaperStart ./internal/proctree/
func BenchmarkReaperStart(b *testing.B) {
	reapers := []struct{ name, bin string }{
		{"c", proctreetest.BuildReaper(b)},
		{"go", proctreetest.BuildReaperWithoutCgo(b)},
		{"gateway-cgo", buildGateway(b, "1")},
		{"gateway-nocgo", buildGateway(b, "0")},
	}
	var direct time.Duration
	took := make([]time.Duration, len(reapers))
	for b.Loop() {
		start := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		direct += time.Since(start)
		for i, r := range reapers {
			took[i] += reap(b, r.bin, "bench", nil, "/bin/true")
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(direct.Microseconds())/n, "direct-µs/run")
	rss := make([]float64, len(reapers))
	for i, r := range reapers {
		var anon float64
		rss[i], anon = memoryOf(b, r.bin)
		b.ReportMetric(float64(took[i].Microseconds())/n, r.name+"-µs/run")
		b.ReportMetric(float64((took[i]-direct).Microseconds())/n, r.name+"-added-µs/run")
		b.ReportMetric(rss[i], r.name+"-rss-KiB")
		b.ReportMetric(anon, r.name+"-anon-KiB")
	}
	b.ReportMetric(float64(took[1]-direct)/float64(took[0]-direct), "go/c-added-time")
	b.ReportMetric(rss[1]/rss[0], "go/c-rss")
}

// hostProcesses is how many sleeping processes BenchmarkEndOfRun starts
// outside the run, standing for a busy host.
const hostProcesses = 2000

// startHost starts n sleeping processes outside any run, and waits until
// they all run; the benchmark's cleanup kills them.
func startHost(b *testing.B, n int) {
	b.Helper()
	cmd := exec.Command("/bin/sh", "-c", `i=0; while [ $i -lt `+strconv.Itoa(n)+` ]; do sleep 600 & i=$((i+1)); done; echo up; wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "up\n" {
		b.Fatalf("the host's processes: %q", line)
	}
	go io.Copy(io.Discard, out)
	for {
		if len(childrenOf(cmd.Process.Pid)) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// benchCgroups opens the cgroups of a replica of the benchmark's own; the
// machine must have cgroup v2 writable.
func benchCgroups(b *testing.B) *proctree.Cgroups {
	b.Helper()
	cgs, err := proctree.OpenCgroups(context.Background(), proctree.CgroupOptions{Replica: "bench-" + uuid.NewString()[:8]})
	if err != nil {
		b.Fatalf("cgroups are needed for this benchmark (cgroup v2, as root): %v", err)
	}
	b.Cleanup(func() { _ = cgs.Close(context.Background()) })
	return cgs
}

// BenchmarkEndOfRun measures the end of a run whose agent left a process
// behind, on a host running hostProcesses other processes, the way the
// supervisor ends it: without a cgroup (the reaper scans /proc for what is
// below it, and the supervisor scans it for the run's cookie) and with one
// (the reaper kills by the cgroup's list of processes, and the supervisor
// kills and removes the cgroup). Both run in turns, in the same run, and
// the figures are the time from the reaper's start to the run's last
// process gone.
//
//	go test -run XXX -bench BenchmarkEndOfRun ./internal/proctree/
func BenchmarkEndOfRun(b *testing.B) {
	reaper := proctreetest.BuildReaper(b)
	cgs := benchCgroups(b)
	startHost(b, hostProcesses)
	tree := proctree.New()
	agent := []string{"/bin/sh", "-c", "sleep 60 & exit 0"}
	var scanReaper, scanSup, cgReaper, cgSup time.Duration
	for b.Loop() {
		id := uuid.NewString()
		scanReaper += reap(b, reaper, id, nil, agent...)
		start := time.Now()
		if err := tree.Kill(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		scanSup += time.Since(start)

		id = uuid.NewString()
		g, err := cgs.New(context.Background(), id)
		if err != nil {
			b.Fatal(err)
		}
		cgReaper += reap(b, reaper, id, g, agent...)
		start = time.Now()
		if err := g.Remove(context.Background()); err != nil {
			b.Fatal(err)
		}
		cgSup += time.Since(start)
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(scanReaper), "scan-reaper-ms/run")
	b.ReportMetric(ms(scanSup), "scan-supervisor-ms/run")
	b.ReportMetric(ms(cgReaper), "cgroup-reaper-ms/run")
	b.ReportMetric(ms(cgSup), "cgroup-supervisor-ms/run")
	b.ReportMetric(float64(scanReaper+scanSup)/float64(cgReaper+cgSup), "end-ratio")
}

// childrenOf returns the children of process pid, of any of its threads:
// a Go program starts a child from whichever thread runs the goroutine.
func childrenOf(pid int) []string {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []string
	for _, t := range tasks {
		c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		out = append(out, strings.Fields(string(c))...)
	}
	return out
}

// BenchmarkKillTurnTools measures the end of an interrupted turn's tools
// on a host running hostProcesses other processes: a root playing the
// reaper, its agent, and a tool below the agent, which is killed while
// the agent is spared. By a scan of all of /proc (KillDescendants), and
// by the run's cgroup (KillDescendantsIn), in turns in the same run.
//
//	go test -run XXX -bench BenchmarkKillTurnTools ./internal/proctree/
func BenchmarkKillTurnTools(b *testing.B) {
	cgs := benchCgroups(b)
	startHost(b, hostProcesses)
	tree := proctree.New()
	var scan, cg time.Duration
	turn := func(inCgroup bool) time.Duration {
		g, err := cgs.New(context.Background(), uuid.NewString())
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = g.Remove(context.Background()) }()
		cmd := exec.Command("/bin/sh", "-c", `exec 9<&0; sh -c 'sleep 63 & read y' <&9 & read x`)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, UseCgroupFD: true, CgroupFD: g.FD()}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		for {
			procs, err := g.Procs()
			if err != nil {
				b.Fatal(err)
			}
			if len(procs) == 3 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		if inCgroup {
			err = tree.KillDescendantsIn(context.Background(), g, cmd.Process.Pid, true)
		} else {
			err = tree.KillDescendants(context.Background(), cmd.Process.Pid, true)
		}
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if procs, _ := g.Procs(); len(procs) != 2 {
			b.Fatalf("%d processes left, want the root and the agent", len(procs))
		}
		return took
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			scan += turn(false)
			cg += turn(true)
		} else {
			cg += turn(true)
			scan += turn(false)
		}
		i++
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(scan), "scan-ms/turn")
	b.ReportMetric(ms(cg), "cgroup-ms/turn")
	b.ReportMetric(float64(scan)/float64(cg), "scan/cgroup")
}
