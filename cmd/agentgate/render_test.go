package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// testEvent makes the event seq of run-1 with data as its payload.
func testEvent(seq uint64, typ string, data any) streamEvent {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	env := envelope{V: 1, RunID: "run-1", Seq: seq, Type: typ, Agent: "claude", Data: b}
	raw, _ := json.Marshal(env)
	return streamEvent{Env: env, Raw: raw}
}

type obj = map[string]any

// sampleRun is a run that uses every kind of line the renderer writes.
func sampleRun() []streamEvent {
	evs := []struct {
		typ  string
		data any
	}{
		{"run.queued", obj{"agent": "claude", "position": 1}},
		{"run.started", obj{"prompt": "p", "permission": "workspace_write", "cwd": "/w", "version_status": "verified"}},
		{"session.started", obj{"session_id": "s", "tools": []string{"Bash"}}},
		{"reasoning.completed", obj{"text": "I think", "visibility": "full"}},
		{"message.delta", obj{"message_id": "m1", "text": "Hello"}},
		{"message.delta", obj{"message_id": "m1", "text": " world"}},
		{"message.completed", obj{"message_id": "m1", "text": "Hello world"}},
		{"tool_call.started", obj{"id": "t1", "name": "Bash", "input": obj{"command": "ls -la\n  /tmp", "description": "list"}}},
		{"tool_call.completed", obj{"id": "t1", "output": "boom\nmore", "is_error": true}},
		{"warning", obj{"code": "permission_denied", "message": "no"}},
		{"message.completed", obj{"message_id": "m2", "text": "No deltas here."}},
		{"approval.requested", obj{"id": "ap1", "tool": "Write", "input": obj{"file_path": "a.txt", "content": "x"}, "options": []string{"allow", "deny"}}},
		{"approval.resolved", obj{"id": "ap1", "decision": "deny", "reason": "timeout"}},
		{"file.changed", obj{"path": "a.txt", "kind": "add"}},
		{"usage.updated", obj{"usage": obj{"input_tokens": 1200, "output_tokens": 34}, "cost_usd": 0.5}},
		{"message.delta", obj{"message_id": "m3", "text": "partial"}},
		{"run.completed", obj{"status": "failed", "usage": obj{"input_tokens": 1200, "output_tokens": 34}, "cost_usd": 0.5,
			"duration_ms": 1500, "num_turns": 2, "error": obj{"class": "api_error", "message": "bad\nrequest", "hint": "retry later", "retryable": false}}},
	}
	out := make([]streamEvent, len(evs))
	for i, e := range evs {
		out[i] = testEvent(uint64(i+1), e.typ, e.data)
	}
	return out
}

func renderAll(t *testing.T, opt renderOptions, evs []streamEvent) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := newRenderer(&out, &errOut, opt, func() time.Time { return clock })
	for _, ev := range evs {
		if err := r.event(ev); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(time.Second)
	}
	r.stop()
	last := evs[len(evs)-1]
	if err := r.summary(outcomeOf(&last.Env)); err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String()
}

func TestRendererInAPipe(t *testing.T) {
	stdout, stderr := renderAll(t, renderOptions{runID: "run-1"}, sampleRun())
	wantOut := `Hello world
[tool] Bash: ls -la /tmp
[tool] Bash failed: boom (+1 more line)
No deltas here.
[approval] Write: a.txt (id ap1)
[approval] ap1: deny (timeout)
[file] add a.txt
partial
`
	wantErr := `warning: permission_denied: no
  answer: agentgate approve run-1 ap1  |  agentgate deny run-1 ap1
run run-1 failed · 1.5s · 2 turns · 1,234 tokens (1,200 in, 34 out) · $0.5000
error: api_error: bad request
hint: retry later
`
	if stdout != wantOut {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, wantOut)
	}
	if stderr != wantErr {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr, wantErr)
	}
}

