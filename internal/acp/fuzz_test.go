package acp

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// FuzzDecode feeds arbitrary lines to an up session, answers whatever it
// asks, and checks that nothing panics and every event marshals. It is
// seeded with the scripted lines of the tests and the recordings in
// testdata (one JSON-RPC message per line, as the real CLIs printed them).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		permissionLine,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":1,"output_tokens":2}}}}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":401,"message":"{\"error\":{\"code\":401}}"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"completed","content":[{"type":"diff","path":"/a","newText":"x"}]}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"plan","entries":[{"content":"a","status":"completed"}]}}}`,
		`{"jsonrpc":"2.0","id":0,"method":"terminal/create","params":{}}`,
		`{"jsonrpc":"2.0","id":null,"result":1}`,
		"",
		"\x00",
	} {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				f.Add(l)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder(runs.Invocation{Dir: "/d", Spec: runs.Spec{Prompt: "p"}}, Profile{
			Counting: Cumulative, Mode: "default",
			ReadUsage: func(r json.RawMessage) (runs.Usage, bool) {
				var u runs.Usage
				return u, json.Unmarshal(r, &u) == nil
			},
		})
		d.Open()
		var evs []runs.Event
		for _, l := range []string{
			`{"jsonrpc":"2.0","id":1,"result":{}}`,
			`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1"}}`,
			`{"jsonrpc":"2.0","id":3,"result":{}}`,
		} {
			evs = append(evs, d.Decode([]byte(l))...)
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			got := d.Decode(line)
			evs = append(evs, got...)
			d.Pending()
			for _, ev := range got {
				if r, ok := ev.Data.(runs.ApprovalRequestedData); ok {
					_ = d.Answer(r.ID, runs.DenyAndStop, "")
				}
			}
			_ = d.Send("next", nil, true)
			d.Pending()
		}
		_ = d.InterruptTurn()
		d.Interrupt()
		d.Close()
		d.Pending()
		o := d.Finish(runs.Exit{Code: 1}, data)
		evs = append(evs, o.Events...)
		for _, ev := range evs {
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("event %s does not marshal: %v", ev.Type, err)
			}
		}
	})
}
