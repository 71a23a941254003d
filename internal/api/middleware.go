package api

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// statusClientGone is recorded, as nginx does, for a request whose client
// went away before it was answered. Nothing is sent.
const statusClientGone = 499

// recorder remembers what a handler answered, for the request's metrics and
// log line. It unwraps, so http.ResponseController still reaches the
// connection's deadlines.
type recorder struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
	// err is the error behind an error answer, logged with the request.
	err error
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader && code >= 200 {
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = http.StatusOK, true
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// FlushError flushes and reports failure; http.ResponseController prefers
// it to Flush, so a stream learns that its client is gone.
func (r *recorder) FlushError() error {
	if !r.wroteHeader {
		r.status, r.wroteHeader = http.StatusOK, true
	}
	return http.NewResponseController(r.ResponseWriter).Flush()
}

// Flush is for code that knows only http.Flusher.
func (r *recorder) Flush() { _ = r.FlushError() }

// Unwrap gives http.ResponseController the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// gone records that the client left before an answer was written.
func (r *recorder) gone(err error) {
	if !r.wroteHeader {
		r.status = statusClientGone
	}
	r.err = err
}

// instrument records every request: one observation by route pattern and
// one log line, at debug level or, for a 5xx, at error level with the
// whole error. It also turns a handler's panic into a 500, so bad input
// that slips past the checks costs one request, not the connection.
func (s *server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			p := recover()
			if p != nil && p != http.ErrAbortHandler {
				s.log.Error("handler panicked", zap.Any("panic", p), zap.Stack("stack"),
					zap.String("method", r.Method), zap.String("path", r.URL.Path))
				if !rec.wroteHeader {
					s.writeJSON(rec, r, http.StatusInternalServerError,
						ErrorResponse{Error: ErrorDetail{Code: CodeInternal, Message: "internal error"}})
				}
			}
			s.record(r, rec, time.Since(start))
			if p == http.ErrAbortHandler {
				panic(p)
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

func (s *server) record(r *http.Request, rec *recorder, took time.Duration) {
	route := RouteUnmatched
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		if p := rctx.RoutePattern(); p != "" {
			route = p
		}
	}
	method := methodLabel(r.Method)
	s.obs.HTTPRequest(route, method, rec.status, took.Seconds())

	level := zapcore.DebugLevel
	if rec.status >= 500 {
		level = zapcore.ErrorLevel
	}
	if ce := s.log.Check(level, "http request"); ce != nil {
		fields := []zap.Field{
			zap.String("method", method),
			zap.String("route", route),
			zap.String("path", r.URL.Path),
			zap.Int("status", rec.status),
			zap.Duration("duration", took),
			zap.Int64("bytes", rec.bytes),
		}
		if rec.err != nil {
			fields = append(fields, zap.Error(rec.err))
		}
		ce.Write(fields...)
	}
}

// methodLabel bounds the method label: chi routes any method string to the
// 405 handler, and each would otherwise become a new time series.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}
