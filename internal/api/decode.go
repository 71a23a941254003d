package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/levenshtein"
	"github.com/agentgate/agentgate/internal/runs"
)

// Limits of a run request, checked at the edge. They are syntactic; what
// needs the agents, the workspace or the queue is the service's to check.
const (
	maxPromptBytes         = runs.MaxPromptBytes
	maxSystemPromptBytes   = runs.MaxSystemPromptBytes
	maxAgentBytes          = 64
	maxIdentBytes          = runs.MaxModelBytes // model, resume_session_id
	maxCwdBytes            = runs.MaxCwdBytes
	maxMetadataKeys        = runs.MaxMetadataKeys
	maxMetadataKeyBytes    = runs.MaxMetadataKeyBytes
	maxMetadataValueBytes  = runs.MaxMetadataValBytes
	minTurns, maxTurns     = 1, runs.MaxTurnsLimit
	minTimeout, maxTimeout = 1, 7 * 86400 // the gateway's AGENTGATE_MAX_RUN_TIMEOUT applies within it
	maxTotalTokens         = 1 << 40
)

// Fields of a run request as the API spells them.
const (
	fieldAgent    = "agent"
	fieldPrompt   = "prompt"
	fieldMetadata = "metadata"
)

// checkJSONContentType rejects a body not declared as JSON, so that a form
// or a text body is refused rather than guessed at.
func checkJSONContentType(h http.Header) error {
	ct := h.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return edgeErr(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "",
			"Content-Type must be application/json, not "+strconv.Quote(echoed(ct)))
	}
	return nil
}

// readBody reads at most limit bytes of the request body.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	// The whole body must arrive within timeout, however it trickles:
	// a stalled body must not hold a connection (and a descriptor) for
	// ever. The deadline is lifted after, for the answer's sake.
	rc := http.NewResponseController(w)
	if timeout > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		// The deadline stays passed: before it answers, the server
		// reads what is left of the body, which would otherwise wait
		// on the client for ever. The connection closes after the 408.
		w.Header().Set("Connection", "close")
		return nil, &edgeError{status: http.StatusRequestTimeout, code: CodeBodyTimeout,
			msg: fmt.Sprintf("the request body did not arrive within %s", timeout), cause: err}
	}
	if timeout > 0 {
		_ = rc.SetReadDeadline(time.Time{})
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, edgeErr(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "",
			fmt.Sprintf("request body is larger than %d bytes", limit))
	}
	if err != nil {
		return nil, &edgeError{status: http.StatusBadRequest, code: CodeInvalidJSON,
			msg: "could not read the request body", cause: err}
	}
	return body, nil
}

// decodeRunRequest parses the body of POST /v1/runs into a spec. Every
// field is checked for type and range, an unknown or repeated field is an
// error naming it, and the first error found is returned. Permission
// defaults to workspace_write.
func decodeRunRequest(body []byte) (runs.Spec, error) {
	members, err := readObject(body)
	if err != nil {
		return runs.Spec{}, err
	}
	f, err := byName(members, requestFields)
	if err != nil {
		return runs.Spec{}, err
	}
	var spec runs.Spec
	for _, field := range runFields {
		if err := field.decode(f, field.name, &spec); err != nil {
			return runs.Spec{}, err
		}
	}
	return spec, nil
}

// Fields of the input requests.
const (
	fieldDecision = "decision"
	fieldMessage  = "message"
	fieldText     = "text"
	fieldMode     = "mode"
	fieldAttach   = "attachments"
)

var (
	decisionFields = []string{fieldDecision, fieldMessage}
	messageFields  = []string{fieldText, fieldMode, fieldAttach}
	messageModes   = []string{runs.MessageQueue, runs.MessageSteer}
)

