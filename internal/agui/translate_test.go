package agui_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/agui"
	"github.com/agentgate/agentgate/internal/agui/aguitest"
	"github.com/agentgate/agentgate/internal/runs"
)

const runA = "0196a7c8-5a3e-7b1e-9d0a-2f4c6b8e1a3d"

var t0 = time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)

// logBuilder builds a run's stored envelopes, as the supervisor encodes
// them, numbering them in order.
type logBuilder struct {
	t    testing.TB
	run  string
	evs  [][]byte
	seq  uint64
	last runs.Event
}

func newLog(t testing.TB) *logBuilder { return &logBuilder{t: t, run: runA} }

// add appends an event of type typ with data; parent, when given, is its
// parent_tool_call_id.
func (l *logBuilder) add(typ runs.EventType, data any, parent ...string) *logBuilder {
	l.t.Helper()
	l.seq++
	ev := runs.Event{V: runs.EnvelopeVersion, RunID: l.run, Seq: l.seq,
		Time: t0.Add(time.Duration(l.seq) * time.Millisecond), Type: typ, Agent: "claude", Data: data}
	if len(parent) > 0 {
		ev.ParentToolCallID = parent[0]
	}
	b, err := json.Marshal(ev)
	if err != nil {
		l.t.Fatal(err)
	}
	l.evs = append(l.evs, b)
	return l
}

func (l *logBuilder) started(prompt string) *logBuilder {
	return l.add(runs.EventRunQueued, runs.RunQueuedData{Agent: "claude", Position: 1}).
		add(runs.EventRunStarted, runs.RunStartedData{Prompt: prompt, Permission: runs.WorkspaceWrite, Cwd: "/w", VersionStatus: "verified"})
}

func (l *logBuilder) completed(d runs.RunCompletedData) *logBuilder {
	return l.add(runs.EventRunCompleted, d)
}

// out is the translation of an envelope sequence: the events, and which
// envelope (by index) made each.
type out struct {
	events []agui.Event
	from   []int
}

// translate feeds evs to a new Translator, checking every event it makes.
func translate(t testing.TB, opts agui.Options, evs [][]byte) out {
	t.Helper()
	tr := agui.New(opts)
	var c aguitest.Checker
	var o out
	for i, ev := range evs {
		for _, e := range tr.Translate(ev) {
			if err := c.Check(e.JSON); err != nil {
				t.Fatalf("%v\nevent: %s\nafter: %s", err, e.JSON, dump(o.events))
			}
			var typ struct{ Type agui.EventType }
			if err := json.Unmarshal(e.JSON, &typ); err != nil || typ.Type != e.Type {
				t.Fatalf("event %s has Type %s", e.JSON, e.Type)
			}
			o.events = append(o.events, e)
			o.from = append(o.from, i)
		}
	}
	return o
}

func dump(evs []agui.Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.Write(e.JSON)
		b.WriteByte('\n')
	}
	return b.String()
}

func (o out) types() []agui.EventType {
	ts := make([]agui.EventType, len(o.events))
	for i, e := range o.events {
		ts[i] = e.Type
	}
	return ts
}

