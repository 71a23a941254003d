package main

// End-to-end: an editor built on the official ACP SDK
// (tools/acp-client/editor.mjs) drives the agentgate binary's acp command
// against a real gateway running the real claude CLI against the mock
// Anthropic server.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// acpEditorTimeout bounds the editor's whole script, against a hang only.
const acpEditorTimeout = 5 * time.Minute

// clientBinary builds the agentgate client once, beside the gateway's
// binary, for a process that an editor starts.
func clientBinary(t *testing.T) string {
	t.Helper()
	gatewayBinary(t) // makes suite.buildDir
	bin := filepath.Join(suite.buildDir, "agentgate")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	out, err := exec.Command("go", "build", "-o", bin, "github.com/agentgate/agentgate/cmd/agentgate").CombinedOutput()
	if err != nil {
		t.Fatalf("go build agentgate: %v\n%s", err, out)
	}
	return bin
}

// acpEditor is tools/acp-client/editor.mjs with node, or the test fails:
// the check of the bridge against the SDK is not optional.
func acpEditor(t *testing.T) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (Node.js 20 or later is needed): install it, then run scripts/install-acp-client.sh")
	}
	dir, err := filepath.Abs("../../tools/acp-client")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk", "package.json")); err != nil {
		t.Fatal("@agentclientprotocol/sdk is not installed in tools/acp-client: run scripts/install-acp-client.sh")
	}
	return node, filepath.Join(dir, "editor.mjs")
}

// acpUpdate is one session/update as the editor got it.
type acpUpdate struct {
	SessionUpdate string          `json:"sessionUpdate"`
	ToolCallID    string          `json:"toolCallId"`
	Status        string          `json:"status"`
	Content       json.RawMessage `json:"content"`
}

// acpTranscript is what editor.mjs prints.
type acpTranscript struct {
	Initialize struct {
		ProtocolVersion int `json:"protocolVersion"`
		AgentInfo       struct {
			Name string `json:"name"`
		} `json:"agentInfo"`
	} `json:"initialize"`
	SessionID string `json:"session_id"`
	Turns     []struct {
		Prompt      string      `json:"prompt"`
		Updates     []acpUpdate `json:"updates"`
		Permissions []struct {
			ToolCall struct {
				ToolCallID string `json:"toolCallId"`
				RawInput   struct {
					Command string `json:"command"`
				} `json:"rawInput"`
			} `json:"toolCall"`
			Options []struct {
				OptionID string `json:"optionId"`
				Kind     string `json:"kind"`
			} `json:"options"`
		} `json:"permissions"`
		StopReason string `json:"stop_reason"`
		CancelSent bool   `json:"cancel_sent"`
		Meta       struct {
			Agentgate struct {
				RunID string `json:"run_id"`
			} `json:"agentgate"`
		} `json:"meta"`
		Error json.RawMessage `json:"error"`
	} `json:"turns"`
	Exit struct {
		Code   *int    `json:"code"`
		Signal *string `json:"signal"`
	} `json:"exit"`
}

