package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

func TestExtractJSON(t *testing.T) {
	cases := []struct {
		answer, want string
		ok           bool
	}{
		{`{"a": 1}`, `{"a":1}`, true},
		{"  [1, 2]\n", `[1,2]`, true},
		{`"text"`, `"text"`, true},
		{"Here it is:\n```json\n{\"a\": 1}\n```\nDone.", `{"a":1}`, true},
		{"```\n{\"a\": 2}\n```", `{"a":2}`, true},
		{"```JSON\n{\"a\": 3}\n```", `{"a":3}`, true},
		{"```go\nfunc(){}\n```\n```json\n{\"a\": 4}\n```", `{"a":4}`, true},
		{"```json\n{\"a\": 1}\n```\n```json\n{\"b\": 2}\n```", "", false},
		{"The answer is 42.", "", false},
		{`{"a": 1} and more`, "", false},
		{"```json\n{\"a\": \n```", "", false},
		{"", "", false},
		{"```json\n{\"a\": 1}", "", false},
	}
	for _, c := range cases {
		got, err := ExtractJSON(c.answer)
		if (err == nil) != c.ok || string(got) != c.want {
			t.Errorf("ExtractJSON(%q) = %s, %v; want %s ok=%v", c.answer, got, err, c.want, c.ok)
		}
	}
}

func FuzzExtractJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, "```json\n[1]\n```", "text ```json\n{}\n``` text", "```", "```\n", "```json\n\"x\"\n```\n```json\n1\n```", "\xff```\n1\n```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ExtractJSON(s)
		if err == nil && !json.Valid(v) {
			t.Fatalf("ExtractJSON(%q) = %q, not JSON", s, v)
		}
		if err != nil && v != nil {
			t.Fatalf("a value with an error")
		}
	})
}

const testSchema = `{"type":"object","properties":{"city":{"type":"string"},"n":{"type":"integer"}},"required":["city","n"],"additionalProperties":false}`

func TestCheckStructured(t *testing.T) {
	s, err := CompileSchema(json.RawMessage(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	got, runErr := checkStructured(s, nil, "```json\n{\"city\": \"Paris\", \"n\": 2}\n```")
	if runErr != nil || string(got) != `{"city":"Paris","n":2}` {
		t.Errorf("fenced match: %s, %+v", got, runErr)
	}
	got, runErr = checkStructured(s, []byte(`{"city":"Oslo","n":1}`), "ignored text")
	if runErr != nil || string(got) != `{"city":"Oslo","n":1}` {
		t.Errorf("the CLI's structured output: %s, %+v", got, runErr)
	}
	for _, c := range []struct {
		structured, result, says string
	}{
		{"", `{"city": "Paris"}`, "does not match"},
		{"", `{"city": "Paris", "n": "two"}`, "does not match"},
		{"", "Paris, twice.", "not a JSON value"},
		{"not json", "", "not JSON"},
	} {
		_, runErr := checkStructured(s, []byte(c.structured), c.result)
		if runErr == nil || runErr.Class != runs.SchemaMismatch || !strings.Contains(runErr.Message, c.says) || runErr.Retryable {
			t.Errorf("%q/%q: %+v, want schema_mismatch saying %q", c.structured, c.result, runErr, c.says)
		}
	}
	// The message is bounded however long the answer's failures are.
	long := `{"city": "` + strings.Repeat("x", 10) + `", "n": 1, ` + strings.Repeat(`"k`+strings.Repeat("y", 50)+`": 1, `, 400) + `"z": 1}`
	_, runErr = checkStructured(s, nil, long)
	if runErr == nil || len(runErr.Message) > maxSchemaError+64 {
		t.Errorf("long mismatch: %d bytes", len(runErr.Message))
	}
}

func TestCompileSchemaRefusals(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(secret, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{
		`{"type": 12}`,
		`{"$ref": "file://` + secret + `"}`,
		`{"$ref": "http://127.0.0.1:1/schema.json"}`,
		`[1]`,
		`{"type":`,
		`{"pattern": "("}`,
	} {
		_, err := CompileSchema(json.RawMessage(raw))
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Field != runs.FieldOutputSchema || !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("CompileSchema(%s) = %v, want invalid output_schema", raw, err)
		}
	}
	if _, err := CompileSchema(json.RawMessage(`{"$defs":{"c":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/c"}}}`)); err != nil {
		t.Errorf("a schema referring to itself: %v", err)
	}
}

func TestSchemaMismatchFailsRun(t *testing.T) {
	store := newMemStore()
	cfg := Config{WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), KillGrace: 300 * time.Millisecond,
		Getenv: func(string) string { return "leak-key-not-json-0123456789" }}
	sup := New(cfg, store, []*Agent{{Adapter: leakAdapter{}, Bin: "/bin/sh", Home: t.TempDir()}}, nopObserver{}, zap.NewNop())
	startSupervisor(t, sup)
	// The agent succeeds, with an answer that is not JSON.
	r, err := sup.Submit(context.Background(), runs.Spec{Agent: "leak", Prompt: "0", OutputSchema: json.RawMessage(testSchema)})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{sup: sup, store: store}
	r = h.wait(t, r.ID, 30*time.Second)
	if r.Status != runs.Failed || r.Error == nil || r.Error.Class != runs.SchemaMismatch || len(r.StructuredOutput) != 0 {
		t.Fatalf("run %s %+v, want failed schema_mismatch", r.Status, r.Error)
	}
}
