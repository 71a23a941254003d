package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// memFiles is files over a map of path → contents, for decoder tests that
// do no I/O.
type memFiles map[string][]byte

type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

func (m memFiles) Open(name string) (io.ReadSeekCloser, error) {
	b, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return memFile{bytes.NewReader(b)}, nil
}

func (m memFiles) ReadDir(name string) ([]string, error) {
	seen := map[string]bool{}
	for p := range m {
		if rest, ok := strings.CutPrefix(p, name+"/"); ok {
			first, _, _ := strings.Cut(rest, "/")
			seen[first] = true
		}
	}
	if len(seen) == 0 {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// ReadFile, Remove and HostPath complete runs.CLIFiles, which an
// Invocation carries; the decoder uses none of them.
func (m memFiles) ReadFile(name string) ([]byte, error) { return runs.NoFiles{}.ReadFile(name) }
func (m memFiles) Remove(name string) error             { return runs.NoFiles{}.Remove(name) }
func (m memFiles) HostPath(name string) (string, error) { return runs.NoFiles{}.HostPath(name) }

func (m memFiles) add(name, text string) { m[name] = append(m[name], text...) }

const (
	testHome    = "/home/g"
	testCwd     = "/work/run-1"
	testSession = "bd8bd01c-1796-4a19-a7f8-c368bd4de043"
	testChat    = testHome + "/.gemini/tmp/run-1/chats/session-2026-12-01T08-46-bd8bd01c.jsonl"
)

// chatLine is a gemini message line as 0.61.0 records it.
func chatLine(id string, in, out, cached, thoughts int64) string {
	b, _ := json.Marshal(map[string]any{"id": id, "type": "gemini", "content": "x", "thoughts": []any{},
		"tokens": map[string]int64{"input": in, "output": out, "cached": cached, "thoughts": thoughts, "tool": 0, "total": in + out + thoughts}})
	return string(b) + "\n"
}

// chatHome is a home holding the registry and the session's file, as the
// real CLI left them after a session's start (realcli probe, 0.61.0).
func chatHome() memFiles {
	m := memFiles{}
	m.add(testHome+"/.gemini/projects.json", `{"projects":{"`+testCwd+`":"run-1"}}`)
	// Another session of the same project, started first.
	m.add(testHome+"/.gemini/tmp/run-1/chats/session-2026-12-01T08-46-3b6f5969.jsonl", `{"sessionId":"3b6f5969-6cb5-4ca3-a335-3c798f2a7fe7","kind":"main"}`+"\n"+chatLine("other", 9, 9, 9, 9))
	m.add(testChat, `{"sessionId":"`+testSession+`","projectHash":"56","kind":"main"}`+"\n")
	m.add(testChat, `{"$set":{"messages":[{"id":"ctx","type":"user","content":[{"text":"<session_context>"}]}],"lastUpdated":"t"}}`+"\n")
	m.add(testChat, `{"id":"u1","type":"user","content":[{"text":"Run two commands."}]}`+"\n")
	return m
}

func meta(in, out int64) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"stopReason": "end_turn", "_meta": map[string]any{"quota": map[string]any{
		"token_count": map[string]int64{"input_tokens": in, "output_tokens": out}}}})
	return b
}

func usageOf(in, cached, out, reasoning int64) runs.Usage {
	return runs.Usage{InputTokens: in, CacheReadTokens: cached, OutputTokens: out + reasoning, ReasoningTokens: reasoning}
}

func wantTurn(t *testing.T, c *chatLog, result json.RawMessage, want runs.Usage, warn string) {
	t.Helper()
	u, ok, evs := c.turnUsage(testSession, result)
	if !ok || u != want {
		t.Errorf("turn usage %+v (ok %v), want %+v", u, ok, want)
	}
	var codes []string
	for _, ev := range evs {
		codes = append(codes, ev.Data.(runs.WarningData).Code)
	}
	if strings.Join(codes, ",") != warn {
		t.Errorf("warnings %v, want %q", codes, warn)
	}
}

