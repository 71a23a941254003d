package api

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentgate/agentgate/internal/runs"
)

func loadEventsSchemaDoc(t testing.TB) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(eventsSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("events.schema.json: %v", err)
	}
	return v.(map[string]any)
}

func compileEventsSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	path, _ := filepath.Abs(eventsSchemaPath)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(path, loadEventsSchemaDoc(t)); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(path)
	if err != nil {
		t.Fatalf("compile events.schema.json: %v", err)
	}
	return sch
}

// payloadTypes is the payload struct of every event type.
var payloadTypes = map[runs.EventType]reflect.Type{
	runs.EventRunQueued:          reflect.TypeFor[runs.RunQueuedData](),
	runs.EventRunStarted:         reflect.TypeFor[runs.RunStartedData](),
	runs.EventSessionStarted:     reflect.TypeFor[runs.SessionStartedData](),
	runs.EventMessageDelta:       reflect.TypeFor[runs.MessageData](),
	runs.EventMessageCompleted:   reflect.TypeFor[runs.MessageData](),
	runs.EventReasoningCompleted: reflect.TypeFor[runs.ReasoningData](),
	runs.EventToolCallStarted:    reflect.TypeFor[runs.ToolCallStartedData](),
	runs.EventToolCallCompleted:  reflect.TypeFor[runs.ToolCallCompletedData](),
	runs.EventReasoningDelta:     reflect.TypeFor[runs.DeltaData](),
	runs.EventToolCallOutput:     reflect.TypeFor[runs.DeltaData](),
	runs.EventToolCallProgress:   reflect.TypeFor[runs.ToolCallProgressData](),
	runs.EventFileChanged:        reflect.TypeFor[runs.FileChangedData](),
	runs.EventPlanUpdated:        reflect.TypeFor[runs.PlanUpdatedData](),
	runs.EventUsageUpdated:       reflect.TypeFor[runs.UsageData](),
	runs.EventRateLimit:          reflect.TypeFor[runs.RateLimitData](),
	runs.EventWarning:            reflect.TypeFor[runs.WarningData](),
	runs.EventAgentUnparsed:      reflect.TypeFor[runs.UnparsedData](),
	runs.EventRunCompleted:       reflect.TypeFor[runs.RunCompletedData](),
	runs.EventApprovalRequested:  reflect.TypeFor[runs.ApprovalRequestedData](),
	runs.EventApprovalResolved:   reflect.TypeFor[runs.ApprovalResolvedData](),
	runs.EventTurnStarted:        reflect.TypeFor[runs.TurnStartedData](),
	runs.EventTurnCompleted:      reflect.TypeFor[runs.TurnCompletedData](),
	runs.EventMessageQueued:      reflect.TypeFor[runs.MessageQueuedData](),
	runs.EventRunResumed:         reflect.TypeFor[runs.RunResumedData](),
	runs.EventRunHibernated:      reflect.TypeFor[runs.RunHibernatedData](),
}

