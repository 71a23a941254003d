package filewatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// lineError is the test format's verdict on an invalid file.
type lineError struct{ line int }

func (e *lineError) Error() string { return fmt.Sprintf("line %d: not a number", e.line) }

var errEmpty = errors.New("empty")

// numbers is a format of one integer a line.
var numbers = Format[[]int]{
	Name: "numbers file", MaxLen: 64, Empty: errEmpty,
	Parse: func(data []byte) ([]int, error) {
		var out []int
		for i, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			n, err := strconv.Atoi(l)
			if err != nil {
				return nil, &lineError{i + 1}
			}
			out = append(out, n)
		}
		return out, nil
	},
	Invalid: InvalidAs(func(e *lineError) int { return e.line }),
}

func write(t *testing.T, path, s string) {
	t.Helper()
	// Through a rename, as an operator's tool or a secret's swap does, so
	// the watcher never sees a half-written version.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"empty": "", "invalid": "1\nx\n", "large": strings.Repeat("1\n", 40)} {
		path := filepath.Join(dir, name)
		write(t, path, body)
		if _, _, err := Load(path, numbers); err == nil || !strings.HasPrefix(err.Error(), "numbers file "+path) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, _, err := Load(filepath.Join(dir, "missing"), numbers); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: err = %v", err)
	}
	if _, _, err := Load(filepath.Join(dir, "empty"), numbers); !errors.Is(err, errEmpty) {
		t.Errorf("empty: err = %v, want errEmpty", err)
	}
}

// Watch hands over each new valid version once, keeps the last valid one
// through an invalid or empty edit (logged once, with its line), and
// hands over nothing for a rewrite of the same content.
func TestWatchReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	write(t, path, "1\n")
	w, v, err := Load(path, numbers)
	if err != nil || len(v) != 1 || v[0] != 1 {
		t.Fatalf("Load = %v, %v", v, err)
	}
	core, logs := observer.New(zap.ErrorLevel)
	got := make(chan []int, 16)
	ctx, cancel := context.WithCancel(context.Background())
	var done sync.WaitGroup
	done.Go(func() { w.Watch(ctx, 2*time.Millisecond, zap.New(core), func(v []int) { got <- v }) })
	defer func() { cancel(); done.Wait() }()

	next := func() []int {
		t.Helper()
		select {
		case v := <-got:
			return v
		case <-time.After(time.Minute):
			t.Fatal("no reload")
			return nil
		}
	}
	write(t, path, "1\n2\n")
	if v := next(); len(v) != 2 || v[1] != 2 {
		t.Fatalf("reloaded %v", v)
	}
	// An invalid version: logged with its line, nothing handed over.
	write(t, path, "1\nnope\n")
	waitLogs(t, logs, func(entries []observer.LoggedEntry) bool { return len(entries) == 1 })
	entry := logs.All()[0]
	if entry.ContextMap()["line"] != int64(2) || !strings.Contains(entry.Message, "numbers file") {
		t.Errorf("log %q %v", entry.Message, entry.ContextMap())
	}
	// The same content as the last valid version, then a new one: only
	// the new one is handed over.
	write(t, path, "1\n2\n")
	write(t, path, "3\n")
	if v := next(); len(v) != 1 || v[0] != 3 {
		t.Fatalf("reloaded %v, want [3] (the same content is not handed over again)", v)
	}
	select {
	case v := <-got:
		t.Fatalf("reloaded %v again", v)
	default:
	}
}

func waitLogs(t *testing.T, logs *observer.ObservedLogs, ok func([]observer.LoggedEntry) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok(logs.All()) {
		if time.Now().After(deadline) {
			t.Fatalf("logs %v", logs.All())
		}
		time.Sleep(time.Millisecond)
	}
}
