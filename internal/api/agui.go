package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agui"
	"github.com/agentgate/agentgate/internal/api/stream"
	"github.com/agentgate/agentgate/internal/runs"
)

// The AG-UI event stream: GET /v1/runs/{id}/events?format=ag-ui, and POST
// /v1/ag-ui, which takes an AG-UI RunAgentInput, creates a run (or answers
// the interrupt it resumes) and answers with that AG-UI run's events. Both
// write server-sent events whose data is one AG-UI event each, translated
// from the run's stored log by internal/agui; they share the native
// stream's cursor, batching, pings and drain: both are written by
// internal/api/stream, AG-UI events by its AGUI encoder.

const (
	// formatAGUI is the value of ?format= that selects AG-UI events.
	formatAGUI = "ag-ui"
	// aguiMediaType is AG-UI's own media type (its protobuf framing). An
	// Accept that lists it asks for AG-UI events; they come as
	// text/event-stream, which every AG-UI client reads by its
	// Content-Type.
	aguiMediaType = "application/vnd.ag-ui.event+proto"
)

// aguiRequested reports whether a request for a run's events asks for
// AG-UI events: ?format=ag-ui, or an Accept listing AG-UI's media type.
func aguiRequested(r *http.Request) (bool, error) {
	q := r.URL.Query()["format"]
	switch {
	case len(q) > 1:
		return false, invalidField("format", "appears more than once")
	case len(q) == 1 && q[0] == formatAGUI:
		return true, nil
	case len(q) == 1 && q[0] != "":
		return false, invalidField("format", `must be "ag-ui", or left out for agentgate's own events`)
	}
	for _, h := range r.Header.Values("Accept") {
		for _, part := range strings.Split(h, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || mt != aguiMediaType {
				continue
			}
			if q, ok := params["q"]; ok {
				if v, err := strconv.ParseFloat(q, 64); err != nil || v <= 0 {
					continue
				}
			}
			return true, nil
		}
	}
	return false, nil
}

// maxAGUIEventsPerEvent bounds the count of an AG-UI event id: no stored
// event makes nearly this many.
const maxAGUIEventsPerEvent = 1 << 20

// parseAGUIID parses an AG-UI event id, "N" or "N.K".
func parseAGUIID(s string) (stream.AGUIPosition, bool) {
	seqPart, countPart, dotted := strings.Cut(s, ".")
	seq, ok := parseSeq(seqPart)
	if !ok {
		return stream.AGUIPosition{}, false
	}
	if !dotted {
		return stream.AGUIPosition{Seq: seq}, true
	}
	n, ok := parseSeq(countPart)
	if !ok || n > maxAGUIEventsPerEvent {
		return stream.AGUIPosition{}, false
	}
	return stream.AGUIPosition{Seq: seq, Count: int(n), Partial: true}, true
}

// aguiResumePoint is the later of Last-Event-ID and ?after=, as for the
// native stream, in AG-UI event ids.
func aguiResumePoint(r *http.Request) (stream.AGUIPosition, error) {
	var pos stream.AGUIPosition
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		p, ok := parseAGUIID(v)
		if !ok {
			return stream.AGUIPosition{}, invalidField("Last-Event-ID", `must be an AG-UI event id: "N" or "N.K", decimal integers`)
		}
		pos = p
	}
	q := r.URL.Query()["after"]
	if len(q) > 1 {
		return stream.AGUIPosition{}, invalidField("after", "appears more than once")
	}
	if len(q) == 1 && q[0] != "" {
		p, ok := parseAGUIID(q[0])
		if !ok {
			return stream.AGUIPosition{}, invalidField("after", `must be an AG-UI event id: "N" or "N.K", decimal integers`)
		}
		if p.After(pos) {
			pos = p
		}
	}
	return pos, nil
}

