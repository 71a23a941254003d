package codex

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// sent decodes what the decoder wrote to stdin, one message per line.
func sent(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("decoder wrote %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// handshake takes a decoder through initialize and thread/start, and
// returns what it sent for the thread and the turn.
func handshake(t *testing.T, d *decoder, thread string) (threadReq, turnReq map[string]any) {
	t.Helper()
	open := sent(t, d.Open())
	if len(open) != 1 || open[0]["method"] != "initialize" || open[0]["id"] != float64(1) {
		t.Fatalf("Open = %v", open)
	}
	d.Decode([]byte(`{"id":1,"result":{"userAgent":"x"}}`))
	out, done := d.Pending()
	msgs := sent(t, out)
	if done || len(msgs) != 2 || msgs[0]["method"] != "initialized" || msgs[0]["id"] != nil {
		t.Fatalf("after initialize: %v, done %v", msgs, done)
	}
	threadReq = msgs[1]
	evs := d.Decode([]byte(`{"id":2,"result":{"thread":{"id":"` + thread + `"},"model":"m1","modelProvider":"mock"}}`))
	if len(evs) != 1 || evs[0].Type != runs.EventSessionStarted || evs[0].SessionID != thread {
		t.Fatalf("thread result gave %+v, want session.started", evs)
	}
	out, _ = d.Pending()
	msgs = sent(t, out)
	if len(msgs) != 1 || msgs[0]["method"] != "turn/start" {
		t.Fatalf("after thread: %v", msgs)
	}
	return threadReq, msgs[0]
}

func TestConversationMapsTheSpec(t *testing.T) {
	inv := runs.Invocation{Dir: "/w/run", Spec: runs.Spec{
		Prompt: "do it", SystemPrompt: "be brief", Model: "gpt-x", Effort: "high", Permission: runs.ReadOnly,
		OutputSchema: json.RawMessage(`{"type":"object"}`),
	}}
	d := newDecoder(inv, nil)
	thread, turn := handshake(t, d, "th1")
	p := thread["params"].(map[string]any)
	if thread["method"] != "thread/start" || p["sandbox"] != "read-only" || p["approvalPolicy"] != "never" ||
		p["developerInstructions"] != "be brief" || p["model"] != "gpt-x" || p["cwd"] != "/w/run" || p["ephemeral"] != true {
		t.Errorf("thread/start = %v", thread)
	}
	tp := turn["params"].(map[string]any)
	input := tp["input"].([]any)[0].(map[string]any)
	if tp["threadId"] != "th1" || input["text"] != "do it" || tp["effort"] != "high" ||
		tp["outputSchema"].(map[string]any)["type"] != "object" {
		t.Errorf("turn/start = %v", turn)
	}

	inv.Spec.ResumeSessionID, inv.Spec.Permission, inv.Spec.KeepSession = "th0", runs.Full, true
	thread, _ = handshake(t, newDecoder(inv, nil), "th0")
	p = thread["params"].(map[string]any)
	if thread["method"] != "thread/resume" || p["threadId"] != "th0" || p["sandbox"] != "danger-full-access" {
		t.Errorf("thread/resume = %v", thread)
	}
	if _, ok := p["ephemeral"]; ok {
		t.Errorf("thread/resume carries ephemeral: %v", p)
	}
	inv.Spec.ResumeSessionID = ""
	thread, _ = handshake(t, newDecoder(inv, nil), "th2")
	if thread["params"].(map[string]any)["ephemeral"] != false {
		t.Errorf("keep_session: %v", thread)
	}
}

func TestOnlyTheRootTurnEndsTheConversation(t *testing.T) {
	d := newDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "p"}}, nil)
	handshake(t, d, "root")
	if d.Interrupt() != nil {
		t.Error("Interrupt before the turn started must leave the stop to signals")
	}
	d.Decode([]byte(`{"id":3,"result":{"turn":{"id":"t1","status":"inProgress","items":[]}}}`))
	lines := []string{
		`{"method":"item/completed","params":{"threadId":"root","turnId":"t1","item":{"type":"collabAgentToolCall","id":"call_spawn","tool":"spawnAgent","status":"completed","senderThreadId":"root","receiverThreadIds":["helper"],"prompt":"look"}}}`,
		`{"method":"item/started","params":{"threadId":"root","turnId":"t1","item":{"type":"collabAgentToolCall","id":"call_wait","tool":"wait","status":"inProgress","senderThreadId":"root","receiverThreadIds":["helper"]}}}`,
		`{"method":"item/completed","params":{"threadId":"helper","turnId":"h1","item":{"type":"agentMessage","id":"m_h","text":"helper says"}}}`,
		`{"method":"thread/tokenUsage/updated","params":{"threadId":"helper","turnId":"h1","tokenUsage":{"total":{"inputTokens":999,"outputTokens":999},"last":{"totalTokens":15,"inputTokens":10,"cachedInputTokens":4,"outputTokens":5,"reasoningOutputTokens":2}}}}`,
		`{"method":"turn/completed","params":{"threadId":"helper","turn":{"id":"h1","status":"completed","items":[]}}}`,
	}
	var evs []runs.Event
	for _, l := range lines {
		evs = append(evs, d.Decode([]byte(l))...)
	}
	if _, done := d.Pending(); done {
		t.Fatal("a helper thread's turn/completed ended the conversation")
	}
	var helperMsg *runs.Event
	for i := range evs {
		if evs[i].Type == runs.EventMessageCompleted {
			helperMsg = &evs[i]
		}
	}
	if helperMsg == nil || helperMsg.SessionID != "helper" || helperMsg.ParentToolCallID != "call_spawn" {
		t.Errorf("helper message = %+v, want it attributed to the helper thread and its spawning call, not the wait", helperMsg)
	}
	for _, ev := range evs {
		if ev.Type == runs.EventUsageUpdated && (ev.SessionID != "root" || ev.ParentToolCallID != "") {
			t.Errorf("usage.updated = %+v, want the run's, on the root session", ev)
		}
	}
	intr := sent(t, d.Interrupt())
	if len(intr) != 1 || intr[0]["method"] != "turn/interrupt" ||
		intr[0]["params"].(map[string]any)["turnId"] != "t1" || intr[0]["params"].(map[string]any)["threadId"] != "root" {
		t.Errorf("Interrupt = %v", intr)
	}
	if d.Interrupt() != nil {
		t.Error("a second Interrupt was sent")
	}
	d.Decode([]byte(`{"method":"item/completed","params":{"threadId":"root","turnId":"t1","item":{"type":"agentMessage","id":"m_r","text":"root answer"}}}`))
	d.Decode([]byte(`{"method":"thread/tokenUsage/updated","params":{"threadId":"root","turnId":"t1","tokenUsage":{"total":{"inputTokens":5000},"last":{"inputTokens":100,"cachedInputTokens":40,"outputTokens":20,"reasoningOutputTokens":5}}}}`))
	d.Decode([]byte(`{"method":"turn/completed","params":{"threadId":"root","turn":{"id":"t1","status":"completed","items":[]}}}`))
	if _, done := d.Pending(); !done {
		t.Fatal("the root turn's completion did not end the conversation")
	}
	o := d.Finish(runs.Exit{}, nil)
	want := runs.Usage{InputTokens: 110, CacheReadTokens: 44, OutputTokens: 25, ReasoningTokens: 7}
	if o.Status != runs.Succeeded || o.Result != "root answer" || o.Usage != want || o.SessionID != "root" {
		t.Errorf("outcome = %+v, want succeeded with the root's answer and usage %+v (the sum of last, helper included)", o, want)
	}
}

