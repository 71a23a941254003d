package autorun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/seal"
)

// storedSpec is a run request as a schedule or trigger keeps it, sealed:
// the spec and the values its JSON leaves out (MCP servers' env and
// headers).
type storedSpec struct {
	Spec runs.Spec                `json:"spec"`
	MCP  map[string]mcpSecretVals `json:"mcp,omitempty"`
}

type mcpSecretVals struct {
	Env     map[string]string `json:"env,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// CheckStorable refuses what a kept run request cannot hold: inline
// images, whose bytes would be stored with every owner; they are uploaded
// once (POST /v1/files) and attached by file_id.
func CheckStorable(spec runs.Spec) error {
	for i, a := range spec.Attachments {
		if a.FileID == "" {
			return runs.Invalid(fmt.Sprintf("run.attachments[%d]", i),
				"a schedule or trigger attaches uploaded files only: upload the image with POST /v1/files and give its file_id")
		}
	}
	return nil
}

// CheckRun checks a kept run request: what it cannot hold (CheckStorable),
// then check, the supervisor's admission without making the run. An error
// names its field as the owner's body does ("run.agent").
func CheckRun(ctx context.Context, check func(context.Context, runs.Spec) error, run runs.Spec) error {
	if err := CheckStorable(run); err != nil {
		return err
	}
	err := check(ctx, run)
	if errors.Is(err, runs.ErrUnknownAgent) {
		return &runs.FieldError{Field: "run.agent", Reason: err.Error(), Kind: runs.ErrInvalid, Code: "unknown_agent"}
	}
	return InRun(err)
}

// InRun names a field of a run request inside the body that holds it:
// "prompt" becomes "run.prompt".
func InRun(err error) error {
	var fe *runs.FieldError
	if errors.As(err, &fe) && fe.Field != "" && !strings.HasPrefix(fe.Field, "run.") {
		c := *fe
		c.Field = "run." + fe.Field
		return &c
	}
	return err
}

// CheckWhenBusy refuses a WhenBusy that is none of WhenBusyValues.
func CheckWhenBusy(w WhenBusy) error {
	if !w.Valid() {
		return runs.Invalid("when_busy", `must be "skip", "queue" or "cancel_previous"`)
	}
	return nil
}

// SealSpec returns spec sealed by box for owner id.
func SealSpec(box *seal.Box, id string, spec runs.Spec) ([]byte, error) {
	st := storedSpec{Spec: spec}
	for name, m := range spec.MCPServers {
		if len(m.Env) > 0 || len(m.Headers) > 0 {
			if st.MCP == nil {
				st.MCP = map[string]mcpSecretVals{}
			}
			st.MCP[name] = mcpSecretVals{Env: m.Env, Headers: m.Headers}
		}
	}
	data, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return box.Seal(id, data), nil
}

// OpenSpec returns the spec SealSpec sealed for owner id, whole.
func OpenSpec(box *seal.Box, id string, sealed []byte) (runs.Spec, error) {
	data, err := box.Open(id, sealed)
	if err != nil {
		return runs.Spec{}, err
	}
	var st storedSpec
	if err := json.Unmarshal(data, &st); err != nil {
		return runs.Spec{}, fmt.Errorf("decode a kept run request: %w", err)
	}
	spec := st.Spec
	for name, vals := range st.MCP {
		m := spec.MCPServers[name]
		m.Env, m.Headers = vals.Env, vals.Headers
		spec.MCPServers[name] = m
	}
	return spec, nil
}

// PublicSpec is spec as the API shows it: the names of its MCP servers'
// env and headers, never their values, and its webhook_url without what
// may carry a token (its query, fragment and user).
func PublicSpec(spec runs.Spec) runs.Spec {
	if spec.WebhookURL != "" {
		if u, err := url.Parse(spec.WebhookURL); err == nil {
			u.RawQuery, u.Fragment, u.User = "", "", nil
			spec.WebhookURL = u.String()
		} else {
			spec.WebhookURL = ""
		}
	}
	if len(spec.MCPServers) == 0 {
		return spec
	}
	out := make(map[string]runs.MCPServer, len(spec.MCPServers))
	for name, m := range spec.MCPServers {
		m.EnvNames, m.HeaderNames = slices.Sorted(maps.Keys(m.Env)), slices.Sorted(maps.Keys(m.Headers))
		m.Env, m.Headers, m.Sealed = nil, nil, nil
		out[name] = m
	}
	spec.MCPServers = out
	return spec
}

// LimitError is a tenant at its bound of schedules or triggers: a 429
// with Code.
type LimitError struct {
	Code    string
	Message string
}

func (e *LimitError) Error() string { return e.Message }
