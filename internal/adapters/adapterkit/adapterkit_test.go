package adapterkit

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestIsELF(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		path string
		want bool
	}{
		{write("native", "\x7fELF\x02\x01\x01"), true},
		{write("launcher.js", "#!/usr/bin/env node\n"), false},
		{write("short", "\x7fE"), false},
		{write("empty", ""), false},
		{filepath.Join(dir, "missing"), false},
		{dir, false},
	} {
		if got := IsELF(c.path); got != c.want {
			t.Errorf("IsELF(%s) = %v, want %v", filepath.Base(c.path), got, c.want)
		}
	}
}

func TestPermission(t *testing.T) {
	for in, want := range map[runs.Permission]runs.Permission{
		"":                  runs.WorkspaceWrite,
		runs.ReadOnly:       runs.ReadOnly,
		runs.WorkspaceWrite: runs.WorkspaceWrite,
		runs.Full:           runs.Full,
		"bogus":             "bogus", // the adapter refuses it, naming it
	} {
		if got := Permission(in); got != want {
			t.Errorf("Permission(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDescribeCopiesTables(t *testing.T) {
	docs := map[runs.Permission]string{runs.ReadOnly: "ro", runs.Full: "full"}
	env := []string{"A_KEY", "B_KEY"}
	d := Describe(runs.Description{Name: "x", DefaultBin: "x"}, docs, env, "a note")
	if d.Name != "x" || d.DefaultBin != "x" {
		t.Errorf("Describe lost the caller's fields: %+v", d)
	}
	if got := strings.Join(d.CredentialEnv, ","); got != "A_KEY,B_KEY,a note" {
		t.Errorf("CredentialEnv = %q, want the variables then the note", got)
	}
	if len(d.Permissions) != 2 || d.Permissions[runs.ReadOnly] != "ro" || d.Permissions[runs.Full] != "full" {
		t.Errorf("Permissions = %v, want %v", d.Permissions, docs)
	}
	d.Permissions[runs.ReadOnly] = "changed"
	d.CredentialEnv[0] = "CHANGED"
	if docs[runs.ReadOnly] != "ro" || env[0] != "A_KEY" {
		t.Errorf("changing the description changed the adapter's tables: %v %v", docs, env)
	}
	if d := Describe(runs.Description{}, nil, nil); d.Permissions == nil {
		t.Error("Describe with no docs gave a nil Permissions map")
	}
}

func TestVersionParser(t *testing.T) {
	whole := VersionParser{Command: "tool --version", Pattern: regexp.MustCompile(`^tool (\d+\.\d+\.\d+)$`)}
	first := VersionParser{Command: "tool --version", Pattern: regexp.MustCompile(`^Tool (\d+\.\d+\.\d+)\.?$`), FirstLineOnly: true}
	for _, c := range []struct {
		p    VersionParser
		in   string
		want string
	}{
		{whole, "tool 1.2.3\n", "1.2.3"},
		{whole, "  tool 1.2.3  ", "1.2.3"},
		{first, "Tool 1.2.3.\nRun `tool update` to update.\n", "1.2.3"},
		{first, "\n Tool 4.5.6 \n", "4.5.6"},
	} {
		if got, err := c.p.Parse([]byte(c.in)); err != nil || got != c.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct {
		p  VersionParser
		in string
	}{
		{whole, "tool 1.2.3\nmore"}, // more than the version: only FirstLineOnly allows it
		{whole, ""},
		{first, "Warning\nTool 1.2.3"},
	} {
		if got, err := c.p.Parse([]byte(c.in)); err == nil {
			t.Errorf("Parse(%q) = %q, want an error", c.in, got)
		}
	}
	long := strings.Repeat("é", 60)
	_, err := whole.Parse([]byte(long))
	if err == nil || !strings.HasPrefix(err.Error(), "tool --version: unrecognised output ") || !strings.Contains(err.Error(), "…") ||
		len(err.Error()) > 140 || !utf8.ValidString(err.Error()) {
		t.Errorf("Parse(120 bytes of é) error = %v; want it to name the command and quote the output clipped on a rune", err)
	}
}

func TestStatusClass(t *testing.T) {
	for status, want := range map[int]runs.Class{
		401: runs.NotAuthenticated, 403: runs.NotAuthenticated,
		429: runs.RateLimited,
		408: runs.TransientAPIError, 500: runs.TransientAPIError, 503: runs.TransientAPIError, 529: runs.TransientAPIError,
		400: runs.APIError, 404: runs.APIError, 413: runs.APIError, 422: runs.APIError,
	} {
		if got, ok := StatusClass(status); !ok || got != want {
			t.Errorf("StatusClass(%d) = %q, %v; want %q", status, got, ok, want)
		}
	}
	for _, status := range []int{0, 200, 302, 399, -1} {
		if got, ok := StatusClass(status); ok {
			t.Errorf("StatusClass(%d) = %q, want no class", status, got)
		}
	}
}

func TestVersionHint(t *testing.T) {
	for _, c := range []struct{ installed, want string }{
		{"1.2.3", "tool 1.2.3 rejected the arguments the adapter built for it; check the request's values"},
		{"1.3.0", "the installed tool is 1.3.0 but the adapter was verified with 1.2.3; install it with `npm i tool@1.2.3`"},
		{"", "the installed tool is of unknown version but the adapter was verified with 1.2.3; install it with `npm i tool@1.2.3`"},
	} {
		if got := VersionHint("tool", c.installed, "1.2.3", "npm i tool@1.2.3"); got != c.want {
			t.Errorf("VersionHint(%q) = %q, want %q", c.installed, got, c.want)
		}
	}
}

func TestFirstModel(t *testing.T) {
	if got := FirstModel(map[string]int{"zeta": 1, "alpha": 2, "mid": 3}); got != "alpha" {
		t.Errorf("FirstModel = %q, want alpha", got)
	}
	if got := FirstModel(map[string]struct{}{}); got != "" {
		t.Errorf("FirstModel(empty) = %q, want none", got)
	}
}
