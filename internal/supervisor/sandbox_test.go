package supervisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// fakeSandbox wraps argv in a shell that reports the run's TMPDIR as the
// fake agent's first line, and records each confinement it is given.
type fakeSandbox struct {
	mu   sync.Mutex
	seen []Confinement
}

func (f *fakeSandbox) Wrap(c Confinement, argv []string) ([]string, error) {
	f.mu.Lock()
	f.seen = append(f.seen, c)
	f.mu.Unlock()
	if c.Permission == runs.Full {
		return argv, nil
	}
	return append([]string{"/bin/sh", "-c", `printf '{"text":"wrapped tmp=%s"}\n' "$TMPDIR"; exec "$@"`, "sh"}, argv...), nil
}

func (f *fakeSandbox) Enforcement() string { return "fakebox" }

func (f *fakeSandbox) last() Confinement {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[len(f.seen)-1]
}

func TestSandboxWrapsRuns(t *testing.T) {
	sb := &fakeSandbox{}
	tempRoot := t.TempDir()
	h := newHarness(t, Config{Sandbox: sb, TempRoot: tempRoot})
	if a := h.sup.Agents(); len(a) != 1 || a[0].Enforcement != runs.EnforcementSandbox || a[0].Sandbox != "fakebox" {
		t.Errorf("agents = %+v, want enforcement sandbox by fakebox", a)
	}
	for _, perm := range []runs.Permission{runs.WorkspaceWrite, runs.ReadOnly, runs.Full} {
		r, err := h.sup.Submit(context.Background(), runs.Spec{Agent: "fake", Prompt: "hi", Permission: perm})
		if err != nil {
			t.Fatal(err)
		}
		r = h.wait(t, r.ID, 30*time.Second)
		if r.Status != runs.Succeeded {
			t.Fatalf("%s: status %s, error %+v", perm, r.Status, r.Error)
		}
		c := sb.last()
		if c.RunID != r.ID || c.Permission != perm || c.Dir == "" || !filepath.IsAbs(c.Home) ||
			filepath.Dir(c.TempDir) != tempRoot || !strings.Contains(filepath.Base(c.TempDir), r.ID) {
			t.Errorf("%s: confinement %+v", perm, c)
		}
		// The directory goes as execute returns, just after the run's
		// last record is stored: wait for it rather than race it.
		waitUntil(t, fmt.Sprintf("%s: the run's temporary directory %s to go", perm, c.TempDir), func() bool {
			_, err := os.Stat(c.TempDir)
			return os.IsNotExist(err)
		})
		var text []string
		for _, e := range h.store.eventsOf(r.ID) {
			if e.Type == runs.EventMessageCompleted {
				text = append(text, string(e.JSON))
			}
		}
		wrapped := len(text) > 0 && strings.Contains(text[0], "wrapped tmp="+c.TempDir)
		if wrapped != (perm != runs.Full) || len(text) < 2 {
			t.Errorf("%s: messages %v; want the agent wrapped (%v) with TMPDIR %s", perm, text, perm != runs.Full, c.TempDir)
		}
	}
}

func TestNoSandboxEnforcement(t *testing.T) {
	h := newHarness(t, Config{})
	if a := h.sup.Agents(); len(a) != 1 || a[0].Enforcement != runs.EnforcementCLI || a[0].Sandbox != "" {
		t.Errorf("agents = %+v, want enforcement cli", a)
	}
}

func TestParentOf(t *testing.T) {
	for stat, want := range map[string]int{
		"1234 (node) S 99 1234 1234 0 -1": 99,
		"7 (a) b (c)) R 1 7 7 0":          1,
		"55 (with space) S 3 55":          3,
		"nonsense":                        -1,
		"12 (x)":                          -1,
		"12 (x) S notanumber 1":           -1,
	} {
		got, ok := parentOf([]byte(stat))
		if (want < 0) == ok || (ok && got != want) {
			t.Errorf("parentOf(%q) = %d, %v; want %d", stat, got, ok, want)
		}
	}
}

func TestNSInit(t *testing.T) {
	for status, want := range map[string]bool{
		"Name:\tbwrap\nNSpid:\t4242\t1\n": true,
		"Name:\tsh\nNSpid:\t4243\t2\n":    false,
		"Name:\tinit\nNSpid:\t1\n":        false, // the host's own init
		"Name:\tx\n":                      false,
	} {
		if got := nsInit([]byte(status)); got != want {
			t.Errorf("nsInit(%q) = %v, want %v", status, got, want)
		}
	}
}

// FuzzProcParsers feeds /proc's stat and status parsers anything: they
// read files whose command names a process chooses.
func FuzzProcParsers(f *testing.F) {
	f.Add([]byte("1234 (node) S 99 1234 1234 0 -1"))
	f.Add([]byte("7 (a) b (c)) R 1 7 7 0"))
	f.Add([]byte("Name:\tbwrap\nNSpid:\t4242\t1\n"))
	f.Add([]byte(")"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if ppid, ok := parentOf(b); ok && !strings.Contains(string(b), ")") {
			t.Errorf("parentOf(%q) = %d without a command", b, ppid)
		}
		_ = nsInit(b)
	})
}

// bubblewrap reports a CLI killed by signal n as its own exit 128+n; the
// run must still say which signal, and a CLI's own high exit codes stay.
func TestSandboxExitReadsSignalsBack(t *testing.T) {
	for _, c := range []struct{ in, want runs.Exit }{
		{runs.Exit{Code: 137}, runs.Exit{Code: -1, Signal: "SIGKILL"}},
		{runs.Exit{Code: 143, Reason: "cancelled"}, runs.Exit{Code: -1, Signal: "SIGTERM", Reason: "cancelled"}},
		{runs.Exit{Code: 139}, runs.Exit{Code: -1, Signal: "SIGSEGV"}},
		{runs.Exit{Code: 173}, runs.Exit{Code: 173}}, // Gemini's 429
		{runs.Exit{Code: 1}, runs.Exit{Code: 1}},
		{runs.Exit{Code: 128}, runs.Exit{Code: 128}},
		{runs.Exit{Code: -1, Signal: "SIGKILL"}, runs.Exit{Code: -1, Signal: "SIGKILL"}},
	} {
		if got := sandboxExit(c.in); got != c.want {
			t.Errorf("sandboxExit(%+v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}
