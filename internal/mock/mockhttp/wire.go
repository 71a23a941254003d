package mockhttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Frame is what every mock records of a request before its wire reads the
// body: its place in the ledger and its HTTP framing.
type Frame struct {
	Seq      int
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
}

// Begin numbers r in book and returns its framing, for the wire's Request.
func Begin[E any](book *Book[E], r *http.Request) Frame {
	return Frame{Seq: book.Next(), Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone()}
}

// ReadBody reads at most max bytes of r's body. An error means the body
// was larger, or broke off.
func ReadBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, max))
}

// Abort ends a handler without an answer: net/http drops the connection
// instead of completing the response a returning handler implies.
func Abort() { panic(http.ErrAbortHandler) }

// Hang holds a request unanswered until its client goes away or the host
// closes, then drops the connection.
func (s *Host) Hang(r *http.Request) {
	s.Wait(r, -1)
	Abort()
}

// WriteJSON sends v as a JSON body with status, and reports whether all of
// it was written.
func WriteJSON(w http.ResponseWriter, status int, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return WriteBody(w, status, "application/json", b)
}

// WriteBody sends b with status and Content-Type ct, and reports whether
// all of it was written.
func WriteBody(w http.ResponseWriter, status int, ct string, b []byte) bool {
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_, err := w.Write(b)
	return err == nil
}

// SSE writes server-sent events, flushing each, and keeps the first write
// error: after it, writes do nothing, and Err says the client did not get
// the whole stream (nothing is billed for it).
type SSE struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	buf  bytes.Buffer
	err  error
	crlf bool
}

// StartSSE sends the headers of an event stream and returns its writer.
func StartSSE(w http.ResponseWriter) *SSE {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &SSE{w: w, rc: http.NewResponseController(w)}
}

// CRLF ends each event with "\r\n\r\n", as the Gemini API frames them,
// instead of "\n\n".
func (o *SSE) CRLF() { o.crlf = true }

// Event writes one event named name (no event line when empty) whose data
// is v as JSON.
func (o *SSE) Event(name string, v any) {
	if o.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		o.err = err
		return
	}
	o.frame(name, b)
}

// Data writes one unnamed event whose data is v as JSON.
func (o *SSE) Data(v any) { o.Event("", v) }

// Raw writes one unnamed event whose data is b as it is.
func (o *SSE) Raw(b []byte) {
	if o.err == nil {
		o.frame("", b)
	}
}

func (o *SSE) frame(name string, data []byte) {
	o.buf.Reset()
	if name != "" {
		fmt.Fprintf(&o.buf, "event: %s\n", name)
	}
	o.buf.WriteString("data: ")
	o.buf.Write(data)
	if o.crlf {
		o.buf.WriteString("\r\n\r\n")
	} else {
		o.buf.WriteString("\n\n")
	}
	if _, o.err = o.w.Write(o.buf.Bytes()); o.err == nil {
		o.err = o.rc.Flush()
	}
}

// Err is the first write error, nil when every event went out.
func (o *SSE) Err() error { return o.err }

// Chunks splits text after each space, so that a client sees a streamed
// text arrive in several deltas.
func Chunks(text string) []string {
	var out []string
	for _, part := range strings.SplitAfter(text, " ") {
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}
