package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// updateSpec rewrites the event schemas of openapi.yaml from
// events.schema.json.
var updateSpec = flag.Bool("update-spec", false, "TestOpenAPIEventSchemas rewrites openapi.yaml's event schemas")

// The markers around the part of openapi.yaml made from events.schema.json.
const (
	eventsBegin = "    # BEGIN event schemas, made from events.schema.json: go test ./internal/api -run TestOpenAPIEventSchemas -update-spec\n"
	eventsEnd   = "    # END event schemas\n"
)

// TestOpenAPIEventSchemas holds openapi.yaml's typed events to
// events.schema.json: one schema per event type, Event their union
// discriminated by type, so that a generated client gets typed events
// where JSON Schema's if/then would give it none.
func TestOpenAPIEventSchemas(t *testing.T) {
	spec, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../events.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	want := eventSchemasYAML(t, raw)
	start := bytes.Index(spec, []byte(eventsBegin))
	end := bytes.Index(spec, []byte(eventsEnd))
	if *updateSpec {
		var out []byte
		if start < 0 || end < start {
			out = append(bytes.TrimRight(spec, "\n"), '\n')
			out = append(out, eventsBegin...)
		} else {
			out = append(out, spec[:start+len(eventsBegin)]...)
		}
		out = append(out, want...)
		out = append(out, eventsEnd...)
		if end > start && start >= 0 {
			out = append(out, spec[end+len(eventsEnd):]...)
		}
		if err := os.WriteFile(openAPIPath, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if start < 0 || end < start {
		t.Fatalf("openapi.yaml has no event schemas between the markers; run with -update-spec")
	}
	if got := spec[start+len(eventsBegin) : end]; !bytes.Equal(got, want) {
		t.Errorf("openapi.yaml's event schemas differ from events.schema.json; run go test ./internal/api -run TestOpenAPIEventSchemas -update-spec")
	}
}

// eventSchemasYAML turns events.schema.json into OpenAPI components: its
// $defs as Event<Name>, one <Type>Event per event type with its data's
// schema, and Event, their union.
func eventSchemasYAML(t *testing.T, raw []byte) []byte {
	t.Helper()
	var schema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
		AllOf      []struct {
			If struct {
				Properties struct {
					Type struct {
						Const string `json:"const"`
					} `json:"type"`
				} `json:"properties"`
			} `json:"if"`
			Then struct {
				Properties struct {
					Data json.RawMessage `json:"data"`
				} `json:"properties"`
			} `json:"then"`
		} `json:"allOf"`
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	rename := func(b []byte) any {
		s := strings.ReplaceAll(string(b), `"#/$defs/`, `"#/components/schemas/Event`)
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	root := &yaml.Node{Kind: yaml.MappingNode}
	add := func(name string, v any) {
		var n yaml.Node
		if err := n.Encode(v); err != nil {
			t.Fatal(err)
		}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, &n)
	}
	var refs []any
	mapping := map[string]string{}
	names := map[string]bool{}
	for _, c := range schema.AllOf {
		typ := c.If.Properties.Type.Const
		name := eventSchemaName(typ)
		if typ == "" || names[name] {
			t.Fatalf("events.schema.json: a case for type %q that does not make a schema name of its own", typ)
		}
		names[name] = true
		ref := "#/components/schemas/" + name
		refs = append(refs, map[string]string{"$ref": ref})
		mapping[typ] = ref
		props := map[string]any{}
		for k, v := range schema.Properties {
			switch k {
			case "type":
				props[k] = map[string]any{"type": "string", "enum": []string{typ}}
			case "data":
				props[k] = rename(c.Then.Properties.Data)
			default:
				props[k] = rename(v)
			}
		}
		add(name, map[string]any{
			"type": "object", "description": "A " + typ + " event.",
			"required": schema.Required, "properties": props,
		})
	}
	add("Event", map[string]any{
		"description":   "An event of a run: the envelope, with data typed by type. events.schema.json is the same as JSON Schema.",
		"oneOf":         refs,
		"discriminator": map[string]any{"propertyName": "type", "mapping": mapping},
	})
	for name, def := range schema.Defs {
		add("Event"+name, rename(def))
	}
	sortMapping(root, map[string]int{"Event": 1})
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line != "" {
			out.WriteString("    " + line)
		}
	}
	return out.Bytes()
}

// eventSchemaName is the schema of an event type: tool_call.started is
// ToolCallStartedEvent.
func eventSchemaName(typ string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(typ, func(r rune) bool { return r == '.' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String() + "Event"
}

// sortMapping orders the top level of a mapping node by key, those in
// first coming first, so that the generated text does not depend on map
// order; the nested maps yaml.v3 encodes sorted already.
func sortMapping(n *yaml.Node, first map[string]int) {
	type pair struct{ k, v *yaml.Node }
	var ps []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		ps = append(ps, pair{n.Content[i], n.Content[i+1]})
	}
	less := func(a, b pair) bool {
		fa, fb := first[a.k.Value], first[b.k.Value]
		if fa != fb {
			return fa > fb
		}
		return a.k.Value < b.k.Value
	}
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && less(ps[j], ps[j-1]); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
	n.Content = n.Content[:0]
	for _, p := range ps {
		n.Content = append(n.Content, p.k, p.v)
	}
}

// Event, as the spec has it, takes the gateway's events and refuses one
// whose data is not its type's.
func TestOpenAPIEventTypesEvents(t *testing.T) {
	const run = "0196f0c2-7e1a-7000-8000-000000000001"
	ok := storedEvent(t, run, 3, "message.delta", map[string]any{"message_id": "m1", "text": "hi"})
	validateOpenAPI(t, "Event", ok.JSON)
	validateOpenAPI(t, "MessageDeltaEvent", ok.JSON)
	bad := storedEvent(t, run, 4, "message.delta", map[string]any{"message_id": 7})
	validateOpenAPI(t, "Event", ok.JSON) // compiles the schemas
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(bad.JSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := openAPISchemas["Event"].Validate(v); err == nil {
		t.Errorf("Event took %s", bad.JSON)
	}
}