// fields decodes event i.
func (o out) fields(t testing.TB, i int) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(o.events[i].JSON, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// find returns the index of the n-th (from 0) event of type typ, or fails.
func (o out) find(t testing.TB, typ agui.EventType, n int) int {
	t.Helper()
	for i, e := range o.events {
		if e.Type == typ {
			if n == 0 {
				return i
			}
			n--
		}
	}
	t.Fatalf("no %s #%d in\n%s", typ, n, dump(o.events))
	return -1
}

// texts reassembles the text messages, by id, from their contents.
func (o out) texts(t testing.TB, start, content agui.EventType) (ids []string, text map[string]string) {
	t.Helper()
	text = map[string]string{}
	for i, e := range o.events {
		switch e.Type {
		case start:
			id := o.fields(t, i)["messageId"].(string)
			ids = append(ids, id)
			text[id] = ""
		case content:
			f := o.fields(t, i)
			text[f["messageId"].(string)] += f["delta"].(string)
		}
	}
	return ids, text
}

func cost(v float64) *float64 { return &v }

func typesOf(ts ...agui.EventType) []agui.EventType { return ts }

func TestTranslateTextRun(t *testing.T) {
	l := newLog(t).started("Say hi").
		add(runs.EventSessionStarted, runs.SessionStartedData{SessionID: "s-1", Model: "opus", Tools: []string{"Bash"}}).
		add(runs.EventMessageDelta, runs.MessageData{MessageID: "msg_1", Text: "Hel"}).
		add(runs.EventMessageDelta, runs.MessageData{MessageID: "msg_1", Text: "lo <b>&"}).
		add(runs.EventMessageCompleted, runs.MessageData{MessageID: "msg_1", Text: "Hello <b>&"}).
		add(runs.EventUsageUpdated, runs.UsageData{Usage: runs.Usage{InputTokens: 100, CacheReadTokens: 40, OutputTokens: 7}, CostUSD: cost(0.01)}).
		completed(runs.RunCompletedData{Status: runs.Succeeded, Result: "Hello <b>&",
			Usage: runs.Usage{InputTokens: 120, CacheReadTokens: 40, CacheWriteTokens: 10, OutputTokens: 9, ReasoningTokens: 2}, CostUSD: cost(0.02)})
	o := translate(t, agui.Options{}, l.evs)
	want := typesOf(agui.RunStarted, agui.StateSnapshot, agui.StateDelta, agui.TextMessageStart, agui.TextMessageContent, agui.TextMessageContent,
		agui.TextMessageEnd, agui.StateDelta, agui.StateDelta, agui.RunFinished)
	if got := o.types(); !slices.Equal(got, want) {
		t.Fatalf("types =\n%v\nwant\n%v", got, want)
	}
	started := o.fields(t, 0)
	if started["threadId"] != runA || started["runId"] != runA || started["timestamp"] != float64(t0.Add(2*time.Millisecond).UnixMilli()) {
		t.Errorf("RUN_STARTED = %v", started)
	}
	input := started["input"].(map[string]any)
	msgs := input["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["content"] != "Say hi" || msgs[0].(map[string]any)["id"] != runA+"/prompt" ||
		msgs[0].(map[string]any)["role"] != "user" {
		t.Errorf("RUN_STARTED input = %v", input)
	}
	snap := o.fields(t, 1)["snapshot"].(map[string]any)
	if snap["status"] != "running" || snap["run_id"] != runA || snap["agent"] != "claude" || snap["pending_approval"] != nil {
		t.Errorf("snapshot = %v", snap)
	}
	ids, text := o.texts(t, agui.TextMessageStart, agui.TextMessageContent)
	if len(ids) != 1 || ids[0] != runA+"/m1" || text[ids[0]] != "Hello <b>&" {
		t.Errorf("messages %v %v", ids, text)
	}
	fin := o.fields(t, len(o.events)-1)
	if fin["result"] != "Hello <b>&" || fin["outcome"].(map[string]any)["type"] != "success" || fin["runId"] != runA {
		t.Errorf("RUN_FINISHED = %v", fin)
	}
	usage := fin["usage"].([]any)[0].(map[string]any)
	for k, v := range map[string]float64{"inputTokens": 120, "outputTokens": 9, "totalTokens": 129, "reasoningTokens": 2,
		"cachedInputTokens": 40, "cacheWriteInputTokens": 10} {
		if usage[k] != v {
			t.Errorf("usage %s = %v, want %v", k, usage[k], v)
		}
	}
	if usage["model"] != "opus" {
		t.Errorf("usage model = %v", usage["model"])
	}
	var c aguitest.Checker
	for _, e := range o.events {
		if err := c.Check(e.JSON); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := c.State()
	s := st.(map[string]any)
	if s["session_id"] != "s-1" || s["model"] != "opus" || s["status"] != "succeeded" || s["cost_usd"] != 0.02 ||
		s["usage"].(map[string]any)["output_tokens"] != float64(9) {
		t.Errorf("final state = %v", s)
	}
}

// TestTranslateMessageShapes covers a message that arrives whole, one
// whose completed text has more than its deltas, deltas without a message
// id, and a completed text that disagrees with its deltas.
func TestTranslateMessageShapes(t *testing.T) {
	l := newLog(t).started("p").
		add(runs.EventMessageCompleted, runs.MessageData{MessageID: "whole", Text: "all at once"}).
		add(runs.EventMessageDelta, runs.MessageData{MessageID: "more", Text: "abc"}).
		add(runs.EventMessageCompleted, runs.MessageData{MessageID: "more", Text: "abcdef"}).
		add(runs.EventMessageDelta, runs.MessageData{Text: "no id "}).
		add(runs.EventMessageDelta, runs.MessageData{Text: "at all"}).
		add(runs.EventMessageCompleted, runs.MessageData{Text: "no id at all"}).
		add(runs.EventMessageDelta, runs.MessageData{MessageID: "odd", Text: "first"}).
		add(runs.EventMessageCompleted, runs.MessageData{MessageID: "odd", Text: "something else"}).
		add(runs.EventMessageCompleted, runs.MessageData{MessageID: "empty"}).
		add(runs.EventMessageDelta, runs.MessageData{MessageID: "x", Text: ""}).
		completed(runs.RunCompletedData{Status: runs.Succeeded})
	o := translate(t, agui.Options{}, l.evs)
	ids, text := o.texts(t, agui.TextMessageStart, agui.TextMessageContent)
	want := []string{"all at once", "abcdef", "no id at all", "first"}
	if len(ids) != len(want) {
		t.Fatalf("messages %v %v", ids, text)
	}
	for i, id := range ids {
		if text[id] != want[i] {
			t.Errorf("message %d = %q, want %q", i, text[id], want[i])
		}
	}
	if n := strings.Count(dump(o.events), `"type":"TEXT_MESSAGE_END"`); n != 4 {
		t.Errorf("%d TEXT_MESSAGE_END, want 4", n)
	}
}

func TestTranslateReasoning(t *testing.T) {
	l := newLog(t).started("p").
		add(runs.EventReasoningDelta, runs.DeltaData{ID: "b1", Text: "I will "}).
		add(runs.EventReasoningDelta, runs.DeltaData{ID: "b1", Text: "think"}).
		add(runs.EventReasoningCompleted, runs.ReasoningData{Text: "I will think.", Visibility: runs.VisibilityFull}).
		add(runs.EventReasoningCompleted, runs.ReasoningData{Text: "a summary", Visibility: runs.VisibilitySummary}).
		add(runs.EventReasoningCompleted, runs.ReasoningData{Visibility: runs.VisibilityRedacted}).
		add(runs.EventReasoningDelta, runs.DeltaData{ID: "b2", Text: "one"}).
		add(runs.EventReasoningDelta, runs.DeltaData{ID: "b3", Text: "two"}).
		add(runs.EventReasoningCompleted, runs.ReasoningData{Text: "two", Visibility: runs.VisibilityFull}).
		completed(runs.RunCompletedData{Status: runs.Succeeded})
	o := translate(t, agui.Options{}, l.evs)
	want := typesOf(agui.RunStarted, agui.StateSnapshot,
		agui.ReasoningStart, agui.ReasoningMessageStart, agui.ReasoningMessageContent, agui.ReasoningMessageContent,
		agui.ReasoningMessageContent, agui.ReasoningMessageEnd, agui.ReasoningEnd,
		agui.ReasoningStart, agui.ReasoningMessageStart, agui.ReasoningMessageContent, agui.ReasoningMessageEnd, agui.ReasoningEnd,
		agui.ReasoningStart, agui.ReasoningEnd,
		agui.ReasoningStart, agui.ReasoningMessageStart, agui.ReasoningMessageContent, agui.ReasoningMessageEnd, agui.ReasoningEnd,
		agui.ReasoningStart, agui.ReasoningMessageStart, agui.ReasoningMessageContent, agui.ReasoningMessageEnd, agui.ReasoningEnd,
		agui.StateDelta, agui.RunFinished)
	if got := o.types(); !slices.Equal(got, want) {
		t.Fatalf("types =\n%v\nwant\n%v", got, want)
	}
	ids, text := o.texts(t, agui.ReasoningMessageStart, agui.ReasoningMessageContent)
	var got []string
	for _, id := range ids {
		got = append(got, text[id])
	}
	if !slices.Equal(got, []string{"I will think.", "a summary", "one", "two"}) {
		t.Errorf("reasoning texts = %q", got)
	}
	if span, msg := o.fields(t, 2)["messageId"], o.fields(t, 3)["messageId"]; span == msg || span != runA+"/r1" {
		t.Errorf("span %v, message %v", span, msg)
	}
}

func TestTranslateToolCall(t *testing.T) {
	l := newLog(t).started("p").
		add(runs.EventToolCallStarted, runs.ToolCallStartedData{ID: "toolu_1", Name: "Bash", Input: json.RawMessage(`{ "command": "ls" }`)}).
		add(runs.EventToolCallOutput, runs.DeltaData{ID: "toolu_1", Text: "a.txt"}).
		add(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: "toolu_1", Output: "a.txt\n"}).
		add(runs.EventToolCallStarted, runs.ToolCallStartedData{ID: "toolu_2", Name: "Read", Input: json.RawMessage(`null`)}).
		add(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: "toolu_2", Output: "", IsError: true}).
		// The same id again, and a result for a call never started.
		add(runs.EventToolCallStarted, runs.ToolCallStartedData{ID: "toolu_1", Name: "Bash", Input: json.RawMessage(`{}`)}).
		add(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: "ghost", Output: "?"}).
		completed(runs.RunCompletedData{Status: runs.Succeeded})
	o := translate(t, agui.Options{}, l.evs)
	want := typesOf(agui.RunStarted, agui.StateSnapshot, agui.ToolCallStart, agui.ToolCallArgs, agui.ToolCallEnd, agui.ToolCallResult,
		agui.ToolCallStart, agui.ToolCallEnd, agui.ToolCallResult, agui.ToolCallStart, agui.ToolCallArgs, agui.ToolCallEnd, agui.ToolCallResult, agui.StateDelta, agui.RunFinished)
	if got := o.types(); !slices.Equal(got, want) {
		t.Fatalf("types =\n%v\nwant\n%v", got, want)
	}
	start, args, result := o.fields(t, 2), o.fields(t, 3), o.fields(t, 5)
	if start["toolCallId"] != runA+"/tool/toolu_1" || start["toolCallName"] != "Bash" || args["delta"] != `{"command":"ls"}` {
		t.Errorf("start %v args %v", start, args)
	}
	if result["toolCallId"] != runA+"/tool/toolu_1" || result["content"] != "a.txt\n" || result["role"] != "tool" || result["metadata"] != nil {
		t.Errorf("result %v", result)
	}
	if failed := o.fields(t, 8); failed["content"] != "" || !reflect.DeepEqual(failed["metadata"], map[string]any{"agentgate": map[string]any{"is_error": true}}) {
		t.Errorf("failed result %v", failed)
	}
	if again := o.fields(t, 9)["toolCallId"]; again == runA+"/tool/toolu_1" {
		t.Errorf("a reused tool call id kept its AG-UI id %v", again)
	}
}

