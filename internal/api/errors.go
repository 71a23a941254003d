package api

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/agentgate/agentgate/internal/autorun"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/tenants"
)

// Error codes: the stable "code" of an error response. Clients branch on
// the code, never on the message.
const (
	// CodeInvalidJSON: the body is not one JSON object.
	CodeInvalidJSON = "invalid_json"
	// CodeUnknownField: the body or query has a field the API does not
	// know; "field" names it.
	CodeUnknownField = "unknown_field"
	// CodeInvalidField: a field is missing, repeated, of the wrong type or
	// out of range; "field" names it.
	CodeInvalidField = "invalid_field"
	// CodeUnsupportedOption: the agent cannot honour a field; "field" and
	// "agent" name them.
	CodeUnsupportedOption = "unsupported_option"
	// CodeUnknownAgent: no agent has that name.
	CodeUnknownAgent = "unknown_agent"
	// CodeAgentNotInstalled: the agent is known but its CLI is not
	// installed on this gateway (422).
	CodeAgentNotInstalled = "agent_not_installed"
	// CodeNotFound: no such run, or no such route.
	CodeNotFound = "not_found"
	// CodeMethodNotAllowed: the route exists but not with this method.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeBodyTooLarge: the body is larger than Config.MaxBodyBytes.
	CodeBodyTooLarge = "body_too_large"
	// CodeUnsupportedMediaType: the body is not declared as JSON.
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeQueueFull: the run queue is full (429, with Retry-After).
	CodeQueueFull = "queue_full"
	// CodeShuttingDown: the gateway is draining (503, with Retry-After).
	CodeShuttingDown = "shutting_down"
	// CodeIdempotencyMismatch: the Idempotency-Key was used before with
	// another request body.
	CodeIdempotencyMismatch = "idempotency_mismatch"
	// CodeDiskFull: the replica's disk is too full to take runs.
	CodeDiskFull = "disk_full"
	// CodeInvalidHeader: a request header is malformed.
	CodeInvalidHeader = "invalid_header"
	// CodeNotReady: GET /readyz found the gateway not ready.
	CodeNotReady = "not_ready"
	// CodeOwnerUnavailable: input for a run cannot reach the replica that
	// executes it (503, with Retry-After).
	CodeOwnerUnavailable = "owner_unavailable"
	// CodeRequestTimeout: the gateway could not answer within
	// AGENTGATE_REQUEST_TIMEOUT (503, with Retry-After).
	CodeRequestTimeout = "request_timeout"
	// CodeBodyTimeout: the request body did not arrive in time (408).
	CodeBodyTimeout = "body_timeout"
	// CodeInternal: anything else; the message is always "internal error".
	CodeInternal = "internal"
)

// The 409 codes of input that does not fit the run's state; they are the
// runs.Conflict* codes, stable like the others.
const (
	CodeApprovalResolved = runs.ConflictApprovalResolved
	CodeNotInteractive   = runs.ConflictNotInteractive
	CodeRunEnded         = runs.ConflictRunEnded
	CodeNoTurnRunning    = runs.ConflictNoTurn
	CodeMessageQueueFull = runs.ConflictQueueFull
	CodeSessionClosing   = runs.ConflictClosing
	CodeRunNotStarted    = runs.ConflictNotStarted
	CodeRunNotFinished   = runs.ConflictRunNotFinished
	CodeSessionBusy      = runs.ConflictSessionBusy
)

// ErrorResponse is the body of every error response.
type ErrorResponse struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong: a stable code, a sentence for a person,
// and, when one is at fault, the request field and the agent.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	Agent   string `json:"agent,omitempty"`
}

// edgeError is an error the API finds itself, before or instead of asking
// the service. It carries its own status and code.
type edgeError struct {
	status int
	code   string
	field  string
	msg    string
	cause  error
	// retryAfter, when set, is sent as Retry-After.
	retryAfter time.Duration
}

func (e *edgeError) Error() string { return e.msg }
func (e *edgeError) Unwrap() error { return e.cause }

func edgeErr(status int, code, field, msg string) *edgeError {
	return &edgeError{status: status, code: code, field: field, msg: msg}
}

