package agenttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fatalTB records Fatalf instead of stopping the test, to check what
// ClaudeBin tells a person.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestClaudeBinFromEnv(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "claude")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(ClaudeBinEnv, exe)
	if got := ClaudeBin(t); got != exe {
		t.Errorf("ClaudeBin = %q, want %q", got, exe)
	}

	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{plain, filepath.Join(dir, "missing"), dir} {
		t.Setenv(ClaudeBinEnv, p)
		f := &fatalTB{TB: t}
		if got := ClaudeBin(f); got != "" || !strings.Contains(f.msg, "scripts/install-agents.sh") {
			t.Errorf("%s: ClaudeBin = %q, fatal %q; want a failure naming the install script", p, got, f.msg)
		}
	}
}

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "internal", "agenttest", "agenttest.go")); err != nil {
		t.Errorf("root %s: %v", root, err)
	}
}

func TestEnv(t *testing.T) {
	home := t.TempDir()
	env := MinimalEnv(home)
	if len(env) != 4 || env[1] != "HOME="+home || !strings.HasPrefix(env[0], "PATH=") || env[3] != "TMPDIR="+home+"/.tmp" {
		t.Errorf("MinimalEnv = %v", env)
	}
	if fi, err := os.Stat(home + "/.tmp"); err != nil || !fi.IsDir() {
		t.Errorf("TMPDIR not made: %v", err)
	}
	if len(NoPhoneHomeEnv()) != 4 {
		t.Errorf("NoPhoneHomeEnv = %v", NoPhoneHomeEnv())
	}
}

func TestStartWait(t *testing.T) {
	p := Start(t, "/bin/sh", []string{"-c", `read x; echo "got $x"; echo line2; echo err >&2; exit 3`},
		MinimalEnv(t.TempDir()), t.TempDir(), []byte("input\n"))
	first := <-p.Lines()
	res := p.Wait()
	if string(first) != "got input" || len(res.Stdout) != 2 || string(res.Stdout[1]) != "line2" {
		t.Errorf("stdout = %q (first %q)", res.Stdout, first)
	}
	if string(res.Stderr) != "err\n" || res.Exit != (runs.Exit{Code: 3}) {
		t.Errorf("stderr %q exit %+v", res.Stderr, res.Exit)
	}
	if again := p.Wait(); again.Exit != res.Exit || len(again.Stdout) != 2 {
		t.Errorf("second Wait = %+v", again)
	}
}

func TestSignalAndProcesses(t *testing.T) {
	marker := fmt.Sprintf("agenttest-marker-%d", time.Now().UnixNano())
	p := Start(t, "/bin/sh", []string{"-c", "echo ready; exec perl -e 'sleep 30' " + marker},
		MinimalEnv(t.TempDir()), t.TempDir(), nil)
	<-p.Lines()
	// exec replaces the shell: the marker is perl's argument, and the
	// shell's before it. Wait for perl itself: while exec swaps the one
	// for the other, /proc shows the process with no command line at all.
	perlRuns := func() bool {
		for _, pid := range ProcessesMatching(marker) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); string(comm) == "perl\n" {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	found := perlRuns()
	for !found && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		found = perlRuns()
	}
	if !found {
		t.Fatal("marker process not found")
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if res := p.Wait(); res.Exit != (runs.Exit{Code: -1, Signal: "SIGTERM"}) {
		t.Errorf("exit = %+v", res.Exit)
	}
	if left := WaitGone(marker, 2*time.Second); len(left) != 0 {
		t.Errorf("left = %v", left)
	}
}

func TestRecordingRoundTrip(t *testing.T) {
	t.Chdir(t.TempDir())
	type meta struct{ Exit int }
	WriteRecording(t, "case", [][]byte{[]byte(`{"a":1}`), []byte(`{"b":2}`)}, meta{Exit: 3})
	var m meta
	got := LoadRecording(t, "case", &m, "record it")
	if len(got) != 2 || string(got[1]) != `{"b":2}` || m.Exit != 3 {
		t.Fatalf("LoadRecording = %q, %+v", got, m)
	}
	if all := RecordedLines(t); len(all) != 2 {
		t.Fatalf("RecordedLines = %q", all)
	}
	ft := &fatalTB{}
	CheckRecordings(ft, func(name string) bool { return name == "case" })
	if ft.msg != "" {
		t.Fatalf("CheckRecordings failed on a replayed recording: %s", ft.msg)
	}
	evs := GoldenEvents([]runs.Event{{Type: runs.EventMessageCompleted, SessionID: "s", Data: runs.MessageData{Text: "hi"}}})
	CompareGolden(t, "case", evs, true)
	CompareGolden(t, "case", evs, false)
	if d := firstDiff("a\nb\n", "a\nc\n"); !strings.Contains(d, "line 2") {
		t.Errorf("firstDiff = %q", d)
	}
}
