package claude

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// httpMCP is a streamable-HTTP MCP server on 127.0.0.1 for the tests: each
// POSTed JSON-RPC message is answered by mcptest's server as one JSON
// body, a notification with 202; a GET (the optional event stream) is 405.
// It keeps the headers of every request.
type httpMCP struct {
	URL   string
	token string
	srv   *http.Server
	ln    net.Listener

	mu      sync.Mutex
	headers []http.Header
	methods []string
}

func startHTTPMCP(t *testing.T, token string) *httpMCP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &httpMCP{URL: "http://" + ln.Addr().String() + "/mcp", token: token, ln: ln}
	h.srv = &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = h.srv.Close()
		<-done
	})
	return h
}

func (h *httpMCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.headers = append(h.headers, r.Header.Clone())
	h.mu.Unlock()
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(body, &msg)
	h.mu.Lock()
	h.methods = append(h.methods, msg.Method)
	h.mu.Unlock()
	var out bytes.Buffer
	if err := mcptest.Serve(bytes.NewReader(append(body, '\n')), &out, h.token); err != nil || out.Len() == 0 {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(bytes.TrimSpace(out.Bytes()))
}

// seen returns the methods called and the values of header name.
func (h *httpMCP) seen(name string) (methods, values []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range h.headers {
		if v := hd.Get(name); v != "" {
			values = append(values, v)
		}
	}
	return append([]string(nil), h.methods...), values
}

// TestRealCLIRemoteMCP gives a run a remote (streamable HTTP) MCP server
// with a secret header: the CLI connects to it with the header, the
// model's call of mcp__remote__reverse_text runs, and its result is in
// the events.
func TestRealCLIRemoteMCP(t *testing.T) {
	t.Parallel()
	h := startHTTPMCP(t, "remote-token")
	const auth = "Bearer remote-header-secret"
	r := runGiven(t, anthropic.MCPCall("remote", "reverse_text", json.RawMessage(reverseInput), "The remote tool answered."),
		runs.Spec{Prompt: "Reverse hello mcp remotely.", MCPServers: map[string]runs.MCPServer{
			"remote": {URL: h.URL, Headers: map[string]string{"Authorization": auth}},
		}}, nil)
	methods, auths := h.seen("Authorization")
	if !strings.Contains(strings.Join(methods, " "), "tools/call") {
		t.Errorf("the server got %v, no tools/call", methods)
	}
	if len(auths) == 0 || auths[0] != auth {
		t.Errorf("Authorization headers %q, want %q", auths, auth)
	}
	var started runs.ToolCallStartedData
	var output string
	for _, ev := range r.events {
		switch d := ev.Data.(type) {
		case runs.ToolCallStartedData:
			started = d
		case runs.ToolCallCompletedData:
			output = d.Output
		}
	}
	if started.MCPServer != "remote" || started.MCPTool != "reverse_text" || output != mcptest.Reversed("hello mcp") {
		t.Errorf("tool call %+v, output %q", started, output)
	}
}
