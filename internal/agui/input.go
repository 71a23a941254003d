package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Input is a RunAgentInput, the body an AG-UI client posts to run an
// agent, as far as the gateway reads it. Members AG-UI may add are
// ignored, as AG-UI's own schemas ignore them; tools and context are
// checked for shape only, since a CLI agent brings its own tools.
type Input struct {
	ThreadID    string
	RunID       string
	ParentRunID string
	// State is the client's state, raw; nil when absent or null.
	State json.RawMessage
	// Messages are the thread's messages, oldest first.
	Messages []Message
	// ForwardedProps is raw; nil when absent or null.
	ForwardedProps json.RawMessage
	// Resume answers the interrupts that ended the thread's last run.
	Resume []ResumeEntry
}

// Message is one message of the thread.
type Message struct {
	ID   string
	Role string
	// Parts are a user message's content, text and images in order; a
	// string content is one text part. Other roles' content is not read.
	Parts []Part
	// Field is where the message is in the input, as "messages[3]".
	Field string
}

// Part is one piece of a user message.
type Part struct {
	// Type is "text" or "image".
	Type string
	Text string
	// An image is inline, base64 Data of MediaType, or a file uploaded to
	// the gateway, FileID.
	MediaType, Data, FileID string
	// Field is where the part is in the input, as "messages[3].content[1]".
	Field string
}

// ResumeEntry answers one interrupt.
type ResumeEntry struct {
	InterruptID string
	// Status is "resolved" or "cancelled".
	Status string
	// Payload is the answer, raw; nil when absent or null.
	Payload json.RawMessage
}

// Resume statuses.
const (
	ResumeResolved  = "resolved"
	ResumeCancelled = "cancelled"
)

// maxIDBytes bounds threadId and runId, which every run event repeats.
const maxIDBytes = 256

// FieldError is a RunAgentInput that is not valid. Field names the member
// at fault, as a path ("messages[2].content[0].source.type"); it is empty
// when the body is not one JSON object.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return "field " + strconv.Quote(e.Field) + ": " + e.Reason
}

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// roles are the roles of AG-UI messages.
var roles = []string{"developer", "system", "assistant", "user", "tool", "activity", "reasoning"}

// DecodeInput parses a RunAgentInput. The error is a *FieldError naming
// the first member at fault.
func DecodeInput(body []byte) (Input, error) {
	top, err := object("", body)
	if err != nil {
		return Input{}, err
	}
	var in Input
	if in.ThreadID, err = top.id("threadId"); err != nil {
		return Input{}, err
	}
	if in.RunID, err = top.id("runId"); err != nil {
		return Input{}, err
	}
	if in.ParentRunID, _, err = top.str("parentRunId"); err != nil {
		return Input{}, err
	}
	if _, _, err = top.str("protocolVersion"); err != nil {
		return Input{}, err
	}
	in.State = top.get("state")
	in.ForwardedProps = top.get("forwardedProps")
	raw := top.get("messages")
	if raw == nil {
		return Input{}, fieldErr("messages", "is required: the thread's messages, the last user message the prompt")
	}
	items, err := array("messages", raw)
	if err != nil {
		return Input{}, err
	}
	for i, item := range items {
		m, err := decodeMessage(fmt.Sprintf("messages[%d]", i), item)
		if err != nil {
			return Input{}, err
		}
		in.Messages = append(in.Messages, m)
	}
	for _, name := range []string{"tools", "context"} {
		if raw := top.get(name); raw != nil {
			items, err := array(name, raw)
			if err != nil {
				return Input{}, err
			}
			for i, item := range items {
				if _, err := object(fmt.Sprintf("%s[%d]", name, i), item); err != nil {
					return Input{}, err
				}
			}
		}
	}
	if raw := top.get("resume"); raw != nil {
		items, err := array("resume", raw)
		if err != nil {
			return Input{}, err
		}
		for i, item := range items {
			e, err := decodeResume(fmt.Sprintf("resume[%d]", i), item)
			if err != nil {
				return Input{}, err
			}
			in.Resume = append(in.Resume, e)
		}
	}
	return in, nil
}

func decodeMessage(at string, raw json.RawMessage) (Message, error) {
	o, err := object(at, raw)
	if err != nil {
		return Message{}, err
	}
	m := Message{Field: at}
	var ok bool
	if m.ID, ok, err = o.str("id"); err != nil {
		return Message{}, err
	}
	if !ok {
		return Message{}, fieldErr(at+".id", "is required")
	}
	if m.Role, ok, err = o.str("role"); err != nil {
		return Message{}, err
	}
	if !ok || !slices.Contains(roles, m.Role) {
		return Message{}, fieldErr(at+".role", "must be one of %s", strings.Join(roles, ", "))
	}
	if m.Role != "user" {
		return m, nil
	}
	content := o.get("content")
	switch {
	case content == nil:
		return Message{}, fieldErr(at+".content", "is required in a user message")
	case content[0] == '"':
		var s string
		if json.Unmarshal(content, &s) != nil {
			return Message{}, fieldErr(at+".content", "is not a valid string")
		}
		m.Parts = []Part{{Type: "text", Text: s, Field: at + ".content"}}
		return m, nil
	}
	items, err := array(at+".content", content)
	if err != nil {
		return Message{}, fieldErr(at+".content", "must be a string or an array of parts")
	}
	for j, item := range items {
		p, err := decodePart(fmt.Sprintf("%s.content[%d]", at, j), item)
		if err != nil {
			return Message{}, err
		}
		m.Parts = append(m.Parts, p)
	}
	return m, nil
}

