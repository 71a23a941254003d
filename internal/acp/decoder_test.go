package acp

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// script plays a scripted ACP agent against a Decoder: the test writes
// the agent's lines and reads what the client wrote back.
type script struct {
	t *testing.T
	d *Decoder
	// evs are every event so far.
	evs []runs.Event
}

func newScript(t *testing.T, p Profile) *script {
	t.Helper()
	inv := runs.Invocation{RunID: "r1", Dir: "/work/dir", Spec: runs.Spec{Prompt: "first prompt", Interactive: true}}
	return &script{t: t, d: NewDecoder(inv, p)}
}

// agent feeds one line from the agent and returns its events.
func (s *script) agent(line string) []runs.Event {
	s.t.Helper()
	evs := s.d.Decode([]byte(line))
	s.evs = append(s.evs, evs...)
	return evs
}

// client returns the lines the client wrote since the last call, as
// generic JSON, and whether it is done.
func (s *script) client() ([]map[string]any, bool) {
	s.t.Helper()
	out, done := s.d.Pending()
	return parseLines(s.t, out), done
}

func parseLines(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("client wrote %q: %v", l, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// up runs the handshake to turn 1's prompt and returns the prompt's id.
func (s *script) up() float64 {
	s.t.Helper()
	open := parseLines(s.t, s.d.Open())
	if len(open) != 1 || open[0]["method"] != "initialize" || open[0]["id"] != 1.0 {
		s.t.Fatalf("Open = %v", open)
	}
	caps := open[0]["params"].(map[string]any)["clientCapabilities"]
	if want := map[string]any{"fs": map[string]any{"readTextFile": false, "writeTextFile": false}, "terminal": false}; !reflect.DeepEqual(caps, want) {
		s.t.Errorf("clientCapabilities = %v", caps)
	}
	s.agent(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{}}}`)
	msgs, _ := s.client()
	if len(msgs) != 1 || msgs[0]["method"] != "session/new" {
		s.t.Fatalf("after initialize: %v", msgs)
	}
	if p := msgs[0]["params"].(map[string]any); p["cwd"] != "/work/dir" || !reflect.DeepEqual(p["mcpServers"], []any{}) {
		s.t.Errorf("session/new params %v", p)
	}
	evs := s.agent(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1","models":{"currentModelId":"m-1"}}}`)
	if len(evs) != 1 || evs[0].Type != runs.EventSessionStarted || evs[0].Data.(runs.SessionStartedData).Model != "m-1" {
		s.t.Fatalf("session/new answer: %v", evs)
	}
	msgs, _ = s.client()
	if s.d.p.Mode != "" {
		if len(msgs) != 1 || msgs[0]["method"] != "session/set_mode" || msgs[0]["params"].(map[string]any)["modeId"] != s.d.p.Mode {
			s.t.Fatalf("after session/new: %v", msgs)
		}
		s.agent(`{"jsonrpc":"2.0","id":3,"result":{}}`)
		msgs, _ = s.client()
	}
	if len(msgs) != 1 || msgs[0]["method"] != "session/prompt" {
		s.t.Fatalf("no prompt: %v", msgs)
	}
	p := msgs[0]["params"].(map[string]any)
	if p["sessionId"] != "S1" || !reflect.DeepEqual(p["prompt"], []any{map[string]any{"type": "text", "text": "first prompt"}}) {
		s.t.Errorf("prompt params %v", p)
	}
	return msgs[0]["id"].(float64)
}

