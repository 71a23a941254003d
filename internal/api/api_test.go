package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestCreateRun(t *testing.T) {
	var got runs.Spec
	svc := &fakeService{submit: func(_ context.Context, spec runs.Spec) (runs.Run, error) {
		got = spec
		return sampleRun(runA, runs.Queued), nil
	}}
	h := newHarness(t, Config{}, svc)
	body := `{
		"agent": "claude", "prompt": "fix the bug", "system_prompt": "be brief",
		"model": "claude-sonnet-4-5[1m]", "effort": "high", "max_turns": 20, "timeout_seconds": 900,
		"max_budget_usd": 1.5, "output_schema": {"type": "object"}, "resume_session_id": "0f1e2d3c-aaaa",
		"keep_session": true, "metadata": {"ticket": "ENG-1"}, "cwd": "repo/sub", "permission": "read_only"}`
	resp, b := h.do(t, "POST", "/v1/runs", body, "Content-Type", "application/json; charset=utf-8")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if loc := resp.Header.Get("Location"); loc != "/v1/runs/"+runA {
		t.Errorf("Location = %q", loc)
	}
	validateOpenAPI(t, "Run", b)
	want := runs.Spec{
		Agent: "claude", Prompt: "fix the bug", SystemPrompt: "be brief", Model: "claude-sonnet-4-5[1m]",
		Effort: "high", MaxTurns: 20, TimeoutSeconds: 900, MaxBudgetUSD: 1.5,
		OutputSchema: json.RawMessage(`{"type": "object"}`), ResumeSessionID: "0f1e2d3c-aaaa", KeepSession: true,
		Metadata: map[string]string{"ticket": "ENG-1"}, Cwd: "repo/sub", Permission: runs.ReadOnly,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spec = %+v\nwant   %+v", got, want)
	}
	var run runs.Run
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(sampleRun(runA, runs.Queued))
	if strings.TrimSpace(string(b)) != string(wantJSON) {
		t.Errorf("body = %s\nwant   %s", b, wantJSON)
	}
}

func TestCreateRunDefaults(t *testing.T) {
	var got runs.Spec
	svc := &fakeService{submit: func(_ context.Context, spec runs.Spec) (runs.Run, error) {
		got = spec
		return sampleRun(runA, runs.Queued), nil
	}}
	h := newHarness(t, Config{}, svc)
	// null means "the default", like an absent field.
	resp, b := h.do(t, "POST", "/v1/runs", `{"agent":"claude","prompt":"hi","model":null,"permission":null,"metadata":{}}`,
		"Content-Type", "application/json")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	want := runs.Spec{Agent: "claude", Prompt: "hi", Permission: runs.WorkspaceWrite}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spec = %+v, want %+v", got, want)
	}
}

