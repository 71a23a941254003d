package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestNewSandbox(t *testing.T) {
	ctx := context.Background()
	sb, err := newSandbox(ctx, "cli-only", nil, zap.NewNop())
	if sb != nil || err != nil {
		t.Errorf("cli-only = %v, %v; want no sandbox", sb, err)
	}
	if _, err := newSandbox(ctx, "sometimes", nil, zap.NewNop()); err == nil || !strings.Contains(err.Error(), "cli-only") {
		t.Errorf("an unknown mode = %v", err)
	}
	for _, mode := range []string{"auto", "bubblewrap"} {
		sb, err := newSandbox(ctx, mode, []string{t.TempDir()}, zap.NewNop())
		if err != nil || sb == nil || sb.Enforcement() != "bubblewrap" {
			t.Fatalf("%s: %v, %v (bubblewrap must be installed: apt-get install bubblewrap)", mode, sb, err)
		}
	}
}

// TestNewSandboxRefuses: a machine without bwrap refuses to start in
// auto mode, and says how to opt out.
func TestNewSandboxRefuses(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, mode := range []string{"auto", "bubblewrap"} {
		sb, err := newSandbox(context.Background(), mode, nil, zap.NewNop())
		if sb != nil || err == nil || !strings.Contains(err.Error(), "AGENTGATE_SANDBOX=cli-only") || !strings.Contains(err.Error(), "bwrap") {
			t.Errorf("%s without bwrap = %v, %v", mode, sb, err)
		}
	}
}

// TestAgentsCannotSeeGitTokenFiles: the token files the git credentials
// name ("@/path") are hidden from agents, as the credentials file is;
// otherwise a confined agent could read a token from the host's files.
func TestAgentsCannotSeeGitTokenFiles(t *testing.T) {
	dir := t.TempDir()
	token, creds := filepath.Join(dir, "github-token"), filepath.Join(dir, "git-credentials")
	if err := os.WriteFile(token, []byte("ghp_"+strings.Repeat("x", 36)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(creds, []byte("* gh https://github.com/acme @"+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &instance{cfg: config{DataDir: filepath.Join(dir, "data"), GitCredentialsFile: creds}, log: zap.NewNop()}
	defer g.close()
	if err := g.openWorkspaces(context.Background()); err != nil {
		t.Fatal(err)
	}
	hide, err := g.hiddenPaths()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{creds, token} {
		if !slices.Contains(hide, p) {
			t.Errorf("agents may see %s: the hidden paths are %q", p, hide)
		}
	}
}