func types(evs []runs.Event) []runs.EventType {
	out := []runs.EventType{}
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func wantTypes(t *testing.T, evs []runs.Event, want ...runs.EventType) {
	t.Helper()
	if want == nil {
		want = []runs.EventType{}
	}
	if got := types(evs); !reflect.DeepEqual(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

// usageProfile reads {"usage":{"in":N,"out":M}} from a prompt result.
func usageProfile(c Counting) Profile {
	return Profile{Agent: "fake", Counting: c, ReadUsage: func(r json.RawMessage) (runs.Usage, bool) {
		var v struct {
			Usage *struct{ In, Out int64 } `json:"usage"`
		}
		if json.Unmarshal(r, &v) != nil || v.Usage == nil {
			return runs.Usage{}, false
		}
		return runs.Usage{InputTokens: v.Usage.In, OutputTokens: v.Usage.Out}, true
	}}
}

func turnOf(t *testing.T, evs []runs.Event) runs.TurnCompletedData {
	t.Helper()
	for _, e := range evs {
		if e.Type == runs.EventTurnCompleted {
			return e.Data.(runs.TurnCompletedData)
		}
	}
	t.Fatalf("no turn.completed in %v", types(evs))
	return runs.TurnCompletedData{}
}

func TestTurnsAndUsage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		c       Counting
		reports [2]string // the two prompt results' usage
		want    [2]runs.Usage
	}{
		{"per_turn", PerTurn, [2]string{`{"in":100,"out":10}`, `{"in":200,"out":20}`},
			[2]runs.Usage{{InputTokens: 100, OutputTokens: 10}, {InputTokens: 200, OutputTokens: 20}}},
		{"cumulative", Cumulative, [2]string{`{"in":100,"out":10}`, `{"in":300,"out":30}`},
			[2]runs.Usage{{InputTokens: 100, OutputTokens: 10}, {InputTokens: 200, OutputTokens: 20}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := usageProfile(tc.c)
			p.Mode = "default"
			s := newScript(t, p)
			id := s.up()
			wantTypes(t, s.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}}}`), runs.EventReasoningDelta)
			wantTypes(t, s.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"}}}}`),
				runs.EventReasoningCompleted, runs.EventMessageDelta)
			s.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"lo"}}}}`)
			evs := s.agent(`{"jsonrpc":"2.0","id":` + ftoa(id) + `,"result":{"stopReason":"end_turn","usage":` + tc.reports[0] + `}}`)
			wantTypes(t, evs, runs.EventMessageCompleted, runs.EventUsageUpdated, runs.EventTurnCompleted)
			turn := turnOf(t, evs)
			if turn.Status != runs.Succeeded || turn.Result != "Hello" || turn.Usage != tc.want[0] || turn.StopReason != "end_turn" {
				t.Errorf("turn 1 %+v", turn)
			}
			if evs[0].SessionID != "S1" {
				t.Errorf("session id %q", evs[0].SessionID)
			}
			if msgs, done := s.client(); len(msgs) != 0 || done {
				t.Fatalf("idle session wrote %v, done %v", msgs, done)
			}
			if err := s.d.Send("second", nil, false); err != nil {
				t.Fatal(err)
			}
			msgs, _ := s.client()
			if len(msgs) != 1 || msgs[0]["method"] != "session/prompt" {
				t.Fatalf("Send wrote %v", msgs)
			}
			if err := s.d.Send("third", nil, false); !errors.Is(err, runs.ErrConflict) {
				t.Errorf("Send during a turn: %v", err)
			}
			s.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Two"}}}}`)
			evs = s.agent(`{"jsonrpc":"2.0","id":` + ftoa(msgs[0]["id"].(float64)) + `,"result":{"stopReason":"end_turn","usage":` + tc.reports[1] + `}}`)
			if turn := turnOf(t, evs); turn.Usage != tc.want[1] || turn.Result != "Two" {
				t.Errorf("turn 2 %+v", turn)
			}
			s.d.Close()
			if _, done := s.client(); !done {
				t.Error("not done after Close")
			}
			o := s.d.Finish(runs.Exit{}, nil)
			if o.Status != runs.Succeeded || o.NumTurns != 2 || o.Usage != tc.want[0].Add(tc.want[1]) || o.Result != "Two" || o.SessionID != "S1" || o.Model != "m-1" {
				t.Errorf("outcome %+v", o)
			}
		})
	}
}

func ftoa(f float64) string { b, _ := json.Marshal(f); return string(b) }

const permissionLine = `{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"S1","options":[` +
	`{"optionId":"yes-always","name":"Always","kind":"allow_always"},{"optionId":"yes","name":"Allow","kind":"allow_once"},{"optionId":"no","name":"Reject","kind":"reject_once"}],` +
	`"toolCall":{"toolCallId":"call-1","status":"pending","title":"touch made.txt","kind":"execute","rawInput":{"command":"touch made.txt"}}}}`

