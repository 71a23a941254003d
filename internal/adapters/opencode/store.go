package opencode

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	// The pure-Go SQLite of database/sql's "sqlite3": no cgo.
	_ "github.com/ncruces/go-sqlite3/driver"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// records is a session decoder's only access to OpenCode's own store,
// where every model request's tokens and cost are (doc.go, "Usage of a
// Session run").
type records interface {
	// Messages returns the messages of a session and of the sessions it
	// started (a subagent's), as stored now: each one's id and data.
	Messages(session string) ([]storedMessage, error)
}

// storedMessage is one row of OpenCode's message table.
type storedMessage struct {
	ID   string
	Data []byte
}

// Bounds on what is read of the store. An assistant message's data is
// its metadata only (about 600 bytes; the parts are in another table),
// so these are far above any real session; a session beyond them fails
// the read rather than be counted in part.
const (
	maxMessages     = 1 << 16
	maxMessageBytes = 1 << 20
	maxSessionDepth = 8
)

// How long a read of the store may take: it runs under the decoder's
// lock, at the end of a turn. A read waits for a lock (which WAL mode
// leaves to checkpoints and recovery) at most busyTimeoutMS, and the
// whole query at most readTimeout; then the turn falls back to the
// prompt result.
const (
	busyTimeoutMS = 250
	readTimeout   = 3 * time.Second
)

// storePath is OpenCode 1.18.33's database in a home: $XDG_DATA_HOME
// (the supervisor sets only HOME, so ~/.local/share) /opencode/
// opencode.db. OPENCODE_DB would move it; the adapter never passes it.
func storePath(home string) string {
	return filepath.Join(home, ".local", "share", "opencode", "opencode.db")
}

// sqliteStore reads records from OpenCode's SQLite database, read-only:
// OpenCode writes it in WAL mode, whose readers neither block its writes
// nor are blocked by them. Each read opens and closes the database, so
// that nothing is held open between turns. SQLite opens the file itself:
// files (the Invocation's) gives its path on the host, and none when the
// run's files are not the host's.
type sqliteStore struct {
	files runs.CLIFiles
	path  string
}

// messagesQuery selects the session's messages and its subagents':
// sessions whose parent_id leads to it, at most maxSessionDepth deep.
// Rows over maxMessageBytes come without their data, so that they are
// refused rather than read.
const messagesQuery = `WITH RECURSIVE tree(id, depth) AS (
	SELECT ?1, 0
	UNION SELECT s.id, tree.depth + 1 FROM session s JOIN tree ON s.parent_id = tree.id WHERE tree.depth < ?2
)
SELECT m.id, length(CAST(m.data AS BLOB)),
	CASE WHEN length(CAST(m.data AS BLOB)) <= ?3 THEN m.data END
FROM message m WHERE m.session_id IN (SELECT id FROM tree)
ORDER BY m.id LIMIT ?4`

func (s sqliteStore) Messages(session string) ([]storedMessage, error) {
	// HostPath checks that the database is there: a missing one is an
	// error, never a new one in the agent's home.
	path, err := s.files.HostPath(s.path)
	if err != nil {
		return nil, err
	}
	dsn := (&url.URL{Scheme: "file", Path: path,
		RawQuery: fmt.Sprintf("mode=ro&_pragma=busy_timeout(%d)", busyTimeoutMS)}).String()
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }()
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	rows, err := db.QueryContext(ctx, messagesQuery, session, maxSessionDepth, maxMessageBytes, maxMessages+1)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []storedMessage
	for rows.Next() {
		var id string
		var size int64
		var data sql.RawBytes
		if err := rows.Scan(&id, &size, &data); err != nil {
			return nil, err
		}
		if size > maxMessageBytes {
			return nil, fmt.Errorf("message %s is %d bytes, more than %d", clip.Text(id, 64), size, maxMessageBytes)
		}
		if len(out) == maxMessages {
			return nil, fmt.Errorf("session %s has more than %d messages", clip.Text(session, 64), maxMessages)
		}
		out = append(out, storedMessage{ID: id, Data: append([]byte(nil), data...)})
	}
	return out, rows.Err()
}

// storedData is what is read of a message's data: an assistant
// message's tokens are its model request's, as in a step_finish part
// (cache out of input, reasoning out of output), and its cost is
// OpenCode's price of them (0 for a model without a price).
type storedData struct {
	Role   string      `json:"role"`
	Tokens *wireTokens `json:"tokens"`
	Cost   *float64    `json:"cost"`
}

// billed is what one message, or a session, was billed.
type billed struct {
	usage runs.Usage
	cost  float64
}

// storeLog reads a session's usage from OpenCode's store turn by turn.
// It is the session decoder's, called under its lock.
type storeLog struct {
	rec records
	// seen is what each message had been billed at the end of the
	// previous turn. A turn's bill is what every message was billed
	// since: its whole for a new one, what it grew by for one that was
	// still being written. A message that is gone (a reverted session)
	// stays billed.
	seen map[string]billed
	// lost: the store failed a turn once; that and every later turn take
	// the prompt result's figures, so that nothing is counted twice.
	lost bool
	// soFarCost is the running turn's cost as usageSoFar last read it,
	// until takeCostSoFar takes it (hasSoFar).
	soFarCost float64
	hasSoFar  bool
}