// openAGUIEvents is openEvents for a request that asked for AG-UI events.
// The translation of a run depends on all of its log, so the cursor always
// starts at the first event; the resume point only decides what is
// written.
func (s *server) openAGUIEvents(ctx context.Context, w http.ResponseWriter, r *http.Request) (string, *stream.Writer, runs.Cursor, bool) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return "", nil, nil, false
	}
	pos, err := aguiResumePoint(r)
	if err != nil {
		s.fail(w, r, err)
		return "", nil, nil, false
	}
	run, err := s.runToStream(ctx, r, id)
	if err != nil {
		s.fail(w, r, err)
		return "", nil, nil, false
	}
	if run.Status.Terminal() && (pos.Seq > 0 || pos.Partial) {
		last, err := s.svc.LastEventSeq(ctx, id)
		if err != nil {
			s.fail(w, r, fmt.Errorf("last event of run %s: %w", id, err))
			return "", nil, nil, false
		}
		if last < pos.Seq || last == pos.Seq && !pos.Partial {
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusNoContent)
			return "", nil, nil, false
		}
	}
	cur, err := s.svc.Events(ctx, id, 0)
	if err != nil {
		s.fail(w, r, fmt.Errorf("open events of run %s: %w", id, err))
		return "", nil, nil, false
	}
	releaseOwnedRun(r.Context())
	enc := stream.NewAGUI(agui.New(agui.Options{}), pos)
	return id, stream.New(w, enc, pos.Seq, &s.streamCfg), cur, true
}

// runAGUI answers POST /v1/ag-ui: an AG-UI client's RunAgentInput runs the
// agent. Without resume, its last user message is the prompt of a new run,
// whose options are forwardedProps (the fields of POST /v1/runs but prompt,
// attachments and interactive); a thread whose state names an earlier run
// (run_id, which the gateway's state snapshots carry) or whose threadId is
// one continues that run's session. With resume, it answers the approval
// that the interrupt names. Either way the answer is the one AG-UI run
// that follows, as server-sent events, ending with its RUN_FINISHED (an
// interrupt or the run's success) or RUN_ERROR.
func (s *server) runAGUI(w http.ResponseWriter, r *http.Request) {
	if err := checkJSONContentType(r.Header); err != nil {
		s.fail(w, r, err)
		return
	}
	body, err := readBody(w, r, s.cfg.MaxBodyBytes+s.inlineAllowance(), s.cfg.BodyReadTimeout)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	in, err := agui.DecodeInput(body)
	if err != nil {
		s.fail(w, r, aguiInputError(err))
		return
	}
	if s.draining() {
		s.fail(w, r, fmt.Errorf("ag-ui run: %w", runs.ErrShuttingDown))
		return
	}
	var id string
	var enc *stream.AGUI
	if len(in.Resume) > 0 {
		id, enc, err = s.aguiResume(r, in)
	} else {
		id, enc, err = s.aguiSubmit(r, in, len(body))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The stream outlives AGENTGATE_REQUEST_TIMEOUT, which bounds every
	// request but GET of a run's events (bounded, in auth.go), the body
	// and the submission included. It still ends when the client goes.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	stop := context.AfterFunc(r.Context(), func() {
		if !errors.Is(context.Cause(r.Context()), errRequestTimeout) {
			cancel()
		}
	})
	defer stop()
	cur, err := s.svc.Events(ctx, id, 0)
	if err != nil {
		s.fail(w, r, fmt.Errorf("open events of run %s: %w", id, err))
		return
	}
	st := stream.New(w, enc, 0, &s.streamCfg)
	s.obs.SSEClientsAdd(1)
	defer s.obs.SSEClientsAdd(-1)
	s.streamEnded(w, id, st, st.Serve(ctx, cancel, cur))
}

// aguiInputError is the 400 of a RunAgentInput that is not valid.
func aguiInputError(err error) error {
	var fe *agui.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	if fe.Field == "" {
		return edgeErr(http.StatusBadRequest, CodeInvalidJSON, "", "request body: "+fe.Reason)
	}
	return invalidField(fe.Field, fe.Reason)
}

// Where a RunAgentInput's run options are.
const fieldForwardedProps = "forwardedProps"

// aguiRunFields are the fields forwardedProps may set: those of a run
// request but the prompt and attachments, which are the last user
// message, and interactive: an AG-UI run is one agentgate run, and a
// thread goes on by its next input.
var aguiRunFields = slices.DeleteFunc(slices.Clone(requestFields), func(f string) bool {
	return f == fieldPrompt || f == runs.FieldAttachments || f == runs.FieldInteractive
})