func TestApprovals(t *testing.T) {
	for _, tc := range []struct {
		d          runs.Decision
		wantOption string
		cancels    bool
	}{
		{runs.Allow, "yes", false},
		{runs.AllowSession, "yes-always", false},
		{runs.Deny, "no", false},
		{runs.DenyAndStop, "no", true},
	} {
		t.Run(string(tc.d), func(t *testing.T) {
			s := newScript(t, Profile{Agent: "fake"})
			prompt := s.up()
			evs := s.agent(permissionLine)
			wantTypes(t, evs, runs.EventToolCallStarted, runs.EventApprovalRequested)
			req := evs[1].Data.(runs.ApprovalRequestedData)
			if req.ToolCallID != "call-1" || req.Tool != "execute" || string(req.Input) != `{"command":"touch made.txt"}` ||
				!reflect.DeepEqual(req.Options, []runs.Decision{runs.Allow, runs.AllowSession, runs.Deny, runs.DenyAndStop}) || !req.ExpiresAt.IsZero() {
				t.Errorf("approval %+v", req)
			}
			if err := s.d.Answer("nope", tc.d, ""); !errors.Is(err, runs.ErrNotFound) {
				t.Errorf("unknown id: %v", err)
			}
			if err := s.d.Answer(req.ID, tc.d, "why"); err != nil {
				t.Fatal(err)
			}
			if err := s.d.Answer(req.ID, tc.d, ""); !errors.Is(err, runs.ErrNotFound) {
				t.Errorf("second answer: %v", err)
			}
			msgs, _ := s.client()
			want := []map[string]any{{"jsonrpc": "2.0", "id": 7.0, "result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": tc.wantOption}}}}
			if tc.cancels {
				want = append(want, map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": "S1"}})
			}
			if !reflect.DeepEqual(msgs, want) {
				t.Errorf("client wrote %v, want %v", msgs, want)
			}
			var end []runs.Event
			if tc.cancels {
				end = s.agent(`{"jsonrpc":"2.0","id":` + ftoa(prompt) + `,"result":{"stopReason":"cancelled"}}`)
				wantTypes(t, end, runs.EventToolCallCompleted, runs.EventUsageUpdated, runs.EventTurnCompleted)
				if turn := turnOf(t, end); turn.Status != runs.Cancelled || turn.Error == nil || turn.Error.Class != runs.Interrupted {
					t.Errorf("turn %+v", turn)
				}
				return
			}
			if tc.d == runs.Deny {
				// A CLI that goes on after a deny says nothing of the
				// call: it is closed when the next one starts.
				evs = s.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"tool_call","toolCallId":"call-2","status":"in_progress","title":"ls","kind":"execute"}}}`)
				wantTypes(t, evs, runs.EventToolCallCompleted, runs.EventToolCallStarted)
				if c := evs[0].Data.(runs.ToolCallCompletedData); c.ID != "call-1" || !c.IsError {
					t.Errorf("denied call %+v", c)
				}
				return
			}
			evs = s.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"tool_call_update","toolCallId":"call-1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"made"}}]}}}`)
			wantTypes(t, evs, runs.EventToolCallCompleted)
			if c := evs[0].Data.(runs.ToolCallCompletedData); c.ID != "call-1" || c.IsError || c.Output != "made" {
				t.Errorf("completed %+v", c)
			}
		})
	}
}

func TestInterruptTurnWithdrawsApprovals(t *testing.T) {
	s := newScript(t, Profile{Agent: "fake"})
	prompt := s.up()
	req := s.agent(permissionLine)[1].Data.(runs.ApprovalRequestedData)
	if err := s.d.InterruptTurn(); err != nil {
		t.Fatal(err)
	}
	msgs, done := s.client()
	want := []map[string]any{
		{"jsonrpc": "2.0", "id": 7.0, "result": map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}},
		{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": "S1"}},
	}
	if !reflect.DeepEqual(msgs, want) || done {
		t.Errorf("client wrote %v (done %v), want %v", msgs, done, want)
	}
	if err := s.d.Answer(req.ID, runs.Allow, ""); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("answer after interrupt: %v", err)
	}
	evs := s.agent(`{"jsonrpc":"2.0","id":` + ftoa(prompt) + `,"result":{"stopReason":"cancelled"}}`)
	wantTypes(t, evs, runs.EventToolCallCompleted, runs.EventApprovalResolved, runs.EventUsageUpdated, runs.EventTurnCompleted)
	if r := evs[1].Data.(runs.ApprovalResolvedData); r.ID != req.ID || r.Reason != runs.ResolvedWithdrawn {
		t.Errorf("resolved %+v", r)
	}
	if err := s.d.InterruptTurn(); !errors.Is(err, runs.ErrConflict) {
		t.Errorf("interrupt while idle: %v", err)
	}
	// The session goes on.
	if err := s.d.Send("again", nil, false); err != nil {
		t.Fatal(err)
	}
}