// TestCreateRunRejects checks every edge validation: status, code, the
// field named, and that the service is never asked.
func TestCreateRunRejects(t *testing.T) {
	svc := &fakeService{submit: func(context.Context, runs.Spec) (runs.Run, error) {
		t.Error("Submit called for an invalid request")
		return runs.Run{}, nil
	}}
	h := newHarness(t, Config{MaxBodyBytes: 3 << 20}, svc)
	ok := `"agent":"claude","prompt":"hi"`
	big := strings.Repeat("x", maxPromptBytes+1)
	manyKeys := make([]string, maxMetadataKeys+1)
	for i := range manyKeys {
		manyKeys[i] = fmt.Sprintf("%q:\"v\"", fmt.Sprint("k", i))
	}
	cases := []struct {
		name   string
		body   string
		status int
		code   string
		field  string
		msg    string
	}{
		{"unknown field", `{` + ok + `,"max_turn":3}`, 400, CodeUnknownField, "max_turn", `did you mean "max_turns"`},
		{"unknown field far from any", `{` + ok + `,"colour":"red"}`, 400, CodeUnknownField, "colour", `unknown field "colour"`},
		{"repeated field", `{` + ok + `,"model":"a","model":"b"}`, 400, CodeInvalidField, "model", "more than once"},
		{"missing agent", `{"prompt":"hi"}`, 400, CodeInvalidField, "agent", "required"},
		{"empty agent", `{"agent":"","prompt":"hi"}`, 400, CodeInvalidField, "agent", "required"},
		{"agent not a string", `{"agent":7,"prompt":"hi"}`, 400, CodeInvalidField, "agent", "string"},
		{"long agent", `{"agent":"` + strings.Repeat("a", 65) + `","prompt":"hi"}`, 400, CodeInvalidField, "agent", "64"},
		{"missing prompt", `{"agent":"claude"}`, 400, CodeInvalidField, "prompt", "required"},
		{"null prompt", `{"agent":"claude","prompt":null}`, 400, CodeInvalidField, "prompt", "required"},
		{"blank prompt", `{"agent":"claude","prompt":" \n\t"}`, 400, CodeInvalidField, "prompt", "blank"},
		{"prompt too long", `{"agent":"claude","prompt":"` + big + `"}`, 400, CodeInvalidField, "prompt", "524288"},
		{"prompt with NUL", `{"agent":"claude","prompt":"a\u0000b"}`, 400, CodeInvalidField, "prompt", "NUL"},
		{"system prompt not string", `{` + ok + `,"system_prompt":["x"]}`, 400, CodeInvalidField, "system_prompt", "string"},
		{"model flag", `{` + ok + `,"model":"--dangerously-skip-permissions"}`, 400, CodeInvalidField, "model", "letter or digit"},
		{"model space", `{` + ok + `,"model":"a b"}`, 400, CodeInvalidField, "model", ""},
		{"effort", `{` + ok + `,"effort":"max"}`, 400, CodeInvalidField, "effort", "low, medium, high"},
		{"max_turns 0", `{` + ok + `,"max_turns":0}`, 400, CodeInvalidField, "max_turns", "1 to 1000"},
		{"max_turns 1001", `{` + ok + `,"max_turns":1001}`, 400, CodeInvalidField, "max_turns", "1 to 1000"},
		{"max_turns fraction", `{` + ok + `,"max_turns":1.5}`, 400, CodeInvalidField, "max_turns", ""},
		{"max_turns exponent", `{` + ok + `,"max_turns":1e2}`, 400, CodeInvalidField, "max_turns", ""},
		{"max_turns string", `{` + ok + `,"max_turns":"5"}`, 400, CodeInvalidField, "max_turns", ""},
		{"max_turns huge", `{` + ok + `,"max_turns":99999999999999999999999}`, 400, CodeInvalidField, "max_turns", ""},
		{"timeout 0", `{` + ok + `,"timeout_seconds":0}`, 400, CodeInvalidField, "timeout_seconds", "1 to 604800"},
		{"timeout too long", `{` + ok + `,"timeout_seconds":604801}`, 400, CodeInvalidField, "timeout_seconds", ""},
		{"budget 0", `{` + ok + `,"max_budget_usd":0}`, 400, CodeInvalidField, "max_budget_usd", "greater than 0"},
		{"budget negative", `{` + ok + `,"max_budget_usd":-1}`, 400, CodeInvalidField, "max_budget_usd", ""},
		{"budget overflow", `{` + ok + `,"max_budget_usd":1e400}`, 400, CodeInvalidField, "max_budget_usd", ""},
		{"budget string", `{` + ok + `,"max_budget_usd":"1"}`, 400, CodeInvalidField, "max_budget_usd", ""},
		{"output_schema array", `{` + ok + `,"output_schema":[]}`, 400, CodeInvalidField, "output_schema", "object"},
		{"output_schema string", `{` + ok + `,"output_schema":"{}"}`, 400, CodeInvalidField, "output_schema", ""},
		{"output_schema bool", `{` + ok + `,"output_schema":true}`, 400, CodeInvalidField, "output_schema", ""},
		{"session traversal", `{` + ok + `,"resume_session_id":"../../etc"}`, 400, CodeInvalidField, "resume_session_id", ""},
		{"session slash", `{` + ok + `,"resume_session_id":"a/b"}`, 400, CodeInvalidField, "resume_session_id", ""},
		{"keep_session string", `{` + ok + `,"keep_session":"yes"}`, 400, CodeInvalidField, "keep_session", "true or false"},
		{"metadata array", `{` + ok + `,"metadata":["a"]}`, 400, CodeInvalidField, "metadata", "object"},
		{"metadata number value", `{` + ok + `,"metadata":{"a":1}}`, 400, CodeInvalidField, "metadata", `"a"`},
		{"metadata too many", `{` + ok + `,"metadata":{` + strings.Join(manyKeys, ",") + `}}`, 400, CodeInvalidField, "metadata", "16 keys"},
		{"metadata long key", `{` + ok + `,"metadata":{"` + strings.Repeat("k", 65) + `":"v"}}`, 400, CodeInvalidField, "metadata", "64"},
		{"metadata empty key", `{` + ok + `,"metadata":{"":"v"}}`, 400, CodeInvalidField, "metadata", ""},
		{"metadata long value", `{` + ok + `,"metadata":{"k":"` + strings.Repeat("v", 513) + `"}}`, 400, CodeInvalidField, "metadata", "512"},
		{"metadata repeated key", `{` + ok + `,"metadata":{"k":"a","k":"b"}}`, 400, CodeInvalidField, "metadata", "more than once"},
		{"cwd absolute", `{` + ok + `,"cwd":"/etc"}`, 400, CodeInvalidField, "cwd", "relative"},
		{"cwd escapes", `{` + ok + `,"cwd":"a/../../b"}`, 400, CodeInvalidField, "cwd", ""},
		{"permission", `{` + ok + `,"permission":"root"}`, 400, CodeInvalidField, "permission", "read_only"},
		{"permission wrong type", `{` + ok + `,"permission":1}`, 400, CodeInvalidField, "permission", "string"},
		{"not JSON", `{"agent":`, 400, CodeInvalidJSON, "", "not valid JSON"},
		{"garbage", `hello`, 400, CodeInvalidJSON, "", ""},
		{"array", `[1]`, 400, CodeInvalidJSON, "", "object"},
		{"null body", `null`, 400, CodeInvalidJSON, "", "object"},
		{"trailing data", `{` + ok + `} {}`, 400, CodeInvalidJSON, "", "after"},
		{"empty body", ``, 400, CodeInvalidJSON, "", "empty"},
		{"body too large", `{"agent":"claude","prompt":"` + strings.Repeat("x", 3<<20) + `"}`, 413, CodeBodyTooLarge, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, b := h.do(t, "POST", "/v1/runs", c.body, "Content-Type", "application/json")
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, b)
			}
			e := errorBody(t, b)
			if e.Code != c.code || e.Field != c.field {
				t.Errorf("code %q field %q, want %q %q (%s)", e.Code, e.Field, c.code, c.field, e.Message)
			}
			if !strings.Contains(e.Message, c.msg) {
				t.Errorf("message %q lacks %q", e.Message, c.msg)
			}
		})
	}
}