// TestChatLogTurns: each turn is what was recorded since the last one;
// a message recorded again counts once, a line without its newline waits
// for the next turn, and a cancelled turn (no result) counts too.
func TestChatLogTurns(t *testing.T) {
	m := chatHome()
	c := newChatLog(m, testHome, testCwd)
	m.add(testChat, chatLine("g1", 5200, 40, 3100, 25))
	m.add(testChat, `{"$set":{"lastUpdated":"t"}}`+"\n")
	// The same message again, with its tool calls: counted once.
	m.add(testChat, chatLine("g1", 5200, 40, 3100, 25))
	m.add(testChat, chatLine("g2", 5400, 18, 5000, 9))
	m.add(testChat, "not json\n")
	wantTurn(t, c, meta(10600, 58), usageOf(10600, 8100, 58, 34), "")

	m.add(testChat, chatLine("g3", 1200, 12, 300, 7))
	half := chatLine("g4", 1000, 10, 100, 5)
	m.add(testChat, half[:20])
	wantTurn(t, c, meta(1200, 12), usageOf(1200, 300, 12, 7), "")
	m.add(testChat, half[20:])
	// Cancelled: no result, the recording alone.
	wantTurn(t, c, nil, usageOf(1000, 100, 10, 5), "")
	// Nothing new: a zero turn.
	wantTurn(t, c, meta(0, 0), runs.Usage{}, "")
}

// TestChatLogRewritten: a file the CLI rewrote (shorter, the same
// messages) is read again without counting anything twice, and a
// rewind does not unbill.
func TestChatLogRewritten(t *testing.T) {
	m := chatHome()
	c := newChatLog(m, testHome, testCwd)
	m.add(testChat, chatLine("g1", 5200, 40, 3100, 25))
	m.add(testChat, chatLine("g2", 5400, 18, 5000, 9))
	wantTurn(t, c, meta(10600, 58), usageOf(10600, 8100, 58, 34), "")
	m[testChat] = []byte(`{"sessionId":"` + testSession + `"}` + "\n" + chatLine("g1", 5200, 40, 3100, 25) + `{"$rewindTo":"g2"}` + "\n")
	m.add(testChat, chatLine("g3", 1200, 12, 300, 7))
	wantTurn(t, c, meta(1200, 12), usageOf(1200, 300, 12, 7), "")
}

// TestChatLogFinds: without the registry, the session's file is found in
// any project directory by its name and first line.
func TestChatLogFinds(t *testing.T) {
	m := chatHome()
	delete(m, testHome+"/.gemini/projects.json")
	moved := testHome + "/.gemini/tmp/elsewhere/chats/session-2026-12-01T08-47-bd8bd01c.jsonl"
	m[moved] = m[testChat]
	// A file of another session whose id starts alike is not taken.
	m[testChat] = []byte(`{"sessionId":"bd8bd01c-0000-0000-0000-000000000000"}` + "\n" + chatLine("x", 1, 1, 1, 1))
	m.add(moved, chatLine("g1", 100, 10, 50, 5))
	c := newChatLog(m, testHome, testCwd)
	wantTurn(t, c, meta(100, 10), usageOf(100, 50, 10, 5), "")
	if c.path != moved {
		t.Errorf("read %s", c.path)
	}
}

