package conformance

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// conformanceSchema is the output_schema of the schema cases.
const conformanceSchema = `{"type":"object","properties":{"city":{"type":"string"},"visits":{"type":"integer"}},"required":["city","visits"],"additionalProperties":false}`

// schemaCases check structured output for every agent: natively where the
// CLI has a schema flag, by asking for JSON where it has not, and checked
// by the gateway either way.
func (s *suite) schemaCases() []suiteCase {
	return []suiteCase{
		{"schema_match", s.schemaMatch},
		{"schema_mismatch", s.schemaMismatch},
	}
}

func (s *suite) schemaMatch(t *testing.T) {
	const answer = `{"city":"Paris","visits":2}`
	g := s.start(t, Scenario{Kind: Text, Text: answer}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Where did you go, and how often?", OutputSchema: json.RawMessage(conformanceSchema)})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	if !sameJSON(r.StructuredOutput, answer) {
		t.Errorf("structured_output = %s, want %s", r.StructuredOutput, answer)
	}
	var done runs.RunCompletedData
	decode(t, evs[len(evs)-1], &done)
	if !sameJSON(done.StructuredOutput, answer) {
		t.Errorf("run.completed structured_output = %s, want %s", done.StructuredOutput, answer)
	}
	g.wantUsage(t, r)
}

func (s *suite) schemaMismatch(t *testing.T) {
	g := s.start(t, Scenario{Kind: Text, Text: `{"city":"Paris"}`}, credentials)
	r := g.submit(t, runs.Spec{Prompt: "Where did you go, and how often?", OutputSchema: json.RawMessage(conformanceSchema)})
	r, evs := g.wait(t, r.ID, quick)
	if r.Status != runs.Failed || r.Error == nil || r.Error.Class != runs.SchemaMismatch {
		t.Fatalf("status %s, error %+v, want failed schema_mismatch; events %s", r.Status, r.Error, typesOf(evs))
	}
	if !strings.Contains(r.Error.Message, "visits") {
		t.Errorf("the error does not say what is missing: %q", r.Error.Message)
	}
	if len(r.StructuredOutput) != 0 {
		t.Errorf("structured_output = %s for an answer that does not match", r.StructuredOutput)
	}
}

// sameJSON reports whether raw is the JSON value want.
func sameJSON(raw json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
