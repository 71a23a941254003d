package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// quotingSeeds are values a shell reads otherwise than as they are, and
// some it reads as they are.
var quotingSeeds = []string{
	"", "plain", "http://127.0.0.1:8089/v1", "a b", "it's", "''", `back\slash`, `"double"`, "$HOME", "${x}", "`id`",
	"$(id)", "a;b", "a|b", "a&b", "*", "~", "#x", "x#", "line\nbreak", "tab\there", "-x", "=x", "!x", "ünï",
	`{"model":"mock/mock-model","options":{"baseURL":"http://127.0.0.1:1/v1"}}`,
}

// TestEnvLinesRoundTrip writes each seed to an env file and checks that
// a shell sourcing it gets the seed back, and that a value the shell
// reads as it is stays unquoted.
func TestEnvLinesRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env")
	var vars []envVar
	var names []string
	for i, v := range quotingSeeds {
		n := "V" + strings.Repeat("_", i)
		vars = append(vars, envVar{n, v})
		names = append(names, n)
	}
	if err := writeEnvFile(path, vars); err != nil {
		t.Fatal(err)
	}
	got := sourced(t, path, names...)
	for _, v := range vars {
		if got[v.Name] != v.Value {
			t.Errorf("%q came back as %q", v.Value, got[v.Name])
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"export V__=http://127.0.0.1:8089/v1\n", "export V_=plain\n", "export V=''\n", `export V____='it'\''s'` + "\n"} {
		if !strings.Contains(string(b), line) {
			t.Errorf("the file lacks %q:\n%s", line, b)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("env file mode = %v, %v; want 0600", fi.Mode(), err)
	}
}

func TestEnvLinesRefuses(t *testing.T) {
	for _, v := range []envVar{{"", "x"}, {"1A", "x"}, {"A-B", "x"}, {"A B", "x"}, {"A=B", "x"}, {"A", "x\x00y"}} {
		if text, err := envLines([]envVar{v}); err == nil {
			t.Errorf("envLines(%q) = %q, nil", v, text)
		}
	}
	path := filepath.Join(t.TempDir(), "env")
	if err := writeEnvFile(path, []envVar{{"A", "ok"}, {"bad name", "x"}}); err == nil {
		t.Error("writeEnvFile wrote a bad name")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("writeEnvFile left a file for a refused variable: %v", err)
	}
}

// FuzzShellQuote checks that a shell reads every quoted value back as
// it was. A shell variable cannot hold NUL, and envLines refuses it.
func FuzzShellQuote(f *testing.F) {
	for _, s := range quotingSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			return
		}
		path := filepath.Join(t.TempDir(), "env")
		if err := writeEnvFile(path, []envVar{{"V", s}}); err != nil {
			t.Fatal(err)
		}
		if got := sourced(t, path, "V")["V"]; got != s {
			t.Errorf("%q came back as %q", s, got)
		}
	})
}