func TestCreateRunContentType(t *testing.T) {
	h := newHarness(t, Config{}, &fakeService{submit: func(context.Context, runs.Spec) (runs.Run, error) {
		return sampleRun(runA, runs.Queued), nil
	}})
	body := `{"agent":"claude","prompt":"hi"}`
	for ct, want := range map[string]int{
		"":                                  415,
		"text/plain":                        415,
		"application/x-www-form-urlencoded": 415,
		"application/json":                  201,
		"application/merge-patch+json":      201,
		"Application/JSON; charset=utf-8":   201,
	} {
		var hdr []string
		if ct != "" {
			hdr = []string{"Content-Type", ct}
		}
		resp, b := h.do(t, "POST", "/v1/runs", body, hdr...)
		if resp.StatusCode != want {
			t.Errorf("Content-Type %q: status %d, want %d", ct, resp.StatusCode, want)
			continue
		}
		if want == 415 {
			if e := errorBody(t, b); e.Code != CodeUnsupportedMediaType {
				t.Errorf("Content-Type %q: code %q", ct, e.Code)
			}
		}
	}
}

// TestServiceErrors checks the one mapping from service errors to status,
// code and headers.
func TestServiceErrors(t *testing.T) {
	const secret = "dial tcp 10.1.2.3:4222: connection refused"
	agents := []runs.AgentInfo{{Name: "codex"}, {Name: "claude"}}
	cases := []struct {
		name       string
		err        error
		status     int
		code       string
		field      string
		agent      string
		msg        string
		retryAfter string
	}{
		{"unsupported", fmt.Errorf("build: %w", runs.Unsupported("codex", runs.FieldMaxBudgetUSD, "the CLI has no budget flag")),
			400, CodeUnsupportedOption, "max_budget_usd", "codex", "no budget flag", ""},
		{"invalid field", runs.Invalid(runs.FieldCwd, "no such directory"), 400, CodeInvalidField, "cwd", "", "no such directory", ""},
		{"invalid", fmt.Errorf("odd: %w", runs.ErrInvalid), 400, CodeInvalidField, "", "", "odd", ""},
		{"unknown agent", fmt.Errorf("agent %q: %w", "cladue", runs.ErrUnknownAgent), 400, CodeUnknownAgent, "agent", "",
			`agent "cladue": unknown agent; known agents: claude, codex`, ""},
		{"not installed", fmt.Errorf("agent %q: %w", "codex", runs.ErrAgentUnavailable), 422, CodeAgentNotInstalled, "agent", "", "not installed", ""},
		{"not found", fmt.Errorf("x: %w", runs.ErrNotFound), 404, CodeNotFound, "", "", "not found", ""},
		{"queue full", fmt.Errorf("x: %w", runs.ErrCapacity), 429, CodeQueueFull, "", "", "queue is full", "2"},
		{"shutting down", fmt.Errorf("x: %w", runs.ErrShuttingDown), 503, CodeShuttingDown, "", "", "shutting down", "2"},
		{"disk full", fmt.Errorf("x: %w", runs.ErrStorageFull), 503, CodeDiskFull, "", "", "disk is full", "2"},
		{"idempotency mismatch", fmt.Errorf("x: %w", runs.ErrIdempotencyMismatch), 422, CodeIdempotencyMismatch, "", "", "another request body", ""},
		{"other", errors.New(secret), 500, CodeInternal, "", "", "internal error", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc := &fakeService{
				submit: func(context.Context, runs.Spec) (runs.Run, error) { return runs.Run{}, c.err },
				agents: func() []runs.AgentInfo { return agents },
			}
			h := newHarness(t, Config{RetryAfter: 1500 * time.Millisecond}, svc)
			resp, b := h.do(t, "POST", "/v1/runs", `{"agent":"claude","prompt":"hi"}`, "Content-Type", "application/json")
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, b)
			}
			e := errorBody(t, b)
			if e.Code != c.code || e.Field != c.field || e.Agent != c.agent {
				t.Errorf("got %+v, want code %q field %q agent %q", e, c.code, c.field, c.agent)
			}
			if !strings.Contains(e.Message, c.msg) {
				t.Errorf("message %q lacks %q", e.Message, c.msg)
			}
			if got := resp.Header.Get("Retry-After"); got != c.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, c.retryAfter)
			}
			if c.status == 500 {
				if e.Message != "internal error" || strings.Contains(string(b), "10.1.2.3") {
					t.Errorf("500 leaks the error: %s", b)
				}
				logged := h.logs.FilterLevelExact(zapcore.ErrorLevel).FilterFieldKey("error").All()
				if len(logged) != 1 || !strings.Contains(fmt.Sprint(logged[0].ContextMap()["error"]), secret) {
					t.Errorf("the whole error was not logged at error level: %+v", logged)
				}
			}
		})
	}
}