// decodeDecision parses the body of POST /v1/runs/{id}/approvals/{approval_id}.
func decodeDecision(body []byte) (runs.Input, error) {
	f, err := readFields(body, decisionFields)
	if err != nil {
		return runs.Input{}, err
	}
	in := runs.Input{Kind: runs.InputDecision}
	d, ok, err := f.str(fieldDecision)
	switch {
	case err != nil:
		return runs.Input{}, err
	case !ok:
		return runs.Input{}, invalidField(fieldDecision, "is required")
	}
	if in.Decision = runs.Decision(d); !in.Decision.Valid() {
		return runs.Input{}, invalidField(fieldDecision, "must be one of allow, allow_session, deny, deny_and_stop")
	}
	if in.Message, _, err = f.str(fieldMessage); err != nil {
		return runs.Input{}, err
	}
	if len(in.Message) > runs.MaxDecisionMessageBytes {
		return runs.Input{}, invalidField(fieldMessage, fmt.Sprintf("must be at most %d bytes", runs.MaxDecisionMessageBytes))
	}
	return in, nil
}

// decodeMessage parses the body of POST /v1/runs/{id}/messages.
func decodeMessage(body []byte) (runs.Input, error) {
	f, err := readFields(body, messageFields)
	if err != nil {
		return runs.Input{}, err
	}
	in := runs.Input{Kind: runs.InputMessage, Mode: runs.MessageQueue}
	var ok bool
	if in.Text, ok, err = f.str(fieldText); err != nil {
		return runs.Input{}, err
	}
	if !ok || strings.TrimSpace(in.Text) == "" {
		return runs.Input{}, invalidField(fieldText, "is required and must not be blank")
	}
	if len(in.Text) > runs.MaxMessageBytes {
		return runs.Input{}, invalidField(fieldText, fmt.Sprintf("must be at most %d bytes", runs.MaxMessageBytes))
	}
	mode, ok, err := f.str(fieldMode)
	if err != nil {
		return runs.Input{}, err
	}
	if ok {
		if !slices.Contains(messageModes, mode) {
			return runs.Input{}, invalidField(fieldMode, "must be one of queue, steer")
		}
		in.Mode = mode
	}
	if in.Attachments, err = decodeAttachments(fieldAttach, f.get(fieldAttach)); err != nil {
		return runs.Input{}, err
	}
	return in, nil
}

// readFields parses body as one JSON object whose members are all among
// known, each at most once. An empty body is an empty object.
func readFields(body []byte, known []string) (fields, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return fields{}, nil
	}
	members, err := readObject(body)
	if err != nil {
		return nil, err
	}
	return byName(members, known)
}

// byName indexes members by name, refusing the first that is not among
// known or that repeats an earlier one.
func byName(members []member, known []string) (fields, error) {
	f := make(fields, len(members))
	for _, m := range members {
		if !slices.Contains(known, m.name) {
			return nil, unknownField(m.name, known)
		}
		if _, dup := f[m.name]; dup {
			return nil, invalidField(m.name, "appears more than once")
		}
		f[m.name] = m.raw
	}
	return f, nil
}

// member is one name/value pair of a JSON object, in body order.
type member struct {
	name string
	raw  json.RawMessage
}

