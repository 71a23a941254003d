package opencode

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func decodeAll(d *decoder, lines ...string) []runs.Event {
	var evs []runs.Event
	for _, l := range lines {
		evs = append(evs, d.Decode([]byte(l))...)
	}
	return evs
}

// TestUsage checks the normalization with the fact sheet's numbers: the
// server sent 5000 prompt tokens (4000 cached) and 50 completion tokens
// (12 reasoning), which OpenCode printed as input 1000, cache.read 4000,
// output 38, reasoning 12; then 5200/5000 and 10/0.
func TestUsage(t *testing.T) {
	d := newDecoder(runs.Invocation{})
	evs := decodeAll(d,
		`{"type":"step_finish","sessionID":"s","part":{"reason":"tool-calls","tokens":{"total":5050,"input":1000,"output":38,"reasoning":12,"cache":{"write":0,"read":4000}},"cost":0}}`,
		`{"type":"step_finish","sessionID":"s","part":{"reason":"stop","tokens":{"total":5210,"input":200,"output":10,"reasoning":0,"cache":{"write":7,"read":5000}},"cost":0}}`)
	want := runs.Usage{InputTokens: 5000 + 5207, CacheReadTokens: 9000, CacheWriteTokens: 7, OutputTokens: 60, ReasoningTokens: 12}
	if len(evs) != 3 || evs[2].Type != runs.EventUsageUpdated || evs[2].Data.(runs.UsageData).Usage != want || evs[2].SessionID != "s" {
		t.Fatalf("events = %+v", evs)
	}
	if first := evs[1].Data.(runs.UsageData); first.Usage.InputTokens != 5000 || first.Usage.OutputTokens != 50 || first.CostUSD != nil {
		t.Errorf("first step = %+v: a cost of 0 is no cost", first)
	}
	o := d.Finish(runs.Exit{}, nil)
	if o.Status != runs.Succeeded || o.Usage != want || o.NumTurns != 2 || o.StopReason != "stop" || o.CostUSD != nil || o.SessionID != "s" {
		t.Errorf("outcome = %+v", o)
	}
	c := newDecoder(runs.Invocation{})
	decodeAll(c, `{"type":"step_finish","part":{"tokens":{"input":1},"cost":0.25}}`, `{"type":"step_finish","part":{"cost":0.5}}`)
	if o := c.Finish(runs.Exit{}, nil); o.CostUSD == nil || *o.CostUSD != 0.75 || o.Usage.InputTokens != 1 {
		t.Errorf("cost = %v, usage %+v", o.CostUSD, o.Usage)
	}
}

func TestResultIsTheLastMessage(t *testing.T) {
	d := newDecoder(runs.Invocation{Spec: runs.Spec{Model: "p/m"}})
	evs := decodeAll(d,
		`{"type":"step_start","sessionID":"s","part":{"type":"step-start"}}`,
		`{"type":"text","sessionID":"s","part":{"messageID":"m1","text":"looking"}}`,
		`{"type":"step_finish","sessionID":"s","part":{"reason":"tool-calls"}}`,
		`{"type":"text","sessionID":"s","part":{"messageID":"m2","text":"one"}}`,
		`{"type":"text","sessionID":"s","part":{"messageID":"m2","text":"two"}}`,
		`{"type":"reasoning","sessionID":"s","part":{"text":""}}`,
		`{"type":"step_finish","sessionID":"s","part":{"reason":"stop"}}`)
	if evs[0].Type != runs.EventSessionStarted || evs[0].Data.(runs.SessionStartedData).Model != "p/m" || evs[0].SessionID != "s" {
		t.Errorf("first event = %+v", evs[0])
	}
	if r := evs[len(evs)-2].Data.(runs.ReasoningData); r.Visibility != runs.VisibilityRedacted {
		t.Errorf("empty reasoning = %+v", r)
	}
	if o := d.Finish(runs.Exit{}, nil); o.Result != "one\ntwo" || o.Model != "p/m" {
		t.Errorf("outcome = %+v", o)
	}
}

