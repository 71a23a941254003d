package cline

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestRelinkSession: the index row of a resumed session names the
// messages in the home it was restored to; other rows, a run that
// resumes nothing and a home without the session are left alone.
func TestRelinkSession(t *testing.T) {
	home := t.TempDir()
	const id, other = "1796457409360_GikKf_cli", "1796457409999_Other_cli"
	if err := os.MkdirAll(filepath.Dir(sessionsDBPath(home)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(messagesPath(home, id)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(messagesPath(home, id), []byte(`{"messages":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+sessionsDBPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE sessions (session_id TEXT PRIMARY KEY, messages_path TEXT)`,
		`INSERT INTO sessions VALUES ('` + id + `', '/old/home/.cline/data/sessions/` + id + `/` + id + `.messages.json')`,
		`INSERT INTO sessions VALUES ('` + other + `', '/old/home/other.messages.json')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	pathOf := func(session string) string {
		t.Helper()
		var p string
		if err := db.QueryRow(`SELECT messages_path FROM sessions WHERE session_id = ?`, session).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fresh := runs.Invocation{Home: home, Spec: runs.Spec{Prompt: "p"}}
	if err := relinkSession(context.Background(), fresh); err != nil || pathOf(id) == messagesPath(home, id) {
		t.Errorf("a run that resumes nothing relinked the session: %v", err)
	}
	inv := runs.Invocation{Home: home, Spec: runs.Spec{Prompt: "p", ResumeSessionID: id}}
	if err := relinkSession(context.Background(), inv); err != nil {
		t.Fatal(err)
	}
	if got := pathOf(id); got != messagesPath(home, id) {
		t.Errorf("messages_path %q, want %q", got, messagesPath(home, id))
	}
	if got := pathOf(other); got != "/old/home/other.messages.json" {
		t.Errorf("another session's row changed: %q", got)
	}
	inv.Home = t.TempDir()
	if err := relinkSession(context.Background(), inv); err != nil {
		t.Errorf("a home without the session: %v", err)
	}
}
