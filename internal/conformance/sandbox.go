package conformance

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/sandbox"
	"github.com/agentgate/agentgate/internal/supervisor"
)

// bwrapPath is where Debian's bubblewrap package puts bwrap; the suite
// fails without it (scripts/test.sh installs it).
const bwrapPath = "/usr/bin/bwrap"

// hiddenFile is the name of the file each gateway of the suite keeps in
// the directory its sandbox hides, as it would keep its store there.
const hiddenFile = "store.dat"

// confine returns the sandbox every gateway of the suite runs its agent
// in, so that every case proves the CLI works under it: it hides the
// workspace root (each run's own directory is bound back) and data, a
// directory standing for the gateway's own, which holds hiddenFile with a
// secret of its own.
func confine(t *testing.T, workspaceRoot, data string) supervisor.Sandbox {
	t.Helper()
	if _, err := os.Stat(bwrapPath); err != nil {
		t.Fatalf("bubblewrap is not installed (apt-get install bubblewrap): %v", err)
	}
	if err := os.WriteFile(filepath.Join(data, hiddenFile), []byte("hidden-"+uuid.NewString()), 0o600); err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Options{Bwrap: bwrapPath, Hide: []string{workspaceRoot, data}})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// sandboxCases are the cases that check the gateway's sandbox itself.
func (s *suite) sandboxCases() []suiteCase {
	return []suiteCase{
		{"sandbox_write_outside", s.writeOutside},
		{"sandbox_evil_agent", s.evilAgent},
	}
}

// toolRun runs one shell tool call of command under perm and returns the
// run, what the tool printed, and the run's directory.
func (s *suite) toolRun(t *testing.T, g *gateway, perm runs.Permission) (runs.Run, string, string) {
	t.Helper()
	r := g.submit(t, runs.Spec{Prompt: "Run the command.", Permission: perm})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("%s: status %s, error %+v; events %s", perm, r.Status, r.Error, typesOf(evs))
	}
	var out strings.Builder
	for _, ev := range of(evs, runs.EventToolCallCompleted) {
		var d struct {
			Output string `json:"output"`
		}
		_ = json.Unmarshal(ev.Data.(json.RawMessage), &d)
		out.WriteString(d.Output)
	}
	if len(of(evs, runs.EventToolCallCompleted)) == 0 {
		t.Fatalf("%s: no tool call: %s", perm, eventsOf(evs))
	}
	var began struct {
		Cwd string `json:"cwd"`
	}
	if st := of(evs, runs.EventRunStarted); len(st) == 1 {
		_ = json.Unmarshal(st[0].Data.(json.RawMessage), &began)
	}
	return r, out.String(), began.Cwd
}

// hiddenPath returns a command that sets the shell variable name to path,
// and the word that expands it, such that no CLI can read the path as one
// before the shell runs the command: several CLIs check the paths a
// command names themselves (Copilot's path check, OpenCode's
// external_directory, Claude's working directories, Gemini's refusal of
// command substitution), and then it would be the CLI, not the sandbox,
// that refused. The shell joins the two halves.
func hiddenPath(name, path string) (set, word string) {
	half := len(path) / 2
	return name + "a='" + path[:half] + "'; " + name + "b='" + path[half:] + "'; ", `"$` + name + `a$` + name + `b"`
}

// writeOutside: a tool that writes outside the run's directory fails under
// workspace_write because the sandbox's root is read-only, and the same
// tool works under full, which is unconfined. The target is under the
// system's temporary directory, which Codex's own sandbox lets its tools
// write: only the gateway's refuses it.
func (s *suite) writeOutside(t *testing.T) {
	outside := t.TempDir()
	target := filepath.Join(outside, "escape.txt")
	set, dir := hiddenPath("d", outside)
	cmd := set + "cd " + dir + " && echo escaped > escape.txt; echo write-exit=$?"
	g := s.start(t, Scenario{Kind: Tool, Command: cmd, Text: "done"}, credentials)
	_, out, _ := s.toolRun(t, g, runs.WorkspaceWrite)
	if !strings.Contains(out, "Read-only file system") {
		t.Errorf("workspace_write: the tool's output does not say the file system is read-only: %q", out)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("workspace_write: %s was written: %v (tool output %q)", target, err, out)
	}

	g = s.start(t, Scenario{Kind: Tool, Command: cmd, Text: "done"}, credentials)
	_, out, _ = s.toolRun(t, g, runs.Full)
	if b, err := os.ReadFile(target); err != nil || strings.TrimSpace(string(b)) != "escaped" {
		t.Errorf("full: %s = %q, %v; the unconfined tool must write it (tool output %q)", target, b, err, out)
	}
}

// evilAgent: a tool under workspace_write that reads every process's
// environment and the gateway's data directory finds neither a secret in
// another process's environment (the gateway's, standing for its API keys)
// nor the hidden file. Under full the same tool finds both, so the check
// can see what it looks for.
func (s *suite) evilAgent(t *testing.T) {
	secret := "gateway-secret-" + uuid.NewString()
	// A process of the gateway's user with the secret in its environment,
	// as the gateway has its keys: /proc/<pid>/environ is readable by the
	// same user.
	gw := exec.Command("sleep", "600")
	gw.Env = []string{"AGENTGATE_CONFORMANCE_SECRET=" + secret}
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = gw.Process.Kill()
		_ = gw.Wait()
	})
	// Until the child has exec'd, its environ is its parent's: wait for
	// the exec, which a loaded machine may delay.
	environ := filepath.Join("/proc", strconv.Itoa(gw.Process.Pid), "environ")
	for deadline := time.Now().Add(time.Minute); ; {
		env, err := os.ReadFile(environ)
		if err == nil && strings.Contains(string(env), secret) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in gateway's environment is not readable from outside: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Each gateway's data dir is one of this test's temporary
	// directories: the tool looks in all of them.
	root := filepath.Dir(t.TempDir())
	setProc, proc := hiddenPath("p", "/proc")
	setRoot, dir := hiddenPath("r", root)
	cmd := setProc + setRoot + "cat " + proc + "/*/environ 2>/dev/null | tr '\\0' '\\n' | grep AGENTGATE_CONFORMANCE; cat " +
		dir + "/*/" + hiddenFile + "; echo; echo evil-done"
	for _, perm := range []runs.Permission{runs.WorkspaceWrite, runs.Full} {
		g := s.start(t, Scenario{Kind: Tool, Command: cmd, Text: "done"}, credentials)
		hidden, err := os.ReadFile(filepath.Join(g.data, hiddenFile))
		if err != nil {
			t.Fatal(err)
		}
		_, out, _ := s.toolRun(t, g, perm)
		leaked := strings.Contains(out, secret) || strings.Contains(out, string(hidden))
		switch {
		case perm == runs.WorkspaceWrite && leaked:
			t.Errorf("workspace_write: the tool read what the sandbox hides: %q", out)
		case perm == runs.WorkspaceWrite && !strings.Contains(out, "evil-done"):
			t.Errorf("workspace_write: the tool did not run to its end: %q", out)
		case perm == runs.Full && (!strings.Contains(out, secret) || !strings.Contains(out, string(hidden))):
			t.Errorf("full: the unconfined tool should read both the secret and the hidden file: %q", out)
		}
	}
}

// eventsOf spells out events, for a failure's message.
func eventsOf(evs []runs.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == runs.EventReasoningDelta || ev.Type == runs.EventMessageDelta {
			continue
		}
		data, _ := json.Marshal(ev.Data)
		b.WriteString(string(ev.Type) + " " + string(data) + "\n")
	}
	return b.String()
}