// A run's routes check its tenant with the record alone; only GET of a
// queued run asks for its place in the queue, which costs the store two
// more reads: a stream opened on a queued run, the common case for a
// client that posts a run and follows it, does not pay them.
func TestQueuePositionOnlyWhereShown(t *testing.T) {
	var gets, records, positions atomic.Int32
	queued := sampleRun(runA, runs.Queued)
	svc := &fakeService{
		record: func(_ context.Context, id string) (runs.Run, error) {
			records.Add(1)
			return queued, nil
		},
		get: func(_ context.Context, id string) (runs.Run, error) {
			gets.Add(1)
			return queued, nil
		},
		position: func(_ context.Context, id string) int {
			positions.Add(1)
			return 3
		},
		events: func(_ context.Context, id string, after uint64) (runs.Cursor, error) {
			return sliceCursor([]runs.StoredEvent{{Seq: 1, Type: runs.EventRunCompleted,
				JSON: []byte(`{"v":1,"run_id":"` + id + `","seq":1,"type":"run.completed","data":{"status":"cancelled"}}`)}}, false), nil
		},
	}
	h := newHarness(t, Config{}, svc)
	resp, b := h.do(t, "GET", "/v1/runs/"+runA, "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET of a queued run: status %d: %s", resp.StatusCode, b)
	}
	var run runs.Run
	if err := json.Unmarshal(b, &run); err != nil || run.QueuePosition != 3 {
		t.Errorf("GET of a queued run: %+v, %v; want queue_position 3", run, err)
	}
	if positions.Load() != 1 || records.Load() != 1 || gets.Load() != 0 {
		t.Errorf("GET of a queued run: %d records, %d positions, %d gets; want the record once and its position once",
			records.Load(), positions.Load(), gets.Load())
	}
	records.Store(0)
	positions.Store(0)
	resp, b = h.do(t, "GET", "/v1/runs/"+runA+"/events", "")
	if resp.StatusCode != 200 || !strings.Contains(string(b), "run.completed") {
		t.Fatalf("events of a queued run: status %d: %s", resp.StatusCode, b)
	}
	if positions.Load() != 0 || gets.Load() != 0 || records.Load() != 1 {
		t.Errorf("the events of a queued run: %d records, %d positions, %d gets; want the record once and no position",
			records.Load(), positions.Load(), gets.Load())
	}
}

