package gitrepo

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestClassifyReadsGitsWords(t *testing.T) {
	cases := map[string]runs.Class{
		"fatal: Authentication failed for 'https://h/r.git/'":                                runs.GitAuthFailed,
		"fatal: could not read Username for 'https://h': terminal prompts disabled":          runs.GitAuthFailed,
		"fatal: unable to access 'https://h/r/': The requested URL returned error: 403":      runs.GitAuthFailed,
		"remote: Repository not found.\nfatal: repository 'https://h/r/' not found":          runs.GitNotFound,
		"fatal: couldn't find remote ref refs/heads/nope":                                    runs.GitNotFound,
		"fatal: unable to access 'https://h/': Could not resolve host: h":                    runs.GitUnreachable,
		"fatal: unable to access: Failed to connect to 127.0.0.1 port 1: Connection refused": runs.GitUnreachable,
		"fatal: unable to access: Operation timed out after 300000 milliseconds":             runs.GitUnreachable,
		"fatal: index file corrupt": runs.GitFailed,
	}
	for stderr, want := range cases {
		if got := classify(stderr); got != want {
			t.Errorf("classify(%q) = %s, want %s", stderr, got, want)
		}
	}
}

func TestScrubRemovesTheTokenAndURLCredentials(t *testing.T) {
	token := "p@ss/w0rd+x"
	in := "fatal: " + token + " and " + url.QueryEscape(token) +
		" at https://user:" + token + "@host/r.git and http://u:p@h/x"
	got := scrub(in, token)
	for _, secret := range []string{token, "p%40ss", "user:", "u:p@"} {
		if strings.Contains(got, secret) {
			t.Fatalf("scrub left %q in %q", secret, got)
		}
	}
	if !strings.Contains(got, "https://host/r.git") || !strings.Contains(got, "http://h/x") {
		t.Fatalf("scrub lost the hosts: %q", got)
	}
}

func TestFailureKeepsGitsReasonNotItsHints(t *testing.T) {
	err := failure("push", errors.New("exit status 1"),
		"To h\n ! [rejected] x -> x (fetch first)\nerror: failed to push some refs\nhint: a\nhint: b\nhint: c\nhint: d\n")
	if !strings.Contains(err.Msg, "[rejected]") || strings.Contains(err.Msg, "hint:") {
		t.Fatalf("message %q: want git's reason without hints", err.Msg)
	}
	if ClassOf(err) != runs.GitFailed || ClassOf(errors.New("other")) != runs.GitFailed {
		t.Fatalf("ClassOf: %s", ClassOf(err))
	}
}