// TestTranslateToolProgress: a running call's progress is a CUSTOM event
// naming the call by its AG-UI id, never RAW.
func TestTranslateToolProgress(t *testing.T) {
	l := newLog(t).started("p").
		add(runs.EventToolCallStarted, runs.ToolCallStartedData{ID: "toolu_1", Name: "Bash", Input: json.RawMessage(`{}`)}).
		add(runs.EventToolCallProgress, runs.ToolCallProgressData{ID: "toolu_1", Name: "Bash", ElapsedMS: 30000}).
		add(runs.EventToolCallProgress, runs.ToolCallProgressData{ID: "ghost", ElapsedMS: 60000}).
		add(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: "toolu_1", Output: "done"}).
		completed(runs.RunCompletedData{Status: runs.Succeeded})
	o := translate(t, agui.Options{}, l.evs)
	want := typesOf(agui.RunStarted, agui.StateSnapshot, agui.ToolCallStart, agui.ToolCallArgs, agui.ToolCallEnd, agui.Custom, agui.Custom, agui.ToolCallResult, agui.StateDelta, agui.RunFinished)
	if got := o.types(); !slices.Equal(got, want) {
		t.Fatalf("types =\n%v\nwant\n%v", got, want)
	}
	first, ghost := o.fields(t, 5), o.fields(t, 6)
	wantFirst := map[string]any{"id": "toolu_1", "name": "Bash", "elapsed_ms": 30000.0, "toolCallId": runA + "/tool/toolu_1"}
	if first["name"] != "agentgate.tool_call.progress" || !reflect.DeepEqual(first["value"], wantFirst) {
		t.Errorf("progress = %v, want agentgate.tool_call.progress with %v", first, wantFirst)
	}
	if v := ghost["value"].(map[string]any); v["toolCallId"] != nil || v["elapsed_ms"] != 60000.0 {
		t.Errorf("progress of an unknown call = %v, want no toolCallId", ghost)
	}
}

