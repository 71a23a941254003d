package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/acpbridge"
)

const acpHelp = `Speaks the Agent Client Protocol (ACP) on stdin and stdout, as an agent that
an editor starts (Zed's agent_servers, and other ACP editors): each
session the editor opens is an interactive run on the gateway, made at its
first prompt; later prompts are its follow-up messages. The agent's text,
reasoning, tool calls and plan stream to the editor; every tool call that
can change something asks the editor first (approvals ask, unless
--approvals never); cancelling in the editor interrupts the turn. The
run's files are on the gateway: the editor's directory is recorded in the
run's metadata (acp_cwd), the run works in --workspace or a fresh
directory. When the editor closes stdin, every session's run is closed
and the command exits 0. Logs go to stderr only.

A session/new may override the flags in _meta.agentgate:
{"agent", "model", "permission", "approvals", "workspace", "metadata"}.`

// acpFlags are acp's flags: the defaults of every session's run.
type acpFlags struct {
	settings  acpbridge.Settings
	workspace string
}

func setupACP(fs *flag.FlagSet) func(a *app, args []string) int {
	f := &acpFlags{}
	fs.StringVar(&f.settings.Agent, "agent", "claude", "the `agent` every session runs (see agentgate agents)")
	fs.StringVar(&f.settings.Agent, "a", "claude", "short for --agent")
	fs.StringVar(&f.settings.Model, "model", "", "the `model`, as the agent names it")
	fs.StringVar(&f.settings.Model, "m", "", "short for --model")
	fs.StringVar(&f.settings.Permission, "permission", "", "the permission `level`: read_only, workspace_write (the gateway's default) or full")
	fs.StringVar(&f.settings.Approvals, "approvals", "ask", "approvals `mode`: ask (the editor is asked before every tool call that can change something) or never")
	fs.StringVar(&f.workspace, "workspace", "", "the runs' directory, as POST /v1/runs's workspace: a JSON `object`, git:URL[#REF], archive:FILE_ID or run:RUN_ID")
	fs.Var(secondsFlag{&f.settings.TimeoutSeconds}, "timeout", "each run's wall-clock limit, in seconds or as a `duration` (15m)")
	return f.serve
}

// serve speaks ACP until stdin ends.
func (f *acpFlags) serve(a *app, args []string) int {
	if len(args) > 0 {
		return a.usageFail("acp", "takes no arguments")
	}
	if f.settings.Approvals != "ask" && f.settings.Approvals != "never" {
		return a.usageFail("acp", "--approvals: want ask or never")
	}
	if f.workspace != "" {
		ws, err := parseWorkspace(f.workspace)
		if err != nil {
			return a.usageFail("acp", "--workspace: %v", err)
		}
		f.settings.Workspace = ws
	}
	c, err := a.client()
	if err != nil {
		return errorExit(a.stderr, err)
	}
	defer c.close()
	logf := func(format string, args ...any) { fmt.Fprintf(a.stderr, "agentgate: "+format+"\n", args...) }
	agent := acpbridge.NewAgent(&acpGateway{c: c, logf: logf}, f.settings, moduleVersion(), logf)
	conn := acpbridge.NewConn(a.stdin, a.stdout, logf)
	// A signal (the editor stopping its agent with SIGTERM) ends the
	// read of stdin, which nothing else would interrupt; the runs are
	// closed as at the end of input.
	stop := context.AfterFunc(a.ctx, func() {
		if c, ok := a.stdin.(io.Closer); ok {
			_ = c.Close()
		}
	})
	defer stop()
	err = agent.Serve(a.ctx, conn)
	if a.ctx.Err() != nil {
		fmt.Fprintln(a.stderr, "agentgate: interrupted; the sessions' runs are closed")
		return exitInterrupted
	}
	if err != nil {
		return errorExit(a.stderr, fmt.Errorf("read the editor's messages: %w", err))
	}
	return exitOK
}