// invalidHeader is a 400 invalid_header naming the header.
func invalidHeader(name, reason string) *edgeError {
	return edgeErr(http.StatusBadRequest, CodeInvalidHeader, "", "header "+name+": "+reason)
}

// invalidField is a 400 invalid_field naming field.
func invalidField(field, reason string) *edgeError {
	return edgeErr(http.StatusBadRequest, CodeInvalidField, field, "field "+quote(field)+": "+reason)
}

// problem is the answer to an error.
type problem struct {
	status     int
	detail     ErrorDetail
	retryAfter bool
	// retryIn, when set, is the Retry-After to send instead of the
	// configured one.
	retryIn time.Duration
}

// problem maps err to a status and a stable code. It is the one place that
// does; every handler's error goes through it.
func (s *server) problem(err error) problem {
	var edge *edgeError
	if errors.As(err, &edge) {
		return problem{status: edge.status, detail: ErrorDetail{Code: edge.code, Message: edge.msg, Field: edge.field},
			retryAfter: edge.retryAfter > 0, retryIn: edge.retryAfter}
	}
	if p, ok := fileProblem(err); ok {
		return p
	}
	var qe *tenants.QuotaError
	if errors.As(err, &qe) {
		code := map[string]string{tenants.LimitRunning: CodeTooManyRunning, tenants.LimitQueued: CodeTooManyQueued,
			tenants.LimitDailyBudget: CodeDailyBudgetExceeded, tenants.LimitOpen: CodeTooManyOpen}[qe.Limit]
		if code == "" {
			code = CodeRateLimited
		}
		return problem{status: http.StatusTooManyRequests, detail: ErrorDetail{Code: code, Message: qe.Message},
			retryAfter: true, retryIn: qe.RetryAfter}
	}
	var le *autorun.LimitError
	if errors.As(err, &le) {
		return problem{status: http.StatusTooManyRequests, detail: ErrorDetail{Code: le.Code, Message: le.Message}}
	}
	var fe *runs.FieldError
	hasField := errors.As(err, &fe)
	detail := ErrorDetail{Message: err.Error()}
	if hasField {
		detail.Field, detail.Agent = fe.Field, fe.Agent
	}
	if hasField && fe.Code != "" {
		detail.Code = fe.Code
		return problem{status: http.StatusBadRequest, detail: detail}
	}
	switch {
	case errors.Is(err, runs.ErrUnsupported):
		detail.Code = CodeUnsupportedOption
		return problem{status: http.StatusBadRequest, detail: detail}
	case errors.Is(err, runs.ErrInvalid):
		detail.Code = CodeInvalidField
		return problem{status: http.StatusBadRequest, detail: detail}
	case errors.Is(err, runs.ErrUnknownAgent):
		detail.Code = CodeUnknownAgent
		if detail.Field == "" {
			detail.Field = "agent"
		}
		if known := s.agentNames(); len(known) > 0 {
			detail.Message += "; known agents: " + strings.Join(known, ", ")
		}
		return problem{status: http.StatusBadRequest, detail: detail}
	case errors.Is(err, runs.ErrAgentUnavailable):
		// 422: the request is well formed but names an agent this
		// gateway cannot run; a client must not retry it as is. The
		// message carries the install command for the operator.
		detail.Code = CodeAgentNotInstalled
		if detail.Field == "" {
			detail.Field = "agent"
		}
		return problem{status: http.StatusUnprocessableEntity, detail: detail}
	case errors.Is(err, runs.ErrNotFound):
		detail.Code = CodeNotFound
		return problem{status: http.StatusNotFound, detail: detail}
	case errors.Is(err, runs.ErrConflict):
		var ce *runs.ConflictError
		if errors.As(err, &ce) {
			detail.Code, detail.Message = ce.Code, ce.Message
		} else {
			detail.Code = "conflict"
		}
		return problem{status: http.StatusConflict, detail: detail}
	case errors.Is(err, runs.ErrOwnerUnavailable):
		detail.Code = CodeOwnerUnavailable
		detail.Message = "the replica running this run cannot be reached; it may have stopped, and the run will end interrupted"
		return problem{status: http.StatusServiceUnavailable, detail: detail, retryAfter: true}
	case errors.Is(err, runs.ErrIdempotencyMismatch):
		detail.Code = CodeIdempotencyMismatch
		detail.Message = "this Idempotency-Key was used with another request body in the last 24 hours; use a new key for a new run"
		return problem{status: http.StatusUnprocessableEntity, detail: detail}
	case errors.Is(err, runs.ErrStreamCapacity):
		detail.Code = CodeTooManyStreams
		detail.Message = runs.ErrStreamCapacity.Error() + "; retry after Retry-After seconds"
		return problem{status: http.StatusServiceUnavailable, detail: detail, retryAfter: true}
	case errors.Is(err, runs.ErrCapacity):
		detail.Code = CodeQueueFull
		return problem{status: http.StatusTooManyRequests, detail: detail, retryAfter: true}
	case errors.Is(err, runs.ErrStorageFull):
		detail.Code = CodeDiskFull
		return problem{status: http.StatusServiceUnavailable, detail: detail, retryAfter: true}
	case errors.Is(err, runs.ErrShuttingDown):
		detail.Code = CodeShuttingDown
		return problem{status: http.StatusServiceUnavailable, detail: detail, retryAfter: true}
	}
	return problem{status: http.StatusInternalServerError, detail: ErrorDetail{Code: CodeInternal, Message: "internal error"}}
}

