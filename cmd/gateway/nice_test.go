package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/proctree/proctreetest"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestAgentsRunBelowTheGateway: with AGENT_NICE=19 a gateway starts each
// agent, and whatever sandbox wraps it, at niceness 19, and keeps the
// run's reaper at its own, so that busy runs yield the CPUs to the gateway
// without slowing the reaper's kills; by default the agent runs at the
// gateway's own.
func TestAgentsRunBelowTheGateway(t *testing.T) {
	bin := buildFakeClaude(t)
	final := recording(t, "text")
	lines := writeLines(t, [][]byte{bracketedDelta(t)})
	for _, nice := range []string{"", "19"} {
		t.Run("nice="+nice, func(t *testing.T) {
			env := benchGatewayEnv(t, bin)
			env["AGENTGATE_AGENTS"] = "claude"
			if nice != "" {
				env["AGENTGATE_AGENT_NICE"] = nice
			}
			g, cmd := startGatewayProcess(t, env, nil)
			checkAgentNice(t, g, cmd, lines, string(final[len(final)-1]), nice != "")
		})
	}
}

// checkAgentNice starts a run on g, whose process is cmd, and checks the
// niceness of every process of the run while its agent waits at a gate:
// 19 below the reaper when niced, the gateway's everywhere otherwise.
func checkAgentNice(t *testing.T, g *gateway, cmd *exec.Cmd, lines, final string, niced bool) {
	gate := filepath.Join(t.TempDir(), "gate")
	s := fakeSettings{Lines: lines, Count: 1, Gate: gate, Final: final}
	id := g.create(t, benchClient(t), map[string]any{"agent": "claude", "prompt": s.prompt(t)})

	gatewayPid := cmd.Process.Pid
	base, _ := proctreetest.Nice(t, strconv.Itoa(gatewayPid))
	want := base
	if niced {
		want = max(base, proctree.MaxNice)
	}
	// The agent waits at the gate: find it, and the processes between it
	// and the gateway.
	var agent int
	var tree []int
	for deadline := time.Now().Add(time.Minute); agent == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no agent process below the gateway after a minute: %v", tree)
		}
		tree = descendants(gatewayPid)
		for _, p := range tree {
			if name, _, _, ok := procStatus(p); ok && name == "fakeclaude" {
				agent = p
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	checked := 0
	for _, p := range tree[1:] {
		f, ok := proctreetest.StatFields(strconv.Itoa(p))
		if !ok {
			continue // gone meanwhile
		}
		nice, _ := strconv.Atoi(f[16])
		name, _, _, _ := procStatus(p)
		switch {
		case f[1] == strconv.Itoa(gatewayPid):
			// The run's reaper, or another child of the gateway.
			if nice != base {
				t.Errorf("the gateway's child %d (%s) at niceness %d, want the gateway's %d", p, name, nice, base)
			}
		case nice != want:
			t.Errorf("process %d (%s) of the run at niceness %d, want %d", p, name, nice, want)
		default:
			checked++
		}
	}
	if checked == 0 {
		t.Fatalf("checked no process of the run; the tree was %v, the agent %d", tree, agent)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := g.waitRun(t, id, time.Minute); r.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v", r.Status, r.Error)
	}
}
