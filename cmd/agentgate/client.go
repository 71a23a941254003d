package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// client is the gateway's HTTP API as the commands use it. It holds no
// state between requests but the connection pool.
type client struct {
	base      *url.URL
	apiKey    string
	userAgent string
	http      *http.Client
}

// Bounds of one request. A stream or a download has no overall deadline:
// only the wait for the answer's headers is bounded.
const (
	dialTimeout    = 10 * time.Second
	headerTimeout  = 60 * time.Second
	requestTimeout = 60 * time.Second
	// maxAnswerBytes bounds a JSON answer read into memory (a page of 500
	// runs with their diffs is the largest the gateway sends).
	maxAnswerBytes = 256 << 20
	// maxErrorBytes bounds the body of an error answer.
	maxErrorBytes = 64 << 10
)

// newClient returns a client of the gateway at rawURL (http or https,
// with an optional path prefix) that sends apiKey as a Bearer token when
// it is not empty.
func newClient(rawURL, apiKey, userAgent string) (*client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" {
		return nil, usageErrorf("gateway URL %q: want http://HOST:PORT or https://HOST[:PORT], with no query", rawURL)
	}
	if strings.ContainsFunc(apiKey, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, usageErrorf("the API key holds a space or a control character")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: headerTimeout,
	}
	return &client{base: u, apiKey: apiKey, userAgent: userAgent, http: &http.Client{Transport: tr}}, nil
}

// close releases the idle connections.
func (c *client) close() { c.http.CloseIdleConnections() }

