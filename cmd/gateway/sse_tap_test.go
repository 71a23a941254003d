package main

import (
	"errors"
	"net/http"
	"strings"
	"sync"
)

// errDropped is what the tap's Write returns once it has cut the stream.
// ReverseProxy answers a failed copy with panic(http.ErrAbortHandler), and
// the server then closes the connection without the final chunk: to the
// browser, a stream broken off mid-way.
var errDropped = errors.New("stream dropped by the test proxy")

// tappedStream is what an sseTap saw of the event stream it passed on.
type tappedStream struct {
	Status  int
	IDs     []string // ids of the events passed on
	Types   []string // their types
	Dropped bool     // the proxy cut the connection
}

// clone copies s with slices of its own, so that a snapshot does not
// change under the reader while the tap goes on appending.
func (s tappedStream) clone() tappedStream {
	s.IDs = append([]string(nil), s.IDs...)
	s.Types = append([]string(nil), s.Types...)
	return s
}

// sseTap passes one event stream on, noting each event's id and type in
// rec (under mu, which the test holds to read it). With cutAfter set, it
// ends the connection right after the first event that cutAfter accepts,
// once that event has been flushed; cutAfter is given how many events have
// passed, this one included, and its type.
type sseTap struct {
	http.ResponseWriter
	mu       *sync.Mutex
	rec      *tappedStream
	cutAfter func(events int, typ string) bool

	line    []byte // the unfinished line
	id, typ string // the id and event fields of the event being read
	hasData bool
	events  int
	dropped bool
}

func (w *sseTap) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *sseTap) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *sseTap) WriteHeader(code int) {
	w.mu.Lock()
	w.rec.Status = code
	w.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sseTap) Write(p []byte) (int, error) {
	if w.dropped {
		return 0, errDropped
	}
	end := len(p)
	for i, c := range p {
		if c != '\n' {
			w.line = append(w.line, c)
			continue
		}
		if w.endLine() {
			end = i + 1
			w.dropped = true
			break
		}
	}
	n, err := w.ResponseWriter.Write(p[:end])
	if err != nil || !w.dropped {
		return n, err
	}
	if err := http.NewResponseController(w.ResponseWriter).Flush(); err != nil {
		return n, err
	}
	w.mu.Lock()
	w.rec.Dropped = true
	w.mu.Unlock()
	return n, errDropped
}

// endLine interprets one finished line (the gateway ends lines with LF
// only) and reports whether it was the blank line that ends the event
// after which the stream is to be cut.
func (w *sseTap) endLine() bool {
	line := strings.TrimSuffix(string(w.line), "\r")
	w.line = w.line[:0]
	switch {
	case line == "":
		if !w.hasData {
			return false // retry:, a ping or a stray blank line
		}
		w.hasData = false
		w.events++
		w.mu.Lock()
		w.rec.IDs = append(w.rec.IDs, w.id)
		w.rec.Types = append(w.rec.Types, w.typ)
		w.mu.Unlock()
		return w.cutAfter != nil && w.cutAfter(w.events, w.typ)
	case strings.HasPrefix(line, "id:"):
		w.id = strings.TrimPrefix(strings.TrimPrefix(line, "id:"), " ")
	case strings.HasPrefix(line, "event:"):
		w.typ = strings.TrimPrefix(strings.TrimPrefix(line, "event:"), " ")
	case strings.HasPrefix(line, "data:"):
		w.hasData = true
	}
	return false
}
