package copilot

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/runs"
)

// sessionData is where the session tests' recordings live: beside the
// one-shot recordings, in a directory of their own, as
// session/<case>.jsonl (a step per line: a line of stdout, or a call the
// test made) and session/<case>.meta.json.
var sessionData = filepath.Join("testdata", "session")

// step is one step of a recorded session: a line the CLI printed, or a
// call of the Session, in the order the decoder saw them.
type step struct {
	Out      *string       `json:"out,omitempty"`
	Call     string        `json:"call,omitempty"` // answer, send, interrupt_turn, close, interrupt
	ID       string        `json:"id,omitempty"`
	Decision runs.Decision `json:"decision,omitempty"`
	Text     string        `json:"text,omitempty"`
	Steer    bool          `json:"steer,omitempty"`
}

// sessionMeta is what a session's Finish needs besides the steps.
type sessionMeta struct {
	RunID  string    `json:"run_id"`
	Home   string    `json:"home"`
	Dir    string    `json:"dir"`
	Spec   runs.Spec `json:"spec"`
	Exit   runs.Exit `json:"exit"`
	Stderr string    `json:"stderr"`
}

// recorder is a Session that keeps the steps the driver took.
type recorder struct {
	runs.Session
	mu    sync.Mutex
	steps []step
}

func (r *recorder) add(s step) {
	r.mu.Lock()
	r.steps = append(r.steps, s)
	r.mu.Unlock()
}

func (r *recorder) Decode(line []byte) []runs.Event {
	l := string(line)
	r.add(step{Out: &l})
	return r.Session.Decode(line)
}

func (r *recorder) Answer(id string, d runs.Decision, msg string) error {
	r.add(step{Call: "answer", ID: id, Decision: d, Text: msg})
	return r.Session.Answer(id, d, msg)
}

func (r *recorder) Send(text string, images []runs.Image, steer bool) error {
	r.add(step{Call: "send", Text: text, Steer: steer})
	return r.Session.Send(text, images, steer)
}

func (r *recorder) InterruptTurn() error {
	r.add(step{Call: "interrupt_turn"})
	return r.Session.InterruptTurn()
}

func (r *recorder) Close() {
	r.add(step{Call: "close"})
	r.Session.Close()
}

func (r *recorder) Interrupt() []byte {
	r.add(step{Call: "interrupt"})
	return r.Session.Interrupt()
}

