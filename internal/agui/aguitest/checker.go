// Package aguitest checks AG-UI event streams, for tests: a Checker reads
// a stream as a strict client would and says where it breaks AG-UI's
// rules or package agui's promises. It is to agui what httptest is to
// net/http, and is linked only into test binaries.
package aguitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/agentgate/agentgate/internal/agui"
)

// Checker checks a stream of AG-UI events as a strict client reads it: each
// event's required fields and their types, and the order rules of AG-UI's
// reference client (a run starts before anything else, nothing but a new
// run follows its end, a message, tool call, reasoning span or step is
// used only while open and is closed before RUN_FINISHED). It also holds
// the stream to what this package promises beyond that: ids are never
// reused, deltas are never empty, and every STATE_DELTA applies to the
// state the events before it built. The zero Checker is ready for the first
// event.
type Checker struct {
	n        int
	started  bool   // a run was started and has not ended
	ended    string // how the last run ended: "" (none), RUN_FINISHED or RUN_ERROR
	thread   string // of the open run
	runID    string
	texts    map[string]bool // open text messages
	tools    map[string]bool // open tool calls
	spans    map[string]bool // open reasoning spans
	thoughts map[string]bool // open reasoning messages
	steps    map[string]bool
	used     map[string]bool // every message, tool call and span id seen
	state    any
	hasState bool
}

// State returns the state that the snapshots and deltas so far built, and
// whether there was a snapshot.
func (c *Checker) State() (any, bool) { return c.state, c.hasState }

// Check checks the next event of the stream, the JSON of one SSE data
// field. The error names the event by its place in the stream.
func (c *Checker) Check(event []byte) error {
	c.n++
	typ, err := c.check(event)
	if err != nil {
		if typ == "" {
			return fmt.Errorf("event %d: %w", c.n, err)
		}
		return fmt.Errorf("event %d (%s): %w", c.n, typ, err)
	}
	return nil
}

func (c *Checker) check(event []byte) (agui.EventType, error) {
	if c.texts == nil {
		c.texts, c.tools, c.spans = map[string]bool{}, map[string]bool{}, map[string]bool{}
		c.thoughts, c.steps, c.used = map[string]bool{}, map[string]bool{}, map[string]bool{}
	}
	if bytes.ContainsAny(event, "\r\n") {
		return "", errors.New("is not on one line")
	}
	var f fieldSet
	if err := json.Unmarshal(event, &f); err != nil {
		return "", fmt.Errorf("is not a JSON object: %v", err)
	}
	ts, err := f.str("type", true)
	if err != nil {
		return "", err
	}
	typ := agui.EventType(ts)
	if raw, ok := f["timestamp"]; ok {
		var n float64
		if json.Unmarshal(raw, &n) != nil || n != math.Trunc(n) || math.Abs(n) > 1<<53-1 {
			return typ, errors.New("timestamp is not an integer")
		}
	}
	if raw, ok := f["metadata"]; ok && (len(raw) == 0 || raw[0] != '{') {
		return typ, errors.New("metadata is not an object")
	}
	if err := c.order(typ); err != nil {
		return typ, err
	}
	return typ, c.fields(typ, f)
}

// order applies the rules of where an event may come.
func (c *Checker) order(typ agui.EventType) error {
	switch {
	case c.n == 1 && typ != agui.RunStarted && typ != agui.RunError:
		return errors.New("the first event must be RUN_STARTED")
	case c.ended == string(agui.RunError) && typ != agui.RunStarted:
		return errors.New("follows RUN_ERROR; only RUN_STARTED may")
	case c.ended == string(agui.RunFinished) && typ != agui.RunStarted && typ != agui.RunError:
		return errors.New("follows RUN_FINISHED; only RUN_STARTED may")
	case typ == agui.RunStarted && c.started:
		return errors.New("a run is already open")
	}
	return nil
}

// fields checks the members of an event of type typ, by the table of each
// type's checks, and applies what the event opens, closes or changes.
func (c *Checker) fields(typ agui.EventType, f fieldSet) error {
	check, ok := eventChecks[typ]
	if !ok {
		return fmt.Errorf("unknown event type %q", typ)
	}
	return check(c, f)
}
