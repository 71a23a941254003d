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

// TestCommandResume: a run that resumes a session runs over ACP, a
// one-shot one too (`cline --json` cannot resume), with the argv of a
// new session; its images are refused, as over ACP Cline drops them.
func TestCommandResume(t *testing.T) {
	for _, interactive := range []bool{false, true} {
		spec := runs.Spec{Prompt: "hi there", Interactive: interactive, ResumeSessionID: "1796457409360_GikKf_cli"}
		cmd, err := New().Command(runs.Invocation{Spec: spec})
		if err != nil || strings.Join(cmd.Args, " ") != "--acp" || !New().PrefersSession(spec) {
			t.Errorf("interactive %v: %q, %v", interactive, cmd.Args, err)
		}
		if _, ok := New().NewDecoder(runs.Invocation{Spec: spec}).(runs.Session); !ok {
			t.Errorf("interactive %v: the decoder is no runs.Session", interactive)
		}
	}
	if New().PrefersSession(runs.Spec{Prompt: "p"}) {
		t.Error("a new one-shot run prefers ACP")
	}
	var fe *runs.FieldError
	_, err := New().Command(runs.Invocation{Spec: runs.Spec{Prompt: "hi", ResumeSessionID: "1796457409360_GikKf_cli",
		Attachments: []runs.Attachment{{Name: "a.png"}}}})
	if !errors.Is(err, runs.ErrUnsupported) || !errors.As(err, &fe) || fe.Field != runs.FieldAttachments {
		t.Errorf("a resumed run with images: err = %v", err)
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
