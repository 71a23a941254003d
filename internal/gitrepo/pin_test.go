package gitrepo

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/gittest"
	"github.com/agentgate/agentgate/internal/runs"
)

// named is a lookup where git.example is 127.0.0.1: a name no resolver of
// this machine knows, so that only the pin lets git reach it.
func named(_ context.Context, host string) ([]netip.Addr, error) {
	if host == "git.example" {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, errors.New("no such host")
}

// byName is a repository's URL on the server s, spelt with git.example.
func byName(s *gittest.Server, repo string) string {
	return strings.Replace(s.RepoURL(repo), "127.0.0.1", "git.example", 1)
}

func TestPinnedGitDialsTheAddressItChecked(t *testing.T) {
	s := gittest.NewServer(t, "tok")
	s.NewRepo(t, "demo", map[string]string{"README.md": "hi\n"})
	policy, err := ParsePolicy([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Config{Pin: policy.Pinner(named)})
	got, dir := clone(t, c, Remote{URL: byName(s, "demo"), Token: "tok"}, "main")
	if got.Base == "" {
		t.Fatalf("clone by a pinned name: %+v", got)
	}
	if b, err := readFile(filepath.Join(dir, "README.md")); err != nil || b != "hi\n" {
		t.Fatalf("README.md = %q (%v)", b, err)
	}
}

func TestAPublicNameOfAnInternalAddressIsNotDialled(t *testing.T) {
	s := gittest.NewServer(t, "tok")
	s.NewRepo(t, "demo", map[string]string{"README.md": "hi\n"})
	policy, err := ParsePolicy(nil) // nothing internal allowed
	if err != nil {
		t.Fatal(err)
	}
	c := newCache(t, Config{Pin: policy.Pinner(named)})
	before := s.Requests()
	_, err = c.Clone(context.Background(), Remote{URL: byName(s, "demo"), Token: "tok"}, "main", filepath.Join(t.TempDir(), "ws"))
	var ge *Error
	if !errors.As(err, &ge) || ge.Class != runs.GitUnreachable || !strings.Contains(err.Error(), "git.example") {
		t.Fatalf("clone of a name that resolves to loopback: %v, want git_unreachable naming the host", err)
	}
	if n := s.Requests() - before; n != 0 {
		t.Fatalf("the server got %d requests from a refused name", n)
	}
}

func TestPinEntries(t *testing.T) {
	policy, err := ParsePolicy([]string{"10.0.0.0/8", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		return map[string][]netip.Addr{
			"four.example": {netip.MustParseAddr("10.1.2.3")},
			"six.example":  {netip.MustParseAddr("fd00::5")},
		}[host], nil
	}
	pin := policy.Pinner(lookup)
	for raw, want := range map[string]string{
		"https://four.example/r.git":     "four.example:443:10.1.2.3",
		"http://four.example:8080/r.git": "four.example:8080:10.1.2.3",
		"https://six.example/r.git":      "six.example:443:[fd00::5]",
		"https://10.1.2.3/r.git":         "", // a literal address was judged with the URL
	} {
		if got, err := pin(context.Background(), raw); err != nil || got != want {
			t.Errorf("pin of %s = %q (%v), want %q", raw, got, err, want)
		}
	}
	if _, err := pin(context.Background(), "https://none.example/r.git"); err == nil {
		t.Error("a name with no address was pinned")
	}
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
