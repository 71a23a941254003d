package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestCreateRunInteractiveFields(t *testing.T) {
	var got runs.Spec
	svc := &fakeService{submit: func(_ context.Context, spec runs.Spec) (runs.Run, error) {
		got = spec
		return sampleRun(runA, runs.Queued), nil
	}}
	h := newHarness(t, Config{}, svc)
	body := `{"agent":"claude","prompt":"hi","approvals":"ask","approval_timeout_seconds":60,"interactive":true,"idle_timeout_seconds":120}`
	resp, b := h.do(t, "POST", "/v1/runs", body, "Content-Type", "application/json")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	want := runs.Spec{Agent: "claude", Prompt: "hi", Permission: runs.WorkspaceWrite, Approvals: runs.ApprovalsAsk,
		ApprovalTimeoutSeconds: 60, Interactive: true, IdleTimeoutSeconds: 120}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("spec = %+v\nwant   %+v", got, want)
	}
	for _, c := range []struct{ body, field string }{
		{`{"agent":"claude","prompt":"hi","approvals":"sometimes"}`, "approvals"},
		{`{"agent":"claude","prompt":"hi","approval_timeout_seconds":0}`, "approval_timeout_seconds"},
		{`{"agent":"claude","prompt":"hi","approval_timeout_seconds":86401}`, "approval_timeout_seconds"},
		{`{"agent":"claude","prompt":"hi","interactive":"yes"}`, "interactive"},
		{`{"agent":"claude","prompt":"hi","idle_timeout_seconds":-1}`, "idle_timeout_seconds"},
	} {
		resp, b := h.do(t, "POST", "/v1/runs", c.body, "Content-Type", "application/json")
		e := decodeError(t, b)
		if resp.StatusCode != http.StatusBadRequest || e.Code != CodeInvalidField || e.Field != c.field {
			t.Errorf("%s: %d %+v", c.body, resp.StatusCode, e)
		}
	}
}

func decodeError(t *testing.T, b []byte) ErrorDetail {
	t.Helper()
	var e ErrorResponse
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body %s: %v", b, err)
	}
	return e.Error
}

func TestAnswerApproval(t *testing.T) {
	var got runs.Input
	svc := &fakeService{input: func(_ context.Context, id string, in runs.Input) (runs.InputResult, error) {
		if id != runA {
			return runs.InputResult{}, fmt.Errorf("run %s: %w", id, runs.ErrNotFound)
		}
		got = in
		switch in.ApprovalID {
		case "ap-done":
			return runs.InputResult{}, runs.Conflict(runs.ConflictApprovalResolved, "approval ap-done was already resolved (timeout)")
		case "ap-unknown":
			return runs.InputResult{}, fmt.Errorf("approval ap-unknown: %w", runs.ErrNotFound)
		}
		return runs.InputResult{Approval: &runs.ResolvedApproval{
			Approval: runs.Approval{ID: in.ApprovalID, Tool: "Bash", Options: runs.Decisions, Turn: 1, CreatedAt: t0, ExpiresAt: t0},
			Decision: in.Decision, Reason: runs.ResolvedByClient, Message: in.Message, ResolvedAt: t0,
		}}, nil
	}}
	h := newHarness(t, Config{}, svc)
	resp, b := h.do(t, "POST", "/v1/runs/"+runA+"/approvals/ap-1", `{"decision":"deny","message":"not that file"}`,
		"Content-Type", "application/json")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	validateOpenAPI(t, "ResolvedApproval", b)
	want := runs.Input{Kind: runs.InputDecision, ApprovalID: "ap-1", Decision: runs.Deny, Message: "not that file"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("input = %+v, want %+v", got, want)
	}
	var ra runs.ResolvedApproval
	if err := json.Unmarshal(b, &ra); err != nil || ra.ID != "ap-1" || ra.Decision != runs.Deny {
		t.Fatalf("body %s: %v", b, err)
	}
	for _, c := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/approvals/ap-done", `{"decision":"allow"}`, http.StatusConflict, CodeApprovalResolved},
		{"/approvals/ap-unknown", `{"decision":"allow"}`, http.StatusNotFound, CodeNotFound},
		{"/approvals/ap-1", `{"decision":"maybe"}`, http.StatusBadRequest, CodeInvalidField},
		{"/approvals/ap-1", `{}`, http.StatusBadRequest, CodeInvalidField},
		{"/approvals/ap-1", ``, http.StatusBadRequest, CodeInvalidField},
		{"/approvals/ap-1", `{"decision":"allow","reason":"x"}`, http.StatusBadRequest, CodeUnknownField},
		{"/approvals/ap-1", `{"decision":"allow","message":"` + strings.Repeat("x", runs.MaxDecisionMessageBytes+1) + `"}`,
			http.StatusBadRequest, CodeInvalidField},
		{"/approvals/ap-1", `{"decision":"allow"`, http.StatusBadRequest, CodeInvalidJSON},
	} {
		resp, b := h.do(t, "POST", "/v1/runs/"+runA+c.path, c.body, "Content-Type", "application/json")
		e := decodeError(t, b)
		if resp.StatusCode != c.status || e.Code != c.code {
			t.Errorf("%s %s: %d %+v, want %d %s", c.path, echoed(c.body), resp.StatusCode, e, c.status, c.code)
		}
		validateOpenAPI(t, "Error", b)
	}
	// A body that is not declared JSON.
	resp, b = h.do(t, "POST", "/v1/runs/"+runA+"/approvals/ap-1", `{"decision":"allow"}`, "Content-Type", "text/plain")
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain: %d %s", resp.StatusCode, b)
	}
}

