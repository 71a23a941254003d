package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// files is what a decoder uses of the Invocation's runs.CLIFiles, its
// only access to the file system: reading the chat recording the CLI
// keeps in its home (see doc.go, "Usage of a session").
type files interface {
	// Open opens a file for reading.
	Open(name string) (io.ReadSeekCloser, error)
	// ReadDir returns the names in a directory.
	ReadDir(name string) ([]string, error)
}

// Bounds on what is read of the CLI's files. A chat line holds a whole
// tool result (the CLI truncates those at 4 million characters by
// default), so a line may be long; a longer one fails the read rather
// than be skipped, since it may carry a message's tokens.
const (
	maxChatLine     = 32 << 20
	maxProjectsFile = 4 << 20
	maxFirstLine    = 64 << 10
)

// chatLog reads one session's usage from the CLI's chat recording,
// $HOME/.gemini/tmp/<project>/chats/session-<time>-<id[:8]>.jsonl, which
// has each model response's full usageMetadata (doc.go). The file is
// append-only JSONL; each turn reads only what was appended since the
// last. It is the session decoder's, called under its lock.
type chatLog struct {
	fs        files
	home, cwd string

	// path is the session's file once found; off is how much of it was
	// parsed (whole lines only).
	path string
	off  int64
	// msgs are the tokens of every model response recorded, by message
	// id, and sum their total. A message is never forgotten (a rewind
	// or a rewritten file does not unbill it); one recorded again
	// replaces its figure.
	msgs map[string]runs.Usage
	sum  runs.Usage
	// last is sum at the end of the previous turn.
	last runs.Usage
	// lost: the recording failed a turn once; that and every later turn
	// take the prompt result's figures, so that nothing is counted twice.
	lost bool
}

func newChatLog(fs files, home, cwd string) *chatLog {
	return &chatLog{fs: fs, home: home, cwd: cwd, msgs: map[string]runs.Usage{}}
}

// turnUsage implements acp.Profile.TurnUsage: the tokens recorded since
// the last turn ended. result is the prompt's result (nil for an error
// answer or a process that ended mid-turn), whose _meta.quota.token_count
// is the fallback and a check: it counts the same requests' prompt and
// candidates tokens, so the recording must hold at least as many.
func (c *chatLog) turnUsage(session string, result json.RawMessage) (runs.Usage, bool, []runs.Event) {
	meta, hasMeta := readSessionUsage(result)
	if c.lost {
		return meta, hasMeta, nil
	}
	if err := c.read(session); err != nil {
		c.lost = true
		return meta, hasMeta, []runs.Event{runs.Warning("usage_unreadable",
			"the CLI's chat recording could not be read ("+err.Error()+"): this turn's and later turns' usage lack cached and thought tokens")}
	}
	turn := c.sum.Sub(c.last)
	c.last = c.sum
	// Only a message recorded again with smaller counts could break
	// these; the CLI never does so, the bound is for a damaged file.
	turn.CacheReadTokens = min(turn.CacheReadTokens, turn.InputTokens)
	turn.ReasoningTokens = min(turn.ReasoningTokens, turn.OutputTokens)
	if hasMeta && (turn.InputTokens < meta.InputTokens || turn.OutputTokens-turn.ReasoningTokens < meta.OutputTokens) {
		c.lost = true
		return meta, true, []runs.Event{runs.Warning("usage_mismatch", fmt.Sprintf(
			"the CLI's chat recording counts fewer tokens for this turn (input %d, output %d) than its prompt result (input %d, output %d): this turn's and later turns' usage lack cached and thought tokens",
			turn.InputTokens, turn.OutputTokens-turn.ReasoningTokens, meta.InputTokens, meta.OutputTokens))}
	}
	return turn, true, nil
}

// soFar implements acp.Profile.UsageSoFar: the tokens recorded since the
// last turn ended, without ending the turn. A response's tokens are
// recorded once its stream ended, before its tool calls run, so at a
// tool call's start the file holds the response that asked for it. A
// failed read reports nothing here; the turn's end reports it.
func (c *chatLog) soFar(session string) (runs.Usage, bool) {
	if c.lost || c.read(session) != nil {
		return runs.Usage{}, false
	}
	u := c.sum.Sub(c.last)
	u.CacheReadTokens = min(u.CacheReadTokens, u.InputTokens)
	u.ReasoningTokens = min(u.ReasoningTokens, u.OutputTokens)
	return u, true
}

