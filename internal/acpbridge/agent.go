package acpbridge

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// ProtocolVersion is the ACP version the bridge speaks.
const ProtocolVersion = 1

// closeTimeout bounds closing the runs when the editor goes.
const closeTimeout = 30 * time.Second

// Agent is the ACP agent of one editor connection: every session it
// opens is an interactive run on the gateway.
type Agent struct {
	gw       Gateway
	defaults Settings
	version  string
	log      func(format string, args ...any)

	conn *Conn

	// ctx is the life of the sessions' followers: it outlives the
	// connection so that a run closed at the end still reports its end.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	nextID   int
	sessions map[string]*session
	wg       sync.WaitGroup // the followers and permission requests
}

// NewAgent returns the agent of gateway gw whose sessions' runs take
// defaults unless a session/new overrides them; version is what
// initialize reports; log gets what goes wrong (never stdout, which is
// the protocol's).
func NewAgent(gw Gateway, defaults Settings, version string, log func(format string, args ...any)) *Agent {
	return &Agent{gw: gw, defaults: defaults, version: version, log: log, sessions: map[string]*session{}}
}

// Serve speaks ACP on conn until the editor closes it (or ctx ends),
// then closes every session's run and waits for their followers. It
// returns nil when the editor closed the connection.
func (a *Agent) Serve(ctx context.Context, conn *Conn) error {
	a.conn = conn
	a.ctx, a.cancel = context.WithCancel(context.WithoutCancel(ctx))
	conn.Handle("initialize", a.initialize)
	conn.Handle("session/new", a.newSession)
	conn.Handle("session/prompt", a.prompt)
	conn.HandleNotification("session/cancel", a.cancelTurn)
	err := conn.Serve(ctx)
	a.closeAll()
	a.cancel()
	a.wg.Wait()
	return err
}

// closeAll closes the run of every session that has one and has not
// ended: the editor is gone, nobody will send its next turn.
func (a *Agent) closeAll() {
	a.mu.Lock()
	var ids []string
	for _, s := range a.sessions {
		if id := s.liveRun(); id != "" {
			ids = append(ids, id)
		}
	}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(a.ctx, closeTimeout)
	defer cancel()
	for _, id := range ids {
		if err := a.gw.Close(ctx, id); err != nil {
			a.log("acp: close run %s: %v", id, err)
		}
	}
}