func TestServerRequestsAreDeclined(t *testing.T) {
	d := newDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "p"}}, nil)
	handshake(t, d, "root")
	for method, want := range map[string]string{
		"item/commandExecution/requestApproval": `"decision":"decline"`,
		"item/fileChange/requestApproval":       `"decision":"decline"`,
		"item/tool/requestUserInput":            `"error":{"code":-32601`,
	} {
		evs := d.Decode([]byte(`{"id":"srv-7","method":"` + method + `","params":{"threadId":"root"}}`))
		out, done := d.Pending()
		if done || !strings.Contains(string(out), `"id":"srv-7"`) || !strings.Contains(string(out), want) {
			t.Errorf("%s: answered %s (done %v), want %s", method, out, done, want)
		}
		if len(evs) != 1 || evs[0].Type != runs.EventWarning || evs[0].Data.(runs.WarningData).Code != "request_declined" {
			t.Errorf("%s: events %+v, want a request_declined warning", method, evs)
		}
	}
}

func TestRefusedRequestIsFlagRejected(t *testing.T) {
	inv := runs.Invocation{CLIVersion: "0.200.0", Spec: runs.Spec{Prompt: "p"}}
	d := newDecoder(inv, nil)
	d.Open()
	d.Decode([]byte(`{"id":1,"result":{}}`))
	d.Pending()
	d.Decode([]byte(`{"id":2,"error":{"code":-32600,"message":"Invalid request: unknown variant ` + "`thread/begin`" + `"}}`))
	if _, done := d.Pending(); !done {
		t.Fatal("a refused thread/start did not end the conversation")
	}
	o := d.Finish(runs.Exit{}, nil)
	if o.Status != runs.Failed || o.Error == nil || o.Error.Class != runs.FlagRejected ||
		!strings.Contains(o.Error.Hint, "0.200.0") || !strings.Contains(o.Error.Hint, VerifiedVersion) {
		t.Errorf("outcome = %+v %+v, want flag_rejected naming both versions", o, o.Error)
	}

	inv.Spec.ResumeSessionID = "gone"
	d = newDecoder(inv, nil)
	d.Open()
	d.Decode([]byte(`{"id":1,"result":{}}`))
	d.Decode([]byte(`{"id":2,"error":{"code":-32600,"message":"thread/resume failed: no rollout found for thread id gone"}}`))
	if o := d.Finish(runs.Exit{}, nil); o.Error == nil || o.Error.Class != runs.SessionNotFound || !strings.Contains(o.Error.Hint, "keep_session") {
		t.Errorf("unknown session: %+v", o.Error)
	}
}