func decodePart(at string, raw json.RawMessage) (Part, error) {
	o, err := object(at, raw)
	if err != nil {
		return Part{}, err
	}
	typ, _, err := o.str("type")
	if err != nil {
		return Part{}, err
	}
	p := Part{Type: typ, Field: at}
	switch typ {
	case "text":
		var ok bool
		if p.Text, ok, err = o.str("text"); err != nil {
			return Part{}, err
		}
		if !ok {
			return Part{}, fieldErr(at+".text", "is required in a text part")
		}
		return p, nil
	case "image":
		src := o.get("source")
		if src == nil {
			return Part{}, fieldErr(at+".source", "is required in an image part")
		}
		s, err := object(at+".source", src)
		if err != nil {
			return Part{}, err
		}
		kind, _, err := s.str("type")
		if err != nil {
			return Part{}, err
		}
		value, hasValue, err := s.str("value")
		if err != nil {
			return Part{}, err
		}
		mt, _, err := s.str("mimeType")
		if err != nil {
			return Part{}, err
		}
		if !hasValue || value == "" {
			return Part{}, fieldErr(at+".source.value", "is required")
		}
		switch kind {
		case "data":
			p.Data, p.MediaType = value, mt
		case "file":
			p.FileID = value
		case "url":
			return Part{}, fieldErr(at+".source.type", "an image by URL is not taken: send its bytes (data) or upload it with POST /v1/files (file)")
		default:
			return Part{}, fieldErr(at+".source.type", "must be data or file")
		}
		p.Type = "image"
		return p, nil
	case "binary":
		// AG-UI 0.0.x's media part: an image by its bytes or its id.
		mt, _, err := o.str("mimeType")
		if err != nil {
			return Part{}, err
		}
		if !strings.HasPrefix(mt, "image/") {
			return Part{}, fieldErr(at+".mimeType", "only images are taken")
		}
		data, _, err := o.str("data")
		if err != nil {
			return Part{}, err
		}
		id, _, err := o.str("id")
		if err != nil {
			return Part{}, err
		}
		switch {
		case data != "":
			p.Data, p.MediaType = data, mt
		case id != "":
			p.FileID = id
		default:
			return Part{}, fieldErr(at, "an image needs its data, or the id of a file uploaded with POST /v1/files")
		}
		p.Type = "image"
		return p, nil
	case "audio", "video", "document":
		return Part{}, fieldErr(at+".type", "only text and image parts are taken")
	}
	return Part{}, fieldErr(at+".type", "must be text or image")
}

func decodeResume(at string, raw json.RawMessage) (ResumeEntry, error) {
	o, err := object(at, raw)
	if err != nil {
		return ResumeEntry{}, err
	}
	var e ResumeEntry
	var ok bool
	if e.InterruptID, ok, err = o.str("interruptId"); err != nil {
		return ResumeEntry{}, err
	}
	if !ok || e.InterruptID == "" {
		return ResumeEntry{}, fieldErr(at+".interruptId", "is required")
	}
	if e.Status, _, err = o.str("status"); err != nil {
		return ResumeEntry{}, err
	}
	if e.Status != ResumeResolved && e.Status != ResumeCancelled {
		return ResumeEntry{}, fieldErr(at+".status", "must be resolved or cancelled")
	}
	e.Payload = o.get("payload")
	if raw := o.get("metadata"); raw != nil {
		if _, err := object(at+".metadata", raw); err != nil {
			return ResumeEntry{}, err
		}
	}
	return e, nil
}

// members are a JSON object's members by name, at a path for errors.
type members struct {
	at string
	m  map[string]json.RawMessage
}

// object decodes raw, a JSON object at path at, into its members. A name
// given twice is an error, as in the gateway's own requests.
func object(at string, raw json.RawMessage) (members, error) {
	bad := func(reason string) error {
		if at == "" {
			return &FieldError{Reason: "the body " + reason}
		}
		return fieldErr(at, "%s", reason)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return members{}, bad("is not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return members{}, bad("must be a JSON object")
	}
	o := members{at: at, m: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return members{}, bad("is not valid JSON")
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return members{}, bad("is not valid JSON")
		}
		if _, dup := o.m[name]; dup {
			return members{}, fieldErr(o.path(name), "appears more than once")
		}
		o.m[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return members{}, bad("is not valid JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return members{}, bad("has data after the JSON object")
	}
	return o, nil
}

func (o members) path(name string) string {
	if o.at == "" {
		return name
	}
	return o.at + "." + name
}

// get returns the raw value of name, nil when absent or null.
func (o members) get(name string) json.RawMessage {
	raw := bytes.TrimSpace(o.m[name])
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// str returns the string value of name and whether it was given.
func (o members) str(name string) (string, bool, error) {
	raw := o.get(name)
	if raw == nil {
		return "", false, nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", true, fieldErr(o.path(name), "must be a string")
	}
	return s, true, nil
}

// id returns the required id name: 1 to maxIDBytes bytes.
func (o members) id(name string) (string, error) {
	s, _, err := o.str(name)
	if err != nil {
		return "", err
	}
	if s == "" || len(s) > maxIDBytes {
		return "", fieldErr(o.path(name), "is required: a string of 1 to %d bytes", maxIDBytes)
	}
	return s, nil
}

// array decodes raw, a JSON array at path at, into its items.
func array(at string, raw json.RawMessage) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, fieldErr(at, "must be an array")
	}
	return items, nil
}