func TestUnparsed(t *testing.T) {
	for line, reason := range map[string]string{
		`not json`:                         "invalid JSON",
		`{"sessionID":"s"}`:                "no type field",
		`{"type":"weird","sessionID":"s"}`: `unknown type "weird"`,
		`{"type":"text","sessionID":"s"}`:  "text without part",
		`{"type":"tool_use","sessionID":"s","part":{"tool":"bash","state":{"status":"running"}}}`: `state "running"`,
		`{"type":"tool_use","sessionID":"s","part":{"tool":"bash"}}`:                              "without part or state",
		`{"type":"step_finish","sessionID":"s"}`:                                                  "step_finish without part",
		`{"type":"step_start","sessionID":"s"}`:                                                   "step_start without part",
		`{"type":"reasoning","sessionID":"s"}`:                                                    "reasoning without part",
		`{"type":"error","sessionID":"s"}`:                                                        "error without error",
	} {
		d := newDecoder(runs.Invocation{})
		evs := d.Decode([]byte(line))
		last := evs[len(evs)-1]
		u, ok := last.Data.(runs.UnparsedData)
		if !ok || last.Type != runs.EventAgentUnparsed || !strings.Contains(u.Reason, reason) || u.Line != line || last.SessionID != "" {
			t.Errorf("%s: %+v", line, evs)
		}
		if strings.Contains(line, `"sessionID":"s"`) && (evs[0].Type != runs.EventSessionStarted || evs[0].SessionID != "s") {
			t.Errorf("%s: the session was not started: %+v", line, evs)
		}
	}
	if evs := newDecoder(runs.Invocation{}).Decode([]byte("  ")); evs != nil {
		t.Errorf("blank line = %+v", evs)
	}
}

func TestTools(t *testing.T) {
	d := newDecoder(runs.Invocation{Dir: "/w"})
	evs := decodeAll(d,
		`{"type":"tool_use","sessionID":"s","part":{"id":"prt_1","tool":"write","state":{"status":"completed","output":"ok","metadata":{"filepath":"/elsewhere/a","exists":true}}}}`,
		`{"type":"tool_use","sessionID":"s","part":{"callID":"c2","tool":"edit","state":{"status":"error","input":{"filePath":"b"},"error":"The user rejected permission to use this specific tool call."}}}`,
		`{"type":"tool_use","sessionID":"s","part":{"callID":"c3","tool":"read","state":{"status":"completed","input":{"filePath":"/w/x"},"output":"text"}}}`,
		`{"type":"tool_use","sessionID":"s","part":{"callID":"c4","tool":"edit","state":{"status":"completed","input":{"filePath":"/w/sub/y"},"metadata":{"diff":"-a\n+b\n"}}}}`)
	var types []runs.EventType
	for _, ev := range evs[1:] {
		types = append(types, ev.Type)
	}
	want := []runs.EventType{runs.EventToolCallStarted, runs.EventFileChanged, runs.EventToolCallCompleted,
		runs.EventToolCallStarted, runs.EventWarning, runs.EventToolCallCompleted,
		runs.EventToolCallStarted, runs.EventToolCallCompleted,
		runs.EventToolCallStarted, runs.EventFileChanged, runs.EventToolCallCompleted}
	if strings.Join(strs(types), ",") != strings.Join(strs(want), ",") {
		t.Fatalf("types = %v\nwant %v", types, want)
	}
	if s := evs[1].Data.(runs.ToolCallStartedData); s.ID != "prt_1" || string(s.Input) != "{}" {
		t.Errorf("write without a call id or input = %+v", s)
	}
	if fc := evs[2].Data.(runs.FileChangedData); fc.Path != "/elsewhere/a" || fc.Kind != runs.ChangeUpdate || fc.ToolCallID != "prt_1" {
		t.Errorf("write of an existing file outside = %+v", fc)
	}
	if w := evs[5].Data.(runs.WarningData); w.Code != "permission_denied" || !strings.HasPrefix(w.Message, "edit was refused") {
		t.Errorf("warning = %+v", w)
	}
	if c := evs[6].Data.(runs.ToolCallCompletedData); !c.IsError || !strings.HasPrefix(c.Output, "The user rejected") {
		t.Errorf("refused edit = %+v", c)
	}
	if fc := evs[10].Data.(runs.FileChangedData); fc.Path != "sub/y" || fc.Diff != "-a\n+b\n" || fc.Kind != runs.ChangeUpdate {
		t.Errorf("edit inside = %+v", fc)
	}
	if o := d.Finish(runs.Exit{}, nil); o.Status != runs.Failed || o.Error.Class != runs.AgentCrashed {
		t.Errorf("exit 0 without a step = %+v", o)
	}
}