// TestTranslateApproval follows a run through an approval: the AG-UI run
// ends with an interrupt, what comes before the answer waits, and the
// answer opens the next AG-UI run.
func TestTranslateApproval(t *testing.T) {
	exp := t0.Add(5 * time.Minute)
	l := newLog(t).started("touch it").
		add(runs.EventTurnStarted, runs.TurnStartedData{Turn: 1, MessageID: "t1", Text: "touch it"}).
		add(runs.EventMessageDelta, runs.MessageData{MessageID: "msg_1", Text: "I will "}).
		add(runs.EventToolCallStarted, runs.ToolCallStartedData{ID: "toolu_1", Name: "Bash", Input: json.RawMessage(`{"command":"touch one.txt"}`)}).
		add(runs.EventApprovalRequested, runs.ApprovalRequestedData{ID: "approval_1", ToolCallID: "toolu_1", Tool: "Bash",
			Input: json.RawMessage(`{"command":"touch one.txt"}`), Options: runs.Decisions, ExpiresAt: exp}).
		add(runs.EventUsageUpdated, runs.UsageData{Usage: runs.Usage{InputTokens: 5, OutputTokens: 1}}).
		add(runs.EventWarning, runs.WarningData{Code: "w", Message: "while waiting"}).
		add(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: "approval_1", Decision: runs.Allow, Reason: runs.ResolvedByClient}).
		add(runs.EventMessageDelta, runs.MessageData{MessageID: "msg_1", Text: "touch it."}).
		add(runs.EventMessageCompleted, runs.MessageData{MessageID: "msg_1", Text: "I will touch it. Done."}).
		add(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: "toolu_1", Output: ""}).
		add(runs.EventTurnCompleted, runs.TurnCompletedData{Turn: 1, Status: runs.Succeeded}).
		completed(runs.RunCompletedData{Status: runs.Succeeded, Result: "Done."})
	o := translate(t, agui.Options{}, l.evs)
	want := typesOf(agui.RunStarted, agui.StateSnapshot, agui.StepStarted, agui.TextMessageStart, agui.TextMessageContent,
		agui.ToolCallStart, agui.ToolCallArgs, agui.ToolCallEnd,
		agui.TextMessageEnd, agui.StepFinished, agui.StateDelta, agui.RunFinished, // the interrupt
		agui.RunStarted, agui.StateSnapshot, agui.StepStarted, agui.Custom, agui.Custom, // the answer; then the held warning
		agui.TextMessageStart, agui.TextMessageContent, agui.TextMessageContent, agui.TextMessageEnd, agui.ToolCallResult, agui.StepFinished,
		agui.StateDelta, agui.RunFinished)
	if got := o.types(); !slices.Equal(got, want) {
		t.Fatalf("types =\n%v\nwant\n%v", got, want)
	}
	iFin := o.find(t, agui.RunFinished, 0)
	fin := o.fields(t, iFin)
	oc := fin["outcome"].(map[string]any)
	in := oc["interrupts"].([]any)[0].(map[string]any)
	if oc["type"] != "interrupt" || in["id"] != runA+"/approval_1" || in["reason"] != "tool_call" ||
		in["toolCallId"] != runA+"/tool/toolu_1" || in["expiresAt"] != exp.Format(time.RFC3339Nano) ||
		!strings.Contains(in["message"].(string), "touch one.txt") {
		t.Errorf("interrupt = %v", fin)
	}
	props := in["responseSchema"].(map[string]any)["properties"].(map[string]any)
	if enum := props["decision"].(map[string]any)["enum"].([]any); len(enum) != 4 || props["approved"] == nil {
		t.Errorf("responseSchema = %v", in["responseSchema"])
	}
	if e := o.events[iFin]; e.Interrupt != runA+"/approval_1" {
		t.Errorf("Interrupt = %q", e.Interrupt)
	}
	delta := o.fields(t, iFin-1)["delta"].([]any)
	if len(delta) != 2 || delta[0].(map[string]any)["value"] != agui.StatusAwaitingApproval ||
		delta[1].(map[string]any)["value"].(map[string]any)["interrupt_id"] != runA+"/approval_1" {
		t.Errorf("delta before the interrupt = %v", delta)
	}
	// The interrupt happens at the approval, the next run at the answer.
	iNext := o.find(t, agui.RunStarted, 1)
	if o.from[iFin] != 5 || o.from[iNext] != 8 {
		t.Errorf("interrupt from envelope %d, next run from %d", o.from[iFin], o.from[iNext])
	}
	next := o.events[iNext]
	nf := o.fields(t, iNext)
	if next.Resumes != runA+"/approval_1" || nf["runId"] != runA+"/approval_1" || nf["input"] != nil || nf["threadId"] != runA {
		t.Errorf("next run = %s (resumes %q)", next.JSON, next.Resumes)
	}
	snap := o.fields(t, iNext+1)["snapshot"].(map[string]any)
	if snap["status"] != "running" || snap["pending_approval"] != nil || snap["usage"].(map[string]any)["input_tokens"] != float64(5) {
		t.Errorf("the snapshot after the answer = %v (the usage while waiting is in it)", snap)
	}
	if name := o.fields(t, iNext+3)["name"]; name != "agentgate.approval.resolved" {
		t.Errorf("after the answer: %v", name)
	}
	if name := o.fields(t, iNext+4)["name"]; name != "agentgate.warning" {
		t.Errorf("the held warning: %v", name)
	}
	ids, text := o.texts(t, agui.TextMessageStart, agui.TextMessageContent)
	if len(ids) != 2 || text[ids[0]] != "I will " || text[ids[1]] != "touch it. Done." {
		t.Errorf("text across the interrupt = %v %v", ids, text)
	}
}

