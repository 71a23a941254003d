package faults

// Sessions and files that follow the run: a conversation resumed through
// nginx on whichever replica takes each turn, a finished run's directory
// served by every replica, a resume after kill -9 of the replica that
// began the session, and one session refused to a second run at once.

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// sessionFile is the file the session's first run writes, and what it
// holds.
const (
	sessionFile    = "first.txt"
	sessionContent = "written by the first turn"
)

// appendRE finds the line a turn appends to turnsFile in its prompt.
var appendRE = regexp.MustCompile(`append-file (ws-[a-z0-9-]+)`)

// turnsFile is the file every resume appends its tag to.
const turnsFile = "turns.txt"

// sessionScenario answers by the newest user message only (a resumed
// request carries the whole conversation): "write-file" writes
// sessionFile with Bash, "append-file TAG" appends TAG to turnsFile,
// "read-file" reads it back, "sleep:N" sleeps N
// seconds, anything else is text; a request carrying a tool's result is
// answered with text.
func sessionScenario() anthropic.Scenario {
	return anthropic.Func(func(req *anthropic.Request) anthropic.Response {
		if len(req.ToolResults()) > 0 {
			return anthropic.TextAnswer("Done with the tool.").Respond(req)
		}
		text := lastUserText(req)
		switch {
		case strings.Contains(text, "write-file"):
			return anthropic.ToolTurn("printf '"+sessionContent+"' > "+sessionFile, "Wrote it.").Respond(req)
		case appendRE.MatchString(text):
			line := appendRE.FindStringSubmatch(text)[1]
			return anthropic.ToolTurn("printf '"+line+"\\n' >> "+turnsFile, "Appended.").Respond(req)
		case strings.Contains(text, "read-file"):
			return anthropic.ToolTurn("cat "+sessionFile, "Read it.").Respond(req)
		}
		if m := sleepRE.FindStringSubmatch(text); m != nil {
			return anthropic.ToolTurn("perl -e 'sleep "+m[1]+"'", "Slept.").Respond(req)
		}
		return anthropic.TextAnswer("Hello from the mock.").Respond(req)
	})
}

// lastUserText is the text of the request's last user message.
func lastUserText(req *anthropic.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == "user" {
			return userText(m)
		}
	}
	return ""
}