func TestRendererVerbose(t *testing.T) {
	evs := sampleRun()
	evs = append(evs[:8:8], testEvent(9, "tool_call.completed", obj{"id": "t1", "output": "fine"}))
	stdout, _ := renderAll(t, renderOptions{runID: "run-1", verbose: true}, evs)
	for _, want := range []string{"[run] claude, workspace_write in /w\n", "[thinking] I think\n", "[tool] Bash done: fine\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("verbose stdout lacks %q:\n%s", want, stdout)
		}
	}
}

// ansi matches every escape sequence the renderer writes.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

func TestRendererOnATerminal(t *testing.T) {
	evs := sampleRun()
	// The agent's own escape sequences and carriage returns never reach
	// the terminal.
	evs[4] = testEvent(5, "message.delta", obj{"message_id": "m1", "text": "He\x1b[31mll\x1b]0;title\x07o\r"})
	stdout, stderr := renderAll(t, renderOptions{runID: "run-1", tty: true, color: true, errColor: true, width: func() int { return 40 }}, evs)
	for _, want := range []string{ansiClearLine, ansiCyan + "[tool]" + ansiReset, "⠋ running Bash · 0 tokens", "1.2k tokens · $0.5000", "Hello world\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("terminal stdout lacks %q:\n%q", want, stdout)
		}
	}
	if !strings.Contains(stderr, ansiRed+"failed"+ansiReset) {
		t.Errorf("stderr's status is not coloured: %q", stderr)
	}
	// What is left once the sequences are taken out: no sequence of the
	// agent's, and no progress line wider than the terminal less one.
	plain := ansi.ReplaceAllString(stdout, "")
	if strings.ContainsAny(plain, "\x1b\x07") || strings.Contains(plain, "title") {
		t.Errorf("the agent's escape sequences reached the terminal: %q", plain)
	}
	for _, seg := range strings.FieldsFunc(plain, func(r rune) bool { return r == '\r' || r == '\n' }) {
		if utf8.RuneCountInString(seg) > 39 {
			t.Errorf("a line of %d columns on a 40-column terminal: %q", utf8.RuneCountInString(seg), seg)
		}
	}
	// The progress line is gone at the end: the last thing written is a
	// cleared line or a line end, never a progress line left behind.
	if i := strings.LastIndex(stdout, "⠋"); i > strings.LastIndex(stdout, ansiClearLine) {
		t.Errorf("a progress line was left on the screen: %q", stdout[i:])
	}
}

