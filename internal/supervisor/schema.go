package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxSchemaError bounds the validation error a schema_mismatch carries: a
// large answer against a large schema can list thousands of failures.
const maxSchemaError = 2048

// schemaURL is the name an output_schema is compiled under; it appears in
// the compiler's messages.
const schemaURL = "output_schema.json"

// CompileSchema compiles a run's output_schema. The schema may refer only
// to itself: a $ref to a file or a URL is an error, so that a client
// cannot make the gateway read its files or fetch a URL. The error is a
// *FieldError naming output_schema, with the compiler's reason.
func CompileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, runs.Invalid(runs.FieldOutputSchema, "is not JSON: "+err.Error())
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, runs.Invalid(runs.FieldOutputSchema, "must be a JSON Schema object")
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no scheme: no file, no network
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, runs.Invalid(runs.FieldOutputSchema, clipText(err.Error(), maxSchemaError))
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, runs.Invalid(runs.FieldOutputSchema, "does not compile: "+clipText(err.Error(), maxSchemaError))
	}
	return s, nil
}

// ExtractJSON finds the JSON value of a final answer: the whole answer
// when it is one JSON value, or the content of its one ```json (or plain
// ```) fence that holds one. It returns the value compacted, or an error
// saying why none was found.
func ExtractJSON(answer string) (json.RawMessage, error) {
	text := strings.TrimSpace(answer)
	if text == "" {
		return nil, errors.New("the answer is empty")
	}
	if v, ok := oneValue(text); ok {
		return v, nil
	}
	var found json.RawMessage
	rest := text
	for {
		i := strings.Index(rest, "```")
		if i < 0 {
			break
		}
		rest = rest[i+3:]
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			break
		}
		lang := strings.TrimSpace(rest[:nl])
		body := rest[nl+1:]
		end := strings.Index(body, "```")
		if end < 0 {
			break
		}
		rest = body[end+3:]
		if lang != "" && !strings.EqualFold(lang, "json") {
			continue
		}
		v, ok := oneValue(strings.TrimSpace(body[:end]))
		if !ok {
			continue
		}
		if found != nil {
			return nil, errors.New("the answer has more than one JSON block")
		}
		found = v
	}
	if found == nil {
		return nil, errors.New("the answer is not a JSON value, nor one in a ```json block")
	}
	return found, nil
}

// oneValue reports whether s is exactly one JSON value, and returns it
// compacted.
func oneValue(s string) (json.RawMessage, bool) {
	if s == "" || !json.Valid([]byte(s)) {
		return nil, false
	}
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(s)) != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

// checkStructured validates a finished run's final answer against its
// compiled schema: the CLI's own structured output when it gave one, the
// result text otherwise. It returns the value to record, or the
// schema_mismatch error.
func checkStructured(s *jsonschema.Schema, structured []byte, result string) (json.RawMessage, *runs.RunError) {
	var raw json.RawMessage
	if len(bytes.TrimSpace(structured)) > 0 {
		v, ok := oneValue(string(bytes.TrimSpace(structured)))
		if !ok {
			return nil, schemaMismatch("the agent's structured output is not JSON")
		}
		raw = v
	} else {
		v, err := ExtractJSON(result)
		if err != nil {
			return nil, schemaMismatch(err.Error())
		}
		raw = v
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, schemaMismatch("the answer is not JSON: " + err.Error())
	}
	if err := s.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		msg := err.Error()
		if errors.As(err, &ve) {
			msg = ve.Error()
		}
		return nil, schemaMismatch("the answer does not match output_schema: " + msg)
	}
	return raw, nil
}

func schemaMismatch(why string) *runs.RunError {
	return runs.NewRunError(runs.SchemaMismatch, clipText(why, maxSchemaError),
		"the model's final answer must be JSON matching output_schema; make the prompt ask for it, or loosen the schema")
}

// clipText cuts s to at most n bytes, on a rune boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d more bytes)", len(s)-cut)
}

// structuredOutput checks a succeeded run's final answer against the
// run's output_schema, compiled again here: the replica that runs the run
// need not be the one that took it.
func (s *Supervisor) structuredOutput(schema json.RawMessage, out runs.Outcome) (json.RawMessage, *runs.RunError) {
	compiled, err := CompileSchema(schema)
	if err != nil {
		return nil, schemaMismatch("output_schema does not compile: " + err.Error())
	}
	return checkStructured(compiled, out.StructuredOutput, out.Result)
}
