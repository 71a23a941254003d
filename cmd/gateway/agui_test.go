package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// nodeTools finds node and the packages a test's Node.js tool needs under
// tools/<dir>/node_modules, or fails naming the script that installs them,
// scripts/install-<dir>.sh. It returns node and the tool's directory.
func nodeTools(t *testing.T, dir string, pkgs ...string) (node, absDir string) {
	t.Helper()
	install := "scripts/install-" + dir + ".sh"
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (Node.js 20 or later is needed): install it, then run %s", install)
	}
	absDir, err = filepath.Abs(filepath.Join("../../tools", dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		if _, err := os.Stat(filepath.Join(absDir, "node_modules", pkg, "package.json")); err != nil {
			t.Fatalf("%s is not installed in tools/%s: run %s", pkg, dir, install)
		}
	}
	return node, absDir
}

// aguiValidator is tools/agui/validate.mjs, which checks AG-UI streams with
// AG-UI's own schemas and client; the test fails without it.
func aguiValidator(t *testing.T) (node, script string) {
	t.Helper()
	node, dir := nodeTools(t, "agui", "@ag-ui/core", "@ag-ui/client", "zod", "rxjs")
	return node, filepath.Join(dir, "validate.mjs")
}

// aguiSummary is what validate.mjs prints: the runs it saw, and the
// messages, state and pending interrupts the AG-UI client built.
type aguiSummary struct {
	Runs []struct {
		Types []string `json:"types"`
	} `json:"runs"`
	// Messages are as the client holds them, to send back as they are.
	Messages []json.RawMessage `json:"messages"`
	State    struct {
		RunID     string `json:"run_id"`
		SessionID string `json:"session_id"`
		Status    string `json:"status"`
		Usage     struct {
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
		FilesChanged []struct {
			Path string `json:"path"`
			Kind string `json:"kind"`
		} `json:"files_changed"`
	} `json:"state"`
	PendingInterrupts []struct{ ID, Reason, ToolCallID string } `json:"pendingInterrupts"`
}

// validateAGUI runs validate.mjs with args (and stdin), failing the test
// unless it finds everything valid.
func validateAGUI(t *testing.T, stdin []byte, input string, args ...string) aguiSummary {
	t.Helper()
	node, script := aguiValidator(t)
	path := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(path, []byte(input), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script, "--input", path}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("validate.mjs %v: %v\n%s", args, err, stderr.Bytes())
	}
	var s aguiSummary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("validate.mjs printed %q: %v", stdout.Bytes(), err)
	}
	return s
}

// postAGUI posts a RunAgentInput as an AG-UI HttpAgent does and reads the
// whole answer, which ends with the AG-UI run.
func (g *gateway) postAGUI(t *testing.T, input string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/ag-ui", strings.NewReader(input))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("POST /v1/ag-ui = %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return b
}