// aguiSubmit creates the run a RunAgentInput without resume asks for.
func (s *server) aguiSubmit(r *http.Request, in agui.Input, bodyLen int) (string, *stream.AGUI, error) {
	var last *agui.Message
	for j := len(in.Messages) - 1; j >= 0; j-- {
		if in.Messages[j].Role == "user" {
			last = &in.Messages[j]
			break
		}
	}
	if last == nil {
		return "", nil, invalidField("messages", "has no user message: the last one is the prompt")
	}
	props, err := forwardedProps(in.ForwardedProps)
	if err != nil {
		return "", nil, err
	}
	names := fieldNames{prompt: last.Field + ".content"}
	var texts []string
	var atts []json.RawMessage
	for _, p := range last.Parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "image":
			a := map[string]string{"file_id": p.FileID}
			if p.FileID == "" {
				a = map[string]string{"data": p.Data}
				if p.MediaType != "" {
					a["media_type"] = p.MediaType
				}
			}
			b, _ := json.Marshal(a)
			atts = append(atts, b)
			names.parts = append(names.parts, p.Field)
		}
	}
	prompt, _ := json.Marshal(strings.Join(texts, "\n"))
	req := append(slices.Clone(props), member{name: fieldPrompt, raw: prompt})
	if len(atts) > 0 {
		b, _ := json.Marshal(atts)
		req = append(req, member{name: runs.FieldAttachments, raw: b})
	}
	given := func(name string) bool {
		return slices.ContainsFunc(props, func(m member) bool { return m.name == name })
	}
	if !given(runs.FieldResumeSessionID) {
		prev, err := s.aguiThreadRun(r.Context(), in)
		if err != nil {
			return "", nil, err
		}
		if prev != nil {
			sid, _ := json.Marshal(prev.SessionID)
			req = append(req, member{name: runs.FieldResumeSessionID, raw: sid})
			if !given(fieldAgent) {
				agent, _ := json.Marshal(prev.Agent)
				req = append(req, member{name: fieldAgent, raw: agent})
			}
		}
	}
	spec, err := decodeRunRequest(objectOf(req))
	if err = s.boundBody(bodyLen, s.cfg.MaxBodyBytes, spec.Attachments, err); err == nil {
		err = s.checkInline(runs.FieldAttachments, spec.Attachments)
	}
	if err != nil {
		return "", nil, names.rename(err)
	}
	if spec.IdempotencyKey, err = idempotencyKey(r.Header); err != nil {
		return "", nil, err
	}
	run, err := s.svc.Submit(r.Context(), spec)
	if err != nil {
		return "", nil, names.rename(fmt.Errorf("submit run: %w", err))
	}
	tr := agui.New(agui.Options{ThreadID: in.ThreadID, RunID: in.RunID, PromptMessageID: last.ID})
	return run.ID, stream.NewAGUIRun(tr, ""), nil
}

// forwardedProps reads a RunAgentInput's forwardedProps: run options by
// name, each known and given once.
func forwardedProps(raw json.RawMessage) ([]member, error) {
	if raw == nil {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, invalidField(fieldForwardedProps, "must be an object of run options (agent, permission, …)")
	}
	ms, err := readObject(raw)
	if err != nil {
		return nil, invalidField(fieldForwardedProps, "is not a valid JSON object")
	}
	seen := map[string]bool{}
	for _, m := range ms {
		at := fieldForwardedProps + "." + m.name
		switch {
		case m.name == fieldPrompt:
			return nil, invalidField(at, "the prompt is the text of the last user message")
		case m.name == runs.FieldAttachments:
			return nil, invalidField(at, "attach images as image parts of the last user message")
		case m.name == runs.FieldInteractive:
			return nil, invalidField(at, "an AG-UI run is one run of the agent: go on with the thread's next input, which continues its session")
		case !slices.Contains(aguiRunFields, m.name):
			msg := "unknown field " + quote(at)
			if c := closest(m.name, aguiRunFields); c != "" {
				msg += " (did you mean " + strconv.Quote(fieldForwardedProps+"."+c) + "?)"
			}
			return nil, edgeErr(http.StatusBadRequest, CodeUnknownField, echoed(at), msg)
		case seen[m.name]:
			return nil, invalidField(at, "appears more than once")
		}
		seen[m.name] = true
	}
	return ms, nil
}

