package opencode

import (
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// memStore is records over a map of session id → messages, for decoder
// tests that touch no file.
type memStore map[string][]storedMessage

func (m memStore) Messages(session string) ([]storedMessage, error) { return m[session], nil }

// failStore is records that cannot be read.
type failStore struct{ err error }

func (f failStore) Messages(string) ([]storedMessage, error) { return nil, f.err }

func assistant(id, tokens string, cost float64) storedMessage {
	b, _ := json.Marshal(map[string]any{"role": "assistant", "tokens": json.RawMessage(tokens), "cost": cost})
	return storedMessage{ID: id, Data: b}
}

func user(id string) storedMessage {
	return storedMessage{ID: id, Data: []byte(`{"role":"user","time":{"created":1}}`)}
}

// promptResult is a session/prompt result with its last request's usage.
func promptResult(in, out, thought, cached int64) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"stopReason": "end_turn", "usage": map[string]int64{
		"inputTokens": in, "outputTokens": out, "thoughtTokens": thought, "cachedReadTokens": cached}})
	return b
}

// The three requests of a probe's tool turn, as OpenCode 1.18.33 stored
// them: their sum is the mock's bill (input 15400, output 110).
var (
	req1 = assistant("msg_1", `{"total":5050,"input":1000,"output":38,"reasoning":12,"cache":{"write":0,"read":4000}}`, 0.00495)
	req2 = assistant("msg_2", `{"total":5230,"input":300,"output":23,"reasoning":7,"cache":{"write":0,"read":4900}}`, 0.00282)
	req3 = assistant("msg_3", `{"total":5230,"input":300,"output":23,"reasoning":7,"cache":{"write":0,"read":4900}}`, 0.00282)
)

func wantBillCost(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	if got == nil || math.Abs(*got-want) > 1e-12 {
		t.Errorf("%s cost %v, want %v", what, got, want)
	}
}

// TestStoreLogTurns: each turn is billed what its messages were billed
// since the last turn ended, a message still growing at a turn's end
// counts its growth in the next, and user messages count nothing.
func TestStoreLogTurns(t *testing.T) {
	m := memStore{"ses_1": {user("msg_0"), req1, req2, req3}}
	c := newStoreLog(m)
	b := c.turnBill("ses_1", promptResult(300, 23, 7, 4900))
	want := runs.Usage{InputTokens: 15400, CacheReadTokens: 13800, OutputTokens: 110, ReasoningTokens: 26}
	if !b.OK || b.Usage != want || len(b.Events) != 0 {
		t.Errorf("turn 1 %+v, want %+v", b, want)
	}
	wantBillCost(t, "turn 1", b.CostUSD, 0.00495+0.00282+0.00282)

	// Turn 2: a new message, and msg_3 (listed twice, the last row
	// counts) grew.
	m["ses_1"] = append(m["ses_1"], user("msg_4"),
		assistant("msg_3", `{"input":300,"output":30,"reasoning":7,"cache":{"read":4900}}`, 0.003),
		assistant("msg_3", `{"input":300,"output":33,"reasoning":7,"cache":{"read":4900}}`, 0.0031),
		assistant("msg_5", `{"input":100,"output":5,"cache":{"read":50,"write":7}}`, 0.001))
	b = c.turnBill("ses_1", promptResult(100, 5, 0, 50))
	want = runs.Usage{InputTokens: 157, CacheReadTokens: 50, CacheWriteTokens: 7, OutputTokens: 15}
	if !b.OK || b.Usage != want {
		t.Errorf("turn 2 %+v, want %+v", b, want)
	}
	wantBillCost(t, "turn 2", b.CostUSD, 0.001+0.0031-0.00282)

	// Turn 3: nothing new (a cancelled turn that made no request).
	b = c.turnBill("ses_1", promptResult(0, 0, 0, 0))
	if !b.OK || !b.Usage.IsZero() || b.CostUSD != nil {
		t.Errorf("turn 3 %+v", b)
	}
	// A process that ended mid-turn: no result, the store still counts.
	m["ses_1"] = append(m["ses_1"], assistant("msg_6", `{"input":10,"output":1}`, 0))
	b = c.turnBill("ses_1", nil)
	if !b.OK || b.Usage != (runs.Usage{InputTokens: 10, OutputTokens: 1}) || b.CostUSD != nil {
		t.Errorf("turn 4 %+v: a model without a price has no cost", b)
	}
}

