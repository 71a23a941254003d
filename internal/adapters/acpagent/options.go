package acpagent

import (
	"bytes"
	"encoding/json"

	"github.com/agentgate/agentgate/internal/acp"
	"github.com/agentgate/agentgate/internal/runs"
)

// decoder is the generic ACP client, shown only the allow_always option
// that allows a tool for the session. ACP's allow_always says nothing of
// where the CLI keeps the rule: a CLI that offers several keeps each
// somewhere else, and the first may be the workspace (Qwen Code's
// "Always Allow in project" writes the client's .qwen/settings.json).
// The gateway's allow_session means this session only, so it takes the
// entry's session_allow_option, or an allow_always the CLI offers alone.
type decoder struct {
	*acp.Decoder
	sessionOption string
}

// Decode implements runs.Decoder.
func (d *decoder) Decode(line []byte) []runs.Event {
	return d.Decoder.Decode(narrowAllowAlways(line, d.sessionOption))
}

// permissionRequest is what narrowAllowAlways reads of a line; the rest
// of it is kept as it came.
type permissionRequest struct {
	Method string                     `json:"method"`
	Params map[string]json.RawMessage `json:"params"`
}

// narrowAllowAlways returns line with a session/request_permission's
// allow_always options narrowed to the one with optionId keep, or, when
// keep is empty, to none unless the CLI offers one alone. Any other line,
// and one it cannot read, is returned as it is.
func narrowAllowAlways(line []byte, keep string) []byte {
	if !bytes.Contains(line, []byte(`session/request_permission`)) || !bytes.Contains(line, []byte(`allow_always`)) {
		return line
	}
	var msg map[string]json.RawMessage
	var req permissionRequest
	if json.Unmarshal(line, &msg) != nil || json.Unmarshal(line, &req) != nil || req.Method != "session/request_permission" {
		return line
	}
	var options []json.RawMessage
	if json.Unmarshal(req.Params["options"], &options) != nil {
		return line
	}
	kept, changed := narrowOptions(options, keep)
	if !changed {
		return line
	}
	var err error
	if req.Params["options"], err = json.Marshal(kept); err != nil {
		return line
	}
	if msg["params"], err = json.Marshal(req.Params); err != nil {
		return line
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return line
	}
	return out
}

// narrowOptions applies narrowAllowAlways's rule to options, and says
// whether it dropped any.
func narrowOptions(options []json.RawMessage, keep string) ([]json.RawMessage, bool) {
	type option struct {
		OptionID string `json:"optionId"`
		Kind     string `json:"kind"`
	}
	parsed := make([]option, len(options))
	always := 0
	for i, raw := range options {
		if json.Unmarshal(raw, &parsed[i]) == nil && parsed[i].Kind == "allow_always" {
			always++
		}
	}
	if always == 0 || (keep == "" && always == 1) {
		return options, false
	}
	kept := make([]json.RawMessage, 0, len(options))
	for i, raw := range options {
		if parsed[i].Kind != "allow_always" || (keep != "" && parsed[i].OptionID == keep) {
			kept = append(kept, raw)
		}
	}
	return kept, len(kept) != len(options)
}

var _ runs.Session = (*decoder)(nil)