func TestInterruptEndsTheRun(t *testing.T) {
	s := newScript(t, Profile{Agent: "fake"})
	prompt := s.up()
	msgs := parseLines(t, s.d.Interrupt())
	if len(msgs) != 1 || msgs[0]["method"] != "session/cancel" {
		t.Fatalf("Interrupt = %v", msgs)
	}
	if again := s.d.Interrupt(); again != nil {
		t.Errorf("second Interrupt = %s", again)
	}
	if _, done := s.client(); done {
		t.Error("done before the prompt answered")
	}
	s.agent(`{"jsonrpc":"2.0","id":` + ftoa(prompt) + `,"result":{"stopReason":"cancelled"}}`)
	if _, done := s.client(); !done {
		t.Error("not done once the cancelled turn ended")
	}
}

func TestUnsupportedAgentRequest(t *testing.T) {
	s := newScript(t, Profile{Agent: "fake"})
	s.up()
	evs := s.agent(`{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{"sessionId":"S1","path":"/etc/passwd"}}`)
	wantTypes(t, evs, runs.EventWarning)
	msgs, _ := s.client()
	if len(msgs) != 1 || msgs[0]["id"] != 3.0 || msgs[0]["error"].(map[string]any)["code"] != -32601.0 {
		t.Errorf("client wrote %v", msgs)
	}
}

func TestPromptError(t *testing.T) {
	p := Profile{Agent: "fake", ClassifyError: func(method string, e *RPCError) *runs.RunError {
		if method == "session/prompt" && e.Code == 429 {
			return runs.NewRunError(runs.RateLimited, e.Text(), "")
		}
		return nil
	}}
	s := newScript(t, p)
	prompt := s.up()
	evs := s.agent(`{"jsonrpc":"2.0","id":` + ftoa(prompt) + `,"error":{"code":429,"message":"Rate limit exceeded."}}`)
	turn := turnOf(t, evs)
	if turn.Status != runs.Failed || turn.Error == nil || turn.Error.Class != runs.RateLimited || !turn.Error.Retryable {
		t.Errorf("turn %+v", turn)
	}
	if err := s.d.Send("again", nil, false); err != nil {
		t.Fatalf("Send after a failed turn: %v", err)
	}
	msgs, _ := s.client()
	evs = s.agent(`{"jsonrpc":"2.0","id":` + ftoa(msgs[0]["id"].(float64)) + `,"error":{"code":-32603,"message":"Internal error","data":{"details":"boom"}}}`)
	if turn := turnOf(t, evs); turn.Error == nil || turn.Error.Class != runs.APIError || !strings.Contains(turn.Error.Message, "boom") {
		t.Errorf("unclassified: %+v", turn.Error)
	}
	o := s.d.Finish(runs.Exit{}, nil)
	if o.Status != runs.Failed || o.Error == nil || o.Error.Class != runs.APIError || o.NumTurns != 2 {
		t.Errorf("outcome %+v", o)
	}
}