// TestStoreLogFallback: a store that cannot be read, or that counts less
// than the prompt result, gives the prompt result's figures with one
// warning, and every later turn takes them too, without a warning.
func TestStoreLogFallback(t *testing.T) {
	cases := map[string]struct {
		rec  records
		code string
	}{
		"missing":    {sqliteStore{files: runs.HostFiles{}, path: filepath.Join(t.TempDir(), "none.db")}, "usage_unreadable"},
		"failing":    {failStore{errors.New("database is locked")}, "usage_unreadable"},
		"no session": {memStore{}, "usage_mismatch"},
		"bad json":   {memStore{"ses_1": {req1, {ID: "msg_x", Data: []byte(`{"role":`)}}}, "usage_unreadable"},
		"short":      {memStore{"ses_1": {user("msg_0"), req1}}, "usage_mismatch"},
		"too big":    {memStore{"ses_1": {{ID: "msg_x", Data: make([]byte, maxMessageBytes+1)}}}, "usage_unreadable"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newStoreLog(tc.rec)
			prompt := promptResult(300, 23, 7, 4900)
			want := runs.Usage{InputTokens: 5200, CacheReadTokens: 4900, OutputTokens: 30, ReasoningTokens: 7}
			b := c.turnBill("ses_1", prompt)
			if !b.OK || b.Usage != want || b.CostUSD != nil || len(b.Events) != 1 || b.Events[0].Data.(runs.WarningData).Code != tc.code {
				t.Errorf("turn 1 %+v, want the prompt's %+v and a %s warning", b, want, tc.code)
			}
			b = c.turnBill("ses_1", prompt)
			if !b.OK || b.Usage != want || len(b.Events) != 0 {
				t.Errorf("turn 2 %+v, want the prompt's %+v and no warning", b, want)
			}
			if b = c.turnBill("ses_1", nil); b.OK || len(b.Events) != 0 {
				t.Errorf("turn 3, no result: %+v", b)
			}
		})
	}
}

// TestStoreLogBounds: absurd counts and costs stay bounded and
// non-negative; a session with too many messages is not read.
func TestStoreLogBounds(t *testing.T) {
	m := memStore{"ses_1": {
		assistant("msg_1", `{"input":-5,"output":1099511627776000,"reasoning":-1,"cache":{"read":-3}}`, -1),
		assistant("msg_2", `{"input":1}`, 1e300),
	}}
	b := newStoreLog(m).turnBill("ses_1", nil)
	if !b.OK || b.Usage.InputTokens != 1 || b.Usage.OutputTokens != maxTokens || b.CostUSD != nil {
		t.Errorf("%+v cost %v", b, b.CostUSD)
	}
	many := make([]storedMessage, maxMessages+1)
	for i := range many {
		many[i] = user("m")
	}
	if b := newStoreLog(memStore{"ses_1": many}).turnBill("ses_1", nil); len(b.Events) != 1 {
		t.Errorf("a session of %d messages: %+v", len(many), b)
	}
}

