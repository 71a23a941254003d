package main

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// eventsSchemaPath is the schema of the event envelope the gateway streams.
const eventsSchemaPath = "../../events.schema.json"

// schemaEventTypes is every event type events.schema.json defines: those
// of the type property's enum and those its allOf gives a payload to.
func schemaEventTypes(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(eventsSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Type struct {
				Enum []string `json:"enum"`
			} `json:"type"`
		} `json:"properties"`
		AllOf []struct {
			If struct {
				Properties struct {
					Type struct {
						Const string `json:"const"`
					} `json:"type"`
				} `json:"properties"`
			} `json:"if"`
		} `json:"allOf"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", eventsSchemaPath, err)
	}
	types := map[string]bool{}
	for _, typ := range doc.Properties.Type.Enum {
		types[typ] = true
	}
	for _, branch := range doc.AllOf {
		if typ := branch.If.Properties.Type.Const; typ != "" {
			types[typ] = true
		}
	}
	// The schema has over twenty types; far fewer means it was not read.
	if len(types) < 20 {
		t.Fatalf("%s defines only %d event types: %v", eventsSchemaPath, len(types), sortedKeys(types))
	}
	return types
}

// TestRendererKnowsEveryEventTypeOfTheSchema: the renderer shows only
// event types the schema defines, and every type the schema defines is
// either shown (eventRenderers) or named, with the reason, in
// eventsNotShown; a type added to the schema fails here until the client
// decides what to do with it.
func TestRendererKnowsEveryEventTypeOfTheSchema(t *testing.T) {
	schema := schemaEventTypes(t)
	for typ := range eventRenderers {
		if !schema[typ] {
			t.Errorf("the renderer shows %q, which %s does not define", typ, eventsSchemaPath)
		}
	}
	for typ, reason := range eventsNotShown {
		if !schema[typ] {
			t.Errorf("eventsNotShown names %q, which %s does not define", typ, eventsSchemaPath)
		}
		if _, shown := eventRenderers[typ]; shown {
			t.Errorf("%q is both in eventRenderers and in eventsNotShown", typ)
		}
		if strings.TrimSpace(reason) == "" {
			t.Errorf("eventsNotShown gives no reason for %q", typ)
		}
	}
	for _, typ := range sortedKeys(schema) {
		_, shown := eventRenderers[typ]
		_, notShown := eventsNotShown[typ]
		if !shown && !notShown {
			t.Errorf("%s defines %q, which the client neither renders (eventRenderers) nor names with a reason (eventsNotShown)", eventsSchemaPath, typ)
		}
	}
}

// TestEventsNotShownWriteNothing: what eventsNotShown names is indeed not
// shown, even with -v.
func TestEventsNotShownWriteNothing(t *testing.T) {
	if len(eventsNotShown) == 0 {
		t.Skip("the renderer shows every event type")
	}
	for typ := range eventsNotShown {
		var out, errOut bytes.Buffer
		r := newRenderer(&out, &errOut, renderOptions{runID: "run-1", verbose: true, interactive: true}, nil)
		if err := r.event(testEvent(1, typ, obj{"id": "t1", "text": "some output\n"})); err != nil {
			t.Fatal(err)
		}
		r.stop()
		if out.Len() != 0 || errOut.Len() != 0 {
			t.Errorf("%s, listed as not shown, wrote stdout %q and stderr %q", typ, &out, &errOut)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