func TestHandshakeFailure(t *testing.T) {
	s := newScript(t, Profile{Agent: "fake"})
	s.d.Open()
	s.agent(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	s.client()
	evs := s.agent(`{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"API key is missing"}}`)
	if turn := turnOf(t, evs); turn.Status != runs.Failed || turn.Error == nil || !strings.Contains(turn.Error.Message, "API key is missing") {
		t.Errorf("turn %+v", turn)
	}
	if _, done := s.client(); !done {
		t.Error("not done after a failed handshake")
	}
	if err := s.d.Send("x", nil, false); !errors.Is(err, runs.ErrConflict) {
		t.Errorf("Send: %v", err)
	}
	o := s.d.Finish(runs.Exit{Code: 0}, nil)
	if o.Status != runs.Failed || o.NumTurns != 1 || len(o.Events) != 0 {
		t.Errorf("outcome %+v", o)
	}
}

func TestSteering(t *testing.T) {
	t.Run("merges", func(t *testing.T) {
		s := newScript(t, Profile{Agent: "fake", Steering: SteerMerges})
		first := s.up()
		if err := s.d.Send("more", nil, true); err != nil {
			t.Fatal(err)
		}
		msgs, _ := s.client()
		if len(msgs) != 1 || msgs[0]["method"] != "session/prompt" {
			t.Fatalf("steer wrote %v", msgs)
		}
		wantTypes(t, s.agent(`{"jsonrpc":"2.0","id":`+ftoa(first)+`,"result":{"stopReason":"end_turn"}}`))
		evs := s.agent(`{"jsonrpc":"2.0","id":` + ftoa(msgs[0]["id"].(float64)) + `,"result":{"stopReason":"end_turn"}}`)
		wantTypes(t, evs, runs.EventUsageUpdated, runs.EventTurnCompleted)
	})
	t.Run("cancels", func(t *testing.T) {
		s := newScript(t, Profile{Agent: "fake", Steering: SteerCancels})
		s.up()
		if err := s.d.Send("more", nil, true); !errors.Is(err, runs.ErrUnsupported) {
			t.Errorf("steer: %v", err)
		}
		if msgs, _ := s.client(); len(msgs) != 0 {
			t.Errorf("wrote %v", msgs)
		}
	})
}

func TestFinishMidTurn(t *testing.T) {
	p := Profile{Agent: "fake", ClassifyExit: func(exit runs.Exit, stderr []byte) *runs.RunError {
		if strings.Contains(string(stderr), "quota") {
			return runs.NewRunError(runs.RateLimited, "quota", "")
		}
		return nil
	}}
	s := newScript(t, p)
	s.up()
	s.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"tool_call","toolCallId":"t1","status":"in_progress","title":"sleep","kind":"execute"}}}`)
	s.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"plan","entries":[{"content":"a","priority":"high","status":"in_progress"}]}}}`)
	o := s.d.Finish(runs.Exit{Code: 1}, []byte("quota reached"))
	wantTypes(t, o.Events, runs.EventToolCallCompleted, runs.EventTurnCompleted)
	if o.Status != runs.Failed || o.Error == nil || o.Error.Class != runs.RateLimited || o.NumTurns != 1 {
		t.Errorf("outcome %+v", o)
	}
	if o.Events[0].SessionID != "S1" {
		t.Errorf("session id %q", o.Events[0].SessionID)
	}
	o = newScript(t, Profile{}).d.Finish(runs.Exit{Code: -1, Signal: "SIGKILL"}, nil)
	if o.Error == nil || o.Error.Class != runs.ProcessKilled || o.NumTurns != 1 {
		t.Errorf("killed before the handshake: %+v", o)
	}
}

func TestUnknownLines(t *testing.T) {
	s := newScript(t, Profile{Agent: "fake", Update: func(kind string, u json.RawMessage) ([]runs.Event, bool) {
		if kind == "custom" {
			return []runs.Event{runs.Warning("custom", string(u))}, true
		}
		return nil, false
	}})
	s.up()
	for line, want := range map[string]runs.EventType{
		`not json`:                              runs.EventAgentUnparsed,
		`{"jsonrpc":"2.0","id":99,"result":{}}`: runs.EventAgentUnparsed,
		`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"brand_new"}}}`: runs.EventAgentUnparsed,
		`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"custom"}}}`:    runs.EventWarning,
		`{"jsonrpc":"2.0","method":"other/notification"}`:                                               runs.EventAgentUnparsed,
		`{}`: runs.EventAgentUnparsed,
	} {
		if evs := s.agent(line); len(evs) != 1 || evs[0].Type != want {
			t.Errorf("%s → %v, want %s", line, types(evs), want)
		}
	}
}

