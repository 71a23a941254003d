package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/agentgate/agentgate/internal/mock/mockhttp"
)

// What Codex is given besides its prompt: the tools of a run's MCP
// servers, and images.
//
// Codex offers the tools of an MCP server <name> as one namespace tool,
// {"type":"namespace","name":"mcp__<name>","tools":[{"type":"function",
// "name":<tool>,…}]}, and takes a call only as {"type":"function_call",
// "namespace":"mcp__<name>","name":<tool>}: a call named
// "mcp__<name>__<tool>" gets the output "unsupported call: …". The
// result comes back as a function_call_output whose output is a list of
// input_text parts, a "Wall time" line and then the tool's text.
//
// An image reaches the model as an input_image part of a user message,
// {"type":"input_image","image_url":"data:image/png;base64,…"}, between
// input_text parts "<image name=[Image #1] path=…>" and "</image>" when
// Codex was given the file's path (localImage).

// MCPNamespace is the namespace tool through which Codex offers the
// tools of the MCP server named server.
func MCPNamespace(server string) string { return "mcp__" + server }

// MCPCall returns a call of tool on the MCP server named server, with
// args, a JSON object text.
func MCPCall(server, tool, args string) Item {
	return Item{Type: "function_call", Namespace: MCPNamespace(server), Name: tool, Arguments: args}
}

// NoMCPToolText is MCPTurn's answer to a request that does not offer the
// tool: the run's MCP server did not start, or Codex did not list it.
const NoMCPToolText = "The request offers no such MCP tool."

// MCPTurn answers the first request of a turn with a call of tool on the
// MCP server named server, with args (a JSON object text), and the
// request that carries that call's output with answer. A request that
// does not offer the tool is answered NoMCPToolText. Requests bill as
// ToolTurn's do.
func MCPTurn(server, tool, args, answer string) Scenario {
	return Func(func(req *Request) Response {
		if _, call, ok := req.LastOutput(); ok && call.Namespace == MCPNamespace(server) && call.Name == tool {
			return Response{Items: []Item{Text(answer)}, Usage: followUpUsage()}
		}
		if !req.HasTool(MCPNamespace(server) + "." + tool) {
			return Response{Items: []Item{Text(NoMCPToolText)}, Usage: textUsage()}
		}
		return Response{Items: []Item{Reasoning("The user wants the MCP tool called."), MCPCall(server, tool, args)},
			Usage: firstCallUsage()}
	})
}

// MCPTwice is MCPTurn with the same call asked for twice in the turn:
// once the first call's output came back, the second; once its output
// came back, answer. A refused call's output counts. It serves
// allow_session, whose second identical call runs unasked.
func MCPTwice(server, tool, args, answer string) Scenario {
	return Func(func(req *Request) Response {
		n := 0
		for _, out := range req.FunctionOutputs() {
			if call, ok := req.Call(out.CallID); ok && call.Namespace == MCPNamespace(server) && call.Name == tool {
				n++
			}
		}
		switch {
		case n >= 2:
			return Response{Items: []Item{Text(answer)}, Usage: followUpUsage()}
		case n == 1:
			return Response{Items: []Item{MCPCall(server, tool, args)}, Usage: followUpUsage()}
		case !req.HasTool(MCPNamespace(server) + "." + tool):
			return Response{Items: []Item{Text(NoMCPToolText)}, Usage: textUsage()}
		}
		return Response{Items: []Item{Reasoning("The user wants the MCP tool called twice."), MCPCall(server, tool, args)},
			Usage: firstCallUsage()}
	})
}

// ToolLoop asks for an exec_command running command on every request,
// never ending the turn by itself, each request billed firstCallUsage:
// only a budget or a stop ends such a run.
func ToolLoop(command string) Scenario { return AlwaysTool(command) }

// Images keeps the image_url of every input_image part the server's
// requests carried, in the order they came. A Request summary keeps no
// image, so a test that checks an image reached the model reads it here.
type Images struct {
	mu   sync.Mutex
	urls []string
}

// URLs returns the image URLs seen so far: data URLs for the images
// Codex read from files.
func (im *Images) URLs() []string {
	im.mu.Lock()
	defer im.mu.Unlock()
	return append([]string(nil), im.urls...)
}

// Seen reports whether an image URL seen holds text: the base64 of an
// image's bytes, for a data URL.
func (im *Images) Seen(text string) bool {
	for _, u := range im.URLs() {
		if strings.Contains(u, text) {
			return true
		}
	}
	return false
}

// keep records the input_image URLs of a Responses API body. A body it
// cannot read keeps nothing: the server answers it as usual.
func (im *Images) keep(body []byte) {
	var w struct {
		Input []struct {
			Content json.RawMessage `json:"content"`
		} `json:"input"`
	}
	if json.Unmarshal(body, &w) != nil {
		return
	}
	for _, it := range w.Input {
		var parts []struct {
			Type     string `json:"type"`
			ImageURL string `json:"image_url"`
		}
		if json.Unmarshal(it.Content, &parts) != nil {
			continue
		}
		for _, p := range parts {
			if p.Type == "input_image" && p.ImageURL != "" {
				im.mu.Lock()
				im.urls = append(im.urls, p.ImageURL)
				im.mu.Unlock()
			}
		}
	}
}

// StartWithImages is Start, with the server also keeping the images its
// requests carry.
func StartWithImages(addr string, sc Scenario, opts ...Option) (*Server, *Images, error) {
	s := &Server{}
	for _, o := range opts {
		o(s)
	}
	if err := s.Listen("mock openai", addr, "/v1", sc); err != nil {
		return nil, nil, err
	}
	im := &Images{}
	s.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := mockhttp.ReadBody(w, r, maxBody)
		if err == nil && r.Method == http.MethodPost && isResponses(r.URL.Path) {
			im.keep(body)
		}
		// The server reads the body again, and answers one too large as
		// it would have.
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		s.ServeHTTP(w, r)
	}))
	return s, im, nil
}

// errReader returns err, or EOF for nil.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}
