package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestGivenAndLeftEndToEnd drives what a run is given and what it leaves
// through the gateway's HTTP API, with the real Claude Code under the
// gateway's sandbox: an image uploaded with POST /v1/files and attached by
// id, an MCP server (this test binary) whose secret must appear nowhere,
// and then a run whose changes come back as a diff, a list, a file and an
// archive.
func TestGivenAndLeftEndToEnd(t *testing.T) {
	const secret = "mcp-secret-value-7f3a9c"
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mock := startMock(t, anthropic.Sequence(
		anthropic.MCPCall(mcptest.Name, "show_token", nil, "The token is shown."),
		anthropic.MCPCall(mcptest.Name, "show_token", nil, "The token is shown."),
		anthropic.ToolTurn("printf 'hello\\n' > made.txt", "I wrote made.txt."),
	))
	settings := gatewayEnv(t, t.TempDir())
	settings["AGENTGATE_AGENTS"] = "claude"
	settings["AGENTGATE_MCP_COMMANDS"] = exe
	g := startGateway(t, settings, mockCreds(mock))

	// An image, uploaded as multipart/form-data.
	pic := pngBytes(t)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "dot.png")
	fw.Write(pic)
	mw.Close()
	code, b := httpDo(t, http.MethodPost, g.URL+"/v1/files", mw.FormDataContentType(), body.Bytes())
	var file struct {
		ID        string `json:"id"`
		MediaType string `json:"media_type"`
		Width     int    `json:"width"`
	}
	if err := json.Unmarshal(b, &file); code != http.StatusCreated || err != nil || file.MediaType != "image/png" || file.Width != 2 {
		t.Fatalf("POST /v1/files = %d %s", code, b)
	}
	// Bytes that only claim to be an image are refused.
	if code, b := httpDo(t, http.MethodPost, g.URL+"/v1/files", "image/png", []byte("\x89PNG\r\n\x1a\nnot really")); code != http.StatusBadRequest || !strings.Contains(string(b), `"invalid_attachment"`) {
		t.Errorf("a fake PNG: %d %s", code, b)
	}
	// A command the operator did not allow is refused, naming it.
	if code, b := httpDo(t, http.MethodPost, g.URL+"/v1/runs", "application/json",
		[]byte(`{"agent":"claude","prompt":"x","mcp_servers":{"x":{"command":"/bin/sh"}}}`)); code != http.StatusBadRequest ||
		!strings.Contains(string(b), `"mcp_command_not_allowed"`) || !strings.Contains(string(b), "/bin/sh") {
		t.Errorf("a command not allowed: %d %s", code, b)
	}

	servers, _ := json.Marshal(map[string]any{mcptest.Name: map[string]any{
		"command": exe, "args": []string{"-test.run=^$"},
		"env": map[string]string{mcptest.ServeEnv: "1", mcptest.TokenEnv: secret},
	}})
	r := g.post(t, `{"agent":"claude","prompt":"Show the token, and look at the image.","permission":"workspace_write",`+
		`"attachments":[{"file_id":"`+file.ID+`"}],"mcp_servers":`+string(servers)+`}`)
	_, evs := g.stream(t, r.ID, "")
	done := g.waitRun(t, r.ID, 12*time.Minute)
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v; events %v", done.Status, done.Error, types(evs))
	}
	var mcpCall bool
	all := &strings.Builder{}
	for _, e := range evs {
		all.WriteString(e.Data)
		if e.Type == string(runs.EventToolCallStarted) {
			var d runs.ToolCallStartedData
			if e.data(&d) == nil && d.MCPServer == mcptest.Name && d.MCPTool == "show_token" {
				mcpCall = true
			}
		}
		if e.Type == string(runs.EventToolCallCompleted) && !strings.Contains(e.Data, "token:") {
			t.Errorf("the MCP tool's result is not in its event: %s", e.Data)
		}
	}
	if !mcpCall {
		t.Errorf("no tool_call.started names the MCP server and tool: %v", types(evs))
	}
	_, record := httpDo(t, http.MethodGet, g.URL+"/v1/runs/"+r.ID, "", nil)
	if strings.Contains(all.String(), secret) || strings.Contains(string(record), secret) {
		t.Errorf("the MCP server's secret reached the events or the record")
	}
	if !mock.Ledger().ImageSeen(base64.StdEncoding.EncodeToString(pic)) {
		t.Error("the model never received the uploaded image")
	}
	if strings.Contains(all.String(), base64.StdEncoding.EncodeToString(pic)) {
		t.Error("an event carries the image's bytes")
	}

	// A run that writes a file leaves its diff, list, file and archive.
	r = g.post(t, `{"agent":"claude","prompt":"Write hello to made.txt","permission":"workspace_write"}`)
	if done := g.waitRun(t, r.ID, 12*time.Minute); done.Status != runs.Succeeded || len(done.Files) != 1 ||
		done.Files[0] != (runs.ChangedFile{Path: "made.txt", Kind: runs.ChangeAdd, Size: 6}) {
		t.Fatalf("run %s, files %+v, error %+v", done.Status, done.Files, done.Error)
	}
	if code, b := httpDo(t, http.MethodGet, g.URL+"/v1/runs/"+r.ID+"/diff", "", nil); code != http.StatusOK ||
		!strings.Contains(string(b), "+++ b/made.txt") || !strings.Contains(string(b), "\n+hello\n") {
		t.Errorf("diff = %d %q", code, b)
	}
	if code, b := httpDo(t, http.MethodGet, g.URL+"/v1/runs/"+r.ID+"/files/made.txt", "", nil); code != http.StatusOK || string(b) != "hello\n" {
		t.Errorf("file = %d %q", code, b)
	}
	if code, b := httpDo(t, http.MethodGet, g.URL+"/v1/runs/"+r.ID+"/files/..%2F..%2Fetc%2Fpasswd", "", nil); code != http.StatusBadRequest {
		t.Errorf("a path out of the run's directory: %d %s", code, b)
	}
	code, b = httpDo(t, http.MethodGet, g.URL+"/v1/runs/"+r.ID+"/archive", "", nil)
	if code != http.StatusOK {
		t.Fatalf("archive = %d %s", code, b)
	}
	if got := tarFile(t, b, "made.txt"); got != "hello\n" {
		t.Errorf("made.txt in the archive = %q", got)
	}
}

func httpDo(t *testing.T, method, url, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// pngBytes is a real 2×1 PNG.
func pngBytes(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 2, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// tarFile returns the content of name in the tar.gz archive b.
func tarFile(t *testing.T, b []byte, name string) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s is not in the archive: %v", name, err)
		}
		if strings.TrimPrefix(h.Name, "./") == name {
			c, _ := io.ReadAll(tr)
			return string(c)
		}
	}
}