// TestRendererToolProgress: a long tool's progress shows its time in the
// progress line, and with -v as a line.
func TestRendererToolProgress(t *testing.T) {
	evs := []streamEvent{
		testEvent(1, "tool_call.started", obj{"id": "t1", "name": "Bash", "input": obj{"command": "make"}}),
		testEvent(2, "tool_call.progress", obj{"id": "t1", "name": "Bash", "elapsed_ms": 90000}),
		testEvent(3, "tool_call.progress", obj{"id": "gone", "elapsed_ms": 1e18}),
		testEvent(4, "run.completed", obj{"status": "succeeded"}),
	}
	stdout, _ := renderAll(t, renderOptions{runID: "run-1", tty: true, width: func() int { return 200 }}, evs)
	if !strings.Contains(stdout, "running Bash (1m30s) · ") {
		t.Errorf("the progress line does not show the tool's time: %q", stdout)
	}
	stdout, _ = renderAll(t, renderOptions{runID: "run-1", verbose: true}, evs)
	for _, want := range []string{"[tool] Bash still running after 1m30s\n", "[tool] tool still running after "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("verbose stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "-") {
		t.Errorf("a negative time: %q", stdout)
	}
}

func TestRendererOnATerminalWithoutColor(t *testing.T) {
	stdout, stderr := renderAll(t, renderOptions{runID: "run-1", tty: true}, sampleRun())
	if !strings.Contains(stdout, ansiClearLine) {
		t.Errorf("no progress line on a terminal: %q", stdout)
	}
	for _, code := range []string{ansiReset, ansiBold, ansiDim, ansiRed, ansiGreen, ansiYellow, ansiMagenta, ansiCyan} {
		if strings.Contains(stdout+stderr, code) {
			t.Errorf("colour %q written without colour", code)
		}
	}
}

func TestRendererTicker(t *testing.T) {
	var out bytes.Buffer
	r := newRenderer(&out, &bytes.Buffer{}, renderOptions{tty: true}, nil)
	if err := r.event(testEvent(1, "run.queued", obj{"position": 3})); err != nil {
		t.Fatal(err)
	}
	stop := r.startTicker(time.Millisecond)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r.mu.Lock()
		frame := r.frame
		r.mu.Unlock()
		if frame >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the spinner did not turn")
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	r.stop()
	if s := out.String(); !strings.Contains(s, "⠙ queued (3 in line)") || !strings.HasSuffix(s, ansiClearLine) {
		t.Errorf("ticker output %q", s)
	}
}

func TestSubAgentToolCallsAreIndented(t *testing.T) {
	var out bytes.Buffer
	r := newRenderer(&out, &bytes.Buffer{}, renderOptions{}, nil)
	ev := testEvent(1, "tool_call.started", obj{"id": "t2", "name": "Read", "input": obj{"file_path": "x.go"}})
	ev.Env.ParentToolCallID = "t1"
	if err := r.event(ev); err != nil {
		t.Fatal(err)
	}
	if out.String() != "  [tool] Read: x.go\n" {
		t.Errorf("stdout %q", &out)
	}
}

func TestInteractiveHint(t *testing.T) {
	var out, errOut bytes.Buffer
	r := newRenderer(&out, &errOut, renderOptions{runID: "run-1", interactive: true}, nil)
	for i, ev := range []streamEvent{
		testEvent(1, "turn.started", obj{"turn": 1, "text": "first"}),
		testEvent(2, "turn.completed", obj{"turn": 1, "status": "succeeded", "usage": obj{"input_tokens": 10, "output_tokens": 2}, "cost_usd": 0.01}),
		testEvent(3, "message.queued", obj{"message_id": "q", "text": "more\nplease", "mode": "queue"}),
		testEvent(4, "turn.started", obj{"turn": 2, "text": "more\nplease"}),
		testEvent(5, "turn.completed", obj{"turn": 2, "status": "cancelled", "usage": obj{}}),
	} {
		if err := r.event(ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	want := "[turn 1] succeeded · 12 tokens · $0.0100\n[queued] more please\n[turn 2] more please\n[turn 2] cancelled · 0 tokens\n"
	if out.String() != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", &out, want)
	}
	if want := "  next turn: agentgate send run-1 MESSAGE  |  end: agentgate close run-1\n"; errOut.String() != want {
		t.Errorf("stderr %q, want the hint once: %q", &errOut, want)
	}
}

func TestResultShownWhenNoTextStreamed(t *testing.T) {
	var out bytes.Buffer
	r := newRenderer(&out, &bytes.Buffer{}, renderOptions{}, nil)
	if err := r.event(testEvent(9, "run.completed", obj{"status": "succeeded", "result": "The answer.", "usage": obj{}})); err != nil {
		t.Fatal(err)
	}
	if out.String() != "The answer.\n" {
		t.Errorf("stdout %q", &out)
	}
}

func TestToolSummary(t *testing.T) {
	for _, tc := range []struct{ input, want string }{
		{`{"command":"echo hi\n\techo  there"}`, "echo hi echo there"},
		{`{"command":["bash","-lc","ls"]}`, "bash -lc ls"},
		{`{"file_path":"/a/b.go","content":"…"}`, "/a/b.go"},
		{`{"pattern":"TODO","path":"."}`, "TODO"},
		{`{"path":"src"}`, "src"},
		{`{"url":"http://127.0.0.1/x"}`, "http://127.0.0.1/x"},
		{`{"a":1}`, `{"a":1}`},
		{`"just text"`, `"just text"`},
		{`null`, ``},
		{``, ``},
		{`{"command":"` + strings.Repeat("x", 200) + `"}`, strings.Repeat("x", 119) + "…"},
		{`{"command":"a\u001b[2Jb"}`, "a[2Jb"},
	} {
		if got := toolSummary(json.RawMessage(tc.input)); got != tc.want {
			t.Errorf("toolSummary(%s) = %q, want %q", tc.input, got, tc.want)
		}
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{groupDigits(0), "0"}, {groupDigits(999), "999"}, {groupDigits(1000), "1,000"}, {groupDigits(24535), "24,535"},
		{groupDigits(1234567), "1,234,567"}, {groupDigits(-1234), "-1,234"},
		{formatTokens(999), "999"}, {formatTokens(24535), "24.5k"}, {formatTokens(1_250_000), "1.2M"},
		{formatCost(0.0568), "$0.0568"}, {formatCost(12.345), "$12.35"},
		{formatDuration(850 * time.Millisecond), "850ms"}, {formatDuration(4200 * time.Millisecond), "4.2s"},
		{formatDuration(185 * time.Second), "3m05s"}, {formatDuration(62 * time.Minute), "1h02m"},
		{formatElapsed(1500 * time.Millisecond), "1s"}, {formatElapsed(65 * time.Second), "1m05s"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestStatusExit(t *testing.T) {
	for status, want := range map[string]int{
		"succeeded": exitOK, "failed": exitFailed, "cancelled": exitCancelled, "timed_out": exitTimedOut,
		"": exitFailed, "running": exitFailed, "something_new": exitFailed,
	} {
		if got := statusExit(status); got != want {
			t.Errorf("statusExit(%q) = %d, want %d", status, got, want)
		}
	}
	// Every code is distinct.
	seen := map[int]bool{}
	for _, c := range []int{exitOK, exitFailed, exitUsage, exitCancelled, exitTimedOut, exitAPIError, exitUnreachable, exitError, exitInterrupted} {
		if seen[c] {
			t.Errorf("exit code %d used twice", c)
		}
		seen[c] = true
		if !strings.Contains(exitCodesHelp, fmt.Sprintf("\n  %-4d ", c)) {
			t.Errorf("exit code %d is not in the help", c)
		}
	}
}

func TestErrorExit(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   int
		stderr string
	}{
		{&apiError{Status: 401, Code: "unauthenticated", Message: "no API key"}, exitAPIError, "error: unauthenticated: no API key\n"},
		{fmt.Errorf("gave up: %w", &apiError{Status: 503, Code: "shutting_down", Message: "draining\x1b[2J"}), exitAPIError, "error: shutting_down: draining[2J\n"},
		{&connectError{url: "http://127.0.0.1:1", err: errors.New("connection refused")}, exitUnreachable,
			"error: cannot_connect: cannot connect to the gateway at http://127.0.0.1:1: connection refused\n"},
		{usageErrorf("bad flag"), exitUsage, "agentgate: bad flag\n"},
		{fmt.Errorf("read: %w", context.Canceled), exitInterrupted, "agentgate: interrupted\n"},
		{errors.New("disk full"), exitError, "error: disk full\n"},
	} {
		var buf bytes.Buffer
		if code := errorExit(&buf, tc.err); code != tc.code || buf.String() != tc.stderr {
			t.Errorf("errorExit(%v) = %d %q, want %d %q", tc.err, code, &buf, tc.code, tc.stderr)
		}
	}
}

func TestColorAllowed(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		noColor bool
		want    bool
	}{
		{map[string]string{"TERM": "xterm-256color"}, false, true},
		{map[string]string{"TERM": "xterm", "NO_COLOR": "1"}, false, false},
		{map[string]string{"TERM": "dumb"}, false, false},
		{map[string]string{"TERM": "xterm"}, true, false},
	} {
		a := &app{getenv: envOf(tc.env), g: globalFlags{noColor: tc.noColor}}
		if got := a.colorAllowed(); got != tc.want {
			t.Errorf("colorAllowed with %v, --no-color %v = %v", tc.env, tc.noColor, got)
		}
	}
}

func TestDecodeError(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   apiError
	}{
		{409, `{"error":{"code":"run_ended","message":"the run has ended","field":"x"}}`, apiError{Status: 409, Code: "run_ended", Message: "the run has ended", Field: "x"}},
		{502, "<html>\n<title>Bad Gateway</title>", apiError{Status: 502, Code: "http_502", Message: "Bad Gateway: <html>"}},
		{500, "", apiError{Status: 500, Code: "http_500", Message: "Internal Server Error"}},
	} {
		resp := httpResponse(tc.status, tc.body)
		if got := decodeError(resp); *got != tc.want {
			t.Errorf("decodeError(%d %q) = %+v, want %+v", tc.status, tc.body, *got, tc.want)
		}
	}
}

// ownSequences removes the sequences the renderer itself writes.
var ownSequences = strings.NewReplacer(ansiClearLine, "", ansiReset, "", ansiBold, "", ansiDim, "", ansiRed, "",
	ansiGreen, "", ansiYellow, "", ansiMagenta, "", ansiCyan, "")

// FuzzRender renders arbitrary envelopes, as a gateway (or a proxy) could
// send them: on a terminal nothing of theirs may reach it as a control
// character, and in a pipe the renderer writes no progress line.
func FuzzRender(f *testing.F) {
	for _, ev := range sampleRun() {
		f.Add(ev.Raw)
	}
	f.Add([]byte(`{"seq":1,"type":"message.delta","data":{"text":"a\u001b]8;;http://x\u0007link\u001b]8;;\u0007\r\u009b2J"}}`))
	f.Add([]byte(`{"seq":1,"type":"tool_call.started","data":{"name":"\u001b[2J","input":{"command":["a","\u0007"]}}}`))
	f.Add([]byte(`{"seq":1,"run_id":"\u001b[2J","agent":"\u0007","type":"run.completed","data":{"status":"\u001b[2J","error":{"class":"\u001b"}}}`))
	f.Add([]byte(`{"seq":1,"type":"approval.resolved","data":{"id":"\u001b[2J","decision":"\r","reason":"\u0008"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		se, err := decodeEvent(sseEvent{Data: raw})
		if err != nil {
			return
		}
		for _, tty := range []bool{false, true} {
			var out, errOut bytes.Buffer
			r := newRenderer(&out, &errOut, renderOptions{tty: tty, color: tty, errColor: tty, verbose: true, interactive: true}, nil)
			if err := r.event(se); err != nil {
				t.Fatal(err)
			}
			r.stop()
			if err := r.summary(outcomeOf(&se.Env)); err != nil {
				t.Fatal(err)
			}
			if !tty {
				if strings.Contains(out.String(), ansiClearLine) {
					t.Fatalf("a progress line in a pipe: %q", &out)
				}
				continue
			}
			left := ownSequences.Replace(out.String() + errOut.String())
			if i := strings.IndexFunc(left, func(r rune) bool { return isControl(r) && r != '\n' && r != '\t' }); i >= 0 {
				t.Fatalf("a control character of the event reached the terminal at %d: %q", i, left)
			}
		}
	})
}

func TestHibernationLines(t *testing.T) {
	closes := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var out, errOut bytes.Buffer
	r := newRenderer(&out, &errOut, renderOptions{runID: "run-1", interactive: true}, nil)
	for i, ev := range []streamEvent{
		testEvent(1, "run.hibernated", obj{"turn": 2, "replica": "a", "reason": "idle", "closes_at": closes.Format(time.RFC3339)}),
		testEvent(2, "run.resumed", obj{"replica": "b", "previous_replica": "a", "turn": 2, "reason": "woken"}),
		testEvent(3, "run.resumed", obj{"replica": "c", "previous_replica": "b", "turn": 3, "reason": "replica_lost"}),
		testEvent(4, "run.hibernated", obj{"turn": 3, "replica": "c", "reason": "replica_lost", "closes_at": closes.Format(time.RFC3339)}),
	} {
		if err := r.event(ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	at := localTime(closes)
	want := "hibernated after turn 2 (idle); the next message wakes it; closes at " + at + "\n" +
		"woken on b; the session goes on from turn 2\n" +
		"taken over by c after b stopped answering; goes on from turn 3\n" +
		"hibernated after turn 3 (taken over); the next message wakes it; closes at " + at + "\n"
	if errOut.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", &errOut, want)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q, want nothing", &out)
	}
	if r.activity != "hibernated" {
		t.Errorf("activity %q, want hibernated", r.activity)
	}
}