func TestRefuseAll(t *testing.T) {
	s := newScript(t, Profile{Agent: "fake", RefuseAll: true})
	s.up()
	wantTypes(t, s.agent(permissionLine), runs.EventToolCallStarted, runs.EventWarning)
	msgs, _ := s.client()
	want := []map[string]any{{"jsonrpc": "2.0", "id": 7.0, "result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "no"}}}}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("client wrote %v", msgs)
	}
}

// TestTurnUsageHook: Profile.TurnUsage is asked at the end of every turn,
// whatever ended it (a result, an error answer, the process's end), with
// the session id and the result, and its usage and events are the turn's.
func TestTurnUsageHook(t *testing.T) {
	type call struct {
		session string
		result  string
	}
	var calls []call
	n := int64(0)
	p := usageProfile(PerTurn)
	p.TurnUsage = func(session string, result json.RawMessage) (runs.Usage, bool, []runs.Event) {
		calls = append(calls, call{session, string(result)})
		n++
		return runs.Usage{InputTokens: 100 * n, CacheReadTokens: 10 * n, OutputTokens: -1},
			true, []runs.Event{runs.NewEvent(runs.EventWarning, runs.WarningData{Code: "w"})}
	}
	s := newScript(t, p)
	id := s.up()
	// The result's own usage is not read: TurnUsage replaces ReadUsage.
	evs := s.agent(`{"jsonrpc":"2.0","id":` + ftoa(id) + `,"result":{"stopReason":"end_turn","usage":{"in":7,"out":7}}}`)
	wantTypes(t, evs, runs.EventWarning, runs.EventUsageUpdated, runs.EventTurnCompleted)
	if turn := turnOf(t, evs); turn.Usage != (runs.Usage{InputTokens: 100, CacheReadTokens: 10}) {
		t.Errorf("turn 1 usage %+v (a negative count must clamp to 0)", turn.Usage)
	}
	if err := s.d.Send("second", nil, false); err != nil {
		t.Fatal(err)
	}
	msgs, _ := s.client()
	evs = s.agent(`{"jsonrpc":"2.0","id":` + ftoa(msgs[0]["id"].(float64)) + `,"error":{"code":500,"message":"boom"}}`)
	if turn := turnOf(t, evs); turn.Status != runs.Failed || turn.Usage != (runs.Usage{InputTokens: 200, CacheReadTokens: 20}) {
		t.Errorf("turn 2 %+v", turn)
	}
	if err := s.d.Send("third", nil, false); err != nil {
		t.Fatal(err)
	}
	s.client()
	o := s.d.Finish(runs.Exit{Signal: "killed"}, nil)
	wantTypes(t, o.Events, runs.EventWarning, runs.EventUsageUpdated, runs.EventTurnCompleted)
	turn := turnOf(t, o.Events)
	if turn.Status != runs.Failed || turn.Usage != (runs.Usage{InputTokens: 300, CacheReadTokens: 30}) {
		t.Errorf("turn 3 %+v", turn)
	}
	if want := (runs.Usage{InputTokens: 600, CacheReadTokens: 60}); o.Usage != want || o.NumTurns != 3 {
		t.Errorf("outcome %+v", o)
	}
	want := []call{{"S1", `{"stopReason":"end_turn","usage":{"in":7,"out":7}}`}, {"S1", ""}, {"S1", ""}}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("TurnUsage calls %q, want %q", calls, want)
	}
}

// TestTurnBillHook: Profile.TurnBill is asked as TurnUsage is, and its
// cost is the turn's: usage.updated and the outcome carry the sum, a
// turn without a cost adds none, and a cost that cannot be right (NaN,
// negative) is dropped.
func TestTurnBillHook(t *testing.T) {
	costs := []float64{0.25, math.NaN(), 0.5, -1}
	var sessions []string
	p := usageProfile(PerTurn)
	p.TurnUsage = func(string, json.RawMessage) (runs.Usage, bool, []runs.Event) {
		t.Error("TurnUsage asked although TurnBill is set")
		return runs.Usage{}, false, nil
	}
	p.TurnBill = func(session string, result json.RawMessage) Bill {
		sessions = append(sessions, session)
		c := costs[len(sessions)-1]
		return Bill{Usage: runs.Usage{InputTokens: 10, OutputTokens: 1}, OK: len(sessions) != 3, CostUSD: &c}
	}
	s := newScript(t, p)
	id := s.up()
	evs := s.agent(`{"jsonrpc":"2.0","id":` + ftoa(id) + `,"result":{"stopReason":"end_turn"}}`)
	wantTypes(t, evs, runs.EventUsageUpdated, runs.EventTurnCompleted)
	if turn := turnOf(t, evs); turn.CostUSD == nil || *turn.CostUSD != 0.25 || turn.Usage.InputTokens != 10 {
		t.Errorf("turn 1 %+v cost %v", turn, turn.CostUSD)
	}
	if u := evs[0].Data.(runs.UsageData); u.CostUSD == nil || *u.CostUSD != 0.25 {
		t.Errorf("usage.updated %+v", u)
	}
	for n := 2; n <= 3; n++ {
		if err := s.d.Send("next", nil, false); err != nil {
			t.Fatal(err)
		}
		msgs, _ := s.client()
		evs = s.agent(`{"jsonrpc":"2.0","id":` + ftoa(msgs[0]["id"].(float64)) + `,"result":{"stopReason":"end_turn"}}`)
		turn := turnOf(t, evs)
		switch {
		case n == 2 && (turn.CostUSD != nil || turn.Usage.InputTokens != 10):
			t.Errorf("turn 2 (cost NaN) %+v cost %v", turn, turn.CostUSD)
		case n == 3 && (turn.CostUSD == nil || *turn.CostUSD != 0.5 || !turn.Usage.IsZero()):
			t.Errorf("turn 3 (usage not known) %+v cost %v", turn, turn.CostUSD)
		}
	}
	if err := s.d.Send("fourth", nil, false); err != nil {
		t.Fatal(err)
	}
	s.client()
	o := s.d.Finish(runs.Exit{Signal: "killed"}, nil)
	if turn := turnOf(t, o.Events); turn.CostUSD != nil || turn.Usage.InputTokens != 10 {
		t.Errorf("turn 4 (cost negative) %+v", turn)
	}
	if o.CostUSD == nil || *o.CostUSD != 0.75 || o.Usage.InputTokens != 30 || o.NumTurns != 4 {
		t.Errorf("outcome %+v cost %v", o, o.CostUSD)
	}
	if len(sessions) != 4 || sessions[0] != "S1" {
		t.Errorf("TurnBill asked %v", sessions)
	}
}

