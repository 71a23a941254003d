package cline

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	_ "github.com/ncruces/go-sqlite3/driver" // the "sqlite3" driver

	"github.com/agentgate/agentgate/internal/runs"
)

// sessionsDBPath is Cline's index of the home's sessions, whose rows
// name each session's messages file by an absolute path.
func sessionsDBPath(home string) string {
	return filepath.Join(home, ".cline", "data", "db", "sessions.db")
}

// messagesPath is where Cline keeps a session's messages.
func messagesPath(home, sessionID string) string {
	return filepath.Join(filepath.Dir(sessionPath(home, sessionID)), sessionID+".messages.json")
}

// relinkSession points the index row of the session a run resumes at
// its messages in this home. session/load reads the messages file
// through the row's absolute messages_path ("Resource not found"
// without it), and a session kept in the cluster comes back in the home
// of the run that resumes it, which need not be at the path of the home
// that recorded it. A home without the index or the messages has
// nothing to relink: the load then fails by itself.
func relinkSession(ctx context.Context, inv runs.Invocation) error {
	id := inv.Spec.ResumeSessionID
	if id == "" || inv.Home == "" || checkResume(inv.Spec) != nil {
		return nil
	}
	dbPath, messages := sessionsDBPath(inv.Home), messagesPath(inv.Home, id)
	for _, p := range []string{dbPath, messages} {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return err
		}
	}
	dsn := (&url.URL{Scheme: "file", Path: dbPath, RawQuery: "mode=rw&_pragma=busy_timeout(1000)"}).String()
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	_, err = db.ExecContext(ctx, `UPDATE sessions SET messages_path = ?1 WHERE session_id = ?2 AND messages_path IS NOT ?1`, messages, id)
	if err != nil {
		return fmt.Errorf("relink session %s: %w", id, err)
	}
	return nil
}