// TestTranslateHeldApprovals: a second approval asked while the first
// waits, answered before it, follows the first's answer in order.
func TestTranslateHeldApprovals(t *testing.T) {
	l := newLog(t).started("p").
		add(runs.EventApprovalRequested, runs.ApprovalRequestedData{ID: "a1", Tool: "Bash"}).
		add(runs.EventApprovalRequested, runs.ApprovalRequestedData{ID: "a2", Tool: "Edit"}).
		add(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: "a2", Decision: runs.Deny, Reason: runs.ResolvedByTimeout}).
		add(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: "a1", Decision: runs.Allow, Reason: runs.ResolvedByClient}).
		add(runs.EventApprovalRequested, runs.ApprovalRequestedData{ID: "a3", Tool: "Bash"}).
		completed(runs.RunCompletedData{Status: runs.Failed, Error: &runs.RunError{Class: runs.Interrupted, Message: "gone"}})
	o := translate(t, agui.Options{}, l.evs)
	want := typesOf(agui.RunStarted, agui.StateSnapshot, agui.StateDelta, agui.RunFinished, // a1
		agui.RunStarted, agui.StateSnapshot, agui.Custom, agui.StateDelta, agui.RunFinished, // a1's answer, then a2
		agui.RunStarted, agui.StateSnapshot, agui.Custom, // a2's answer
		agui.StateDelta, agui.RunFinished, // a3
		agui.RunStarted, agui.StateSnapshot, agui.StateDelta, agui.RunError) // the end, unanswered
	if got := o.types(); !slices.Equal(got, want) {
		t.Fatalf("types =\n%v\nwant\n%v", got, want)
	}
	var resumes, interrupts []string
	for _, e := range o.events {
		if e.Resumes != "" {
			resumes = append(resumes, e.Resumes)
		}
		if e.Interrupt != "" {
			interrupts = append(interrupts, e.Interrupt)
		}
	}
	if !slices.Equal(interrupts, []string{runA + "/a1", runA + "/a2", runA + "/a3"}) ||
		!slices.Equal(resumes, interrupts) {
		t.Errorf("interrupts %v, resumed %v", interrupts, resumes)
	}
	errEv := o.fields(t, len(o.events)-1)
	if errEv["code"] != "interrupted" || errEv["message"] != "gone" {
		t.Errorf("RUN_ERROR = %v", errEv)
	}
}

func TestTranslateFailures(t *testing.T) {
	for _, c := range []struct {
		name          string
		log           *logBuilder
		code, message string
	}{
		{"class and hint", newLog(t).started("p").completed(runs.RunCompletedData{Status: runs.Failed,
			Error: runs.NewRunError(runs.NotAuthenticated, "401 from the API", "run `claude setup-token`")}),
			"not_authenticated", "401 from the API (run `claude setup-token`)"},
		{"cancelled while queued", newLog(t).add(runs.EventRunQueued, runs.RunQueuedData{Agent: "claude"}).
			completed(runs.RunCompletedData{Status: runs.Cancelled}), "cancelled", "the run ended cancelled"},
		{"timed out", newLog(t).started("p").completed(runs.RunCompletedData{Status: runs.TimedOut,
			Error: runs.NewRunError(runs.Timeout, "too slow", "")}), "timeout", "too slow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := translate(t, agui.Options{}, c.log.evs)
			last := o.events[len(o.events)-1]
			f := o.fields(t, len(o.events)-1)
			if last.Type != agui.RunError || f["code"] != c.code || f["message"] != c.message {
				t.Fatalf("last event %s", last.JSON)
			}
			if o.events[0].Type != agui.RunStarted {
				t.Errorf("first event %s", o.events[0].JSON)
			}
		})
	}
}