// samplePayloads returns, per type, a payload with every field set and
// one with only what the type needs (nil slices and maps included).
func samplePayloads() map[runs.EventType][]any {
	cost := 0.0123
	return map[runs.EventType][]any{
		runs.EventRunQueued: {
			runs.RunQueuedData{Agent: "claude", Metadata: map[string]string{"ticket": "ENG-1"}, Position: 3},
			runs.RunQueuedData{Agent: "claude", Position: 1},
		},
		runs.EventRunStarted: {
			runs.RunStartedData{Prompt: "fix it", SystemPrompt: "be brief", Model: "sonnet", Effort: "high",
				Permission: runs.Full, Cwd: "repo", ResumeSessionID: "s1", CLIVersion: "2.0.1", VersionStatus: runs.CompatNewer},
			runs.RunStartedData{Prompt: "fix it", Permission: runs.WorkspaceWrite, Cwd: ".", VersionStatus: runs.CompatVerified},
		},
		runs.EventSessionStarted: {
			runs.SessionStartedData{SessionID: "s1", Model: "claude-sonnet-4-5", Tools: []string{"Bash", "Read"}},
			runs.SessionStartedData{SessionID: "s1"},
		},
		runs.EventMessageDelta: {
			runs.MessageData{MessageID: "m1", Text: "Hel"},
			runs.MessageData{},
		},
		runs.EventMessageCompleted: {
			runs.MessageData{MessageID: "m1", Text: "Hello"},
			runs.MessageData{Text: "Hello"},
		},
		runs.EventReasoningCompleted: {
			runs.ReasoningData{Text: "thinking", Visibility: runs.VisibilityFull},
			runs.ReasoningData{Visibility: runs.VisibilityRedacted},
		},
		runs.EventToolCallStarted: {
			runs.ToolCallStartedData{ID: "t1", Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
			runs.ToolCallStartedData{ID: "t1", Name: "Bash"},
		},
		runs.EventToolCallCompleted: {
			runs.ToolCallCompletedData{ID: "t1", Output: "a\nb", IsError: true},
			runs.ToolCallCompletedData{ID: "t1"},
		},
		runs.EventToolCallProgress: {
			runs.ToolCallProgressData{ID: "t1", Name: "Bash", ElapsedMS: 30000},
			runs.ToolCallProgressData{ID: "t1"},
		},
		runs.EventReasoningDelta: {
			runs.DeltaData{ID: "rs_1", Text: "Thinking"},
			runs.DeltaData{},
		},
		runs.EventToolCallOutput: {
			runs.DeltaData{ID: "t1", Text: "line 1\n"},
			runs.DeltaData{ID: "t1"},
		},
		runs.EventFileChanged: {
			runs.FileChangedData{Path: "src/a.go", Kind: runs.ChangeUpdate, MovePath: "src/b.go", Diff: "@@ -1 +1 @@\n-a\n+b\n",
				Status: "completed", ToolCallID: "t1"},
			runs.FileChangedData{Path: "a.txt", Kind: runs.ChangeAdd},
		},
		runs.EventPlanUpdated: {
			runs.PlanUpdatedData{Explanation: "first read", Steps: []runs.PlanStep{{Step: "read", Status: runs.StepCompleted},
				{Step: "fix", Status: runs.StepInProgress}, {Step: "test", Status: runs.StepPending}}},
			runs.PlanUpdatedData{},
		},
		runs.EventUsageUpdated: {
			runs.UsageData{Usage: runs.Usage{InputTokens: 100, CacheReadTokens: 80, CacheWriteTokens: 10, OutputTokens: 20, ReasoningTokens: 5}, CostUSD: &cost},
			runs.UsageData{},
		},
		runs.EventRateLimit: {
			runs.RateLimitData{Attempt: 1, MaxRetries: 10, RetryDelayMS: 500, Status: 429, Error: "rate_limit_error"},
			runs.RateLimitData{},
		},
		runs.EventWarning: {
			runs.WarningData{Code: "cli_version_newer", Message: "newer than verified"},
			runs.WarningData{},
		},
		runs.EventAgentUnparsed: {
			runs.UnparsedData{Line: "{oops", Truncated: true, Bytes: 5, Reason: "invalid JSON"},
			runs.UnparsedData{},
		},
		runs.EventRunCompleted: {
			runs.RunCompletedData{Status: runs.Failed, StopReason: "end_turn", Result: "done",
				StructuredOutput: json.RawMessage(`{"ok":true}`), Usage: runs.Usage{InputTokens: 1}, CostUSD: &cost,
				NumTurns: 3, Diff: "diff --git a/x b/x\n", DurationMS: 4000, Exit: &runs.Exit{Code: -1, Signal: "SIGKILL", Reason: "timeout"},
				Error: runs.NewRunError(runs.Timeout, "timed out", "raise timeout_seconds")},
			runs.RunCompletedData{Status: runs.Succeeded},
		},
		runs.EventApprovalRequested: {
			runs.ApprovalRequestedData{ID: "ap-1", ToolCallID: "t1", Tool: "Bash", Input: json.RawMessage(`{"command":"touch x"}`),
				Options: runs.Decisions, ExpiresAt: t0},
			runs.ApprovalRequestedData{ID: "ap-1", Tool: "Bash", Options: []runs.Decision{runs.Allow}, ExpiresAt: t0},
		},
		runs.EventApprovalResolved: {
			runs.ApprovalResolvedData{ID: "ap-1", Decision: runs.Deny, Reason: runs.ResolvedByClient, Message: "not that"},
			runs.ApprovalResolvedData{ID: "ap-1", Reason: runs.ResolvedWithdrawn},
		},
		runs.EventTurnStarted: {
			runs.TurnStartedData{Turn: 2, MessageID: "m-2", Text: "and now the tests"},
			runs.TurnStartedData{Turn: 1, MessageID: "m-1"},
		},
		runs.EventTurnCompleted: {
			runs.TurnCompletedData{Turn: 2, Status: runs.Failed, StopReason: "error", Result: "x", Usage: runs.Usage{InputTokens: 5},
				CostUSD: &cost, Error: runs.NewRunError(runs.RateLimited, "429", "")},
			runs.TurnCompletedData{Turn: 1, Status: runs.Cancelled},
		},
		runs.EventMessageQueued: {
			runs.MessageQueuedData{MessageID: "m-2", Text: "and now the tests", Mode: runs.MessageSteer},
			runs.MessageQueuedData{MessageID: "m-2", Mode: runs.MessageQueue},
		},
		runs.EventRunResumed: {
			runs.RunResumedData{Replica: "b", PreviousReplica: "a", Turn: 2, Reason: runs.ResumedReplicaLost},
			runs.RunResumedData{Replica: "b", PreviousReplica: "a", Reason: runs.ResumedReplicaLost},
			runs.RunResumedData{Replica: "b", PreviousReplica: "a", Turn: 3, Reason: runs.ResumedWoken},
		},
		runs.EventRunHibernated: {
			runs.RunHibernatedData{Turn: 2, Replica: "a", Reason: runs.HibernatedIdle, ClosesAt: t0},
			runs.RunHibernatedData{Replica: "b", Reason: runs.HibernatedReplicaLost, ClosesAt: t0},
		},
	}
}

func envelope(t *testing.T, typ runs.EventType, data any, mutate func(*runs.Event)) any {
	t.Helper()
	ev := runs.Event{V: runs.EnvelopeVersion, RunID: runA, Seq: 3, Time: t0, Type: typ, Agent: "claude",
		SessionID: "s1", ParentToolCallID: "t0", Data: data}
	if mutate != nil {
		mutate(&ev)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestEventsSchemaBranches fails when an event type lacks a branch, or a
// branch names a type runs does not have.
func TestEventsSchemaBranches(t *testing.T) {
	doc := loadEventsSchemaDoc(t)
	var branches []string
	for _, b := range doc["allOf"].([]any) {
		cond := b.(map[string]any)["if"].(map[string]any)["properties"].(map[string]any)["type"].(map[string]any)
		branches = append(branches, cond["const"].(string))
	}
	var want []string
	for _, et := range runs.EventTypes {
		want = append(want, string(et))
	}
	enum := strs(doc["properties"].(map[string]any)["type"].(map[string]any)["enum"])
	sort.Strings(branches)
	sort.Strings(want)
	if !slices.Equal(branches, want) {
		t.Errorf("schema branches = %v, runs.EventTypes = %v", branches, want)
	}
	if !slices.Equal(enum, want) {
		t.Errorf("schema type enum = %v, runs.EventTypes = %v", enum, want)
	}
	for _, et := range runs.EventTypes {
		if _, ok := payloadTypes[et]; !ok {
			t.Errorf("event type %s has no payload type in this test", et)
		}
		if _, ok := samplePayloads()[et]; !ok {
			t.Errorf("event type %s has no sample in this test", et)
		}
	}
}

// TestEventsSchemaMatchesPayloads fails when a payload definition and its
// Go struct disagree on field names or on which fields are always sent.
func TestEventsSchemaMatchesPayloads(t *testing.T) {
	doc := loadEventsSchemaDoc(t)
	defs := doc["$defs"].(map[string]any)
	branchDef := map[string]string{}
	for _, b := range doc["allOf"].([]any) {
		bm := b.(map[string]any)
		typ := bm["if"].(map[string]any)["properties"].(map[string]any)["type"].(map[string]any)["const"].(string)
		ref := bm["then"].(map[string]any)["properties"].(map[string]any)["data"].(map[string]any)["$ref"].(string)
		branchDef[typ] = strings.TrimPrefix(ref, "#/$defs/")
	}
	check := func(def string, typ reflect.Type) {
		d, ok := defs[def].(map[string]any)
		if !ok {
			t.Errorf("no $defs/%s", def)
			return
		}
		all, required := jsonFields(typ)
		if got := keys(d["properties"].(map[string]any)); !slices.Equal(got, all) {
			t.Errorf("%s properties = %v, %s has %v", def, got, typ, all)
		}
		if got := strs(d["required"]); !slices.Equal(got, required) {
			t.Errorf("%s required = %v, %s always sends %v", def, got, typ, required)
		}
		if d["additionalProperties"] != false {
			t.Errorf("%s must have additionalProperties: false", def)
		}
	}
	for et, typ := range payloadTypes {
		check(branchDef[string(et)], typ)
	}
	check("Usage", reflect.TypeFor[runs.Usage]())
	check("Exit", reflect.TypeFor[runs.Exit]())
	check("RunError", reflect.TypeFor[runs.RunError]())

	envAll, envReq := jsonFields(reflect.TypeFor[runs.Event]())
	if got := keys(doc["properties"].(map[string]any)); !slices.Equal(got, envAll) {
		t.Errorf("envelope properties = %v, runs.Event has %v", got, envAll)
	}
	if got := strs(doc["required"]); !slices.Equal(got, envReq) {
		t.Errorf("envelope required = %v, runs.Event always sends %v", got, envReq)
	}
	var classes []string
	for _, c := range runs.Classes {
		classes = append(classes, string(c))
	}
	sort.Strings(classes)
	class := defs["RunError"].(map[string]any)["properties"].(map[string]any)["class"].(map[string]any)
	if got := strs(class["enum"]); !slices.Equal(got, classes) {
		t.Errorf("RunError.class enum = %v, runs.Classes = %v", got, classes)
	}
}

// TestEventsSchemaValidatesSamples validates an event of every type, built
// from the Go payload structs, and rejects broken ones.
func TestEventsSchemaValidatesSamples(t *testing.T) {
	sch := compileEventsSchema(t)
	samples := samplePayloads()
	for _, et := range runs.EventTypes {
		for i, data := range samples[et] {
			if err := sch.Validate(envelope(t, et, data, nil)); err != nil {
				t.Errorf("%s sample %d: %v", et, i, err)
			}
		}
		// Without the optional envelope fields too.
		v := envelope(t, et, samples[et][0], func(e *runs.Event) { e.SessionID, e.ParentToolCallID = "", "" })
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s without session: %v", et, err)
		}
	}

	bad := map[string]any{
		"unknown type": envelope(t, "run.paused", runs.MessageData{Text: "x"}, nil),
		"empty type":   envelope(t, "", runs.MessageData{Text: "x"}, nil),
		"wrong payload for type": envelope(t, runs.EventToolCallStarted,
			runs.MessageData{Text: "x"}, nil),
		"bad version":      envelope(t, runs.EventWarning, runs.WarningData{}, func(e *runs.Event) { e.V = 2 }),
		"seq 0":            envelope(t, runs.EventWarning, runs.WarningData{}, func(e *runs.Event) { e.Seq = 0 }),
		"run id not uuid":  envelope(t, runs.EventWarning, runs.WarningData{}, func(e *runs.Event) { e.RunID = "run-1" }),
		"bad permission":   envelope(t, runs.EventRunStarted, runs.RunStartedData{Prompt: "x", Permission: "root", VersionStatus: runs.CompatVerified}, nil),
		"non-final status": envelope(t, runs.EventRunCompleted, runs.RunCompletedData{Status: runs.Running}, nil),
		"bad class": envelope(t, runs.EventRunCompleted, runs.RunCompletedData{Status: runs.Failed,
			Error: &runs.RunError{Class: "oops", Message: "x"}}, nil),
		"bad visibility": envelope(t, runs.EventReasoningCompleted, runs.ReasoningData{Visibility: "partial"}, nil),
		"null data":      envelope(t, runs.EventWarning, nil, nil),
		"bad decision": envelope(t, runs.EventApprovalResolved, runs.ApprovalResolvedData{ID: "a", Decision: "maybe",
			Reason: runs.ResolvedByClient}, nil),
		"bad turn status":  envelope(t, runs.EventTurnCompleted, runs.TurnCompletedData{Turn: 1, Status: runs.TimedOut}, nil),
		"turn 0":           envelope(t, runs.EventTurnStarted, runs.TurnStartedData{MessageID: "m"}, nil),
		"negative elapsed": envelope(t, runs.EventToolCallProgress, runs.ToolCallProgressData{ID: "t1", ElapsedMS: -1}, nil),
		"bad hibernation reason": envelope(t, runs.EventRunHibernated, runs.RunHibernatedData{Replica: "a", Reason: "bored",
			ClosesAt: t0}, nil),
		"bad resumed reason": envelope(t, runs.EventRunResumed, runs.RunResumedData{Replica: "b", PreviousReplica: "a",
			Reason: "restarted"}, nil),
	}
	for name, v := range bad {
		if sch.Validate(v) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Extra or missing payload fields.
	for name, raw := range map[string]string{
		"extra data field":   `{"v":1,"run_id":"` + runA + `","seq":1,"time":"2025-05-01T12:00:00Z","type":"warning","agent":"claude","data":{"code":"c","message":"m","extra":1}}`,
		"missing data field": `{"v":1,"run_id":"` + runA + `","seq":1,"time":"2025-05-01T12:00:00Z","type":"warning","agent":"claude","data":{"code":"c"}}`,
		"extra envelope":     `{"v":1,"run_id":"` + runA + `","seq":1,"time":"2025-05-01T12:00:00Z","type":"warning","agent":"claude","data":{"code":"c","message":"m"},"x":1}`,
		"bad time":           `{"v":1,"run_id":"` + runA + `","seq":1,"time":"yesterday","type":"warning","agent":"claude","data":{"code":"c","message":"m"}}`,
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if sch.Validate(v) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
