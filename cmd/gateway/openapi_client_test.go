package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// openAPIClientTools is tools/openapi-client: client.ts, and the pinned
// openapi-typescript, openapi-fetch and TypeScript that build it. The
// test fails without them.
func openAPIClientTools(t *testing.T) (node, dir string) {
	t.Helper()
	return nodeTools(t, "openapi-client", "openapi-typescript", "openapi-fetch", "typescript", "@types/node")
}

// runTool runs a command of the client's build, failing the test with its
// output if it fails.
func runTool(t *testing.T, dir string, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s%s", filepath.Base(name), args, err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes()
}

// TestGeneratedClientDrivesARun generates a TypeScript client from the spec
// the gateway serves (openapi-typescript's types, openapi-fetch's calls),
// type-checks a program written against it with tsc --strict, which must
// find every event's data typed by its type, and runs it: it lists the
// agents, is refused a bad run with a typed error, creates a claude run
// that uses a tool, reads its events as NDJSON, and reads the run.
func TestGeneratedClientDrivesARun(t *testing.T) {
	node, tools := openAPIClientTools(t)
	mock := startMock(t, anthropic.ToolTurn("echo hi > out.txt", "I wrote out.txt."))
	g := startGateway(t, gatewayEnv(t, t.TempDir()), mockCreds(mock))

	// The spec as the gateway serves it.
	resp, err := http.Get(g.URL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi.yaml = %d %v", resp.StatusCode, err)
	}

	// The client's build: the generated types beside client.ts, compiled
	// with the pinned tsc.
	work := t.TempDir()
	for name, body := range map[string][]byte{
		"openapi.yaml": spec,
		"package.json": []byte(`{"type":"module","private":true}` + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(work, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"client.ts", "tsconfig.json"} {
		b, err := os.ReadFile(filepath.Join(tools, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(tools, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tools, "node_modules", ".bin")
	runTool(t, work, filepath.Join(bin, "openapi-typescript"), "openapi.yaml", "-o", "schema.d.ts")
	runTool(t, work, filepath.Join(bin, "tsc"), "-p", ".", "--outDir", ".")

	out := runTool(t, work, node, "client.js", g.URL, "Write hi to out.txt")
	var got struct {
		Claude *struct {
			Installed     bool   `json:"installed"`
			Compatibility string `json:"compatibility"`
		} `json:"claude"`
		Refused *struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		} `json:"refused"`
		ID        string   `json:"id"`
		Types     []string `json:"types"`
		Seqs      []uint64 `json:"seqs"`
		Messages  []string `json:"messages"`
		Tools     []string `json:"tools"`
		Completed *struct {
			Status       string `json:"status"`
			Result       string `json:"result"`
			OutputTokens int64  `json:"output_tokens"`
		} `json:"completed"`
		Run struct {
			Status   string            `json:"status"`
			Result   string            `json:"result"`
			Metadata map[string]string `json:"metadata"`
		} `json:"run"`
		Missing struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		} `json:"missing"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client.js printed %q: %v", out, err)
	}
	if got.Claude == nil || !got.Claude.Installed || got.Claude.Compatibility != runs.CompatVerified {
		t.Errorf("claude as the client saw it: %+v", got.Claude)
	}
	if got.Refused == nil || got.Refused.Status != http.StatusBadRequest || got.Refused.Code != "unknown_agent" {
		t.Errorf("a run of an unknown agent: %+v, want 400 unknown_agent", got.Refused)
	}
	if len(got.Types) == 0 || got.Types[len(got.Types)-1] != string(runs.EventRunCompleted) {
		t.Fatalf("events %v: want them to end with run.completed", got.Types)
	}
	for i, seq := range got.Seqs {
		if seq != uint64(i+1) {
			t.Fatalf("seqs %v: not 1, 2, … in order", got.Seqs)
		}
	}
	for _, want := range []runs.EventType{runs.EventRunStarted, runs.EventToolCallStarted, runs.EventToolCallCompleted, runs.EventMessageCompleted} {
		if !slices.Contains(got.Types, string(want)) {
			t.Errorf("events %v: no %s", got.Types, want)
		}
	}
	if len(got.Tools) == 0 || !slices.Contains(got.Messages, "I wrote out.txt.") {
		t.Errorf("tools %v, messages %q", got.Tools, got.Messages)
	}
	if c := got.Completed; c == nil || c.Status != string(runs.Succeeded) || c.Result != "I wrote out.txt." || c.OutputTokens == 0 {
		t.Errorf("run.completed as the client read it: %+v", got.Completed)
	}
	if got.Run.Status != string(runs.Succeeded) || got.Run.Result != "I wrote out.txt." || got.Run.Metadata["client"] != "openapi-fetch" {
		t.Errorf("the run as the client read it: %+v", got.Run)
	}
	if got.Missing.Status != http.StatusNotFound || got.Missing.Code != "not_found" {
		t.Errorf("an unknown run: %+v, want 404 not_found", got.Missing)
	}
	if b, err := os.ReadFile(filepath.Join(g.DataDir, "workspaces", got.ID, "out.txt")); err != nil || string(bytes.TrimSpace(b)) != "hi" {
		t.Errorf("the run's tool did not run: %q %v", b, err)
	}
	assertNoProcesses(t, got.ID)
}