func TestGetRun(t *testing.T) {
	svc := &fakeService{get: func(_ context.Context, id string) (runs.Run, error) {
		if id == runA {
			return sampleRun(runA, runs.Running), nil
		}
		if id == runB {
			return runs.Run{}, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
		}
		t.Errorf("Get(%q): a malformed id reached the service", id)
		return runs.Run{}, runs.ErrNotFound
	}}
	h := newHarness(t, Config{}, svc)
	resp, b := h.do(t, "GET", "/v1/runs/"+runA, "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	validateOpenAPI(t, "Run", b)
	var run runs.Run
	if err := json.Unmarshal(b, &run); err != nil || run.ID != runA || run.Status != runs.Running {
		t.Errorf("run = %+v, %v", run, err)
	}
	for _, id := range []string{runB, "nope", strings.ToUpper(runA), "{" + runA + "}",
		strings.ReplaceAll(runA, "-", ""), "urn:uuid:" + runA, runA + "0"} {
		resp, b := h.do(t, "GET", "/v1/runs/"+id, "")
		if resp.StatusCode != 404 {
			t.Errorf("%s: status %d", id, resp.StatusCode)
			continue
		}
		if e := errorBody(t, b); e.Code != CodeNotFound {
			t.Errorf("%s: code %q", id, e.Code)
		}
	}
}

// Cursors are run ids; anything else is refused before the service.
const (
	cursorC1    = "0196f0c2-7e1a-7000-8000-0000000000c1"
	cursorEmpty = "0196f0c2-7e1a-7000-8000-0000000000e0"
	cursorBad   = "0196f0c2-7e1a-7000-8000-0000000000bd"
)

func TestListRuns(t *testing.T) {
	var got []runs.Filter
	svc := &fakeService{list: func(_ context.Context, f runs.Filter) (runs.Page, error) {
		got = append(got, f)
		switch f.Cursor {
		case cursorBad:
			return runs.Page{}, fmt.Errorf("cursor: %w", runs.ErrInvalid)
		case cursorEmpty:
			return runs.Page{}, nil
		}
		return runs.Page{Runs: []runs.Run{sampleRun(runB, runs.Running), sampleRun(runA, runs.Succeeded)}, NextCursor: "c2"}, nil
	}}
	h := newHarness(t, Config{}, svc)

	resp, b := h.do(t, "GET", "/v1/runs?status=running&agent=claude&limit=2&cursor="+cursorC1, "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	validateOpenAPI(t, "RunList", b)
	var page struct {
		Runs       []runs.Run `json:"runs"`
		NextCursor string     `json:"next_cursor"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 2 || page.Runs[0].ID != runB || page.NextCursor != "c2" {
		t.Errorf("page = %+v", page)
	}
	if want := (runs.Filter{Status: runs.Running, Agent: "claude", Limit: 2, Cursor: cursorC1}); got[0] != want {
		t.Errorf("filter = %+v, want %+v", got[0], want)
	}

	resp, b = h.do(t, "GET", "/v1/runs?cursor="+cursorEmpty, "")
	if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != `{"runs":[]}` {
		t.Errorf("empty page: %d %s", resp.StatusCode, b)
	}
	if want := (runs.Filter{Limit: defaultPageSize, Cursor: cursorEmpty}); got[1] != want {
		t.Errorf("default filter = %+v, want %+v", got[1], want)
	}
	// An empty value is the same as an absent one.
	if resp, _ := h.do(t, "GET", "/v1/runs?status=&limit=", ""); resp.StatusCode != 200 || got[2].Limit != defaultPageSize || got[2].Status != "" {
		t.Errorf("empty values: %d %+v", resp.StatusCode, got[2])
	}
	if resp, _ := h.do(t, "GET", "/v1/runs?limit=500", ""); resp.StatusCode != 200 || got[3].Limit != 500 {
		t.Errorf("limit 500: %d %+v", resp.StatusCode, got[3])
	}

	calls := len(got)
	for _, c := range []struct{ query, code, field string }{
		{"status=paused", CodeInvalidField, "status"},
		{"limit=0", CodeInvalidField, "limit"},
		{"limit=501", CodeInvalidField, "limit"},
		{"limit=ten", CodeInvalidField, "limit"},
		{"limit=+5", CodeInvalidField, "limit"},
		{"limit=1&limit=2", CodeInvalidField, "limit"},
		{"stauts=running", CodeUnknownField, "stauts"},
	} {
		resp, b := h.do(t, "GET", "/v1/runs?"+c.query, "")
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d", c.query, resp.StatusCode)
			continue
		}
		if e := errorBody(t, b); e.Code != c.code || e.Field != c.field {
			t.Errorf("%s: %+v", c.query, e)
		}
	}
	if len(got) != calls {
		t.Errorf("invalid queries reached the service")
	}
	resp, b = h.do(t, "GET", "/v1/runs?cursor="+cursorBad, "")
	if e := errorBody(t, b); resp.StatusCode != 400 || e.Code != CodeInvalidField {
		t.Errorf("bad cursor: %d %+v", resp.StatusCode, e)
	}
}

// TestCancelIdempotent cancels twice: both answer 200 with the run as it
// is, first still running, then cancelled; an unknown run is a 404.
func TestCancelIdempotent(t *testing.T) {
	var mu sync.Mutex
	status := runs.Running
	calls := 0
	svc := &fakeService{cancel: func(_ context.Context, id string) (runs.Run, error) {
		mu.Lock()
		defer mu.Unlock()
		if id != runA {
			return runs.Run{}, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
		}
		calls++
		run := sampleRun(runA, status)
		status = runs.Cancelled // the supervisor finishes cancelling a moment later
		return run, nil
	}}
	h := newHarness(t, Config{}, svc)
	for i, want := range []runs.State{runs.Running, runs.Cancelled, runs.Cancelled} {
		resp, b := h.do(t, "POST", "/v1/runs/"+runA+"/cancel", "")
		if resp.StatusCode != 200 {
			t.Fatalf("cancel %d: status %d: %s", i, resp.StatusCode, b)
		}
		validateOpenAPI(t, "Run", b)
		var run runs.Run
		if err := json.Unmarshal(b, &run); err != nil || run.Status != want {
			t.Errorf("cancel %d: status %q, want %q (%v)", i, run.Status, want, err)
		}
	}
	if calls != 3 {
		t.Errorf("Cancel called %d times", calls)
	}
	resp, b := h.do(t, "POST", "/v1/runs/"+runB+"/cancel", "")
	if e := errorBody(t, b); resp.StatusCode != 404 || e.Code != CodeNotFound {
		t.Errorf("unknown run: %d %+v", resp.StatusCode, e)
	}
	resp, b = h.do(t, "POST", "/v1/runs/bogus/cancel", "")
	if e := errorBody(t, b); resp.StatusCode != 404 || e.Code != CodeNotFound {
		t.Errorf("malformed id: %d %+v", resp.StatusCode, e)
	}
}

func TestAgentsHealthReadyMetrics(t *testing.T) {
	var readyMu sync.Mutex
	var readyErr error
	svc := &fakeService{
		agents: func() []runs.AgentInfo {
			return []runs.AgentInfo{{Name: "claude", Installed: true, Path: "/usr/bin/claude", Version: "2.0.1",
				VerifiedVersion: "2.0.1", Compatibility: runs.CompatVerified, Capabilities: []string{"model"},
				Permissions: map[runs.Permission]string{runs.ReadOnly: "--permission-mode plan"}, Enforcement: runs.EnforcementSandbox, Sandbox: "bubblewrap",
				Networks: []runs.Network{runs.NetworkOpen, runs.NetworkModel, runs.NetworkAllow},
				Source:   runs.SourceBuiltin, Reports: runs.Description{ReportsCost: true}.Reporting()}}
		},
		ready: func(context.Context) error {
			readyMu.Lock()
			defer readyMu.Unlock()
			return readyErr
		},
	}
	h := newHarness(t, Config{}, svc)
	resp, b := h.do(t, "GET", "/v1/agents", "")
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"name":"claude"`) {
		t.Errorf("agents: %d %s", resp.StatusCode, b)
	}
	validateOpenAPI(t, "AgentList", b)

	resp, b = h.do(t, "GET", "/healthz", "")
	if resp.StatusCode != 200 {
		t.Errorf("healthz: %d", resp.StatusCode)
	}
	validateOpenAPI(t, "Health", b)

	resp, b = h.do(t, "GET", "/readyz", "")
	if resp.StatusCode != 200 {
		t.Errorf("readyz: %d %s", resp.StatusCode, b)
	}
	readyMu.Lock()
	readyErr = errors.New("store not connected")
	readyMu.Unlock()
	resp, b = h.do(t, "GET", "/readyz", "")
	if e := errorBody(t, b); resp.StatusCode != 503 || e.Code != CodeNotReady || !strings.Contains(e.Message, "store not connected") {
		t.Errorf("readyz not ready: %d %+v", resp.StatusCode, e)
	}
	resp, b = h.do(t, "GET", "/healthz", "")
	if resp.StatusCode != 200 {
		t.Errorf("healthz while not ready: %d %s", resp.StatusCode, b)
	}

	resp, b = h.do(t, "GET", "/metrics", "")
	if resp.StatusCode != 200 || string(b) != "agentgate_up 1\n" {
		t.Errorf("metrics: %d %q", resp.StatusCode, b)
	}
	// Without a metrics handler, /metrics is a 404 with the error body.
	noMetrics := httptestServer(t, New(Config{}, svc, nil, nil, nil))
	resp, b = get(t, noMetrics+"/metrics")
	if e := errorBody(t, b); resp.StatusCode != 404 || e.Code != CodeNotFound {
		t.Errorf("metrics disabled: %d %+v", resp.StatusCode, e)
	}
	// No agents is an empty list, not null.
	empty := newHarness(t, Config{}, &fakeService{})
	if _, b := empty.do(t, "GET", "/v1/agents", ""); strings.TrimSpace(string(b)) != `{"agents":[]}` {
		t.Errorf("no agents: %s", b)
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	h := newHarness(t, Config{}, &fakeService{})
	resp, b := h.do(t, "GET", "/v2/nothing", "")
	if e := errorBody(t, b); resp.StatusCode != 404 || e.Code != CodeNotFound {
		t.Errorf("unknown route: %d %+v", resp.StatusCode, e)
	}
	for _, c := range []struct {
		method, path string
		allow        []string
	}{
		{"DELETE", "/v1/runs", []string{"GET", "POST", "HEAD"}},
		{"PUT", "/v1/runs/" + runA, []string{"GET", "DELETE", "HEAD"}},
		{"GET", "/v1/runs/" + runA + "/cancel", []string{"POST"}},
		{"POST", "/healthz", []string{"GET", "HEAD"}},
	} {
		resp, b := h.do(t, c.method, c.path, "")
		if resp.StatusCode != 405 {
			t.Errorf("%s %s: status %d", c.method, c.path, resp.StatusCode)
			continue
		}
		if e := errorBody(t, b); e.Code != CodeMethodNotAllowed {
			t.Errorf("%s %s: %+v", c.method, c.path, e)
		}
		if got := resp.Header.Values("Allow"); !slices.Equal(got, c.allow) {
			t.Errorf("%s %s: Allow = %v, want %v", c.method, c.path, got, c.allow)
		}
	}
}

// TestObserverAndLog checks one observation per request, by route pattern,
// and the request log's levels.
func TestObserverAndLog(t *testing.T) {
	svc := &fakeService{
		get: func(_ context.Context, id string) (runs.Run, error) {
			if id == runB {
				return runs.Run{}, errors.New("store exploded")
			}
			return sampleRun(id, runs.Running), nil
		},
	}
	h := newHarness(t, Config{}, svc)
	h.do(t, "GET", "/v1/runs/"+runA, "")
	h.do(t, "GET", "/v1/runs/"+runB, "")
	h.do(t, "GET", "/no/such/"+runA, "")
	h.do(t, "BREW", "/v1/runs", "")

	want := []observedRequest{
		{"/v1/runs/{id}", "GET", 200},
		{"/v1/runs/{id}", "GET", 500},
		{RouteUnmatched, "GET", 404},
		{RouteUnmatched, "OTHER", 405},
	}
	if got := h.obs.observed(); !slices.Equal(got, want) {
		t.Errorf("observed %+v\nwant     %+v", got, want)
	}
	all := h.logs.FilterMessage("http request").All()
	if len(all) != 4 {
		t.Fatalf("%d request log lines, want 4", len(all))
	}
	for i, e := range all {
		wantLevel := zapcore.DebugLevel
		if i == 1 {
			wantLevel = zapcore.ErrorLevel
		}
		if e.Level != wantLevel {
			t.Errorf("line %d (%v) at %v, want %v", i, e.ContextMap()["status"], e.Level, wantLevel)
		}
	}
	if errLine := all[1].ContextMap(); !strings.Contains(fmt.Sprint(errLine["error"]), "store exploded") ||
		errLine["route"] != "/v1/runs/{id}" {
		t.Errorf("500 log line = %v", errLine)
	}
}

// TestPanicBecomes500 checks that a panicking handler costs one request.
func TestPanicBecomes500(t *testing.T) {
	var calmed atomic.Bool
	svc := &fakeService{get: func(_ context.Context, id string) (runs.Run, error) {
		if !calmed.Load() {
			panic("boom")
		}
		return sampleRun(id, runs.Running), nil
	}}
	h := newHarness(t, Config{}, svc)
	resp, b := h.do(t, "GET", "/v1/runs/"+runA, "")
	if e := errorBody(t, b); resp.StatusCode != 500 || e.Code != CodeInternal || e.Message != "internal error" {
		t.Errorf("panic: %d %+v", resp.StatusCode, e)
	}
	if n := h.logs.FilterMessage("handler panicked").Len(); n != 1 {
		t.Errorf("%d panic log lines", n)
	}
	// The server still serves.
	calmed.Store(true)
	if resp, _ := h.do(t, "GET", "/v1/runs/"+runA, ""); resp.StatusCode != 200 {
		t.Errorf("after panic: %d", resp.StatusCode)
	}
}

func TestConfigDefaults(t *testing.T) {
	got := Config{BatchSize: 7, PingInterval: -time.Second}.withDefaults()
	want := Config{PingInterval: DefaultPingInterval, WriteTimeout: DefaultWriteTimeout, BatchSize: 7,
		MaxBodyBytes: DefaultMaxBodyBytes, RetryAfter: DefaultRetryAfter, ReconnectDelay: DefaultReconnectDelay,
		StreamTokenTTL: DefaultStreamTokenTTL, BodyReadTimeout: 30 * time.Second, RequestTimeout: time.Minute,
		TriggerMaxBodyBytes: DefaultTriggerMaxBodyBytes, TriggerRate: DefaultTriggerRate, TriggerBurst: DefaultTriggerBurst}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("withDefaults = %+v, want %+v", got, want)
	}
}

// The Idempotency-Key header reaches the service with the spec; a
// malformed one is a 400 invalid_header, and a key reused with another body
// a 422 idempotency_mismatch.
func TestCreateRunIdempotencyKey(t *testing.T) {
	var got []string
	svc := &fakeService{submit: func(_ context.Context, spec runs.Spec) (runs.Run, error) {
		got = append(got, spec.IdempotencyKey)
		if spec.Prompt == "other" {
			return runs.Run{}, fmt.Errorf("submit: %w", runs.ErrIdempotencyMismatch)
		}
		return sampleRun(runA, runs.Queued), nil
	}}
	h := newHarness(t, Config{}, svc)
	resp, b := h.do(t, "POST", "/v1/runs", `{"agent":"claude","prompt":"hi"}`,
		"Content-Type", "application/json", "Idempotency-Key", "order-42:attempt")
	if resp.StatusCode != http.StatusCreated || len(got) != 1 || got[0] != "order-42:attempt" {
		t.Fatalf("status %d keys %q: %s", resp.StatusCode, got, b)
	}
	resp, b = h.do(t, "POST", "/v1/runs", `{"agent":"claude","prompt":"other"}`,
		"Content-Type", "application/json", "Idempotency-Key", "order-42:attempt")
	e := decodeError(t, b)
	if resp.StatusCode != http.StatusUnprocessableEntity || e.Code != CodeIdempotencyMismatch {
		t.Fatalf("reused key: %d %+v", resp.StatusCode, e)
	}
	validateOpenAPI(t, "Error", b)
	for _, bad := range []string{strings.Repeat("k", 256), "has space", "tab\there", "ключ"} {
		resp, b := h.do(t, "POST", "/v1/runs", `{"agent":"claude","prompt":"hi"}`,
			"Content-Type", "application/json", "Idempotency-Key", bad)
		e := decodeError(t, b)
		if resp.StatusCode != http.StatusBadRequest || e.Code != CodeInvalidHeader || !strings.Contains(e.Message, "Idempotency-Key") {
			t.Errorf("key %q: %d %+v", bad, resp.StatusCode, e)
		}
	}
	if len(got) != 2 {
		t.Errorf("the service saw %d submissions, want 2: bad keys must not reach it", len(got))
	}
}
