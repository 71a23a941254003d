package gittest

import (
	"os/exec"
	"strings"
	"testing"
)

func TestServerClonesWithTokenAndRefusesWithout(t *testing.T) {
	s := NewServer(t, "sekret")
	r := s.NewRepo(t, "demo", map[string]string{"README.md": "hello\n"})

	good := t.TempDir()
	url := strings.Replace(r.URL, "http://", "http://u:sekret@", 1)
	Git(t, good, "clone", "-q", url, ".")
	if got := Show(t, r, "v1", "README.md"); got != "hello\n" {
		t.Fatalf("README.md at v1 = %q, want hello", got)
	}
	if got, want := Git(t, good, "rev-parse", "HEAD"), Branch(t, r, "main"); got != want {
		t.Fatalf("clone HEAD = %s, main = %s", got, want)
	}

	cmd := exec.Command("git", "clone", "-q", r.URL, t.TempDir())
	cmd.Env = Env(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "could not read Username") {
		t.Fatalf("clone without token: err %v, output %s; want a refusal", err, out)
	}
	if s.Requests() < 2 || s.BytesSent() == 0 {
		t.Fatalf("requests %d, bytes %d: not counted", s.Requests(), s.BytesSent())
	}
}

func TestRefusePushesRefusesAPush(t *testing.T) {
	s := NewServer(t, "")
	r := s.NewRepo(t, "demo", map[string]string{"a": "1"})
	RefusePushes(t, r, "branch protected")

	work := t.TempDir()
	Git(t, work, "clone", "-q", r.URL, ".")
	Git(t, work, "commit", "-q", "--allow-empty", "-m", "x")
	cmd := exec.Command("git", "push", "origin", "HEAD:refs/heads/new")
	cmd.Dir = work
	cmd.Env = Env(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "branch protected") {
		t.Fatalf("push: err %v, output %s; want the hook's refusal", err, out)
	}
	if got := Branch(t, r, "new"); got != "" {
		t.Fatalf("branch new = %s after a refused push", got)
	}
}