func TestTranslateTurnsAndExtras(t *testing.T) {
	l := newLog(t).started("first").
		add(runs.EventTurnStarted, runs.TurnStartedData{Turn: 1, Text: "first"}).
		add(runs.EventTurnCompleted, runs.TurnCompletedData{Turn: 1, Status: runs.Succeeded}).
		add(runs.EventMessageQueued, runs.MessageQueuedData{MessageID: "q", Text: "second", Mode: runs.MessageQueue}).
		add(runs.EventTurnStarted, runs.TurnStartedData{Turn: 2, Text: "second"}).
		add(runs.EventRateLimit, runs.RateLimitData{Attempt: 1, Status: 429}).
		add(runs.EventAgentUnparsed, runs.UnparsedData{Line: "{?", Bytes: 2, Reason: "bad"}).
		add(runs.EventPlanUpdated, runs.PlanUpdatedData{Steps: []runs.PlanStep{{Step: "a", Status: runs.StepPending}}}).
		add(runs.EventFileChanged, runs.FileChangedData{Path: "a.go", Kind: runs.ChangeAdd, Diff: "+x"}).
		add(runs.EventFileChanged, runs.FileChangedData{Path: "b.go", Kind: runs.ChangeUpdate}).
		add("some.future_type", map[string]int{"n": 1}).
		completed(runs.RunCompletedData{Status: runs.Succeeded, StructuredOutput: json.RawMessage(`{"name":"Bob"}`), Result: `{"name":"Bob"}`})
	o := translate(t, agui.Options{}, l.evs)
	want := typesOf(agui.RunStarted, agui.StateSnapshot, agui.StepStarted, agui.StepFinished, agui.Custom,
		agui.StepStarted, agui.TextMessageStart, agui.TextMessageContent, agui.TextMessageEnd, agui.Custom, agui.Raw,
		agui.StateDelta, agui.StateDelta, agui.StateDelta, agui.Custom, agui.StepFinished, agui.StateDelta, agui.RunFinished)
	if got := o.types(); !slices.Equal(got, want) {
		t.Fatalf("types =\n%v\nwant\n%v", got, want)
	}
	if f := o.fields(t, 5); f["stepName"] != "turn 2" {
		t.Errorf("step %v", f)
	}
	if f := o.fields(t, 6); f["role"] != "user" {
		t.Errorf("the second turn's message %v", f)
	}
	if f := o.fields(t, 10); f["source"] != "claude" || f["event"].(map[string]any)["line"] != "{?" {
		t.Errorf("RAW %v", f)
	}
	if f := o.fields(t, 14); f["name"] != "agentgate.some.future_type" {
		t.Errorf("CUSTOM %v", f)
	}
	if f := o.fields(t, 12)["delta"].([]any)[0].(map[string]any); f["op"] != "add" || f["path"] != "/files_changed/-" ||
		f["value"].(map[string]any)["diff"] != nil {
		t.Errorf("file delta %v", f)
	}
	if r := o.fields(t, len(o.events)-1)["result"]; !reflect.DeepEqual(r, map[string]any{"name": "Bob"}) {
		t.Errorf("structured result %v", r)
	}
}

// TestTranslateRunFilesJoinFilesChanged: the files the run changed, as
// run.completed lists them, join files_changed in the run's last
// STATE_DELTA, once each, after those file.changed named already.
func TestTranslateRunFilesJoinFilesChanged(t *testing.T) {
	l := newLog(t).started("p").
		add(runs.EventFileChanged, runs.FileChangedData{Path: "a.go", Kind: runs.ChangeUpdate}).
		completed(runs.RunCompletedData{Status: runs.Succeeded, Files: []runs.ChangedFile{
			{Path: "a.go", Kind: runs.ChangeUpdate}, {Path: "out.txt", Kind: runs.ChangeAdd, Size: 6}}})
	o := translate(t, agui.Options{}, l.evs)
	var added []any
	for i, typ := range o.types() {
		if typ != agui.StateDelta {
			continue
		}
		for _, op := range o.fields(t, i)["delta"].([]any) {
			if op := op.(map[string]any); op["path"] == "/files_changed/-" {
				added = append(added, op["value"].(map[string]any)["path"])
			}
		}
	}
	if !slices.Equal(added, []any{"a.go", "out.txt"}) {
		t.Fatalf("files_changed added %v, want a.go (file.changed) then out.txt (the run's files)", added)
	}
}

func TestTranslateOptions(t *testing.T) {
	l := newLog(t).started("p").
		add(runs.EventApprovalRequested, runs.ApprovalRequestedData{ID: "a1", Tool: "Bash"}).
		add(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: "a1", Decision: runs.Allow}).
		completed(runs.RunCompletedData{Status: runs.Succeeded})
	o := translate(t, agui.Options{ThreadID: "thread-9", RunID: "client-run", PromptMessageID: "user-msg-3"}, l.evs)
	for i, e := range o.events {
		if e.Type != agui.RunStarted && e.Type != agui.RunFinished {
			continue
		}
		f := o.fields(t, i)
		if f["threadId"] != "thread-9" || f["runId"] != "client-run" {
			t.Errorf("%s", e.JSON)
		}
	}
	in := o.fields(t, 0)["input"].(map[string]any)
	if in["threadId"] != "thread-9" || in["messages"].([]any)[0].(map[string]any)["id"] != "user-msg-3" {
		t.Errorf("input %v", in)
	}
}

