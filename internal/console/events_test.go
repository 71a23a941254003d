package console

import (
	"regexp"
	"slices"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestStreamListensToEveryEventType holds stream.js's EVENT_TYPES to the
// envelope's types: an EventSource delivers only the types it listens
// to, so a type missing there never reaches the run view.
func TestStreamListensToEveryEventType(t *testing.T) {
	src, err := static.ReadFile("static/stream.js")
	if err != nil {
		t.Fatal(err)
	}
	list := regexp.MustCompile(`(?s)export const EVENT_TYPES = \[(.*?)\];`).FindSubmatch(src)
	if list == nil {
		t.Fatal("stream.js has no EVENT_TYPES array")
	}
	var got []string
	for _, m := range regexp.MustCompile(`"([^"]+)"`).FindAllSubmatch(list[1], -1) {
		got = append(got, string(m[1]))
	}
	var want []string
	for _, et := range runs.EventTypes {
		want = append(want, string(et))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("stream.js EVENT_TYPES =\n  %v\nruns.EventTypes =\n  %v", got, want)
	}
}