func TestDeathBeforeTheTurnCompleted(t *testing.T) {
	d := newDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "p"}}, nil)
	handshake(t, d, "root")
	d.Decode([]byte(`{"method":"item/started","params":{"threadId":"root","turnId":"t1","item":{"type":"commandExecution","id":"c1","command":"sleep 60","cwd":"/w","status":"inProgress"}}}`))
	o := d.Finish(runs.Exit{Code: -1, Signal: "SIGKILL"}, []byte("noise\n"))
	if o.Error == nil || o.Error.Class != runs.ProcessKilled {
		t.Errorf("killed: %+v", o.Error)
	}
	if len(o.Events) != 1 || o.Events[0].Type != runs.EventToolCallCompleted || !o.Events[0].Data.(runs.ToolCallCompletedData).IsError {
		t.Errorf("open tool call not closed as failed: %+v", o.Events)
	}
	d = newDecoder(runs.Invocation{CLIVersion: "9.9.9", Spec: runs.Spec{Prompt: "p"}}, nil)
	o = d.Finish(runs.Exit{Code: 2}, []byte("error: unexpected argument '--bogus' found\n"))
	if o.Error == nil || o.Error.Class != runs.FlagRejected || !strings.Contains(o.Error.Hint, "9.9.9") {
		t.Errorf("rejected flag: %+v", o.Error)
	}
}

func TestStructuredOutput(t *testing.T) {
	inv := runs.Invocation{Spec: runs.Spec{Prompt: "p", OutputSchema: json.RawMessage(`{"type":"object"}`)}}
	for text, ok := range map[string]bool{`{"name":"x"}`: true, `not json`: false} {
		d := newDecoder(inv, nil)
		handshake(t, d, "root")
		d.Decode([]byte(`{"id":3,"result":{"turn":{"id":"t1"}}}`))
		b, _ := json.Marshal(text)
		d.Decode([]byte(`{"method":"turn/completed","params":{"threadId":"root","turn":{"id":"t1","status":"completed","items":[{"type":"agentMessage","id":"m","text":` + string(b) + `}]}}}`))
		o := d.Finish(runs.Exit{}, nil)
		if ok && (o.Status != runs.Succeeded || string(o.StructuredOutput) != text) {
			t.Errorf("%s: %+v", text, o)
		}
		if !ok && (o.Status != runs.Failed || o.Error == nil) {
			t.Errorf("%s accepted as structured output: %+v", text, o)
		}
	}
}

// TestPlanAndDiff maps turn/plan/updated and turn/diff/updated as the
// protocol's schema describes them. codex 0.171.0 offers its models no
// update_plan tool, so no real run has produced a plan.
func TestPlanAndDiff(t *testing.T) {
	d := newDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "p"}}, nil)
	handshake(t, d, "root")
	d.Decode([]byte(`{"id":3,"result":{"turn":{"id":"t1"}}}`))
	evs := d.Decode([]byte(`{"method":"turn/plan/updated","params":{"threadId":"root","turnId":"t1","explanation":"first read",` +
		`"plan":[{"step":"read","status":"completed"},{"step":"fix","status":"inProgress"},{"step":"test","status":"pending"}]}}`))
	want := runs.PlanUpdatedData{Explanation: "first read", Steps: []runs.PlanStep{
		{Step: "read", Status: runs.StepCompleted}, {Step: "fix", Status: runs.StepInProgress}, {Step: "test", Status: runs.StepPending}}}
	if len(evs) != 1 || evs[0].Type != runs.EventPlanUpdated || !reflect.DeepEqual(evs[0].Data, want) {
		t.Errorf("plan = %+v, want %+v", evs, want)
	}
	d.Decode([]byte(`{"method":"turn/diff/updated","params":{"threadId":"root","turnId":"t1","diff":"first"}}`))
	d.Decode([]byte(`{"method":"turn/diff/updated","params":{"threadId":"helper","turnId":"h1","diff":"helper's"}}`))
	d.Decode([]byte(`{"method":"turn/diff/updated","params":{"threadId":"root","turnId":"t1","diff":"last"}}`))
	if o := d.Finish(runs.Exit{}, nil); o.Diff != "last" {
		t.Errorf("diff = %q, want the root turn's latest", o.Diff)
	}
}

