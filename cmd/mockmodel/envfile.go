package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// envName matches a name a POSIX shell can export.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// shellSafe matches a value a POSIX shell reads as itself without quotes.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9@%+=:,./_-]+$`)

// shellQuote returns s as one word of a POSIX shell: as it is when it
// holds nothing the shell would read otherwise, else in single quotes,
// where each single quote is written as a closing quote, an escaped
// quote and an opening quote.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// envLines renders vars as `export NAME=VALUE` lines, one a variable,
// that a POSIX shell sources. A name a shell cannot export, and a value
// with a NUL byte, which no environment can hold, are refused.
func envLines(vars []envVar) (string, error) {
	var b strings.Builder
	for _, v := range vars {
		if !envName.MatchString(v.Name) {
			return "", fmt.Errorf("environment variable name %q cannot be exported", v.Name)
		}
		if strings.ContainsRune(v.Value, 0) {
			return "", fmt.Errorf("environment variable %s: value holds a NUL byte", v.Name)
		}
		fmt.Fprintf(&b, "export %s=%s\n", v.Name, shellQuote(v.Value))
	}
	return b.String(), nil
}

// writeEnvFile writes vars to path as envLines.
func writeEnvFile(path string, vars []envVar) error {
	text, err := envLines(vars)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, []byte(text))
}

// writeFileAtomic writes b to path, readable by its owner only, through
// a temporary file in the same directory renamed into place: a reader
// sees the old file or the whole new one, never part of it.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return werr
	}
	return nil
}