// readObject parses body as exactly one JSON object and returns its members
// in order, keeping repeated names (which a map would silently merge).
func readObject(body []byte) ([]member, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, edgeErr(http.StatusBadRequest, CodeInvalidJSON, "", "request body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return nil, badJSON(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, edgeErr(http.StatusBadRequest, CodeInvalidJSON, "", "request body must be a JSON object")
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, badJSON(err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, edgeErr(http.StatusBadRequest, CodeInvalidJSON, "", "request body is not valid JSON")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, badJSON(err)
		}
		ms = append(ms, member{name: name, raw: raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, badJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, edgeErr(http.StatusBadRequest, CodeInvalidJSON, "", "request body has data after the JSON object")
	}
	return ms, nil
}

func badJSON(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return &edgeError{status: http.StatusBadRequest, code: CodeInvalidJSON,
		msg: "request body is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: "), cause: err}
}

// unknownField is a 400 naming the field, with the closest known name when
// the unknown one looks like a typo of it.
func unknownField(name string, known []string) error {
	msg := "unknown field " + quote(name)
	if s := closest(name, known); s != "" {
		msg += " (did you mean " + strconv.Quote(s) + "?)"
	}
	return edgeErr(http.StatusBadRequest, CodeUnknownField, echoed(name), msg)
}

// closest returns the known name within edit distance 2 of name, if any.
func closest(name string, known []string) string {
	if len(name) > 64 {
		return ""
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := levenshtein.Distance(strings.ToLower(name), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// fields are the members of a request object by name.
type fields map[string]json.RawMessage

// get returns the raw value of name, or nil when it is absent or null: an
// explicit null means "the default", like an absent field.
func (f fields) get(name string) json.RawMessage {
	raw := bytes.TrimSpace(f[name])
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// str returns the string value of name and whether it was given.
func (f fields) str(name string) (string, bool, error) {
	raw := f.get(name)
	if raw == nil {
		return "", false, nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", true, invalidField(name, "must be a string")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", true, invalidField(name, "must not contain NUL characters")
	}
	return s, true, nil
}

// boolean returns the value of name, false when absent.
func (f fields) boolean(name string) (bool, error) {
	switch string(f.get(name)) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, invalidField(name, "must be true or false")
}

// ident returns the value of name, which must be a name: an ASCII letter or
// digit, then letters, digits and the bytes of extra.
func (f fields) ident(name, extra string) (string, error) {
	s, _, err := f.str(name)
	if err != nil || s == "" {
		return s, err
	}
	if len(s) > maxIdentBytes || !isIdent(s, extra) {
		return "", invalidField(name, fmt.Sprintf(
			"must start with a letter or digit and contain only letters, digits and %q (at most %d bytes)", extra, maxIdentBytes))
	}
	return s, nil
}

func isIdent(s, extra string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || strings.IndexByte(extra, c) < 0) {
			return false
		}
	}
	return true
}

// integer returns the value of name, which must be an integer literal in
// [lo, hi]; 0 when absent.
func (f fields) integer(name string, lo, hi int) (int, error) {
	raw := f.get(name)
	if raw == nil {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < int64(lo) || n > int64(hi) {
		return 0, invalidField(name, fmt.Sprintf("must be an integer from %d to %d", lo, hi))
	}
	return int(n), nil
}

// positive returns the value of name, which must be a number greater than
// 0; 0 when absent.
func (f fields) positive(name string) (float64, error) {
	raw := f.get(name)
	if raw == nil {
		return 0, nil
	}
	bad := invalidField(name, "must be a number greater than 0")
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return 0, bad
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, bad
	}
	return v, nil
}

// metadata returns the value of name, a small object of strings; nil when
// absent or empty.
func (f fields) metadata(name string) (map[string]string, error) {
	raw := f.get(name)
	if raw == nil {
		return nil, nil
	}
	notObject := invalidField(name, "must be an object whose values are strings")
	if raw[0] != '{' {
		return nil, notObject
	}
	ms, err := readObject(raw)
	if err != nil {
		return nil, notObject
	}
	if len(ms) > maxMetadataKeys {
		return nil, invalidField(name, fmt.Sprintf("must have at most %d keys", maxMetadataKeys))
	}
	if len(ms) == 0 {
		return nil, nil
	}
	md := make(map[string]string, len(ms))
	for _, m := range ms {
		switch {
		case m.name == "" || len(m.name) > maxMetadataKeyBytes:
			return nil, invalidField(name, fmt.Sprintf("keys must be 1 to %d bytes", maxMetadataKeyBytes))
		case strings.IndexByte(m.name, 0) >= 0:
			return nil, invalidField(name, "keys must not contain NUL characters")
		}
		if _, dup := md[m.name]; dup {
			return nil, invalidField(name, "key "+quote(m.name)+" appears more than once")
		}
		var v string
		if m.raw[0] != '"' || json.Unmarshal(m.raw, &v) != nil {
			return nil, invalidField(name, "value of "+quote(m.name)+" must be a string")
		}
		if len(v) > maxMetadataValueBytes {
			return nil, invalidField(name, fmt.Sprintf("value of %s must be at most %d bytes", quote(m.name), maxMetadataValueBytes))
		}
		md[m.name] = v
	}
	return md, nil
}