// aguiData is the data of each event of an AG-UI stream.
func aguiData(b []byte) []string {
	var out []string
	for _, block := range strings.Split(string(b), "\n\n") {
		for _, line := range strings.Split(block, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

func aguiTypes(t *testing.T, data []string) []string {
	var out []string
	for _, d := range data {
		var e struct{ Type string }
		if err := json.Unmarshal([]byte(d), &e); err != nil {
			t.Fatalf("event %q: %v", d, err)
		}
		out = append(out, e.Type)
	}
	return out
}

// TestAGUIEndToEnd runs the real claude CLI through POST /v1/ag-ui: the
// first AG-UI run ends with the interrupt of the Bash call's approval, the
// resume answers it and the second ends with the run's success; both, and
// the run's whole AG-UI stream, pass AG-UI's own schemas and client.
func TestAGUIEndToEnd(t *testing.T) {
	mock := startMock(t, anthropic.ToolTurn("echo hello > out.txt", "I wrote out.txt."))
	g := startGateway(t, gatewayEnv(t, t.TempDir()), mockCreds(mock))

	input := `{"threadId":"thread-e2e","runId":"run-1","state":{},"tools":[],"context":[],
	  "messages":[{"id":"u1","role":"user","content":"Write hello to out.txt"}],
	  "forwardedProps":{"agent":"claude","permission":"workspace_write","approvals":"ask"}}`
	first := g.postAGUI(t, input)
	sum := validateAGUI(t, first, input)
	types := aguiTypes(t, aguiData(first))
	if !subsequence(types, []string{"RUN_STARTED", "STATE_SNAPSHOT", "REASONING_START", "TEXT_MESSAGE_START",
		"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "STATE_DELTA", "RUN_FINISHED"}) || types[len(types)-1] != "RUN_FINISHED" {
		t.Fatalf("first AG-UI run %v", types)
	}
	if len(sum.PendingInterrupts) != 1 || sum.PendingInterrupts[0].Reason != "tool_call" || sum.State.Status != "awaiting_approval" {
		t.Fatalf("after the first AG-UI run: interrupts %+v, state %+v", sum.PendingInterrupts, sum.State)
	}
	interrupt := sum.PendingInterrupts[0]
	runID := sum.State.RunID
	if !strings.HasPrefix(interrupt.ID, runID+"/") || interrupt.ToolCallID == "" {
		t.Fatalf("interrupt %+v of run %s", interrupt, runID)
	}
	g.waitRecord(t, runID, "awaiting the approval", func(r runs.Run) bool {
		return r.Activity == runs.AwaitingApproval && len(r.PendingApprovals) == 1
	})

	resume := `{"threadId":"thread-e2e","runId":"run-2","state":{},"tools":[],"context":[],
	  "messages":[{"id":"u1","role":"user","content":"Write hello to out.txt"}],
	  "resume":[{"interruptId":"` + interrupt.ID + `","status":"resolved","payload":{"approved":true}}]}`
	second := g.postAGUI(t, resume)
	sum = validateAGUI(t, second, resume)
	types = aguiTypes(t, aguiData(second))
	if !subsequence(types, []string{"RUN_STARTED", "STATE_SNAPSHOT", "CUSTOM", "TOOL_CALL_RESULT", "TEXT_MESSAGE_START",
		"TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"}) || types[len(types)-1] != "RUN_FINISHED" {
		t.Fatalf("second AG-UI run %v", types)
	}
	last := aguiData(second)[len(types)-1]
	if !strings.Contains(last, `"outcome":{"type":"success"}`) || !strings.Contains(last, `"result":"I wrote out.txt."`) {
		t.Fatalf("the run ends %s", last)
	}
	// The Bash call wrote out.txt: no edit tool said so, the run's
	// changed files do.
	if f := sum.State.FilesChanged; len(f) != 1 || f[0].Path != "out.txt" || f[0].Kind != string(runs.ChangeAdd) {
		t.Fatalf("files_changed at the end %+v, want out.txt added", f)
	}
	done := g.waitRun(t, runID, time.Minute)
	if done.Status != runs.Succeeded || len(done.PendingApprovals) != 0 {
		t.Fatalf("run %+v", done)
	}
	if out, err := os.ReadFile(filepath.Join(g.DataDir, "workspaces", runID, "out.txt")); err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Fatalf("the approved tool did not run: %q %v", out, err)
	}
	// Sending the same resume again shows the same AG-UI run: a resume is
	// safe to replay.
	if again := g.postAGUI(t, resume); !slices.Equal(aguiTypes(t, aguiData(again)), types) {
		t.Errorf("the resume sent again gave %v", aguiTypes(t, aguiData(again)))
	}

	// The run's own AG-UI stream has both AG-UI runs.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/v1/runs/"+runID+"/events?format=ag-ui", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET events?format=ag-ui = %d %v", resp.StatusCode, err)
	}
	view := `{"threadId":"` + runID + `","runId":"` + runID + `","messages":[]}`
	sum = validateAGUI(t, whole, view)
	if sum.State.Status != "succeeded" || sum.State.SessionID == "" || sum.State.Usage.OutputTokens == 0 ||
		len(sum.State.FilesChanged) != 1 || sum.State.FilesChanged[0].Path != "out.txt" {
		t.Errorf("the whole stream's state %+v", sum.State)
	}
	var said []string
	for _, raw := range sum.Messages {
		var m struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		}
		json.Unmarshal(raw, &m)
		if s, ok := m.Content.(string); ok && s != "" {
			said = append(said, m.Role+": "+s)
		}
	}
	if !slices.Contains(said, "assistant: I wrote out.txt.") || !slices.Contains(said, "user: Write hello to out.txt") {
		t.Errorf("the whole stream's messages %q", said)
	}
	if n := strings.Count(string(whole), `"type":"RUN_STARTED"`); n != 2 {
		t.Errorf("the whole stream has %d AG-UI runs, want 2", n)
	}
	assertNoProcesses(t, runID)
}

// TestAGUIHttpAgentEndToEnd drives the gateway with AG-UI's own HttpAgent,
// as a front end does: it runs, gets the interrupt, approves it in the
// next run of the thread, and then asks a follow-up question on the same
// thread, which continues the run's session.
func TestAGUIHttpAgentEndToEnd(t *testing.T) {
	mock := startMock(t, anthropic.ToolTurn("echo hi > hi.txt", "Done."))
	g := startGateway(t, gatewayEnv(t, t.TempDir()), mockCreds(mock))
	input := `{"threadId":"thread-http","runId":"r1","messages":[{"id":"u1","role":"user","content":"Write hi.txt"}],
	  "forwardedProps":{"agent":"claude","approvals":"ask"}}`
	sum := validateAGUI(t, nil, input, "--url", g.URL+"/v1/ag-ui", "--approve")
	if len(sum.Runs) != 2 || len(sum.PendingInterrupts) != 0 || sum.State.Status != "succeeded" {
		t.Fatalf("the HttpAgent's runs %+v, interrupts %+v, state %+v", sum.Runs, sum.PendingInterrupts, sum.State)
	}
	if got := sum.Runs[1].Types; got[0] != "RUN_STARTED" || got[len(got)-1] != "RUN_FINISHED" {
		t.Fatalf("the resumed run %v", got)
	}
	first := sum.State.RunID
	session := sum.State.SessionID
	if first == "" || session == "" {
		t.Fatalf("state %+v", sum.State)
	}

	// A follow-up on the thread: the state the client holds names the run,
	// whose session the new run resumes.
	state, _ := json.Marshal(sum.State)
	history := append(sum.Messages, json.RawMessage(`{"id":"u2","role":"user","content":"Thanks. Anything else?"}`))
	hist, _ := json.Marshal(history)
	follow := `{"threadId":"thread-http","runId":"r3","state":` + string(state) + `,"messages":` + string(hist) + `}`
	sum = validateAGUI(t, nil, follow, "--url", g.URL+"/v1/ag-ui")
	if len(sum.Runs) != 1 || sum.State.RunID == first || sum.State.Status != "succeeded" {
		t.Fatalf("the follow-up: runs %+v, state %+v", sum.Runs, sum.State)
	}
	next := g.get(t, sum.State.RunID)
	if next.Agent != "claude" {
		t.Fatalf("the follow-up run %+v", next)
	}
	var started struct {
		Data struct {
			ResumeSessionID string `json:"resume_session_id"`
		}
	}
	_, evs := g.stream(t, next.ID, "")
	for _, e := range evs {
		if e.Type == "run.started" {
			json.Unmarshal([]byte(e.Data), &started)
		}
	}
	if started.Data.ResumeSessionID != session {
		t.Fatalf("the follow-up resumed session %q, want %q", started.Data.ResumeSessionID, session)
	}
}

// TestAGUIFailedRunEndToEnd: a run that fails ends its AG-UI run with
// RUN_ERROR, its code the error class.
func TestAGUIFailedRunEndToEnd(t *testing.T) {
	mock := startMock(t, anthropic.Failure(http.StatusUnauthorized))
	g := startGateway(t, gatewayEnv(t, t.TempDir()), mockCreds(mock))
	input := `{"threadId":"thread-fail","runId":"r1","messages":[{"id":"u1","role":"user","content":"hi"}],"forwardedProps":{"agent":"claude"}}`
	b := g.postAGUI(t, input)
	validateAGUI(t, b, input)
	data := aguiData(b)
	var end struct{ Type, Code, Message string }
	if err := json.Unmarshal([]byte(data[len(data)-1]), &end); err != nil {
		t.Fatal(err)
	}
	if end.Type != "RUN_ERROR" || end.Code != "not_authenticated" || end.Message == "" {
		t.Fatalf("the failed run ends %s", data[len(data)-1])
	}
	// A RunAgentInput the gateway cannot run is a 400 naming the field.
	resp, err := http.Post(g.URL+"/v1/ag-ui", "application/json", strings.NewReader(
		`{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user","content":"hi"}],"forwardedProps":{"agent":"claude","permision":"full"}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error struct{ Code, Field string } }
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || e.Error.Code != "unknown_field" || e.Error.Field != "forwardedProps.permision" {
		t.Fatalf("a typo in forwardedProps = %d %+v", resp.StatusCode, e)
	}
}