// The Profile's mode and config options go one at a time, each once the
// last was accepted, and turn 1 only after them all; a refused option
// fails turn 1 and ends the session.
func TestModeAndConfigOptionsBeforeTurnOne(t *testing.T) {
	p := Profile{Agent: "fake", Mode: "plan", ConfigOptions: []ConfigOption{{ID: "model", Value: "m-2"}, {ID: "auto_approve", Value: true}}}
	s := newScript(t, p)
	s.d.Open()
	s.agent(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	s.client()
	s.agent(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1"}}`)
	want := []map[string]any{
		{"method": "session/set_mode", "params": map[string]any{"sessionId": "S1", "modeId": "plan"}},
		{"method": "session/set_config_option", "params": map[string]any{"sessionId": "S1", "configId": "model", "value": "m-2"}},
		{"method": "session/set_config_option", "params": map[string]any{"sessionId": "S1", "configId": "auto_approve", "type": "boolean", "value": true}},
	}
	for i, w := range want {
		msgs, _ := s.client()
		if len(msgs) != 1 || msgs[0]["method"] != w["method"] || !reflect.DeepEqual(msgs[0]["params"], w["params"]) {
			t.Fatalf("request %d = %v, want %v", i+1, msgs, w)
		}
		s.agent(`{"jsonrpc":"2.0","id":` + ftoa(msgs[0]["id"].(float64)) + `,"result":{}}`)
	}
	msgs, _ := s.client()
	if len(msgs) != 1 || msgs[0]["method"] != "session/prompt" {
		t.Fatalf("after the options: %v, want turn 1's prompt", msgs)
	}

	s = newScript(t, Profile{Agent: "fake", ConfigOptions: []ConfigOption{{ID: "model", Value: "nope"}}})
	s.d.Open()
	s.agent(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	s.client()
	s.agent(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1"}}`)
	s.client()
	evs := s.agent(`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"unknown model nope"}}`)
	turn := turnOf(t, evs)
	if turn.Status != runs.Failed || turn.Error == nil || !strings.Contains(turn.Error.Message, "refused the run's model: unknown model nope") {
		t.Errorf("turn %+v, want failed naming the option and the CLI's words", turn)
	}
	if msgs, done := s.client(); !done || len(msgs) != 0 {
		t.Errorf("after a refused option: %v, done %v; want nothing sent, the session over", msgs, done)
	}
}

// newResumeScript is a script of a run resuming session S0.
func newResumeScript(t *testing.T, p Profile) *script {
	t.Helper()
	inv := runs.Invocation{RunID: "r1", Dir: "/work/dir", Spec: runs.Spec{Prompt: "next prompt", Interactive: true, ResumeSessionID: "S0"}}
	return &script{t: t, d: NewDecoder(inv, p)}
}

func TestSessionLoadDropsTheReplay(t *testing.T) {
	var loaded []string
	s := newResumeScript(t, Profile{Agent: "fake", Mode: "yolo", SessionLoaded: func(id string) []runs.Event {
		loaded = append(loaded, id)
		return []runs.Event{runs.Warning("w", "records read")}
	}})
	s.d.Open()
	s.agent(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`)
	msgs, _ := s.client()
	if len(msgs) != 1 || msgs[0]["method"] != "session/load" {
		t.Fatalf("after initialize: %v", msgs)
	}
	want := map[string]any{"sessionId": "S0", "cwd": "/work/dir", "mcpServers": []any{}}
	if p := msgs[0]["params"]; !reflect.DeepEqual(p, want) {
		t.Errorf("session/load params %v, want %v", p, want)
	}
	replay := []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S0","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"first prompt"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S0","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S0","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"ls","kind":"execute","status":"pending"}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S0","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"a.txt"}}]}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S0","update":{"sessionUpdate":"plan","entries":[{"content":"x","priority":"high","status":"pending"}]}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S0","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"TOKEN-1"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S0","update":{"sessionUpdate":"something_new"}}}`,
	}
	for _, l := range replay {
		if evs := s.agent(l); len(evs) != 0 {
			t.Errorf("replayed %s gave %v", l, types(evs))
		}
	}
	evs := s.agent(`{"jsonrpc":"2.0","id":2,"result":{"models":{"currentModelId":"m-2"}}}`)
	if len(evs) != 2 || evs[0].Type != runs.EventSessionStarted || evs[1].Type != runs.EventWarning {
		t.Fatalf("session/load answer: %v", types(evs))
	}
	if !reflect.DeepEqual(loaded, []string{"S0"}) {
		t.Errorf("SessionLoaded called with %v", loaded)
	}
	if st := evs[0].Data.(runs.SessionStartedData); st.SessionID != "S0" || st.Model != "m-2" || evs[0].SessionID != "S0" {
		t.Errorf("session.started %+v (event session %q)", st, evs[0].SessionID)
	}
	msgs, _ = s.client()
	if len(msgs) != 1 || msgs[0]["method"] != "session/set_mode" || msgs[0]["params"].(map[string]any)["sessionId"] != "S0" {
		t.Fatalf("after session/load: %v", msgs)
	}
	s.agent(`{"jsonrpc":"2.0","id":3,"result":{}}`)
	msgs, _ = s.client()
	if len(msgs) != 1 || msgs[0]["method"] != "session/prompt" {
		t.Fatalf("no prompt: %v", msgs)
	}
	if p := msgs[0]["params"].(map[string]any); p["sessionId"] != "S0" || !reflect.DeepEqual(p["prompt"], []any{map[string]any{"type": "text", "text": "next prompt"}}) {
		t.Errorf("prompt params %v", p)
	}
	evs = s.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S0","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"TOKEN-2"}}}}`)
	wantTypes(t, evs, runs.EventMessageDelta)
	evs = s.agent(`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}`)
	if turn := turnOf(t, evs); turn.Status != runs.Succeeded || turn.Result != "TOKEN-2" {
		t.Errorf("turn %+v", turn)
	}
	o := s.d.Finish(runs.Exit{}, nil)
	if o.SessionID != "S0" || o.NumTurns != 1 || o.Result != "TOKEN-2" {
		t.Errorf("outcome %+v", o)
	}
}

func TestSessionLoadWithoutLoadSessionFails(t *testing.T) {
	for name, answer := range map[string]string{
		"false":  `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false}}}`,
		"absent": `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			s := newResumeScript(t, Profile{Agent: "fake"})
			s.d.Open()
			evs := s.agent(answer)
			turn := turnOf(t, evs)
			if turn.Status != runs.Failed || turn.Error == nil || turn.Error.Class != runs.APIError ||
				!strings.Contains(turn.Error.Message, "loadSession") || !strings.Contains(turn.Error.Message, "S0") {
				t.Errorf("turn %+v", turn)
			}
			msgs, done := s.client()
			if len(msgs) != 0 || !done {
				t.Errorf("after a refused load: %v, done %v", msgs, done)
			}
			if o := s.d.Finish(runs.Exit{}, nil); o.Status != runs.Failed || o.NumTurns != 1 {
				t.Errorf("outcome %+v", o)
			}
		})
	}
}

