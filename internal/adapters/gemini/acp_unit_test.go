package gemini

import (
	"encoding/json"
	"testing"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/runs"
)

// 0.61.0 answers a model it cannot find with code 500 and the API's
// sentence, and other failures with their status as the code.
func TestClassifyRPC(t *testing.T) {
	for _, c := range []struct {
		e     acp.RPCError
		class runs.Class
	}{
		{acp.RPCError{Code: 500, Message: "models/gemini-nope is not found for API version v1beta, or is not supported for generateContent."}, runs.APIError},
		{acp.RPCError{Code: 500, Message: "Internal error"}, runs.TransientAPIError},
		{acp.RPCError{Code: 429, Message: "Rate limit exceeded. Try again later."}, runs.RateLimited},
		{acp.RPCError{Code: rpcAuthRequired, Message: "Gemini API key is missing or not configured."}, runs.NotAuthenticated},
	} {
		got := classifyRPC("session/prompt", &c.e)
		if got == nil || got.Class != c.class || got.Retryable != c.class.Retryable() {
			t.Errorf("%+v: %+v, want %s", c.e, got, c.class)
		}
	}
}

// The notice 0.61.0 sends when session/set_mode changes the mode is not
// the model's text.
func TestModeUpdateIsNoMessage(t *testing.T) {
	notice := json.RawMessage(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"[MODE_UPDATE] autoEdit"}}`)
	if evs, handled := dropModeUpdate("agent_message_chunk", notice); !handled || len(evs) != 0 {
		t.Errorf("mode notice: %v %v, want it swallowed", evs, handled)
	}
	text := json.RawMessage(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello [MODE_UPDATE] x"}}`)
	if _, handled := dropModeUpdate("agent_message_chunk", text); handled {
		t.Error("the model's text was swallowed")
	}
	if _, handled := dropModeUpdate("tool_call", notice); handled {
		t.Error("another kind was swallowed")
	}
}