func TestACPEditorRunsClaudeThroughTheGateway(t *testing.T) {
	g := sharedGateway(t)
	bin := clientBinary(t)
	node, script := acpEditor(t)
	plan, _ := json.Marshal(map[string]any{
		"prompts":     []string{"Write hello to out.txt", markText + " Thanks.", markLong + " wait a minute"},
		"cancel_turn": 2,
	})
	ctx, cancel := context.WithTimeout(context.Background(), acpEditorTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, string(plan), bin, "--url", g.URL, "acp", "--agent", "claude")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "AGENTGATE_API_KEY=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("editor.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	var tr acpTranscript
	if err := json.Unmarshal(stdout.Bytes(), &tr); err != nil {
		t.Fatalf("the transcript %q: %v\nstderr:\n%s", &stdout, err, &stderr)
	}
	if tr.Initialize.ProtocolVersion != 1 || tr.Initialize.AgentInfo.Name != "agentgate" || tr.SessionID == "" || len(tr.Turns) != 3 {
		t.Fatalf("transcript: %s\nstderr:\n%s", &stdout, &stderr)
	}
	if tr.Exit.Code == nil || *tr.Exit.Code != 0 {
		t.Fatalf("agentgate acp exited %+v at the end of its input; stderr:\n%s", tr.Exit, &stderr)
	}

	// Turn 1: the Bash call asked the editor, its allow ran it.
	first := tr.Turns[0]
	if first.StopReason != "end_turn" || len(first.Permissions) != 1 || first.Permissions[0].ToolCall.RawInput.Command != "echo hello > out.txt" {
		t.Fatalf("turn 1: %s\nstderr:\n%s", &stdout, &stderr)
	}
	kinds := map[string]bool{}
	for _, o := range first.Permissions[0].Options {
		kinds[o.Kind] = true
	}
	if !kinds["allow_once"] || !kinds["reject_once"] {
		t.Fatalf("permission options %+v", first.Permissions[0].Options)
	}
	toolID := first.Permissions[0].ToolCall.ToolCallID
	var statuses []string
	for _, u := range first.Updates {
		if u.ToolCallID == toolID {
			statuses = append(statuses, u.SessionUpdate+":"+u.Status)
		}
	}
	if strings.Join(statuses, " ") != "tool_call:pending tool_call_update:in_progress tool_call_update:completed" {
		t.Fatalf("the tool call's updates: %v", statuses)
	}
	if text := agentText(first.Updates); !strings.Contains(text, "I wrote out.txt.") {
		t.Fatalf("turn 1's text %q", text)
	}
	runID := first.Meta.Agentgate.RunID
	if runID == "" {
		t.Fatalf("turn 1 names no run: %s", &stdout)
	}
	if res := g.cli(t, "files", runID, "out.txt"); res.code != exitOK || res.stdout != "hello\n" {
		t.Fatalf("out.txt on the gateway: %s", res)
	}

	// Turn 2: a follow-up in the same session, its text streamed.
	second := tr.Turns[1]
	if second.StopReason != "end_turn" || len(second.Permissions) != 0 || !strings.Contains(agentText(second.Updates), textAnswer) {
		t.Fatalf("turn 2: stop %q, %d permissions, text %q", second.StopReason, len(second.Permissions), agentText(second.Updates))
	}

	// Turn 3: the long call allowed, then cancelled by the editor.
	third := tr.Turns[2]
	if !third.CancelSent || third.StopReason != "cancelled" || len(third.Permissions) != 1 {
		t.Fatalf("turn 3: cancel sent %v, stop %q, error %s, %d permissions", third.CancelSent, third.StopReason, third.Error, len(third.Permissions))
	}
	for _, turn := range tr.Turns[1:] {
		if turn.Meta.Agentgate.RunID != runID {
			t.Fatalf("a later turn ran in run %q, not the session's %q", turn.Meta.Agentgate.RunID, runID)
		}
	}

	// The gateway's record: three turns, two approvals allowed by the
	// client, the last turn interrupted, the run closed at the end.
	res := g.cli(t, "--json", "watch", runID)
	if res.code == exitUsage || res.code == exitAPIError || res.code == exitUnreachable {
		t.Fatalf("watch %s: %s", runID, res)
	}
	var turnStatuses, decisions []string
	for _, ev := range eventLines(t, res.stdout) {
		var d struct {
			Status   string `json:"status"`
			Decision string `json:"decision"`
			Reason   string `json:"reason"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		switch ev.Type {
		case "turn.completed":
			turnStatuses = append(turnStatuses, d.Status)
		case "approval.resolved":
			decisions = append(decisions, d.Decision+"/"+d.Reason)
		}
	}
	if strings.Join(turnStatuses, " ") != "succeeded succeeded cancelled" {
		t.Fatalf("turns on the gateway: %v", turnStatuses)
	}
	if strings.Join(decisions, " ") != "allow/client allow/client" {
		t.Fatalf("approvals on the gateway: %v", decisions)
	}
	if rec := g.record(t, runID); !rec.Interactive || rec.Approvals != "ask" || rec.Metadata["acp_cwd"] != cmd.Dir {
		t.Fatalf("record = %+v", rec)
	}
}

// agentText joins a turn's agent_message_chunk texts.
func agentText(updates []acpUpdate) string {
	var b strings.Builder
	for _, u := range updates {
		if u.SessionUpdate != "agent_message_chunk" {
			continue
		}
		var c struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(u.Content, &c)
		b.WriteString(c.Text)
	}
	return b.String()
}
