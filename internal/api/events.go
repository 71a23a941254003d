package api

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/api/stream"
	"github.com/agentgate/agentgate/internal/runs"
)

// Media types of the event stream.
const (
	contentTypeSSE    = stream.ContentTypeSSE
	contentTypeNDJSON = stream.ContentTypeNDJSON
)

// runEvents answers GET /v1/runs/{id}/events with the run's events, from
// the start or after the larger of Last-Event-ID and ?after=N, as SSE or,
// for Accept: application/x-ndjson, as JSON lines. It ends after
// run.completed. A run that has ended with nothing newer than the cursor
// answers 204, which tells an EventSource to stop reconnecting.
func (s *server) runEvents(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// Opened in a call of its own: what it looks at on the way (the run,
	// the request's fields) is off the stack before the stream begins,
	// and a thousand parked streams each keep a smaller one.
	id, st, cur, ok := s.openEvents(ctx, w, r)
	if !ok {
		return
	}
	s.obs.SSEClientsAdd(1)
	defer s.obs.SSEClientsAdd(-1)
	s.streamEnded(w, id, st, st.Serve(ctx, cancel, cur))
}

// streamEnded logs why a stream ended, if it says anything worth knowing.
// It is a call of its own for the same reason as openEvents.
//
//go:noinline
func (s *server) streamEnded(w http.ResponseWriter, id string, st *stream.Writer, err error) {
	log := s.log.With(zap.String("run_id", id))
	if errors.Is(err, stream.ErrDrained) {
		log.Debug("event stream ended by the drain", zap.Uint64("last_seq", st.Last()))
		err = nil
	}
	var dropped *stream.ClientError
	switch {
	case errors.As(err, &dropped):
		log.Debug("event stream client dropped", zap.Uint64("last_seq", st.Last()), zap.Error(err))
	case err != nil:
		log.Warn("event stream ended early", zap.Uint64("last_seq", st.Last()), zap.Error(err))
		if rec, ok := w.(*recorder); ok {
			rec.err = err
		}
	}
}

// runToStream returns the run whose events r asks for, unless the gateway
// is draining. The tenant check has just read the run: a stream opens with
// one read of the record, not two.
func (s *server) runToStream(ctx context.Context, r *http.Request, id string) (runs.Run, error) {
	if s.draining() {
		return runs.Run{}, fmt.Errorf("open events of run %s: %w", id, runs.ErrShuttingDown)
	}
	if run, found := ownedRun(r.Context()); found {
		return run, nil
	}
	run, err := s.svc.Get(ctx, id)
	if err != nil {
		return runs.Run{}, noRun(id, err)
	}
	return run, nil
}

// openEvents checks the request and opens the run's cursor on ctx, or
// answers the request itself (an error, or 204) and reports !ok.
//
//go:noinline
func (s *server) openEvents(ctx context.Context, w http.ResponseWriter, r *http.Request) (id string, st *stream.Writer, cur runs.Cursor, ok bool) {
	// AG-UI events (agui.go) are opened on their own: their resume
	// point is another kind of id, and their cursor starts at the first
	// event.
	if ag, err := aguiRequested(r); err != nil {
		s.fail(w, r, err)
		return "", nil, nil, false
	} else if ag {
		return s.openAGUIEvents(ctx, w, r)
	}
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return "", nil, nil, false
	}
	after, err := resumeAfter(r)
	if err != nil {
		s.fail(w, r, err)
		return "", nil, nil, false
	}
	var enc stream.Encoder = stream.SSE{}
	if prefersNDJSON(r.Header.Values("Accept")) {
		enc = stream.NDJSON{}
	}

	run, err := s.runToStream(ctx, r, id)
	if err != nil {
		s.fail(w, r, err)
		return "", nil, nil, false
	}
	// The cursor starts at most at the log's end: a client resumed past
	// the end of a running run (a Last-Event-ID from a log that was
	// lost, or made up) still sees run.completed, and its stream ends
	// with the run; only events after its resume point are written.
	from := after
	if after > 0 || run.Status.Terminal() {
		last, err := s.svc.LastEventSeq(ctx, id)
		if err != nil {
			s.fail(w, r, fmt.Errorf("last event of run %s: %w", id, err))
			return "", nil, nil, false
		}
		if run.Status.Terminal() && last <= after {
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusNoContent)
			return "", nil, nil, false
		}
		from = min(after, last)
	}

	cur, err = s.svc.Events(ctx, id, from)
	if err != nil {
		s.fail(w, r, fmt.Errorf("open events of run %s: %w", id, err))
		return "", nil, nil, false
	}
	releaseOwnedRun(r.Context())
	return id, stream.New(w, enc, after, &s.streamCfg), cur, true
}