// A helper's first events may come before the spawn's item/completed,
// which is the first to name the helper's thread: they belong to the one
// spawn still running.
func TestHelperEventsBeforeTheSpawnCompleted(t *testing.T) {
	d := newDecoder(runs.Invocation{Spec: runs.Spec{Prompt: "p"}}, nil)
	handshake(t, d, "root")
	d.Decode([]byte(`{"id":3,"result":{"turn":{"id":"t1","status":"inProgress","items":[]}}}`))
	var evs []runs.Event
	for _, l := range []string{
		`{"method":"item/started","params":{"threadId":"root","turnId":"t1","item":{"type":"collabAgentToolCall","id":"call_spawn","tool":"spawnAgent","status":"inProgress","senderThreadId":"root","receiverThreadIds":[],"prompt":"look"}}}`,
		`{"method":"item/completed","params":{"threadId":"helper","turnId":"h1","item":{"type":"agentMessage","id":"m_h","text":"early helper"}}}`,
		`{"method":"item/completed","params":{"threadId":"root","turnId":"t1","item":{"type":"collabAgentToolCall","id":"call_spawn","tool":"spawnAgent","status":"completed","senderThreadId":"root","receiverThreadIds":["helper"],"prompt":"look"}}}`,
		`{"method":"item/completed","params":{"threadId":"helper","turnId":"h1","item":{"type":"agentMessage","id":"m_h2","text":"late helper"}}}`,
	} {
		evs = append(evs, d.Decode([]byte(l))...)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type != runs.EventMessageCompleted {
			continue
		}
		n++
		if ev.SessionID != "helper" || ev.ParentToolCallID != "call_spawn" {
			t.Errorf("helper message = %+v, want it under the spawning call", ev)
		}
	}
	if n != 2 {
		t.Fatalf("%d helper messages, want 2: %+v", n, evs)
	}
}

// Codex's notice that it uses its bundled bubblewrap is about the host,
// which the agent's advisory says once: it is no warning of the run.
// Other config warnings still are.
func TestBundledBubblewrapNoticeIsNotARunWarning(t *testing.T) {
	d := newDecoder(runs.Invocation{Dir: "/w/run", Spec: runs.Spec{Prompt: "hi"}}, nil)
	handshake(t, d, "th0")
	notice := `{"method":"configWarning","params":{"summary":"Codex could not find bubblewrap on PATH. Install bubblewrap with your OS package manager. See the sandbox prerequisites: https://developers.openai.com/codex/concepts/sandboxing#prerequisites. Codex will use the bundled bubblewrap in the meantime."}}`
	if evs := d.Decode([]byte(notice)); len(evs) != 0 {
		t.Errorf("the bubblewrap notice gave %+v, want nothing", evs)
	}
	other := `{"method":"configWarning","params":{"summary":"unknown key in config.toml: modle"}}`
	evs := d.Decode([]byte(other))
	if len(evs) != 1 || evs[0].Type != runs.EventWarning {
		t.Fatalf("another config warning gave %+v, want a warning", evs)
	}
	if b, _ := json.Marshal(evs[0].Data); !strings.Contains(string(b), "modle") {
		t.Errorf("warning data %s", b)
	}
}

// HostAdvisory names a missing bwrap, looked up on the agent's PATH, and
// says nothing when one is there.
func TestHostAdvisoryNamesMissingBubblewrap(t *testing.T) {
	a := &Adapter{}
	empty := t.TempDir()
	if note := a.HostAdvisory([]string{"PATH=" + empty}); !strings.Contains(note, "bubblewrap") {
		t.Errorf("without bwrap: %q", note)
	}
	withBwrap := t.TempDir()
	if err := os.WriteFile(filepath.Join(withBwrap, "bwrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if note := a.HostAdvisory([]string{"PATH=" + empty + ":" + withBwrap}); note != "" {
		t.Errorf("with bwrap on the PATH: %q", note)
	}
}
