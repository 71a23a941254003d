package main

import (
	"context"
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