func newStoreLog(rec records) *storeLog {
	return &storeLog{rec: rec, seen: map[string]billed{}}
}

// turnBill implements acp.Profile.TurnBill: what the session's messages
// were billed since the last turn ended. result is the prompt's result
// (nil for an error answer or a process that ended mid-turn); its usage,
// the last model request's, is the fallback and a check: the turn
// holds that request, so the store must count at least as many tokens.
func (c *storeLog) turnBill(session string, result json.RawMessage) acp.Bill {
	prompt, hasPrompt := readSessionUsage(result)
	fallback := acp.Bill{Usage: prompt, OK: hasPrompt}
	if c.lost {
		return fallback
	}
	now, err := c.read(session)
	if err != nil {
		c.lost = true
		fallback.Events = []runs.Event{runs.Warning("usage_unreadable",
			"OpenCode's store could not be read ("+err.Error()+"): this turn's and later turns' usage is their last model request's only, and they have no cost")}
		return fallback
	}
	var turn billed
	for id, b := range now {
		prev := c.seen[id]
		turn.usage = turn.usage.Add(b.usage.Sub(prev.usage))
		turn.cost += max(b.cost-prev.cost, 0)
	}
	if hasPrompt && (turn.usage.InputTokens < prompt.InputTokens || turn.usage.OutputTokens < prompt.OutputTokens) {
		c.lost = true
		fallback.Events = []runs.Event{runs.Warning("usage_mismatch", fmt.Sprintf(
			"OpenCode's store counts fewer tokens for this turn (input %d, output %d) than its prompt result (input %d, output %d): this turn's and later turns' usage is their last model request's only, and they have no cost",
			turn.usage.InputTokens, turn.usage.OutputTokens, prompt.InputTokens, prompt.OutputTokens))}
		return fallback
	}
	for id, b := range now {
		c.seen[id] = b
	}
	bill := acp.Bill{Usage: turn.usage, OK: true}
	if turn.cost > 0 {
		bill.CostUSD = &turn.cost
	}
	return bill
}

// loaded implements acp.Profile.SessionLoaded: what the store holds of a
// resumed session before its first prompt was billed to earlier runs,
// so that the first turn's bill is its own.
func (c *storeLog) loaded(session string) []runs.Event {
	now, err := c.read(session)
	if err != nil {
		c.lost = true
		return []runs.Event{runs.Warning("usage_unreadable",
			"OpenCode's store could not be read ("+err.Error()+"): every turn's usage is its last model request's only, and they have no cost")}
	}
	c.seen = now
	return nil
}

// usageSoFar implements acp.Profile.UsageSoFar: what the session's
// messages were billed since the last turn ended, as turnBill would count
// it now, without moving on (turnBill still bills the turn whole). At a
// tool call's start the store holds every finished request of the turn
// but the one that asked for the call, whose tokens OpenCode records once
// its tools return: the figure lags one request behind, and still grows
// with every request of a long turn. A store that cannot be read gives
// nothing; turnBill then says so at the turn's end.
func (c *storeLog) usageSoFar(session string) (runs.Usage, bool) {
	if c.lost {
		return runs.Usage{}, false
	}
	now, err := c.read(session)
	if err != nil {
		return runs.Usage{}, false
	}
	var u runs.Usage
	var cost float64
	for id, b := range now {
		u = u.Add(b.usage.Sub(c.seen[id].usage))
		cost += max(b.cost-c.seen[id].cost, 0)
	}
	c.soFarCost, c.hasSoFar = cost, true
	return u, true
}

// takeCostSoFar returns the cost of the turn so far that the last
// usageSoFar read, once.
func (c *storeLog) takeCostSoFar() (float64, bool) {
	cost, ok := c.soFarCost, c.hasSoFar
	c.soFarCost, c.hasSoFar = 0, false
	return cost, ok
}

// read is what each assistant message of the session was billed, by id;
// a message listed twice counts once, as its last row.
func (c *storeLog) read(session string) (map[string]billed, error) {
	if session == "" {
		return nil, errors.New("no session id")
	}
	msgs, err := c.rec.Messages(session)
	if err != nil {
		return nil, err
	}
	if len(msgs) > maxMessages {
		return nil, fmt.Errorf("session %s has more than %d messages", clip.Text(session, 64), maxMessages)
	}
	out := make(map[string]billed, len(msgs))
	for _, m := range msgs {
		if len(m.Data) > maxMessageBytes {
			return nil, fmt.Errorf("message %s is %d bytes, more than %d", clip.Text(m.ID, 64), len(m.Data), maxMessageBytes)
		}
		var d storedData
		if err := json.Unmarshal(m.Data, &d); err != nil {
			// It may be an assistant message: its tokens cannot be
			// left out.
			return nil, fmt.Errorf("message %s: %v", clip.Text(m.ID, 64), err)
		}
		if d.Role != "assistant" {
			delete(out, m.ID)
			continue
		}
		var b billed
		if d.Tokens != nil {
			b.usage = normalize(d.Tokens)
		}
		if d.Cost != nil && *d.Cost > 0 && *d.Cost < maxMessageCost {
			b.cost = *d.Cost
		}
		out[m.ID] = b
	}
	return out, nil
}

// maxMessageCost bounds one request's cost, far above any real one, so
// that sums of absurd figures stay finite.
const maxMessageCost = 1e6