// TestChatLogFallback: a recording that cannot be read, or that counts
// less than the prompt result, gives the prompt result's figures with one
// warning, for that turn and every later one (nothing is counted twice).
func TestChatLogFallback(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		m := chatHome()
		delete(m, testChat)
		c := newChatLog(m, testHome, testCwd)
		wantTurn(t, c, meta(100, 10), runs.Usage{InputTokens: 100, OutputTokens: 10}, "usage_unreadable")
		m[testChat] = []byte(`{"sessionId":"` + testSession + `"}` + "\n" + chatLine("g1", 100, 10, 50, 5) + chatLine("g2", 200, 20, 50, 5))
		wantTurn(t, c, meta(200, 20), runs.Usage{InputTokens: 200, OutputTokens: 20}, "")
		if u, ok, _ := c.turnUsage(testSession, nil); ok || !u.IsZero() {
			t.Errorf("a cancelled turn after the fallback: %+v %v", u, ok)
		}
	})
	t.Run("mismatch", func(t *testing.T) {
		m := chatHome()
		m.add(testChat, chatLine("g1", 100, 10, 50, 5))
		c := newChatLog(m, testHome, testCwd)
		wantTurn(t, c, meta(300, 10), runs.Usage{InputTokens: 300, OutputTokens: 10}, "usage_mismatch")
		m.add(testChat, chatLine("g2", 200, 20, 50, 5))
		wantTurn(t, c, meta(200, 20), runs.Usage{InputTokens: 200, OutputTokens: 20}, "")
	})
	t.Run("long_line", func(t *testing.T) {
		m := chatHome()
		m.add(testChat, `{"id":"big","content":"`+strings.Repeat("a", maxChatLine)+`"}`+"\n")
		c := newChatLog(m, testHome, testCwd)
		wantTurn(t, c, meta(1, 1), runs.Usage{InputTokens: 1, OutputTokens: 1}, "usage_unreadable")
	})
	t.Run("no_session", func(t *testing.T) {
		c := newChatLog(chatHome(), testHome, testCwd)
		if u, ok, evs := c.turnUsage("", meta(5, 5)); !ok || u != (runs.Usage{InputTokens: 5, OutputTokens: 5}) || len(evs) != 1 {
			t.Errorf("no session id: %+v %v %v", u, ok, evs)
		}
	})
}

// TestChatLogRealFiles reads a recording through runs.HostFiles, laid out as
// the real CLI lays it out.
func TestChatLogRealFiles(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	chats := filepath.Join(home, ".gemini", "tmp", path.Base(cwd), "chats")
	if err := os.MkdirAll(chats, 0o755); err != nil {
		t.Fatal(err)
	}
	reg, _ := json.Marshal(map[string]any{"projects": map[string]string{cwd: path.Base(cwd)}})
	if err := os.WriteFile(filepath.Join(home, ".gemini", "projects.json"), reg, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(chats, "session-2026-12-01T08-46-bd8bd01c.jsonl")
	if err := os.WriteFile(file, []byte(`{"sessionId":"`+testSession+`"}`+"\n"+chatLine("g1", 100, 10, 50, 5)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newChatLog(runs.HostFiles{}, home, cwd)
	wantTurn(t, c, meta(100, 10), usageOf(100, 50, 10, 5), "")
	if _, err := (runs.HostFiles{}).ReadDir(filepath.Join(home, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadDir of nothing: %v", err)
	}
}

// FuzzChatLog feeds arbitrary bytes as a session's recording, appended
// in two parts across two turns: nothing panics, no count is negative,
// cached tokens are within the input and reasoning within the output.
func FuzzChatLog(f *testing.F) {
	f.Add([]byte(chatLine("g1", 5200, 40, 3100, 25)+chatLine("g1", 5200, 40, 3100, 25)+chatLine("g2", 1, 2, 3, 4)), 10)
	f.Add([]byte(`{"$set":{"messages":[{"id":"a","tokens":{"input":5,"total":-3}},{"$set":{}}]}}`+"\n"+`{"id":"b","tokens":{"input":1e300}}`+"\n"), 3)
	f.Add([]byte(`{"id":"c","tokens":{"input":9223372036854775807,"output":9223372036854775807,"thoughts":9223372036854775807}}`+"\n"), 0)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		if cut < 0 || cut > len(data) {
			cut = len(data) / 2
		}
		m := chatHome()
		c := newChatLog(m, testHome, testCwd)
		for _, part := range [][]byte{data[:cut], data[cut:]} {
			m[testChat] = append(m[testChat], part...)
			u, ok, _ := c.turnUsage(testSession, nil)
			if !c.lost && !ok || u.InputTokens < 0 || u.CacheReadTokens < 0 || u.OutputTokens < 0 || u.ReasoningTokens < 0 ||
				u.CacheReadTokens > u.InputTokens || u.ReasoningTokens > u.OutputTokens {
				t.Fatalf("turn usage %+v ok %v", u, ok)
			}
		}
	})
}