// apiError is an error answer of the gateway: its status and the code and
// message of its body, `{"error":{"code","message","field"?,"agent"?}}`.
// An answer without that body (a proxy's page) gets the code http_<status>.
type apiError struct {
	Status     int
	Code       string
	Message    string
	Field      string
	Agent      string
	RetryAfter time.Duration
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// retryable reports whether the same request may succeed later: the
// gateway is draining, overloaded or its owner replica is away.
func (e *apiError) retryable() bool {
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout
}

// connectError is a request that never got an answer: the gateway cannot
// be reached, or the connection failed before the answer's headers.
type connectError struct {
	url string
	err error
}

func (e *connectError) Error() string {
	return fmt.Sprintf("cannot connect to the gateway at %s: %v", e.url, rootCause(e.err))
}
func (e *connectError) Unwrap() error { return e.err }

// rootCause drops the url.Error wrapping, whose text repeats the method
// and the URL.
func rootCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// endpoint returns the URL of path (already escaped) under the base.
func (c *client) endpoint(path string, q url.Values) string {
	s := c.base.String() + path
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

// runPath returns the escaped path of a run's route: /v1/runs/{id}/rest.
func runPath(id string, rest ...string) string {
	p := "/v1/runs/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// filePath escapes a path of a run's directory segment by segment, so
// that its slashes stay separators.
func filePath(p string) string {
	segs := strings.Split(strings.TrimLeft(p, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// request builds a request of the API; body, when not nil, is sent as JSON.
func (c *client) request(ctx context.Context, method, path string, q url.Values, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint(path, q), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	req.Header.Set("User-Agent", c.userAgent)
	return req, nil
}

// send sends req and returns the answer when its status is 2xx; otherwise
// the body is read and closed and the error is an *apiError. A request
// that got no answer is a *connectError, or the context's error when the
// context ended.
func (c *client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, &connectError{url: c.base.String(), err: err}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// call makes one JSON request and returns the answer's body. out, when
// not nil, receives the body decoded. The whole call, answer included, is
// bounded by requestTimeout.
func (c *client) call(ctx context.Context, method, path string, q url.Values, body, out any) ([]byte, error) {
	return c.callWith(ctx, method, path, q, nil, body, out)
}

// callWith is call with more request headers.
func (c *client) callWith(ctx context.Context, method, path string, q url.Values, hdr http.Header, body, out any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range hdr {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(ctxErr, context.DeadlineExceeded) {
			return nil, ctxErr
		}
		return nil, &connectError{url: c.base.String(), err: fmt.Errorf("read the answer: %w", err)}
	}
	if len(b) > maxAnswerBytes {
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", method, path, maxAnswerBytes)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("%s %s: the answer is not the JSON expected: %w", method, path, err)
		}
	}
	return b, nil
}

// decodeError turns an error answer into an *apiError.
func decodeError(resp *http.Response) *apiError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	e := &apiError{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
			Agent   string `json:"agent"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message, e.Field, e.Agent = body.Error.Code, body.Error.Message, body.Error.Field, body.Error.Agent
		return e
	}
	e.Code = "http_" + strconv.Itoa(resp.StatusCode)
	e.Message = http.StatusText(resp.StatusCode)
	if s := firstLine(string(b), 200); s != "" {
		e.Message += ": " + s
	}
	if e.Message == "" {
		e.Message = "status " + strconv.Itoa(resp.StatusCode)
	}
	return e
}

// retryAfter parses a Retry-After header in seconds (the only form the
// gateway sends); anything else is 0.
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, 3600)) * time.Second
}

// The answers of the API that the commands read. Only the fields shown
// are decoded; --json prints the answer as the gateway sent it.

// envelope is one event as stored and streamed.
type envelope struct {
	V                int             `json:"v"`
	RunID            string          `json:"run_id"`
	Seq              uint64          `json:"seq"`
	Time             time.Time       `json:"time"`
	Type             string          `json:"type"`
	Agent            string          `json:"agent"`
	SessionID        string          `json:"session_id,omitempty"`
	ParentToolCallID string          `json:"parent_tool_call_id,omitempty"`
	Data             json.RawMessage `json:"data"`
}

// usage is token usage: input includes both cache counts, output
// includes reasoning.
type usage struct {
	InputTokens      int64 `json:"input_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
}

// total is what a run's token budget counts: input plus output.
func (u usage) total() int64 { return u.InputTokens + u.OutputTokens }

// runError is why a run or a turn failed.
type runError struct {
	Class     string `json:"class"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	Hint      string `json:"hint,omitempty"`
	Budget    string `json:"budget,omitempty"`
}

// approval is a pending or resolved approval request.
type approval struct {
	ID         string          `json:"id"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Tool       string          `json:"tool"`
	Input      json.RawMessage `json:"input,omitempty"`
	MCPServer  string          `json:"mcp_server,omitempty"`
	Options    []string        `json:"options"`
	ExpiresAt  time.Time       `json:"expires_at"`
	Decision   string          `json:"decision,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Message    string          `json:"message,omitempty"`
}

// changedFile is one file a run changed.
type changedFile struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Size   int64  `json:"size"`
	Binary bool   `json:"binary,omitempty"`
}

// runRecord is a run as GET /v1/runs/{id} answers it.
type runRecord struct {
	ID               string            `json:"id"`
	Agent            string            `json:"agent"`
	Model            string            `json:"model,omitempty"`
	Status           string            `json:"status"`
	CreatedAt        time.Time         `json:"created_at"`
	StartedAt        *time.Time        `json:"started_at,omitempty"`
	FinishedAt       *time.Time        `json:"finished_at,omitempty"`
	SessionID        string            `json:"session_id,omitempty"`
	Result           string            `json:"result,omitempty"`
	Usage            usage             `json:"usage"`
	CostUSD          *float64          `json:"cost_usd,omitempty"`
	NumTurns         int               `json:"num_turns,omitempty"`
	QueuePosition    int               `json:"queue_position,omitempty"`
	Files            []changedFile     `json:"files,omitempty"`
	Error            *runError         `json:"error,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	Interactive      bool              `json:"interactive,omitempty"`
	Approvals        string            `json:"approvals,omitempty"`
	Activity         string            `json:"activity,omitempty"`
	ClosesAt         *time.Time        `json:"closes_at,omitempty"`
	PendingApprovals []approval        `json:"pending_approvals,omitempty"`
}

// runList is one page of GET /v1/runs.
type runList struct {
	Runs       []runRecord `json:"runs"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// agentInfo is one agent of GET /v1/agents.
type agentInfo struct {
	Name            string   `json:"name"`
	Aliases         []string `json:"aliases,omitempty"`
	Installed       bool     `json:"installed"`
	Version         string   `json:"version,omitempty"`
	VerifiedVersion string   `json:"verified_version"`
	Compatibility   string   `json:"compatibility"`
	Advisory        string   `json:"advisory"`
	Enforcement     string   `json:"enforcement"`
	Interaction     *struct {
		Steer        bool `json:"steer"`
		DenyEndsTurn bool `json:"deny_ends_turn"`
		Hibernate    bool `json:"hibernate"`
	} `json:"interaction,omitempty"`
}

// runRequest is the body of POST /v1/runs: zero values are left out,
// which the gateway reads as the agent's defaults.
type runRequest struct {
	Agent                  string            `json:"agent"`
	Prompt                 string            `json:"prompt"`
	SystemPrompt           string            `json:"system_prompt,omitempty"`
	Model                  string            `json:"model,omitempty"`
	Effort                 string            `json:"effort,omitempty"`
	MaxTurns               int               `json:"max_turns,omitempty"`
	TimeoutSeconds         int               `json:"timeout_seconds,omitempty"`
	MaxBudgetUSD           float64           `json:"max_budget_usd,omitempty"`
	MaxTotalTokens         int64             `json:"max_total_tokens,omitempty"`
	OutputSchema           json.RawMessage   `json:"output_schema,omitempty"`
	ResumeSessionID        string            `json:"resume_session_id,omitempty"`
	KeepSession            bool              `json:"keep_session,omitempty"`
	Metadata               map[string]string `json:"metadata,omitempty"`
	Cwd                    string            `json:"cwd,omitempty"`
	Permission             string            `json:"permission,omitempty"`
	Approvals              string            `json:"approvals,omitempty"`
	ApprovalTimeoutSeconds int               `json:"approval_timeout_seconds,omitempty"`
	Interactive            bool              `json:"interactive,omitempty"`
	IdleTimeoutSeconds     int               `json:"idle_timeout_seconds,omitempty"`
	HibernateAfterSeconds  int               `json:"hibernate_after_seconds,omitempty"`
}