// Explain is the API's code and sentence for err: what a run that starts
// itself (a schedule's fire, a trigger's delivery) records when its
// submission is refused, as a client's POST /v1/runs would have got it.
func Explain(err error) autorun.ErrorInfo {
	p := (&server{}).problem(err)
	return autorun.ErrorInfo{Code: p.detail.Code, Message: p.detail.Message}
}

// agentNames lists the configured agents, sorted.
func (s *server) agentNames() []string {
	if s.svc == nil {
		return nil
	}
	var names []string
	for _, a := range s.svc.Agents() {
		names = append(names, a.Name)
	}
	slices.Sort(names)
	return names
}

// fail answers the request with err mapped by problem. The whole error goes
// to the request's log line (an error line for a 5xx); the client sees only
// the mapped detail. A request whose client has gone gets no answer.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	rec, _ := w.(*recorder)
	var edge *edgeError
	timedOut := errors.As(err, &edge) && edge.code == CodeBodyTimeout
	if errors.Is(context.Cause(r.Context()), errRequestTimeout) && !timedOut {
		// The gateway gave up, not the client: tell it.
		err = &edgeError{status: http.StatusServiceUnavailable, code: CodeRequestTimeout,
			msg:   "the gateway could not answer in time (its store may be slow); retry after Retry-After seconds",
			cause: err, retryAfter: s.cfg.RetryAfter}
		timedOut = true
	}
	// A body that timed out fails the connection's read, which cancels
	// the request's context; the client is still there to be told.
	if r.Context().Err() != nil && !timedOut {
		if rec != nil {
			rec.gone(err)
		}
		return
	}
	p := s.problem(err)
	if rec != nil {
		rec.err = err
	} else {
		s.log.Error("request failed", zap.String("path", r.URL.Path), zap.Error(err))
	}
	if (p.status == http.StatusInternalServerError || p.detail.Code == CodeRequestTimeout) && reconnectable(r) {
		s.reconnectLater(w, err)
		return
	}
	switch {
	case p.retryIn > 0:
		retryAfterHeader(w, p.retryIn)
	case p.retryAfter:
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(s.cfg.RetryAfter.Seconds()))))
	}
	s.writeJSON(w, r, p.status, ErrorResponse{Error: p.detail})
}

// writeJSON answers with v as JSON.
func (s *server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a type the API controls reaches here, so this is a bug.
		s.log.Error("encode response", zap.String("path", r.URL.Path), zap.Error(err))
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// echoed bounds a client-supplied string echoed in a message.
func echoed(s string) string { return clip.Text(s, 64) }

// quote quotes a client-supplied name for a message, clipped.
func quote(s string) string { return strconv.Quote(echoed(s)) }