// parseWorkspace reads --workspace: a JSON object as it is, or one of
// the short forms of its three sources.
func parseWorkspace(v string) (json.RawMessage, error) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "{") {
		if !json.Valid([]byte(v)) {
			return nil, errors.New("not JSON")
		}
		return json.RawMessage(v), nil
	}
	kind, rest, ok := strings.Cut(v, ":")
	if !ok || rest == "" {
		return nil, errors.New("want a JSON object, git:URL[#REF], archive:FILE_ID or run:RUN_ID")
	}
	var ws any
	switch kind {
	case "git":
		g := map[string]string{"url": rest}
		if u, ref, ok := strings.Cut(rest, "#"); ok {
			g = map[string]string{"url": u, "ref": ref}
		}
		ws = map[string]any{"git": g}
	case "archive":
		ws = map[string]string{"archive": rest}
	case "run":
		ws = map[string]string{"from_run": rest}
	default:
		return nil, fmt.Errorf("unknown source %q: want git, archive or run", kind)
	}
	b, err := json.Marshal(ws)
	return b, err
}

// acpGateway is the bridge's Gateway over the client and its follower.
type acpGateway struct {
	c    *client
	logf func(format string, args ...any)
}

// apiErr turns the client's error answers into the bridge's.
func apiErr(err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		return &acpbridge.APIError{Status: ae.Status, Code: ae.Code, Message: ae.Message}
	}
	return err
}

func (g *acpGateway) CreateRun(ctx context.Context, req acpbridge.RunRequest) (string, error) {
	var rec runRecord
	if _, err := g.c.call(ctx, http.MethodPost, "/v1/runs", nil, req, &rec); err != nil {
		return "", apiErr(err)
	}
	return rec.ID, nil
}

func (g *acpGateway) SendMessage(ctx context.Context, runID string, msg acpbridge.Message) (string, error) {
	var res struct {
		ID string `json:"id"`
	}
	if _, err := g.c.call(ctx, http.MethodPost, runPath(runID, "messages"), nil, msg, &res); err != nil {
		return "", apiErr(err)
	}
	return res.ID, nil
}

func (g *acpGateway) Decide(ctx context.Context, runID, approvalID, decision string) error {
	_, err := g.c.call(ctx, http.MethodPost, runPath(runID, "approvals", url.PathEscape(approvalID)), nil,
		map[string]string{"decision": decision}, nil)
	return apiErr(err)
}

func (g *acpGateway) Interrupt(ctx context.Context, runID string) error {
	_, err := g.c.call(ctx, http.MethodPost, runPath(runID, "interrupt"), nil, nil, nil)
	return apiErr(err)
}

func (g *acpGateway) Close(ctx context.Context, runID string) error {
	_, err := g.c.call(ctx, http.MethodPost, runPath(runID, "close"), nil, nil, nil)
	return apiErr(err)
}

// UploadImage posts the image as the raw body, its media type the
// editor's (the gateway sniffs the bytes and refuses a mismatch).
func (g *acpGateway) UploadImage(ctx context.Context, mediaType string, data []byte) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := g.c.request(ctx, http.MethodPost, "/v1/files", nil, nil)
	if err != nil {
		return "", err
	}
	req.Body = io.NopCloser(bytes.NewReader(data))
	req.ContentLength = int64(len(data))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	req.Header.Set("Content-Type", mediaType)
	req.Header.Set("Accept", "application/json")
	resp, err := g.c.send(req)
	if err != nil {
		return "", apiErr(err)
	}
	defer resp.Body.Close()
	var file struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBytes)).Decode(&file); err != nil || file.ID == "" {
		return "", fmt.Errorf("POST /v1/files: the answer has no file id (%v)", err)
	}
	return file.ID, nil
}

// Follow reads the run's events with the follower, which resumes a
// dropped stream from the last event delivered.
func (g *acpGateway) Follow(ctx context.Context, runID string, deliver func(acpbridge.Event)) error {
	f := newFollower(g.c, runID, 0, func(ev streamEvent) error {
		deliver(acpbridge.Event{Seq: ev.Env.Seq, Type: ev.Env.Type, Data: ev.Env.Data})
		return nil
	})
	f.retrying = func(err error, wait time.Duration) {
		g.logf("run %s: %s; reconnecting in %s", runID, oneLine(err.Error(), 500), formatDuration(wait))
	}
	_, err := f.follow(ctx)
	return apiErr(err)
}
