package supervisor

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
)

// encodeEvent encodes an envelope as one line of JSON. HTML is not escaped:
// the stream is JSON, not HTML, and tool inputs such as "a > b" should read
// as they were written.
func encodeEvent(ev runs.Event) ([]byte, error) {
	// The fixed part of a delta's envelope is under 160 bytes; escapes
	// may grow the strings.
	size := 160 + len(ev.RunID) + len(ev.Agent) + len(ev.SessionID) + len(ev.ParentToolCallID)
	delta := true
	switch d := ev.Data.(type) {
	case runs.MessageData:
		size += len(d.MessageID) + len(d.Text)*9/8
	case runs.DeltaData:
		size += len(d.ID) + len(d.Text)*9/8
	default:
		delta = false
	}
	if delta {
		if b, ok := appendDeltaEnvelope(make([]byte, 0, size), &ev); ok {
			return b, nil
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// appendDeltaEnvelope encodes the envelopes a run emits most, text and
// reasoning deltas, without reflection, byte for byte as encoding/json
// does (TestDeltaEnvelopeEncoding and FuzzDeltaEnvelope hold it to that).
// At full speed encoding through reflection was the largest single cost
// left in emitting an event. It answers false for any other payload.
func appendDeltaEnvelope(dst []byte, ev *runs.Event) ([]byte, bool) {
	var idKey, id, text string
	switch d := ev.Data.(type) {
	case runs.MessageData:
		idKey, id, text = "message_id", d.MessageID, d.Text
	case runs.DeltaData:
		idKey, id, text = "id", d.ID, d.Text
	default:
		return dst, false
	}
	if y := ev.Time.Year(); y < 0 || y > 9999 {
		return dst, false // time.Time.MarshalJSON refuses these
	}
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendInt(dst, int64(ev.V), 10)
	dst = append(dst, `,"run_id":`...)
	dst = appendJSONString(dst, ev.RunID)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, ev.Seq, 10)
	dst = append(dst, `,"time":"`...)
	dst = ev.Time.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","type":`...)
	dst = appendJSONString(dst, string(ev.Type))
	dst = append(dst, `,"agent":`...)
	dst = appendJSONString(dst, ev.Agent)
	if ev.SessionID != "" {
		dst = append(dst, `,"session_id":`...)
		dst = appendJSONString(dst, ev.SessionID)
	}
	if ev.ParentToolCallID != "" {
		dst = append(dst, `,"parent_tool_call_id":`...)
		dst = appendJSONString(dst, ev.ParentToolCallID)
	}
	dst = append(dst, `,"data":{`...)
	if id != "" {
		dst = append(dst, '"')
		dst = append(dst, idKey...)
		dst = append(dst, `":`...)
		dst = appendJSONString(dst, id)
		dst = append(dst, ',')
	}
	dst = append(dst, `"text":`...)
	dst = appendJSONString(dst, text)
	dst = append(dst, "}}"...)
	return dst, true
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json writes a string with HTML
// escaping off: quotes, backslashes and control characters escaped,
// invalid UTF-8 as \ufffd, and U+2028 and U+2029 escaped, since
// JavaScript once read them as line ends.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