// goldenLog turns an adapter's golden transcript into the log the
// supervisor would store: run.queued and run.started first, an answer
// after each approval that the transcript does not resolve itself, and
// run.completed from its outcome.
func goldenLog(t testing.TB, path string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Events []struct {
			Type             runs.EventType  `json:"type"`
			SessionID        string          `json:"session_id"`
			ParentToolCallID string          `json:"parent_tool_call_id"`
			Data             json.RawMessage `json:"data"`
		} `json:"events"`
		Outcome runs.RunCompletedData `json:"outcome"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	l := newLog(t).started("the prompt")
	resolved := map[string]bool{}
	for _, e := range g.Events {
		if e.Type == runs.EventApprovalResolved {
			var d runs.ApprovalResolvedData
			json.Unmarshal(e.Data, &d)
			resolved[d.ID] = true
		}
	}
	for _, e := range g.Events {
		l.add(e.Type, e.Data, e.ParentToolCallID)
		if e.Type == runs.EventApprovalRequested {
			var d runs.ApprovalRequestedData
			json.Unmarshal(e.Data, &d)
			if !resolved[d.ID] {
				l.add(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: d.ID, Decision: runs.Allow, Reason: runs.ResolvedByClient})
			}
		}
	}
	if g.Outcome.Status == "" {
		g.Outcome.Status = runs.Failed
	}
	return l.completed(g.Outcome).evs
}

func goldenFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("../adapters/*/testdata/*.golden.json")
	if err != nil || len(files) < 50 {
		t.Fatalf("golden transcripts: %d, %v", len(files), err)
	}
	return files
}

// TestTranslateRecordedRuns translates every adapter's recorded
// transcripts: each stream satisfies the Checker, its text matches the
// completed messages, each approval is one interrupt, the final state has
// the outcome's usage, and translating again gives the same bytes.
func TestTranslateRecordedRuns(t *testing.T) {
	for _, path := range goldenFiles(t) {
		name := strings.TrimSuffix(strings.TrimPrefix(path, "../adapters/"), ".golden.json")
		t.Run(name, func(t *testing.T) {
			evs := goldenLog(t, path)
			o := translate(t, agui.Options{}, evs)
			again := translate(t, agui.Options{}, evs)
			if dump(o.events) != dump(again.events) {
				t.Fatal("a second translation differs")
			}
			var completed []string
			approvals, tools := 0, 0
			var outcome runs.RunCompletedData
			for _, b := range evs {
				var env struct {
					Type             runs.EventType
					ParentToolCallID string `json:"parent_tool_call_id"`
					Data             json.RawMessage
				}
				json.Unmarshal(b, &env)
				switch env.Type {
				case runs.EventMessageCompleted:
					var d runs.MessageData
					json.Unmarshal(env.Data, &d)
					if d.Text != "" {
						completed = append(completed, d.Text)
					}
				case runs.EventApprovalRequested:
					approvals++
				case runs.EventToolCallStarted:
					tools++
				case runs.EventRunCompleted:
					json.Unmarshal(env.Data, &outcome)
				}
			}
			ids, text := o.texts(t, agui.TextMessageStart, agui.TextMessageContent)
			var got []string
			for _, id := range ids {
				if !strings.HasPrefix(id, runA+"/m") {
					t.Errorf("message id %q", id)
				}
				got = append(got, text[id])
			}
			if !slices.Equal(got, completed) {
				t.Errorf("text messages\n%q\nwant the completed messages\n%q", got, completed)
			}
			var interrupts, starts int
			for _, e := range o.events {
				if e.Interrupt != "" {
					interrupts++
				}
				if e.Type == agui.ToolCallStart {
					starts++
				}
			}
			if interrupts != approvals || starts != tools {
				t.Errorf("%d interrupts for %d approvals, %d tool calls for %d", interrupts, approvals, starts, tools)
			}
			var c aguitest.Checker
			for _, e := range o.events {
				if err := c.Check(e.JSON); err != nil {
					t.Fatal(err)
				}
			}
			st, _ := c.State()
			var final agui.State
			b, _ := json.Marshal(st)
			json.Unmarshal(b, &final)
			if final.Usage != outcome.Usage || final.Status != string(outcome.Status) {
				t.Errorf("final state %+v, outcome %+v", final, outcome)
			}
			last := o.events[len(o.events)-1]
			if (outcome.Status == runs.Succeeded) != (last.Type == agui.RunFinished) || !last.Type.Ends() {
				t.Errorf("status %s ends with %s", outcome.Status, last.JSON)
			}
		})
	}
}

// TestTranslateIgnoresWhatCannotBe: undecodable envelopes, and anything
// after run.completed, make no events.
func TestTranslateIgnoresWhatCannotBe(t *testing.T) {
	tr := agui.New(agui.Options{})
	for _, b := range []string{``, `{`, `[]`, `{"type":""}`, `"x"`} {
		if evs := tr.Translate([]byte(b)); len(evs) != 0 {
			t.Errorf("%q made %d events", b, len(evs))
		}
	}
	l := newLog(t).started("p").completed(runs.RunCompletedData{Status: runs.Succeeded}).
		add(runs.EventWarning, runs.WarningData{Code: "late"})
	var n int
	for i, b := range l.evs {
		evs := tr.Translate(b)
		if i == len(l.evs)-1 && len(evs) != 0 {
			t.Errorf("an event after run.completed made %s", dump(evs))
		}
		n += len(evs)
	}
	if !tr.Done() || n == 0 {
		t.Errorf("done %v after %d events", tr.Done(), n)
	}
}

// fuzzEnvelopes makes a run's log from the bytes of a fuzz input: each
// byte picks an event from a small alphabet that reaches every path of
// the translator (two messages, two reasoning agents, tool calls, three
// approvals, turns), and the log ends with run.completed.
func fuzzEnvelopes(t testing.TB, program []byte) [][]byte {
	l := newLog(t)
	for _, b := range program {
		msg := fmt.Sprintf("m%d", b>>6)
		parent := ""
		if b&0x20 != 0 {
			parent = "helper"
		}
		appr := fmt.Sprintf("a%d", b>>6%3)
		switch b % 20 {
		case 0:
			l.add(runs.EventRunStarted, runs.RunStartedData{Prompt: "p"})
		case 1:
			l.add(runs.EventMessageDelta, runs.MessageData{MessageID: msg, Text: "d"}, parent)
		case 2:
			l.add(runs.EventMessageCompleted, runs.MessageData{MessageID: msg, Text: "dd"}, parent)
		case 3:
			l.add(runs.EventReasoningDelta, runs.DeltaData{ID: msg, Text: "r"}, parent)
		case 4:
			l.add(runs.EventReasoningCompleted, runs.ReasoningData{Text: string(rune('a' + b%3))}, parent)
		case 5:
			l.add(runs.EventToolCallStarted, runs.ToolCallStartedData{ID: msg, Name: "Bash", Input: json.RawMessage(`{"c":1}`)}, parent)
		case 6:
			l.add(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: msg, Output: "o", IsError: b&1 == 1}, parent)
		case 7:
			l.add(runs.EventApprovalRequested, runs.ApprovalRequestedData{ID: appr, ToolCallID: msg, Tool: "Bash"})
		case 8:
			l.add(runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: appr, Decision: runs.Allow})
		case 9:
			l.add(runs.EventTurnStarted, runs.TurnStartedData{Turn: int(b >> 6), Text: "t"})
		case 10:
			l.add(runs.EventTurnCompleted, runs.TurnCompletedData{Status: runs.Succeeded})
		case 11:
			l.add(runs.EventUsageUpdated, runs.UsageData{Usage: runs.Usage{InputTokens: int64(b)}})
		case 12:
			l.add(runs.EventFileChanged, runs.FileChangedData{Path: msg, Kind: runs.ChangeAdd})
		case 13:
			l.add(runs.EventPlanUpdated, runs.PlanUpdatedData{Steps: []runs.PlanStep{{Step: msg}}})
		case 14:
			l.add(runs.EventWarning, runs.WarningData{Code: msg})
		case 15:
			l.add(runs.EventSessionStarted, runs.SessionStartedData{SessionID: msg, Model: "x"})
		case 16:
			l.add(runs.EventAgentUnparsed, runs.UnparsedData{Line: msg})
		case 17:
			l.add(runs.EventMessageQueued, runs.MessageQueuedData{MessageID: msg})
		case 18:
			l.add(runs.EventMessageDelta, runs.MessageData{Text: "anon"}, parent)
		case 19:
			l.add(runs.EventToolCallOutput, runs.DeltaData{ID: msg, Text: "x"})
		}
	}
	st := runs.Succeeded
	if len(program)%2 == 1 {
		st = runs.Failed
	}
	return l.completed(runs.RunCompletedData{Status: st}).evs
}

// FuzzTranslate holds every sequence of events to the Checker, and to
// one AG-UI run end for run.completed.
func FuzzTranslate(f *testing.F) {
	f.Add([]byte{0, 1, 1, 2, 5, 7, 11, 1, 8, 6, 2})
	f.Add([]byte{7, 0, 3, 7 + 64, 8 + 64, 8, 4, 9, 10})
	f.Add([]byte{1, 3, 5, 9, 7, 14, 0, 15, 8, 18, 3 + 64, 4})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, program []byte) {
		if len(program) > 400 {
			return
		}
		o := translate(t, agui.Options{}, fuzzEnvelopes(t, program))
		ends := 0
		for _, e := range o.events {
			if e.Type.Ends() && e.Interrupt == "" {
				ends++
			}
		}
		if ends != 1 || !o.events[len(o.events)-1].Type.Ends() {
			t.Fatalf("%d run ends:\n%s", ends, dump(o.events))
		}
	})
}

// FuzzTranslateBytes feeds arbitrary envelopes, seeded with the recorded
// runs: no panic, and the Checker holds.
func FuzzTranslateBytes(f *testing.F) {
	// The small recordings: the fuzzer minimizes what it finds
	// interesting, and a large seed makes that slow.
	for _, path := range goldenFiles(f) {
		if log := bytes.Join(goldenLog(f, path), []byte("\n")); len(log) < 6<<10 {
			f.Add(log)
		}
	}
	f.Add([]byte(`{"type":"run.completed","data":{"status":"succeeded","result":1}}`))
	f.Add([]byte(`{"type":"approval.requested","time":7,"data":{"id":"a"}}` + "\n" + `{"type":"run.started","data":null}`))
	f.Fuzz(func(t *testing.T, log []byte) {
		translate(t, agui.Options{}, bytes.Split(log, []byte("\n")))
	})
}
