package agenttest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/workspace"
)

// HomeCarry is one proof, with a real CLI, that an adapter's
// runs.HomeKeeper lists what the gateway needs: a session started in one
// run's home resumes in another home, built afresh from the base home at
// another path, from the files SessionFiles lists alone, while what a run
// planted in its home does not follow it (see CheckHomeCarry).
type HomeCarry struct {
	Keeper runs.HomeKeeper
	// Base is the operator's base home, made by the test: the CLI's
	// login and configuration.
	Base string
	// Planted are files, relative to a home, that a run could write to
	// steer later runs (a hook in a settings file, a changed
	// configuration): the next home must hold the base's copy, or none.
	Planted []string
	// First runs the first turn in home and dir.
	First func(t *testing.T, home, dir string) Turn
	// Resume runs the next turn of session in home and dir.
	Resume func(t *testing.T, home, dir, session string) Turn
}

// Turn is what a HomeCarry learns of one run.
type Turn struct {
	// Prompt is the turn's prompt, which a resumed turn's request holds.
	Prompt    string
	SessionID string
	Succeeded bool
	// Detail says how the run ended (its error, stderr's tail), for a
	// failure message.
	Detail string
	// Request is the text of the last request the mock model received in
	// the turn, where a resumed turn carries the history.
	Request string
}

// CheckHomeCarry runs c: the first turn in home A, built from the base by
// copying BaseFiles, in a fresh directory D; then plants c.Planted in A;
// builds home B from the base at another path and copies SessionFiles
// from A into it; checks nothing planted reached B; and resumes the
// session in B in D, which must succeed and send the model the first
// turn's prompt. A control resume in a home with the base files alone must
// not have the history, or the session did not live in the home at all.
func CheckHomeCarry(t *testing.T, c HomeCarry) {
	t.Helper()
	dir := t.TempDir()
	homeA := NewHome(t, c.Base, c.Keeper)
	first := c.First(t, homeA, dir)
	if !first.Succeeded || first.SessionID == "" {
		t.Fatalf("first turn in home A: succeeded %v, session %q: %s", first.Succeeded, first.SessionID, first.Detail)
	}
	plant(t, homeA, c.Planted)
	homeB := NewHome(t, c.Base, c.Keeper)
	carried := CarrySession(t, c.Keeper, homeA, homeB, dir, first.SessionID)
	t.Logf("carried from home A: %v of %v", carried, Tree(homeA))
	wantBaseCopies(t, c.Base, homeB, c.Planted)

	next := c.Resume(t, homeB, dir, first.SessionID)
	if !next.Succeeded {
		t.Errorf("resume in home B failed: %s (home A held %v)", next.Detail, Tree(homeA))
	}
	if !strings.Contains(next.Request, first.Prompt) {
		t.Errorf("the resumed request lacks the first prompt %q: %q (home A held %v)", first.Prompt, tail(next.Request, 400), Tree(homeA))
	}
	if next.SessionID != first.SessionID {
		t.Errorf("resumed session = %q, want %q", next.SessionID, first.SessionID)
	}

	bare := NewHome(t, c.Base, c.Keeper)
	if control := c.Resume(t, bare, dir, first.SessionID); control.Succeeded && strings.Contains(control.Request, first.Prompt) {
		t.Errorf("a home with the base files alone resumed the session with its history: the session is not kept in the home")
	}
}

// NewHome returns a fresh home holding what k.BaseFiles lists of base.
func NewHome(t testing.TB, base string, k runs.HomeKeeper) string {
	t.Helper()
	home := t.TempDir()
	copyListed(t, base, home, k.BaseFiles())
	return home
}

// CarrySession copies into home to what k.SessionFiles lists of session
// in home from after a run in dir, and returns the list.
func CarrySession(t testing.TB, k runs.HomeKeeper, from, to, dir, session string) []string {
	t.Helper()
	names, err := k.SessionFiles(runs.HostFiles{}, from, dir, session)
	if err != nil {
		t.Fatalf("SessionFiles(%s): %v (home held %v)", session, err, Tree(from))
	}
	copyListed(t, from, to, names)
	return names
}

// copyListed copies each of names (relative, local) from one home to
// another, files and directories, skipping what from lacks: as the
// gateway makes a run's home (workspace.BuildHome).
func copyListed(t testing.TB, from, to string, names []string) {
	t.Helper()
	if err := workspace.BuildHome(from, to, names, 0); err != nil {
		t.Fatalf("copy %v: %v", names, err)
	}
}

// plantMark is what plant appends to a planted file.
const plantMark = "\nplanted by a run\n"

// plant appends a mark to each of names in home, making the file where
// there is none.
func plant(t testing.TB, home string, names []string) {
	t.Helper()
	for _, name := range names {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteString(plantMark)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// wantBaseCopies checks that each of names in home is as it is in base,
// or absent where base lacks it.
func wantBaseCopies(t testing.TB, base, home string, names []string) {
	t.Helper()
	for _, name := range names {
		want, werr := os.ReadFile(filepath.Join(base, name))
		got, gerr := os.ReadFile(filepath.Join(home, name))
		switch {
		case errors.Is(werr, fs.ErrNotExist) && !errors.Is(gerr, fs.ErrNotExist):
			t.Errorf("%s, planted in the first home, reached the next: %q", name, tail(string(got), 200))
		case werr == nil && string(got) != string(want):
			t.Errorf("%s in the next home = %q (%v), want the base's %q", name, tail(string(got), 200), gerr, tail(string(want), 200))
		}
	}
}

// Tree lists the files under home, relative to it, for a failure message.
func Tree(home string) []string {
	var names []string
	_ = filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(home, p)
			names = append(names, rel)
		}
		return nil
	})
	return names
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