func strs(ts []runs.EventType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

func TestClassify(t *testing.T) {
	errLine := func(name string, data map[string]any) string {
		b, _ := json.Marshal(map[string]any{"type": "error", "sessionID": "s", "error": map[string]any{"name": name, "data": data}})
		return string(b)
	}
	ctx := `{"error":{"code":"context_length_exceeded","message":"too long","type":"invalid_request_error"}}`
	for _, c := range []struct {
		line  string
		class runs.Class
		msg   string
	}{
		{errLine("APIError", map[string]any{"message": "bad key", "statusCode": 401, "isRetryable": false}), runs.NotAuthenticated, "bad key (HTTP 401)"},
		{errLine("APIError", map[string]any{"message": "no", "statusCode": 403}), runs.NotAuthenticated, "no (HTTP 403)"},
		{errLine("APIError", map[string]any{"message": "slow down", "statusCode": 429, "isRetryable": true}), runs.RateLimited, "slow down"},
		{errLine("APIError", map[string]any{"message": "late", "statusCode": 408}), runs.TransientAPIError, "late"},
		{errLine("APIError", map[string]any{"message": "busy", "statusCode": 503, "isRetryable": true}), runs.TransientAPIError, "busy"},
		{errLine("APIError", map[string]any{"message": "too long", "statusCode": 400, "responseBody": ctx}), runs.ContextExceeded, "too long"},
		{errLine("APIError", map[string]any{"message": "bad", "statusCode": 400, "responseBody": "<html>"}), runs.APIError, "bad (HTTP 400)"},
		{errLine("APIError", map[string]any{"message": "Cannot connect to API", "isRetryable": true}), runs.TransientAPIError, "Cannot connect"},
		{errLine("APIError", map[string]any{"message": "odd", "isRetryable": false}), runs.APIError, "odd"},
		{errLine("ProviderAuthError", map[string]any{"providerID": "p", "message": "no key"}), runs.NotAuthenticated, "no key"},
		{errLine("ContextOverflowError", map[string]any{"message": "full"}), runs.ContextExceeded, "full"},
		{errLine("ContentFilterError", map[string]any{"message": "filtered"}), runs.Refused, "filtered"},
		{errLine("MessageAbortedError", map[string]any{"message": "Aborted"}), runs.Interrupted, "Aborted"},
		{errLine("MessageOutputLengthError", map[string]any{}), runs.APIError, "output token limit"},
		{errLine("StructuredOutputError", map[string]any{"message": "schema"}), runs.APIError, "schema"},
		{errLine("UnknownError", map[string]any{"message": `{"message":"invalid content","type":"server_error","param":null,"code":null}`}), runs.TransientAPIError, "invalid content"},
		{errLine("UnknownError", map[string]any{"message": `{"message":"slow","type":"requests","code":"rate_limit_exceeded"}`}), runs.RateLimited, "slow"},
		{errLine("UnknownError", map[string]any{"message": `{"message":"long","type":"invalid_request_error","code":"context_length_exceeded"}`}), runs.ContextExceeded, "long"},
		{errLine("UnknownError", map[string]any{"message": `{"message":"key","type":"invalid_request_error","code":"invalid_api_key"}`}), runs.NotAuthenticated, "key"},
		{errLine("UnknownError", map[string]any{"message": `{"message":"what","type":"invalid_request_error"}`}), runs.APIError, "what"},
		{errLine("UnknownError", map[string]any{"message": "Unexpected server error. Check server logs for details.", "ref": "err_1"}), runs.AgentCrashed, "Unexpected server error"},
		{errLine("BrandNewError", nil), runs.AgentCrashed, "OpenCode reported BrandNewError"},
	} {
		d := newDecoder(runs.Invocation{})
		if evs := d.Decode([]byte(c.line)); len(evs) != 1 || evs[0].Type != runs.EventSessionStarted {
			t.Errorf("%s: events %+v, want only session.started", c.line, evs)
		}
		o := d.Finish(runs.Exit{Code: 1}, nil)
		if o.Status != runs.Failed || o.Error == nil || o.Error.Class != c.class || o.Error.Retryable != c.class.Retryable() ||
			!strings.Contains(o.Error.Message, c.msg) || o.Error.Hint == "" && c.class != runs.Refused {
			t.Errorf("%s: %+v, want %s with %q", c.line, o.Error, c.class, c.msg)
		}
	}
}

func TestClassifyExit(t *testing.T) {
	for _, c := range []struct {
		exit   runs.Exit
		stderr string
		steps  []string
		class  runs.Class
		msg    string
		hint   string
	}{
		{runs.Exit{Code: 1}, "\x1b[91m\x1b[1mError: \x1b[0mSession not found\n", nil, runs.SessionNotFound, "no session ses_x", "leave cwd empty"},
		{runs.Exit{Code: 1}, "opencode run [message..]\n\nrun opencode with a message\n", nil, runs.FlagRejected, "usage", VerifiedVersion},
		{runs.Exit{Code: 1}, "Options:\n...\nUnknown argument: bogus\n", nil, runs.FlagRejected, "Unknown argument: bogus", VerifiedVersion},
		{runs.Exit{Code: 2}, "panic: something\nat line 3\n", nil, runs.AgentCrashed, "code 2 without an answer: panic: something | at line 3", "print-logs"},
		{runs.Exit{Code: -1, Signal: "SIGKILL"}, "", nil, runs.ProcessKilled, "SIGKILL", ""},
		{runs.Exit{}, "", nil, runs.AgentCrashed, "without running a model request", "print-logs"},
		{runs.Exit{}, "", []string{`{"type":"step_finish","part":{"reason":"content-filter"}}`}, runs.Refused, "content filter", ""},
	} {
		d := newDecoder(runs.Invocation{CLIVersion: VerifiedVersion, Spec: runs.Spec{ResumeSessionID: "ses_x"}})
		decodeAll(d, c.steps...)
		o := d.Finish(c.exit, []byte(c.stderr))
		if o.Status != runs.Failed || o.Error == nil || o.Error.Class != c.class || !strings.Contains(o.Error.Message, c.msg) ||
			!strings.Contains(o.Error.Hint, c.hint) {
			t.Errorf("exit %+v, stderr %q: %+v, want %s with %q and a hint with %q", c.exit, c.stderr, o.Error, c.class, c.msg, c.hint)
		}
	}
	// A step that ended on the token limit is a success that says so.
	d := newDecoder(runs.Invocation{})
	decodeAll(d, `{"type":"step_finish","part":{"reason":"length"}}`)
	if o := d.Finish(runs.Exit{}, nil); o.Status != runs.Succeeded || o.StopReason != "length" {
		t.Errorf("length = %+v", o)
	}
}

func TestVersionHint(t *testing.T) {
	if h := versionHint(""); !strings.Contains(h, "unknown version") || !strings.Contains(h, InstallCommand) {
		t.Errorf("unknown = %q", h)
	}
	if h := versionHint(VerifiedVersion); strings.Contains(h, "install") {
		t.Errorf("verified = %q", h)
	}
}
