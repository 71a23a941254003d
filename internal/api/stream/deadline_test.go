package stream

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// deadlineRecorder is a ResponseWriter that records the write deadlines
// set on it.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

// A stream moves its connection's write deadline only when less than the
// write timeout is left before it, so every write has at least the
// timeout, and a stream that writes often does not move it at every write.
func TestStreamMovesItsDeadlineOnlyWhenItMust(t *testing.T) {
	rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	const timeout = time.Hour
	st := &Writer{w: rec, rc: http.NewResponseController(rec), timeout: timeout}
	start := time.Now()
	for range 100 {
		if err := st.write([]byte(": ping\n\n")); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.deadlines) != 1 {
		t.Fatalf("%d deadlines set for 100 writes in a row, want 1", len(rec.deadlines))
	}
	if d := rec.deadlines[0]; d.Before(start.Add(timeout)) || d.After(time.Now().Add(timeout*3/2)) {
		t.Fatalf("deadline %v after the first write, want between %v and 1.5 timeouts ahead", d.Sub(start), timeout)
	}
	if got := rec.Body.Len(); got != 100*len(": ping\n\n") {
		t.Fatalf("%d bytes written, want every ping", got)
	}

	// Less than a timeout left: the next write moves it again.
	st.deadline = time.Now().Add(timeout - time.Second)
	before := time.Now()
	if err := st.write(nil); err != nil {
		t.Fatal(err)
	}
	if len(rec.deadlines) != 2 || rec.deadlines[1].Before(before.Add(timeout)) {
		t.Fatalf("deadlines %v: want a second one at least a timeout after the write", rec.deadlines)
	}
}