// TestSessionLoadError: a load the agent refused is session_not_found,
// unless the profile tells a more telling class (a login).
func TestSessionLoadError(t *testing.T) {
	authOnly := func(_ string, e *RPCError) *runs.RunError {
		if e.Code == -32000 {
			return runs.NewRunError(runs.NotAuthenticated, e.Message, "")
		}
		return runs.NewRunError(runs.APIError, "the model API refused the request", "")
	}
	for _, tc := range []struct {
		answer string
		class  runs.Class
		words  string
	}{
		{`{"jsonrpc":"2.0","id":2,"error":{"code":-32002,"message":"Resource not found: S0"}}`, runs.SessionNotFound, "could not load session S0: Resource not found"},
		{`{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"Authentication required"}}`, runs.NotAuthenticated, "Authentication required"},
	} {
		s := newResumeScript(t, Profile{Agent: "fake", ClassifyError: authOnly})
		s.d.Open()
		s.agent(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`)
		s.client()
		turn := turnOf(t, s.agent(tc.answer))
		if turn.Status != runs.Failed || turn.Error == nil || turn.Error.Class != tc.class || !strings.Contains(turn.Error.Message, tc.words) {
			t.Errorf("%s: turn %+v (%+v)", tc.answer, turn, turn.Error)
		}
		if _, done := s.client(); !done {
			t.Error("not done after a failed load")
		}
	}
}