// eventStreamKey marks a request for a run's event stream (see
// eventStreamRoute).
type eventStreamKey struct{}

// eventStreamRoute marks the requests of the event stream's route, so that
// fail answers one whose store failed the way an EventSource can come back
// from (see reconnectLater).
func eventStreamRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), eventStreamKey{}, true)))
	})
}

// reconnectable reports whether a failure to open r's stream that is the
// store's should be answered by reconnectLater: r is for the event stream,
// as server-sent events. An NDJSON client does not reconnect by itself,
// and gets the error.
func reconnectable(r *http.Request) bool {
	marked, _ := r.Context().Value(eventStreamKey{}).(bool)
	return marked && !prefersNDJSON(r.Header.Values("Accept"))
}

// reconnectLater answers an event stream that could not be opened for a
// failure of the store (what problem maps to a 500, such as a timeout or
// a cluster without a leader, or the gateway's own request timeout) with
// an empty stream that tells the client to come back after the reconnect
// delay, as a stream that fails after it began does: an EventSource gives
// up for good on any status but 200, and would stay down after an outage
// that its next attempt outlives.
func (s *server) reconnectLater(w http.ResponseWriter, err error) {
	s.log.Warn("event stream not opened; the client is told to reconnect", zap.Error(err))
	h := w.Header()
	h.Set("Content-Type", contentTypeSSE)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, ": the event store did not answer; reconnect with Last-Event-ID\nretry: %d\n\n", s.cfg.ReconnectDelay.Milliseconds())
	_ = http.NewResponseController(w).Flush()
}

// resumeAfter returns the seq to stream after: the larger of the
// Last-Event-ID header and ?after=N, 0 when neither is given. The larger
// wins because an EventSource reconnects to the same URL, ?after included,
// with the Last-Event-ID it reached since, and must not get again what it
// already has.
func resumeAfter(r *http.Request) (uint64, error) {
	var after uint64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, ok := parseSeq(v)
		if !ok {
			return 0, invalidField("Last-Event-ID", "must be an event id, a decimal integer")
		}
		after = n
	}
	q := r.URL.Query()["after"]
	if len(q) > 1 {
		return 0, invalidField("after", "appears more than once")
	}
	if len(q) == 1 && q[0] != "" {
		n, ok := parseSeq(q[0])
		if !ok {
			return 0, invalidField("after", "must be an event id, a decimal integer")
		}
		after = max(after, n)
	}
	return after, nil
}

// parseSeq parses an event id: decimal digits only, within uint64.
func parseSeq(s string) (uint64, bool) {
	if !isDigits(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// prefersNDJSON reports whether the Accept headers rank
// application/x-ndjson above text/event-stream. Anything else, including
// no Accept at all, gets SSE.
func prefersNDJSON(accept []string) bool {
	sse, nd := -1.0, -1.0
	for _, h := range accept {
		for _, part := range strings.Split(h, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				if q, err = strconv.ParseFloat(v, 64); err != nil {
					continue
				}
			}
			switch mt {
			case contentTypeSSE:
				sse = max(sse, q)
			case contentTypeNDJSON:
				nd = max(nd, q)
			}
		}
	}
	return nd > 0 && nd > sse
}

// draining reports whether the gateway has begun to shut down.
func (s *server) draining() bool {
	select {
	case <-s.cfg.Draining:
		return true
	default:
		return false
	}
}