// objectOf encodes members as one JSON object.
func objectOf(ms []member) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(m.name)
		b.Write(name)
		b.WriteByte(':')
		b.Write(m.raw)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// aguiThreadRun is the run whose session a new AG-UI run continues: the
// one that the client's state names (run_id, as the gateway's snapshots
// have it), else the one the threadId is, if it is the caller's and has a
// session; nil when there is none.
func (s *server) aguiThreadRun(ctx context.Context, in agui.Input) (*runs.Run, error) {
	var ids []string
	var st struct {
		RunID string `json:"run_id"`
	}
	if len(in.State) > 0 && in.State[0] == '{' && json.Unmarshal(in.State, &st) == nil && st.RunID != "" {
		ids = append(ids, st.RunID)
	}
	ids = append(ids, in.ThreadID)
	for _, id := range ids {
		if u, err := uuid.Parse(id); err != nil || u.String() != id {
			continue
		}
		run, err := s.ownRun(ctx, id)
		switch {
		case notFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("get run %s: %w", id, err)
		case run.SessionID != "":
			return &run, nil
		}
	}
	return nil, nil
}

// notFound reports whether err says there is no such run (or none of
// the caller's).
func notFound(err error) bool {
	var edge *edgeError
	return errors.Is(err, runs.ErrNotFound) || errors.As(err, &edge) && edge.status == http.StatusNotFound
}

// fieldNames maps the fields of the run request a RunAgentInput became to
// where they came from, for errors.
type fieldNames struct {
	prompt string   // the last user message's content
	parts  []string // the image parts, by attachment index
}

func (n fieldNames) name(f string) string {
	switch {
	case f == "":
		return ""
	case f == fieldPrompt || f == runs.FieldAttachments:
		return n.prompt
	case strings.HasPrefix(f, runs.FieldAttachments+"["):
		idx, rest, _ := strings.Cut(strings.TrimPrefix(f, runs.FieldAttachments+"["), "]")
		if k, err := strconv.Atoi(idx); err == nil && k >= 0 && k < len(n.parts) {
			return n.parts[k] + rest
		}
		return n.prompt
	}
	return fieldForwardedProps + "." + f
}

// rename makes err, about the run request, name the RunAgentInput's
// member instead.
func (n fieldNames) rename(err error) error {
	var edge *edgeError
	if errors.As(err, &edge) && edge.field != "" {
		old := edge.field
		edge.field = n.name(old)
		edge.msg = strings.Replace(edge.msg, quote(old), quote(edge.field), 1)
		return err
	}
	var fe *runs.FieldError
	if errors.As(err, &fe) {
		old := fe.Field
		fe.Field = n.name(old)
		return &renamedError{err: err, from: quote(old), to: quote(fe.Field)}
	}
	if errors.Is(err, runs.ErrUnknownAgent) || errors.Is(err, runs.ErrAgentUnavailable) {
		return &runs.FieldError{Field: n.name(fieldAgent), Reason: err.Error(), Kind: err}
	}
	return err
}

// renamedError is an error whose message names a field anew: the layers
// that wrapped a *runs.FieldError wrote its old name into their text.
type renamedError struct {
	err      error
	from, to string
}

func (e *renamedError) Error() string { return strings.Replace(e.err.Error(), e.from, e.to, 1) }
func (e *renamedError) Unwrap() error { return e.err }