func TestPostMessage(t *testing.T) {
	var got runs.Input
	svc := &fakeService{input: func(_ context.Context, id string, in runs.Input) (runs.InputResult, error) {
		got = in
		switch in.Text {
		case "to a finished run":
			return runs.InputResult{}, runs.Conflict(runs.ConflictRunEnded, "the run has ended")
		case "steer gemini":
			return runs.InputResult{}, runs.Unsupported("gemini", "mode", "this agent cannot add a message to a running turn")
		case "owner gone":
			return runs.InputResult{}, fmt.Errorf("input: %w", runs.ErrOwnerUnavailable)
		}
		return runs.InputResult{MessageID: "m-7"}, nil
	}}
	h := newHarness(t, Config{}, svc)
	resp, b := h.do(t, "POST", "/v1/runs/"+runA+"/messages", `{"text":"and the tests","mode":"steer"}`, "Content-Type", "application/json")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	validateOpenAPI(t, "MessageAccepted", b)
	if !reflect.DeepEqual(got, runs.Input{Kind: runs.InputMessage, Text: "and the tests", Mode: runs.MessageSteer}) {
		t.Fatalf("input = %+v", got)
	}
	if !strings.Contains(string(b), `"id":"m-7"`) {
		t.Fatalf("body %s", b)
	}
	_, _ = h.do(t, "POST", "/v1/runs/"+runA+"/messages", `{"text":"queued by default"}`, "Content-Type", "application/json")
	if got.Mode != runs.MessageQueue {
		t.Fatalf("default mode = %q", got.Mode)
	}
	for _, c := range []struct {
		body        string
		status      int
		code, field string
	}{
		{`{"text":"to a finished run"}`, http.StatusConflict, CodeRunEnded, ""},
		{`{"text":"steer gemini","mode":"steer"}`, http.StatusBadRequest, CodeUnsupportedOption, "mode"},
		{`{"text":"owner gone"}`, http.StatusServiceUnavailable, CodeOwnerUnavailable, ""},
		{`{"text":"  "}`, http.StatusBadRequest, CodeInvalidField, "text"},
		{`{"text":"x","mode":"shout"}`, http.StatusBadRequest, CodeInvalidField, "mode"},
		{`{"txt":"x"}`, http.StatusBadRequest, CodeUnknownField, "txt"},
	} {
		resp, b := h.do(t, "POST", "/v1/runs/"+runA+"/messages", c.body, "Content-Type", "application/json")
		e := decodeError(t, b)
		if resp.StatusCode != c.status || e.Code != c.code || e.Field != c.field {
			t.Errorf("%s: %d %+v, want %d %s %s", c.body, resp.StatusCode, e, c.status, c.code, c.field)
		}
		if c.status == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", c.body)
		}
	}
}

func TestInterruptAndClose(t *testing.T) {
	var kinds []runs.InputKind
	svc := &fakeService{input: func(_ context.Context, id string, in runs.Input) (runs.InputResult, error) {
		kinds = append(kinds, in.Kind)
		if id == runB {
			return runs.InputResult{}, runs.Conflict(runs.ConflictNoTurn, "no turn is running")
		}
		return runs.InputResult{}, nil
	}}
	h := newHarness(t, Config{}, svc)
	for _, path := range []string{"/interrupt", "/close"} {
		resp, b := h.do(t, "POST", "/v1/runs/"+runA+path, "")
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		validateOpenAPI(t, "Accepted", b)
		resp, b = h.do(t, "POST", "/v1/runs/"+runA+path, `{}`, "Content-Type", "application/json")
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s with {}: %d %s", path, resp.StatusCode, b)
		}
		resp, b = h.do(t, "POST", "/v1/runs/"+runA+path, `{"now":true}`, "Content-Type", "application/json")
		if e := decodeError(t, b); resp.StatusCode != http.StatusBadRequest || e.Code != CodeUnknownField {
			t.Fatalf("%s with a field: %d %+v", path, resp.StatusCode, e)
		}
	}
	want := []runs.InputKind{runs.InputInterrupt, runs.InputInterrupt, runs.InputClose, runs.InputClose}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("inputs %v, want %v", kinds, want)
	}
	resp, b := h.do(t, "POST", "/v1/runs/"+runB+"/interrupt", "")
	if e := decodeError(t, b); resp.StatusCode != http.StatusConflict || e.Code != CodeNoTurnRunning {
		t.Fatalf("interrupt with no turn: %d %+v", resp.StatusCode, e)
	}
	resp, _ = h.do(t, "POST", "/v1/runs/not-a-uuid/interrupt", "")
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("bad run id: %d", resp.StatusCode)
	}
}

func FuzzDecodeInput(f *testing.F) {
	for _, s := range []string{`{"decision":"allow"}`, `{"decision":"deny","message":"no"}`, `{"text":"hi","mode":"steer"}`,
		`{}`, ``, `{"text":1}`, `{"decision":null}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, decode := range []func([]byte) (runs.Input, error){decodeDecision, decodeMessage} {
			in, err := decode(body)
			if err != nil {
				continue
			}
			if verr := in.Validate(); in.Kind == runs.InputDecision && in.ApprovalID == "" {
				continue // the path gives the id
			} else if verr != nil {
				t.Fatalf("decoded %q into %+v, which does not validate: %v", body, in, verr)
			}
		}
	})
}