// read parses what was appended to the session's file since the last
// read, finding the file first.
func (c *chatLog) read(session string) error {
	if c.path == "" {
		p, err := c.find(session)
		if err != nil {
			return err
		}
		c.path = p
	}
	f, err := c.fs.Open(c.path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if size < c.off {
		// Rewritten (the CLI does so when it cannot read the file back):
		// the same messages under the same ids, read again.
		c.off = 0
	}
	if _, err := f.Seek(c.off, io.SeekStart); err != nil {
		return err
	}
	n, err := c.parse(f)
	c.off += n
	return err
}

// parse reads whole lines from r, recording the tokens they carry, and
// returns the bytes consumed. A line without its newline is left for the
// next read: the CLI writes each record with one synchronous append.
func (c *chatLog) parse(r io.Reader) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var n int64
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxChatLine {
			return n, fmt.Errorf("a line of the chat recording is longer than %d bytes", maxChatLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
		n += int64(len(line))
		c.record(line)
		line = line[:0]
	}
}

// chatRecord is what is read of one line of the recording: a message
// ({id, type, tokens, …}), or a metadata update whose $set may list
// messages.
type chatRecord struct {
	ID     string      `json:"id"`
	Tokens *chatTokens `json:"tokens"`
	Set    *struct {
		Messages []chatRecord `json:"messages"`
	} `json:"$set"`
}

// chatTokens is a model response's usageMetadata as the CLI records it:
// input promptTokenCount (cached included), output candidatesTokenCount,
// cached cachedContentTokenCount, thoughts thoughtsTokenCount, tool
// toolUsePromptTokenCount, total totalTokenCount.
type chatTokens struct {
	Input    int64 `json:"input"`
	Output   int64 `json:"output"`
	Cached   int64 `json:"cached"`
	Thoughts int64 `json:"thoughts"`
	Tool     int64 `json:"tool"`
	Total    int64 `json:"total"`
}

// usage normalizes a response's tokens as the one-shot stats are
// (normalize): reasoning is what the total holds beyond input and
// output, i.e. the thoughts (and tool-use prompt tokens, which function
// calls never bill).
func (t chatTokens) usage() runs.Usage {
	in, out, cached := bound(t.Input), bound(t.Output), bound(t.Cached)
	reasoning := bound(bound(t.Thoughts) + bound(t.Tool))
	if total := bound(t.Total); total > 0 {
		reasoning = max(total-in-out, 0)
	}
	return runs.Usage{
		InputTokens:     in,
		CacheReadTokens: min(cached, in),
		OutputTokens:    bound(out + reasoning),
		ReasoningTokens: reasoning,
	}
}

// record takes the tokens of one line. A line that is not JSON is
// skipped: it carries nothing the CLI would count either.
func (c *chatLog) record(line []byte) {
	var r chatRecord
	if json.Unmarshal(line, &r) != nil {
		return
	}
	c.take(r, 0)
}

func (c *chatLog) take(r chatRecord, depth int) {
	if r.ID != "" && r.Tokens != nil {
		u := r.Tokens.usage()
		c.sum = boundUsage(c.sum.Add(u)).Sub(c.msgs[r.ID])
		c.msgs[r.ID] = u
	}
	if r.Set != nil && depth == 0 {
		for _, m := range r.Set.Messages {
			c.take(m, depth+1)
		}
	}
}

// find locates the session's file: in the project directory that the
// CLI's registry ($HOME/.gemini/projects.json) names for the run's
// directory, else in any project directory. The file's name holds the
// id's first 8 characters; its first line must name the whole id.
func (c *chatLog) find(session string) (string, error) {
	if len(session) < 8 || strings.ContainsAny(session, `/\`) {
		return "", fmt.Errorf("no session id to find its recording by (%q)", session)
	}
	tmp := filepath.Join(c.home, ".gemini", "tmp")
	if slug := c.projectSlug(); slug != "" {
		if p := c.findIn(filepath.Join(tmp, slug, "chats"), session); p != "" {
			return p, nil
		}
	}
	projects, err := c.fs.ReadDir(tmp)
	if err != nil {
		return "", err
	}
	for _, proj := range projects {
		if p := c.findIn(filepath.Join(tmp, proj, "chats"), session); p != "" {
			return p, nil
		}
	}
	return "", fmt.Errorf("no file of session %s under %s", session, tmp)
}

// projectSlug is the registry's name for the run's directory, "" if it
// has none or cannot be read.
func (c *chatLog) projectSlug() string {
	f, err := c.fs.Open(filepath.Join(c.home, ".gemini", "projects.json"))
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxProjectsFile))
	if err != nil {
		return ""
	}
	var reg struct {
		Projects map[string]string `json:"projects"`
	}
	if json.Unmarshal(b, &reg) != nil {
		return ""
	}
	slug := reg.Projects[filepath.Clean(c.cwd)]
	if slug == "" || slug != filepath.Base(slug) || slug == ".." {
		return ""
	}
	return slug
}

// findIn is the session's file in a chats directory, "" if none.
func (c *chatLog) findIn(dir, session string) string {
	names, err := c.fs.ReadDir(dir)
	if err != nil {
		return ""
	}
	suffix := "-" + session[:8] + ".jsonl"
	for _, name := range names {
		if !strings.HasPrefix(name, "session-") || !strings.HasSuffix(name, suffix) {
			continue
		}
		p := filepath.Join(dir, name)
		if c.firstSession(p) == session {
			return p
		}
	}
	return ""
}

// firstSession is the sessionId of a file's first line.
func (c *chatLog) firstSession(path string) string {
	f, err := c.fs.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	b, _ := io.ReadAll(io.LimitReader(f, maxFirstLine))
	first, _, _ := bytes.Cut(b, []byte("\n"))
	var meta struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(first, &meta) != nil {
		return ""
	}
	return meta.SessionID
}

// boundUsage clamps every count to [0, maxTokens]: a sum of bounded
// counts stays far from overflow once clamped after each addition.
func boundUsage(u runs.Usage) runs.Usage {
	return runs.Usage{
		InputTokens: bound(u.InputTokens), CacheReadTokens: bound(u.CacheReadTokens), CacheWriteTokens: bound(u.CacheWriteTokens),
		OutputTokens: bound(u.OutputTokens), ReasoningTokens: bound(u.ReasoningTokens),
	}
}
