package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/auth"
)

func TestKeysNew(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runKeysCommand([]string{"new", "--tenant", "acme", "--role", "write", "--id", "acme-ci"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	var secret, line string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		switch {
		case strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, auth.SecretPrefix):
			secret = l
		default:
			line = l
		}
	}
	if secret == "" || line == "" {
		t.Fatalf("want a secret and a keys file line in:\n%s", out.String())
	}
	if strings.Count(out.String(), secret) != 1 {
		t.Errorf("the secret is printed more than once:\n%s", out.String())
	}
	// The whole output, pasted into a keys file by mistake, is refused.
	if _, err := auth.ParseKeys(strings.NewReader(out.String())); err == nil {
		t.Error("the command's whole output parses as a keys file: the secret would be stored")
	}
	kr, err := auth.ParseKeys(strings.NewReader(line + "\n"))
	if err != nil {
		t.Fatalf("the printed line %q does not parse: %v", line, err)
	}
	if k, ok := kr.Lookup(secret); !ok || k != (auth.Key{ID: "acme-ci", Tenant: "acme", Role: auth.RoleWrite}) {
		t.Errorf("Lookup(secret) = %+v, %v", k, ok)
	}

	// Without --id, the id is the tenant and a random suffix.
	out.Reset()
	long := strings.Repeat("t", 63)
	if code := runKeysCommand([]string{"new", "-tenant", long, "-role", "read"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	kr, err = auth.ParseKeys(strings.NewReader(lines[len(lines)-1]))
	if err != nil {
		t.Fatalf("the printed line does not parse: %v", err)
	}
	k, ok := kr.Lookup(lines[2])
	if !ok || k.Tenant != long || k.Role != auth.RoleRead || !strings.HasPrefix(k.ID, long[:54]+"-") {
		t.Errorf("Lookup = %+v, %v", k, ok)
	}
}

func TestKeysNewUsage(t *testing.T) {
	for name, args := range map[string][]string{
		"nothing":     nil,
		"unknown":     {"old"},
		"no tenant":   {"new", "--role", "read"},
		"bad tenant":  {"new", "--tenant", "Acme", "--role", "read"},
		"no role":     {"new", "--tenant", "acme"},
		"bad role":    {"new", "--tenant", "acme", "--role", "owner"},
		"bad id":      {"new", "--tenant", "acme", "--role", "read", "--id", "a b"},
		"extra":       {"new", "--tenant", "acme", "--role", "read", "more"},
		"bad flag":    {"new", "--tenant", "acme", "--role", "read", "--secret", "x"},
		"check alone": {"check"},
	} {
		var out, errOut bytes.Buffer
		if code := runKeysCommand(args, &out, &errOut); code != 2 {
			t.Errorf("%s: exit %d, want 2", name, code)
		}
		if out.Len() != 0 || errOut.Len() == 0 {
			t.Errorf("%s: stdout %q, stderr %q: want only a message on stderr", name, out.String(), errOut.String())
		}
	}
}

func TestKeysCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	secret, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, []byte("# keys\n"+auth.Line("k", "acme", auth.RoleAdmin, secret)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := runKeysCommand([]string{"check", good}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "1 keys, 1 tenants") {
		t.Errorf("good file: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("# keys\n"+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	code := runKeysCommand([]string{"check", bad}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "line 2:") || strings.Contains(errOut.String(), secret) {
		t.Errorf("bad file: exit %d, stderr %q: want line 2, never the line itself", code, errOut.String())
	}
	if code := runKeysCommand([]string{"check", filepath.Join(dir, "missing")}, &out, &errOut); code != 1 {
		t.Errorf("missing file: exit %d", code)
	}
}
