package codex

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

// httpMCP is a streamable-HTTP MCP server on 127.0.0.1: each POSTed
// JSON-RPC message is answered by mcptest's server as one JSON body, a
// notification with 202; any other method is 405. It keeps the headers
// of every request.
type httpMCP struct {
	URL   string
	token string
	srv   *http.Server

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
	h := &httpMCP{URL: "http://" + ln.Addr().String() + "/mcp", token: token}
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
		Method string `json:"method"`
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
// with a secret header: codex connects to it with the header
// (http_headers), the model's call of reverse_text in namespace
// mcp__remote runs, its result is in the events, and the header's value
// is in none of them.
func TestRealCLIRemoteMCP(t *testing.T) {
	h := startHTTPMCP(t, "remote-token")
	auth := "Bearer remote-header-" + rand.Text()
	g := startGateway(t, openai.MCPTurn("remote", "reverse_text", `{"text":"hello mcp"}`, "The remote tool answered."), h.URL)
	r := g.submit(t, runs.Spec{Prompt: "Reverse hello mcp remotely.", MCPServers: map[string]runs.MCPServer{
		"remote": {URL: h.URL, Headers: map[string]string{"Authorization": auth}},
	}})
	done, evs := g.wait(t, r.ID)
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v; events: %s", done.Status, done.Error, eventTypes(evs))
	}
	methods, auths := h.seen("Authorization")
	if !strings.Contains(strings.Join(methods, " "), "tools/call") {
		t.Errorf("the server got %v, no tools/call", methods)
	}
	if len(auths) == 0 || auths[0] != auth {
		t.Errorf("Authorization headers %q, want %q", auths, auth)
	}
	c := onlyMCPCall(t, evs)
	if c.started.MCPServer != "remote" || c.started.MCPTool != "reverse_text" || c.completed.Output != mcptest.Reversed("hello mcp") {
		t.Errorf("tool call %+v, output %q", c.started, c.completed.Output)
	}
	for _, e := range evs {
		if strings.Contains(string(e.JSON), auth[len("Bearer "):]) {
			t.Errorf("event %d (%s) holds the header's value", e.Seq, e.Type)
		}
	}
}
