package opencode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/acp/acptest"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestSessionLoadResumesKeptSession is a hibernation as the supervisor
// does it: a turn in one process, the session's files (SessionFiles,
// nothing else) kept and restored into a fresh home, and a new process
// resuming the session with session/load, whose model request holds
// what the first turn said.
func TestSessionLoadResumesKeptSession(t *testing.T) {
	t.Parallel()
	token := "KEPT-" + uuid.NewString()[:8]
	dir := t.TempDir()
	first := startSessionIn(t, dir, runs.Spec{Prompt: "Say a token.", Interactive: true}, chat.Turns(token))
	if turn, _ := first.WaitTurn(1, sessionWithin); turn.Status != runs.Succeeded || turn.Result != token {
		t.Fatalf("turn 1: %+v", turn)
	}
	o := first.close(t)
	if o.SessionID == "" {
		t.Fatal("no session id")
	}
	files, err := New().SessionFiles(runs.HostFiles{}, first.home, dir, o.SessionID)
	if err != nil || len(files) == 0 {
		t.Fatalf("SessionFiles = %v, %v", files, err)
	}

	second := startSessionWith(t, sessionSetup{dir: dir, sc: chat.Turns("Resumed."),
		spec: runs.Spec{Prompt: "What was the token?", Interactive: true, ResumeSessionID: o.SessionID},
		restore: func(home string) {
			copyFiles(t, first.home, home, files)
			// As a hibernated run's home, the first is gone: nothing
			// may be read from it by an absolute path.
			if err := os.RemoveAll(first.home); err != nil {
				t.Fatal(err)
			}
		}})
	turn, _ := second.WaitTurn(1, sessionWithin)
	if turn.Status != runs.Succeeded || turn.Result != "Resumed." {
		t.Fatalf("resumed turn: %+v (%v); stdout %s; stderr …%s", turn, turn.Error, second.Stdout(), tail(string(second.Stderr()), 500))
	}
	// The second process's server billed only the resumed turn: the
	// earlier turns' usage must not be counted again.
	if own := normalizedBill(second.srv.Ledger()); turn.Usage != own || own.IsZero() {
		t.Errorf("resumed turn's usage %+v, billed for it %+v", turn.Usage, own)
	}
	t.Logf("replayed while loading: %v", replayed(t, second.Stdout()))
	if !second.srv.Ledger().Seen(token) {
		t.Errorf("the resumed session's model request lacks turn 1's %s", token)
	}
	if !second.srv.Ledger().Seen("What was the token?") {
		t.Error("the resumed turn's prompt never reached the model")
	}
	for _, ev := range second.Events() {
		if ev.Type == runs.EventSessionStarted && ev.Data.(runs.SessionStartedData).SessionID != o.SessionID {
			t.Errorf("session.started %+v, want session %s", ev.Data, o.SessionID)
		}
		if m, ok := ev.Data.(runs.MessageData); ok && strings.Contains(m.Text, token) {
			t.Errorf("the replayed history became an event: %s %+v", ev.Type, m)
		}
	}
	if got := acptest.Of(second.Events(), runs.EventSessionStarted); len(got) != 1 {
		t.Errorf("%d session.started events", len(got))
	}
	if resumed := second.close(t); resumed.SessionID != o.SessionID || resumed.NumTurns != 1 {
		t.Errorf("resumed outcome %+v", resumed)
	}
}

// copyFiles copies the files named relative to home from into to, as a
// hibernated run's home is restored; a file from lacks is left out.
func copyFiles(t *testing.T, from, to string, files []string) {
	t.Helper()
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(from, rel))
		if os.IsNotExist(err) {
			t.Logf("session file %s: absent", rel)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(to, rel)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, rel), b, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("session file %s: %d bytes", rel, len(b))
	}
}

// replayed lists the session/update kinds the CLI sent before it
// answered session/load (the client's request id 2).
func replayed(t *testing.T, stdout [][]byte) []string {
	t.Helper()
	var kinds []string
	for _, l := range stdout {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Update struct {
					SessionUpdate string `json:"sessionUpdate"`
				} `json:"update"`
			} `json:"params"`
		}
		if json.Unmarshal(l, &m) != nil {
			continue
		}
		if string(m.ID) == "2" && m.Method == "" {
			return kinds
		}
		if m.Method == "session/update" {
			kinds = append(kinds, m.Params.Update.SessionUpdate)
		}
	}
	t.Error("no answer to session/load")
	return kinds
}
