package cline

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/mcptest"
	"github.com/agentgate/agentgate/internal/netns"
	"github.com/agentgate/agentgate/internal/runs"
)

func TestMain(m *testing.M) {
	netns.Main()   // the conformance suite's network shim is this binary
	mcptest.Main() // the conformance suite's MCP server is this binary
	os.Exit(m.Run())
}

func TestCommandOneShot(t *testing.T) {
	cmd, err := New().Command(runs.Invocation{Spec: runs.Spec{Prompt: "hi", Model: "m1", Permission: runs.ReadOnly}})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cmd.Args, " ")
	// A prompt without whitespace gets a newline, or Cline takes it for
	// a subcommand.
	if got != "--json --model=m1 --plan -- hi\n" {
		t.Errorf("args = %q", got)
	}
	if cmd.InterruptSignal == 0 || cmd.Stdin != nil {
		t.Errorf("command = %+v", cmd)
	}
	if !strings.Contains(strings.Join(cmd.Env, " "), "CLINE_SESSION_BACKEND_MODE=local") {
		t.Errorf("env = %v", cmd.Env)
	}
}

// TestCommandResume: only an interactive run resumes a session, over
// ACP, with the argv of a new one.
func TestCommandResume(t *testing.T) {
	_, err := New().Command(runs.Invocation{Spec: runs.Spec{Prompt: "hi there", ResumeSessionID: "x"}})
	var fe *runs.FieldError
	if !errors.Is(err, runs.ErrUnsupported) || !errors.As(err, &fe) || fe.Field != runs.FieldResumeSessionID {
		t.Errorf("one-shot: err = %v", err)
	}
	cmd, err := New().Command(runs.Invocation{Spec: runs.Spec{Prompt: "hi there", Interactive: true, ResumeSessionID: "1796457409360_GikKf_cli"}})
	if err != nil || strings.Join(cmd.Args, " ") != "--acp" {
		t.Errorf("interactive: %q, %v", cmd.Args, err)
	}
	_, err = New().Command(runs.Invocation{Spec: runs.Spec{Prompt: "hi there", Interactive: true, ResumeSessionID: "../x"}})
	if !errors.Is(err, runs.ErrInvalid) || !errors.As(err, &fe) || fe.Field != runs.FieldResumeSessionID {
		t.Errorf("a session id with a slash: err = %v", err)
	}
	if d := New().Describe(); !d.Interaction.ResumesSession || !slices.Contains(d.Fields, runs.FieldResumeSessionID) {
		t.Errorf("description %+v", d)
	}
}

func TestParseVersion(t *testing.T) {
	if v, err := New().ParseVersion([]byte("3.0.65\n")); err != nil || v != "3.0.65" {
		t.Errorf("version = %q, %v", v, err)
	}
	if _, err := New().ParseVersion([]byte("Usage: cline")); err == nil {
		t.Error("usage text read as a version")
	}
}