func userText(m anthropic.Turn) string {
	var parts []string
	for _, b := range m.Blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// turnBody is a claude run of prompt, tagged, resuming session unless it
// is empty.
func turnBody(prompt, tag, session string) string {
	body := map[string]any{"agent": "claude", "prompt": prompt + " " + tag, "metadata": map[string]string{"tag": tag}}
	if session != "" {
		body["resume_session_id"] = session
	}
	b, _ := json.Marshal(body)
	return string(b)
}

// turn is one finished run of the session.
type turn struct {
	Tag     string
	ID      string
	Session string
	Replica int // the gateway that executed it
}

// sessionRig is a rig whose runs continue one session.
type sessionRig struct {
	*rig
	t     *testing.T
	mock  *anthropic.Server
	turns []turn
}

// run submits prompt through nginx, resuming the session's last turn
// (none for the first), waits for it to succeed and records its turn.
func (s *sessionRig) run(prompt, tag string) turn {
	s.t.Helper()
	var session string
	if len(s.turns) > 0 {
		session = s.turns[len(s.turns)-1].Session
	}
	sub, err := post(s.Nginx, turnBody(prompt, tag, session), "")
	if err != nil || sub.Status != http.StatusCreated {
		s.t.Fatalf("%s: POST through nginx = %d %s %v", tag, sub.Status, sub.Raw, err)
	}
	s.track(sub.Run.ID)
	rec, err := waitTerminal(s.t, s.Nginx, sub.Run.ID, settleWithin)
	if err != nil || rec.Status != runs.Succeeded || rec.SessionID == "" {
		s.t.Fatalf("%s: run %s ended %s %+v with session %q (%v)", tag, sub.Run.ID, rec.Status, rec.Error, rec.SessionID, err)
	}
	tr := turn{Tag: tag, ID: rec.ID, Session: rec.SessionID, Replica: s.executor(rec.ID)}
	s.t.Logf("%s: run %s on gateway %d, session %s", tag, tr.ID, tr.Replica, tr.Session)
	s.turns = append(s.turns, tr)
	return tr
}

// onlyReplica is the gateway that ran every resume so far, 0 when they
// ran on more than one.
func (s *sessionRig) onlyReplica() int {
	seen := map[int]bool{}
	for _, tr := range s.turns[1:] {
		seen[tr.Replica] = true
	}
	if len(seen) != 1 {
		return 0
	}
	for n := range seen {
		return n
	}
	return 0
}

// executor is the gateway (1-3) whose log says it started the run, 0 when
// none does.
func (r *rig) executor(id string) int {
	for i := 1; i <= 3; i++ {
		b, _ := os.ReadFile(filepath.Join(r.dir, fmt.Sprintf("gateway%d", i), "log"))
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"run started"`) && strings.Contains(line, id) {
				return i
			}
		}
	}
	return 0
}

// modelSawEarlierTurns checks the mock's last request of tr's turn: the
// one whose newest user message is tr's prompt carries every earlier
// turn's prompt.
func (s *sessionRig) modelSawEarlierTurns(tr turn, earlier []turn) []string {
	var last *anthropic.Request
	for _, e := range s.mock.Ledger().Messages() {
		if requestOfTurn(&e.Request, tr.Tag) {
			last = &e.Request
		}
	}
	if last == nil {
		return []string{fmt.Sprintf("%s: the model received no request of the turn", tr.Tag)}
	}
	var problems []string
	for _, e := range earlier {
		if !last.Contains(e.Tag) {
			problems = append(problems, fmt.Sprintf("%s (run %s, gateway %d): the model's last request of the turn lacks the earlier turn %s (gateway %d)",
				tr.Tag, tr.ID, tr.Replica, e.Tag, e.Replica))
		}
	}
	return problems
}

// requestOfTurn reports whether req belongs to tag's turn: its newest
// user message with text (a tool's result has none) is tag's prompt.
func requestOfTurn(req *anthropic.Request, tag string) bool {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		for _, b := range m.Blocks {
			if b.Type == "text" {
				return strings.Contains(userText(m), tag)
			}
		}
	}
	return false
}

// TestSessionFollowsTheRunAcrossReplicas begins a session with a run that
// writes a file, resumes it 6 times through nginx, one turn after
// another, on whichever replica takes each, reads the first run's
// directory from every replica, kills -9 the replica that began the
// session and resumes it once more, and resumes it twice at once.
func TestSessionFollowsTheRunAcrossReplicas(t *testing.T) {
	began := time.Now()
	mock, err := anthropic.Start("127.0.0.1:0", sessionScenario())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mock.Close)
	// One slot a replica: a replica that has just run a turn pulls from
	// the shared queue after the others, so that turns spread.
	s := &sessionRig{rig: newRig(t, mock, rigOptions{Env: map[string]string{"AGENTGATE_MAX_CONCURRENT_RUNS": "1"}}), t: t, mock: mock}
	s.mustStart()
	t.Logf("rig up in %s", time.Since(began).Round(time.Millisecond))

	first := s.run("write-file", "ws-turn-0")
	var problems []string
	var lines string
	for i := 1; i <= 6; i++ {
		tag := fmt.Sprintf("ws-turn-%d", i)
		var tr turn
		if only := s.onlyReplica(); i == 6 && only != 0 {
			// Every resume so far ran on one replica: the last one
			// runs elsewhere, as it would with that replica gone.
			s.do("term-gateway", only)
			tr = s.run("append-file", tag)
			s.do("start-gateway", only)
		} else {
			tr = s.run("append-file", tag)
		}
		problems = append(problems, s.modelSawEarlierTurns(tr, s.turns[:i])...)
		// Each turn works on the directory the turn before left.
		lines += tag + "\n"
		if got, status := getFile(s.Nginx, tr.ID, turnsFile); status != http.StatusOK || got != lines {
			problems = append(problems, fmt.Sprintf("%s (run %s, gateway %d): GET its %s through nginx = %d %q, want 200 %q", tag, tr.ID, tr.Replica, turnsFile, status, got, lines))
		}
	}
	replicas := map[int]int{}
	for _, tr := range s.turns[1:] {
		replicas[tr.Replica]++
	}
	if len(replicas) < 2 || replicas[0] > 0 {
		problems = append(problems, fmt.Sprintf("the 6 resumes ran on gateways %v: not on more than one, so no resume crossed replicas", replicas))
	}
	t.Logf("resumes by gateway: %v (%s so far)", replicas, time.Since(began).Round(time.Millisecond))

	problems = append(problems, s.sameDirEverywhere(first)...)

	// The replica that began the session dies; the session goes on.
	s.do("kill-gateway", first.Replica)
	after := s.run("read-file", "ws-after-kill")
	problems = append(problems, s.modelSawEarlierTurns(after, s.turns[:len(s.turns)-1])...)
	if !s.modelReadFile(after.Tag) {
		problems = append(problems, fmt.Sprintf("%s (run %s): the model never saw %s's content through the tool: the resumed directory lacks the first run's file", after.Tag, after.ID, sessionFile))
	}
	if got, status := getFile(s.Nginx, after.ID, sessionFile); status != http.StatusOK || got != sessionContent {
		problems = append(problems, fmt.Sprintf("%s: GET its %s through nginx = %d %q, want 200 %q", after.Tag, sessionFile, status, got, sessionContent))
	}

	problems = append(problems, s.busySession()...)
	var made []string
	for _, tr := range s.turns {
		made = append(made, tr.ID)
	}
	problems = append(problems, s.verifyAll(t, made, want{Status: runs.Succeeded}, settleWithin)...)
	report(t, append(problems, checkListing(s.Nginx, made)...))
	t.Logf("the case took %s", time.Since(began).Round(time.Millisecond))
}

// modelReadFile reports whether a tool result of tag's turn carried the
// first run's file.
func (s *sessionRig) modelReadFile(tag string) bool {
	for _, e := range s.mock.Ledger().Messages() {
		if !requestOfTurn(&e.Request, tag) {
			continue
		}
		for _, b := range e.Request.ToolResults() {
			if strings.Contains(b.Text, sessionContent) {
				return true
			}
		}
	}
	return false
}

// sameDirEverywhere reads the first run's archive and file from every
// replica directly: each answers 200 with the directory as the first run
// left it, whatever the turns after it did to the session's directory.
func (s *sessionRig) sameDirEverywhere(first turn) []string {
	var problems []string
	want := map[string]string{sessionFile: sessionContent}
	for i, g := range s.Gateways {
		files, status, err := getArchive(g, first.ID)
		if status != http.StatusOK || err != nil {
			problems = append(problems, fmt.Sprintf("gateway %d: GET the archive of %s = %d %v", i+1, first.ID, status, err))
		} else if !maps.Equal(files, want) {
			problems = append(problems, fmt.Sprintf("gateway %d: the archive of %s holds %q, want %q", i+1, first.ID, files, want))
		}
		if got, status := getFile(g, first.ID, sessionFile); status != http.StatusOK || got != sessionContent {
			problems = append(problems, fmt.Sprintf("gateway %d: GET %s of %s = %d %q, want 200 %q", i+1, sessionFile, first.ID, status, got, sessionContent))
		}
		if got, status := getFile(g, first.ID, turnsFile); status != http.StatusNotFound {
			problems = append(problems, fmt.Sprintf("gateway %d: GET %s of %s, which a later turn wrote = %d %q, want 404", i+1, turnsFile, first.ID, status, got))
		}
	}
	return problems
}

// busySession resumes the session with a turn whose tool runs, and while
// it runs resumes it again: the second is a 409 session_busy, the first
// succeeds.
func (s *sessionRig) busySession() []string {
	s.t.Helper()
	session := s.turns[len(s.turns)-1].Session
	sub, err := post(s.Nginx, turnBody("run the tool sleep:3", "ws-busy-holder", session), "")
	if err != nil || sub.Status != http.StatusCreated {
		s.t.Fatalf("ws-busy-holder: POST through nginx = %d %s %v", sub.Status, sub.Raw, err)
	}
	s.track(sub.Run.ID)
	s.turns = append(s.turns, turn{Tag: "ws-busy-holder", ID: sub.Run.ID})
	var problems []string
	if !waitEvent(s.Nginx, sub.Run.ID, runs.EventToolCallStarted, 90*time.Second) {
		problems = append(problems, fmt.Sprintf("ws-busy-holder (run %s): its tool never started", sub.Run.ID))
	}
	second, err := post(s.Nginx, turnBody("say hello", "ws-busy-second", session), "")
	if err != nil || second.Status != http.StatusConflict || second.Code != "session_busy" {
		problems = append(problems, fmt.Sprintf("a second resume of session %s while run %s runs it = %d %s %v, want 409 session_busy", session, sub.Run.ID, second.Status, second.Raw, err))
		if second.Status == http.StatusCreated {
			s.turns = append(s.turns, turn{Tag: "ws-busy-second", ID: second.Run.ID})
		}
	}
	return problems
}

// getFile reads one file of a run's directory from base.
func getFile(base, id, path string) (string, int) {
	resp, err := client.Get(base + "/v1/runs/" + url.PathEscape(id) + "/files/" + path)
	if err != nil {
		return err.Error(), 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

// getArchive reads a run's archive from base: each regular file's
// content by its path.
func getArchive(base, id string) (map[string]string, int, error) {
	resp, err := client.Get(base + "/v1/runs/" + url.PathEscape(id) + "/archive")
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, fmt.Errorf("%s", b)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, err
	}
	files := map[string]string{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, resp.StatusCode, nil
		}
		if err != nil {
			return files, resp.StatusCode, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return files, resp.StatusCode, err
		}
		files[strings.TrimPrefix(h.Name, "./")] = string(b)
	}
}