func (a *Agent) initialize(_ context.Context, params json.RawMessage) (any, error) {
	var p struct {
		ProtocolVersion *int `json:"protocolVersion"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.ProtocolVersion == nil {
		return nil, &Error{Code: CodeInvalidParams, Message: "initialize: protocolVersion is required"}
	}
	return map[string]any{
		"protocolVersion": ProtocolVersion,
		"agentCapabilities": map[string]any{
			"loadSession":        false,
			"promptCapabilities": map[string]any{"image": true, "audio": false, "embeddedContext": true},
			"mcpCapabilities":    map[string]any{"http": true, "sse": false},
		},
		"authMethods": []any{},
		"agentInfo":   map[string]any{"name": "agentgate", "title": "agentgate", "version": a.version},
	}, nil
}

// newSessionParams is session/new's params.
type newSessionParams struct {
	Cwd        string            `json:"cwd"`
	MCPServers []json.RawMessage `json:"mcpServers"`
	Meta       struct {
		Agentgate json.RawMessage `json:"agentgate"`
	} `json:"_meta"`
}

// metaKey is the metadata key that records the editor's cwd: the run's
// files are on the gateway, so the editor's directory is only a label.
const metaKey = "acp_cwd"

func (a *Agent) newSession(_ context.Context, params json.RawMessage) (any, error) {
	var p newSessionParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &Error{Code: CodeInvalidParams, Message: "session/new: " + err.Error()}
	}
	settings, err := a.settingsOf(p.Meta.Agentgate)
	if err != nil {
		return nil, err
	}
	servers, err := mcpServersOf(p.MCPServers)
	if err != nil {
		return nil, err
	}
	if p.Cwd != "" {
		md := make(map[string]string, len(settings.Metadata)+1)
		for k, v := range settings.Metadata {
			md[k] = v
		}
		md[metaKey] = p.Cwd
		settings.Metadata = md
	}
	a.mu.Lock()
	a.nextID++
	id := "agentgate-" + strconv.Itoa(a.nextID)
	a.sessions[id] = &session{agent: a, id: id, settings: settings, mcp: servers, tools: map[string]toolCall{}, approvalTools: map[string]string{}, asking: map[string]context.CancelFunc{}}
	a.mu.Unlock()
	return map[string]any{"sessionId": id}, nil
}

// settingsOf is the flags' settings with a session/new's
// _meta.agentgate over them; a key it does not know is an error, so a
// typo never silently drops a setting.
func (a *Agent) settingsOf(meta json.RawMessage) (Settings, error) {
	s := a.defaults
	if len(meta) == 0 || isNull(meta) {
		return s, nil
	}
	var o struct {
		Agent      *string           `json:"agent"`
		Model      *string           `json:"model"`
		Permission *string           `json:"permission"`
		Approvals  *string           `json:"approvals"`
		Workspace  json.RawMessage   `json:"workspace"`
		Metadata   map[string]string `json:"metadata"`
	}
	dec := json.NewDecoder(bytes.NewReader(meta))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return s, &Error{Code: CodeInvalidParams, Message: "session/new: _meta.agentgate: " + err.Error()}
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.Agent, o.Agent)
	set(&s.Model, o.Model)
	set(&s.Permission, o.Permission)
	set(&s.Approvals, o.Approvals)
	if len(o.Workspace) > 0 && !isNull(o.Workspace) {
		s.Workspace = o.Workspace
	}
	if o.Metadata != nil {
		s.Metadata = o.Metadata
	}
	return s, nil
}

// mcpServersOf maps ACP's MCP servers (a list of named stdio or http
// servers, their env and headers as name/value lists) to the run's
// mcp_servers; the gateway's operator decides which may run.
func mcpServersOf(list []json.RawMessage) (map[string]MCPServer, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := make(map[string]MCPServer, len(list))
	type pair struct{ Name, Value string }
	for i, raw := range list {
		var s struct {
			Type    string   `json:"type"`
			Name    string   `json:"name"`
			Command string   `json:"command"`
			Args    []string `json:"args"`
			Env     []pair   `json:"env"`
			URL     string   `json:"url"`
			Headers []pair   `json:"headers"`
		}
		if err := json.Unmarshal(raw, &s); err != nil || s.Name == "" {
			return nil, &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("session/new: mcpServers[%d]: want a named server", i)}
		}
		m := MCPServer{}
		switch {
		case s.Type == "" && s.Command != "":
			m.Command, m.Args, m.Env = s.Command, s.Args, pairs(s.Env, func(p pair) (string, string) { return p.Name, p.Value })
		case s.Type == "http" && s.URL != "":
			m.URL, m.Headers = s.URL, pairs(s.Headers, func(p pair) (string, string) { return p.Name, p.Value })
		default:
			return nil, &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("session/new: mcpServers[%d] (%s): only stdio and http servers are supported", i, s.Name)}
		}
		out[s.Name] = m
	}
	return out, nil
}

func pairs[P any](ps []P, kv func(P) (string, string)) map[string]string {
	if len(ps) == 0 {
		return nil
	}
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		k, v := kv(p)
		m[k] = v
	}
	return m
}

// session looks up a session by its id.
func (a *Agent) session(id string) (*session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[id]
	if !ok {
		return nil, &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("no session %q", id)}
	}
	return s, nil
}

// promptParams is session/prompt's params.
type promptParams struct {
	SessionID string            `json:"sessionId"`
	Prompt    []json.RawMessage `json:"prompt"`
}

func (a *Agent) prompt(ctx context.Context, params json.RawMessage) (any, error) {
	var p promptParams
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &Error{Code: CodeInvalidParams, Message: "session/prompt: " + err.Error()}
	}
	s, err := a.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	content, err := contentOf(p.Prompt)
	if err != nil {
		return nil, err
	}
	var attachments []Attachment
	for _, img := range content.images {
		id, err := a.gw.UploadImage(ctx, img.mediaType, img.data)
		if err != nil {
			return nil, gatewayError("upload an image of the prompt", err)
		}
		attachments = append(attachments, Attachment{FileID: id})
	}
	return s.prompt(ctx, content.text, attachments)
}

// cancelTurn is session/cancel: the running turn is interrupted, and the
// pending prompt then answers cancelled.
func (a *Agent) cancelTurn(_ context.Context, params json.RawMessage) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	s, err := a.session(p.SessionID)
	if err != nil {
		a.log("acp: session/cancel of an unknown session %q", p.SessionID)
		return
	}
	s.cancel()
}

// image is an image block of a prompt.
type image struct {
	mediaType string
	data      []byte
}

// promptContent is a prompt's blocks: the text the run gets and its
// images.
type promptContent struct {
	text   string
	images []image
}

// contentOf reads a prompt's ContentBlocks: text as it is, an embedded
// text resource and a resource link as text that names them, images for
// upload. Audio and binary resources are refused: the gateway has no way
// to give them to an agent.
func contentOf(blocks []json.RawMessage) (promptContent, error) {
	var out promptContent
	var parts []string
	for i, raw := range blocks {
		var b struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Data     string `json:"data"`
			MimeType string `json:"mimeType"`
			URI      string `json:"uri"`
			Name     string `json:"name"`
			Resource struct {
				URI      string  `json:"uri"`
				Text     *string `json:"text"`
				MimeType string  `json:"mimeType"`
			} `json:"resource"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return out, &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("prompt[%d]: %v", i, err)}
		}
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "image":
			data, err := base64.StdEncoding.DecodeString(b.Data)
			if err != nil || len(data) == 0 {
				return out, &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("prompt[%d]: an image's data must be base64", i)}
			}
			out.images = append(out.images, image{mediaType: b.MimeType, data: data})
		case "resource_link":
			parts = append(parts, fmt.Sprintf("[%s](%s)", b.Name, b.URI))
		case "resource":
			if b.Resource.Text == nil {
				return out, &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("prompt[%d]: only text resources can be embedded (%s)", i, b.Resource.URI)}
			}
			parts = append(parts, fmt.Sprintf("<resource uri=%q>\n%s\n</resource>", b.Resource.URI, *b.Resource.Text))
		default:
			return out, &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("prompt[%d]: %q content is not supported", i, b.Type)}
		}
	}
	out.text = joinParts(parts)
	if out.text == "" {
		return out, &Error{Code: CodeInvalidParams, Message: "the prompt has no text"}
	}
	return out, nil
}

func joinParts(parts []string) string {
	var b bytes.Buffer
	for _, p := range parts {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(p)
	}
	return b.String()
}

// gatewayError is the JSON-RPC error of a failed call of the gateway:
// its code and sentence when it answered, else what went wrong.
func gatewayError(what string, err error) *Error {
	var ae *APIError
	if errors.As(err, &ae) {
		return &Error{Code: CodeGatewayError, Message: ae.Message, Data: map[string]any{"code": ae.Code, "status": ae.Status}}
	}
	return &Error{Code: CodeInternalError, Message: what + ": " + err.Error()}
}