// TestSQLiteStore reads a database laid out as OpenCode 1.18.33's (the
// message and session tables of its migrations, WAL mode), through the
// same query as a run: the session's messages and its subagents', not
// another session's; a row too big is refused.
func TestSQLiteStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir with ?#% signs", "opencode.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(path, "%", "%25"), "?", "%3f"), "#", "%23"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`PRAGMA journal_mode=WAL`,
		"CREATE TABLE `session` (`id` text PRIMARY KEY, `parent_id` text, `title` text NOT NULL)",
		"CREATE TABLE `message` (`id` text PRIMARY KEY, `session_id` text NOT NULL, `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL)",
		`INSERT INTO session VALUES ('ses_1', NULL, 'run'), ('ses_sub', 'ses_1', 'subagent'), ('ses_subsub', 'ses_sub', 'x'), ('ses_other', NULL, 'other')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	insert := func(id, session string, data []byte) {
		if _, err := db.Exec(`INSERT INTO message VALUES (?, ?, 1, 2, ?)`, id, session, string(data)); err != nil {
			t.Fatal(err)
		}
	}
	insert("msg_1", "ses_1", req1.Data)
	insert("msg_2", "ses_sub", req2.Data)
	insert("msg_3", "ses_subsub", req3.Data)
	insert("msg_4", "ses_other", req3.Data)
	s := sqliteStore{files: runs.HostFiles{}, path: path}
	msgs, err := s.Messages("ses_1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "msg_1,msg_2,msg_3" || string(msgs[0].Data) != string(req1.Data) {
		t.Errorf("messages %v", ids)
	}
	insert("msg_5", "ses_1", []byte(`{"role":"user","x":"`+strings.Repeat("a", maxMessageBytes)+`"}`))
	if _, err := s.Messages("ses_1"); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("a message too big: %v", err)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("the database is not in WAL mode: %v", err)
	}
}

// TestStoreLogUsageSoFar: during a turn, the usage so far is what the
// messages were billed since the last turn, without moving the turn's
// bill on; a store that cannot be read gives none.
func TestStoreLogUsageSoFar(t *testing.T) {
	m := memStore{"ses_1": {user("msg_0"), req1}}
	c := newStoreLog(m)
	u, ok := c.usageSoFar("ses_1")
	want1 := runs.Usage{InputTokens: 5000, CacheReadTokens: 4000, OutputTokens: 50, ReasoningTokens: 12}
	if !ok || u != want1 {
		t.Errorf("so far %+v %v, want %+v", u, ok, want1)
	}
	if cost, ok := c.takeCostSoFar(); !ok || math.Abs(cost-0.00495) > 1e-12 {
		t.Errorf("cost so far %v %v, want req1's", cost, ok)
	}
	if _, ok := c.takeCostSoFar(); ok {
		t.Error("the cost so far was taken twice")
	}
	m["ses_1"] = append(m["ses_1"], req2, req3)
	b := c.turnBill("ses_1", promptResult(300, 23, 7, 4900))
	if b.Usage.InputTokens != 15400 || b.Usage.OutputTokens != 110 {
		t.Errorf("the turn's bill %+v after usage so far: want all three requests", b.Usage)
	}
	if u, ok := c.usageSoFar("ses_1"); !ok || !u.IsZero() {
		t.Errorf("so far after the turn %+v %v, want zero", u, ok)
	}
	if _, ok := newStoreLog(failStore{errors.New("locked")}).usageSoFar("ses_1"); ok {
		t.Error("an unreadable store gave a usage so far")
	}
}

// TestStoreLogLoaded: a resumed session's first turn is billed only the
// messages since the load, and a store unreadable at the load gives one
// warning and the prompt results' figures.
func TestStoreLogLoaded(t *testing.T) {
	m := memStore{"ses_1": {user("msg_0"), req1}}
	c := newStoreLog(m)
	if evs := c.loaded("ses_1"); len(evs) != 0 {
		t.Errorf("loaded: %v", evs)
	}
	m["ses_1"] = append(m["ses_1"], user("msg_4"), req2)
	b := c.turnBill("ses_1", promptResult(300, 23, 7, 4900))
	want := runs.Usage{InputTokens: 5200, CacheReadTokens: 4900, OutputTokens: 30, ReasoningTokens: 7}
	if !b.OK || b.Usage != want {
		t.Errorf("first turn after the load %+v, want %+v", b, want)
	}
	wantBillCost(t, "first turn", b.CostUSD, 0.00282)

	c = newStoreLog(failStore{err: errors.New("locked")})
	if evs := c.loaded("ses_1"); len(evs) != 1 || evs[0].Type != runs.EventWarning {
		t.Fatalf("loaded from a failing store: %v", evs)
	}
	if b := c.turnBill("ses_1", promptResult(300, 23, 7, 4900)); !b.OK || b.Usage.InputTokens != 5200 || len(b.Events) != 0 {
		t.Errorf("turn after a failed load %+v", b)
	}
}
