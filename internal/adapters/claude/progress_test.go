package claude

import (
	"reflect"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestToolProgress decodes tool_progress lines. The heartbeat is a line of
// the real CLI (testdata/long_tool.jsonl); the others are built from the
// shapes the CLI's bundled source prints (a hook's heartbeat, a
// subagent's API retry, a script's status), which no test of ours makes
// it print.
func TestToolProgress(t *testing.T) {
	cases := []struct {
		name, line string
		want       []runs.Event
	}{
		{
			name: "heartbeat (recorded)",
			line: `{"type":"tool_progress","tool_use_id":"toolu_mock_0001-heartbeat-0","tool_name":"Bash","parent_tool_use_id":"toolu_mock_0001","elapsed_time_seconds":30,"heartbeat":true,"session_id":"s1","uuid":"u"}`,
			want: []runs.Event{{Type: runs.EventToolCallProgress, SessionID: "s1",
				Data: runs.ToolCallProgressData{ID: "toolu_mock_0001", Name: "Bash", ElapsedMS: 30000}}},
		},
		{
			name: "a hook's heartbeat names the hook's event, not the tool",
			line: `{"type":"tool_progress","tool_use_id":"hook-PreToolUse-toolu_1-heartbeat-0","tool_name":"PreToolUse","parent_tool_use_id":"toolu_1","elapsed_time_seconds":60,"heartbeat":true,"session_id":"s1","uuid":"u"}`,
			want: []runs.Event{{Type: runs.EventToolCallProgress, SessionID: "s1",
				Data: runs.ToolCallProgressData{ID: "toolu_1", ElapsedMS: 60000}}},
		},
		{
			name: "a subagent's rate-limited API call, inside its Agent call",
			line: `{"type":"tool_progress","tool_use_id":"p1","tool_name":"Agent","parent_tool_use_id":"toolu_task","elapsed_time_seconds":0,"subagent_type":"Explore","subagent_retry":{"agent_id":"a1","attempt":2,"max_retries":10,"retry_delay_ms":1200,"error_status":429,"error_category":"rate_limit"},"session_id":"s1","uuid":"u"}`,
			want: []runs.Event{{Type: runs.EventRateLimit, SessionID: "s1", ParentToolCallID: "toolu_task",
				Data: runs.RateLimitData{Attempt: 2, MaxRetries: 10, RetryDelayMS: 1200, Status: 429, Error: "rate_limit"}}},
		},
		{
			name: "a subagent's failed API call",
			line: `{"type":"tool_progress","tool_use_id":"toolu_task","tool_name":"Agent","parent_tool_use_id":null,"elapsed_time_seconds":0,"subagent_type":"Explore","subagent_retry":{"agent_id":"a1","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":null,"error_category":"connection"},"session_id":"s1","uuid":"u"}`,
			want: []runs.Event{{Type: runs.EventWarning, SessionID: "s1", ParentToolCallID: "toolu_task",
				Data: runs.WarningData{Code: "subagent_api_retry",
					Message: "subagent Explore: API request failed (connection, status 0); retry 1 of 10 in 500 ms"}}},
		},
		{
			name: "a resolved retry, a script's status: nothing to tell",
			line: `{"type":"tool_progress","tool_use_id":"toolu_task","tool_name":"Agent","parent_tool_use_id":null,"elapsed_time_seconds":0,"subagent_type":"Explore","session_id":"s1","uuid":"u"}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := New().NewDecoder(runs.Invocation{}).Decode([]byte(c.line))
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("events =\n  %+v\nwant\n  %+v", got, c.want)
			}
		})
	}
}

// TestToolProgressIncomplete: a tool_progress line without what it must
// carry is kept as agent.unparsed, with the reason.
func TestToolProgressIncomplete(t *testing.T) {
	for line, reason := range map[string]string{
		`{"type":"tool_progress","tool_name":"Bash","parent_tool_use_id":null,"elapsed_time_seconds":30}`: "tool_progress without tool_use_id",
		`{"type":"tool_progress","tool_use_id":"t-heartbeat-0","parent_tool_use_id":"t"}`:                 "tool_progress without elapsed_time_seconds",
	} {
		evs := New().NewDecoder(runs.Invocation{}).Decode([]byte(line))
		if len(evs) != 1 || evs[0].Type != runs.EventAgentUnparsed || evs[0].Data.(runs.UnparsedData).Reason != reason {
			t.Errorf("%s: events %+v, want agent.unparsed for %q", line, evs, reason)
		}
	}
}