// writeSession writes the recording of a finished session test.
func writeSession(t *testing.T, name string, r *recorder, meta sessionMeta) {
	t.Helper()
	var buf bytes.Buffer
	r.mu.Lock()
	for _, s := range r.steps {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	r.mu.Unlock()
	m, _ := json.MarshalIndent(meta, "", "  ")
	base := filepath.Join(sessionData, name)
	if err := os.MkdirAll(sessionData, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".jsonl", buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".meta.json", append(m, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sessionName is the recording's name of a session test.
func sessionName(t *testing.T) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(t.Name(), "TestSession")), "/", "_")
}

// loadSession reads a session recording.
func loadSession(t testing.TB, name string) ([]step, sessionMeta) {
	t.Helper()
	base := filepath.Join(sessionData, name)
	var meta sessionMeta
	b, err := os.ReadFile(base + ".meta.json")
	if err == nil {
		err = json.Unmarshal(b, &meta)
	}
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(base + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var steps []step
	for _, l := range bytes.Split(raw, []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var s step
		if err := json.Unmarshal(l, &s); err != nil {
			t.Fatalf("%s.jsonl: %v", base, err)
		}
		steps = append(steps, s)
	}
	return steps, meta
}

// replaySession drives a fresh decoder through the steps as the test
// drove the real one, and returns every event, the calls' errors, and the
// outcome.
func replaySession(steps []step, meta sessionMeta) ([]runs.Event, []string, runs.Outcome) {
	inv := runs.Invocation{RunID: meta.RunID, Home: meta.Home, Dir: meta.Dir, Spec: meta.Spec, CLIVersion: VerifiedVersion}
	dec := New().NewDecoder(inv).(runs.Session)
	dec.Open()
	var evs []runs.Event
	var errs []string
	call := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, s := range steps {
		switch s.Call {
		case "":
			if s.Out != nil {
				evs = append(evs, dec.Decode([]byte(*s.Out))...)
			}
		case "answer":
			call(dec.Answer(s.ID, s.Decision, s.Text))
		case "send":
			call(dec.Send(s.Text, nil, s.Steer))
		case "interrupt_turn":
			call(dec.InterruptTurn())
		case "close":
			dec.Close()
		case "interrupt":
			dec.Interrupt()
		}
		dec.Pending()
	}
	o := dec.Finish(meta.Exit, []byte(meta.Stderr))
	return evs, errs, o
}

// sessionGolden is what a session recording replays to.
type sessionGolden struct {
	Events  []agenttest.GoldenEvent `json:"events"`
	Errors  []string                `json:"call_errors,omitempty"`
	Outcome goldenOutcome           `json:"outcome"`
}

// TestSessionGolden replays every session recording of the real CLI, with
// the calls its test made, against session/<case>.golden.json.
func TestSessionGolden(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(sessionData, "*.meta.json"))
	if len(files) == 0 {
		t.Fatalf("no session recordings in %s: record them with `go test -run TestSession -record-acp`", sessionData)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".meta.json")
		t.Run(name, func(t *testing.T) {
			steps, meta := loadSession(t, name)
			evs, errs, o := replaySession(steps, meta)
			all := append(append([]runs.Event(nil), evs...), o.Events...)
			turns := 0
			for _, ev := range all {
				if ev.Type == runs.EventAgentUnparsed {
					t.Errorf("unparsed: %+v", ev.Data)
				}
				if ev.Type == runs.EventTurnCompleted {
					turns++
				}
			}
			if turns != o.NumTurns || turns == 0 || (o.Status == runs.Succeeded) != (o.Error == nil) {
				t.Errorf("%d turn.completed, outcome %+v", turns, o)
			}
			g := sessionGolden{Events: agenttest.GoldenEvents(evs), Errors: errs, Outcome: goldenOutcome{
				Events: agenttest.GoldenEvents(o.Events), Status: o.Status, StopReason: o.StopReason, Result: o.Result,
				Usage: o.Usage, NumTurns: o.NumTurns, SessionID: o.SessionID, Model: o.Model, Error: o.Error,
			}}
			agenttest.CompareGolden(t, filepath.Join("session", name), g, *update)
		})
	}
}

// FuzzSessionDecode feeds arbitrary lines to the decoder of a session
// that asks for approvals, seeded with the session recordings' stdout,
// and answers every approval it asks: nothing may panic, and every event
// and the outcome must marshal.
func FuzzSessionDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(sessionData, "*.jsonl"))
	for _, name := range files {
		steps, _ := loadSession(f, strings.TrimSuffix(filepath.Base(name), ".jsonl"))
		var buf bytes.Buffer
		for _, s := range steps {
			if s.Out != nil {
				buf.WriteString(*s.Out)
				buf.WriteByte('\n')
			}
		}
		f.Add(buf.Bytes())
	}
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Error: 500 x"}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","usage":{"inputTokens":-5,"outputTokens":1e30,"cachedReadTokens":"x"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update","toolCallId":"c","content":[{"type":"diff","path":"p","oldText":"","newText":"n"}],"status":"completed","rawOutput":{"detailedContent":"diff --git"}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv := runs.Invocation{Home: "/h", Dir: "/d", Spec: runs.Spec{Prompt: "p", Approvals: runs.ApprovalsAsk, Interactive: true}}
		dec := New().NewDecoder(inv).(runs.Session)
		dec.Open()
		var evs []runs.Event
		for _, l := range bytes.Split(data, []byte("\n")) {
			got := dec.Decode(l)
			for _, ev := range got {
				if a, ok := ev.Data.(runs.ApprovalRequestedData); ok {
					_ = dec.Answer(a.ID, runs.AllowSession, "")
				}
			}
			evs = append(evs, got...)
			dec.Pending()
		}
		dec.Close()
		o := dec.Finish(runs.Exit{Code: 1}, data)
		evs = append(evs, o.Events...)
		for _, ev := range evs {
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("event %s does not marshal: %v", ev.Type, err)
			}
		}
		if _, err := json.Marshal(o); err != nil {
			t.Fatalf("outcome does not marshal: %v", err)
		}
		if (o.Status == runs.Failed) != (o.Error != nil) && o.Status != runs.Cancelled {
			t.Fatalf("status %s with error %+v", o.Status, o.Error)
		}
	})
}