// aguiResume answers the interrupt a RunAgentInput resumes: its approval,
// on the run the interrupt names. An approval answered already (a resume
// sent again, or one the timeout answered) is not an error: the stream
// shows what happened.
func (s *server) aguiResume(r *http.Request, in agui.Input) (string, *stream.AGUI, error) {
	if len(in.Resume) != 1 {
		return "", nil, invalidField("resume", "must answer one interrupt: an AG-UI run of this gateway ends with one at most")
	}
	e := in.Resume[0]
	const at = "resume[0]"
	runID, approval, _ := strings.Cut(e.InterruptID, "/")
	if u, err := uuid.Parse(runID); err != nil || u.String() != runID || approval == "" || len(approval) > maxApprovalIDBytes {
		return "", nil, invalidField(at+".interruptId", "is not an interrupt of this gateway: <run id>/<approval id>")
	}
	input, err := aguiDecision(at, e)
	if err != nil {
		return "", nil, err
	}
	input.ApprovalID = approval
	if _, err := s.ownRun(r.Context(), runID); err != nil {
		return "", nil, fmt.Errorf("run %s: %w", runID, err)
	}
	_, err = s.svc.Input(r.Context(), runID, input)
	var ce *runs.ConflictError
	if err != nil && !(errors.As(err, &ce) && (ce.Code == runs.ConflictApprovalResolved || ce.Code == runs.ConflictRunEnded)) {
		return "", nil, fmt.Errorf("answer approval %s of run %s: %w", approval, runID, err)
	}
	tr := agui.New(agui.Options{ThreadID: in.ThreadID, RunID: in.RunID})
	return runID, stream.NewAGUIRun(tr, e.InterruptID), nil
}

// The members of a resume payload.
var resumePayloadFields = []string{"approved", fieldDecision, fieldMessage}

// aguiDecision is the approval decision of a resume entry: cancelled
// denies; resolved takes a payload of {"approved": bool}, or the decision
// by name, and a message for the model ("approved" alone, true or false,
// will do too).
func aguiDecision(at string, e agui.ResumeEntry) (runs.Input, error) {
	in := runs.Input{Kind: runs.InputDecision, Decision: runs.Deny}
	if e.Status == agui.ResumeCancelled {
		return in, nil
	}
	p := e.Payload
	switch {
	case p == nil:
		return runs.Input{}, invalidField(at+".payload", `is required: {"approved": true} or {"approved": false}`)
	case string(p) == "true":
		in.Decision = runs.Allow
		return in, nil
	case string(p) == "false":
		return in, nil
	case p[0] != '{':
		return runs.Input{}, invalidField(at+".payload", `must be {"approved": true|false}, with a "decision" or "message" if wanted`)
	}
	ms, err := readObject(p)
	if err != nil {
		return runs.Input{}, invalidField(at+".payload", "is not a valid JSON object")
	}
	f := fields{}
	for _, m := range ms {
		name := at + ".payload." + m.name
		if !slices.Contains(resumePayloadFields, m.name) {
			msg := "unknown field " + quote(name)
			if c := closest(m.name, resumePayloadFields); c != "" {
				msg += " (did you mean " + strconv.Quote(at+".payload."+c) + "?)"
			}
			return runs.Input{}, edgeErr(http.StatusBadRequest, CodeUnknownField, echoed(name), msg)
		}
		if _, dup := f[m.name]; dup {
			return runs.Input{}, invalidField(name, "appears more than once")
		}
		f[m.name] = m.raw
	}
	approved, hasApproved := false, f.get("approved") != nil
	if approved, err = f.boolean("approved"); err != nil {
		return runs.Input{}, invalidField(at+".payload.approved", "must be true or false")
	}
	d, hasDecision, err := f.str(fieldDecision)
	if err != nil {
		return runs.Input{}, invalidField(at+".payload.decision", "must be a string")
	}
	switch {
	case hasDecision:
		in.Decision = runs.Decision(d)
		if !in.Decision.Valid() {
			return runs.Input{}, invalidField(at+".payload.decision", "must be one of allow, allow_session, deny, deny_and_stop")
		}
		allows := in.Decision == runs.Allow || in.Decision == runs.AllowSession
		if hasApproved && approved != allows {
			return runs.Input{}, invalidField(at+".payload.approved", "contradicts the decision")
		}
	case hasApproved:
		if approved {
			in.Decision = runs.Allow
		}
	default:
		return runs.Input{}, invalidField(at+".payload", `needs "approved" (true or false) or a "decision"`)
	}
	if in.Message, _, err = f.str(fieldMessage); err != nil {
		return runs.Input{}, invalidField(at+".payload.message", "must be a string")
	}
	if len(in.Message) > runs.MaxDecisionMessageBytes {
		return runs.Input{}, invalidField(at+".payload.message", fmt.Sprintf("must be at most %d bytes", runs.MaxDecisionMessageBytes))
	}
	return in, nil
}
