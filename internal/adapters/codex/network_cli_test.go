package codex

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/agenttest/proxytest"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestProxyRealCLI runs the installed codex with HTTP_PROXY, HTTPS_PROXY
// and ALL_PROXY (and their lower-case forms, NO_PROXY empty) naming a
// logging proxy, and the adapter's ProxyEnv, as the gateway runs it in a
// run's network namespace: the model's requests, a command's curl and the
// requests to an MCP server given by URL must all go through the proxy,
// and nothing else may be asked of it but the adapter's ModelEndpoints.
// It fails when the CLI reaches the mock directly.
func TestProxyRealCLI(t *testing.T) {
	sink := proxytest.StartSink(t)
	mcp := startHTTPMCP(t, "proxy-token")
	for _, c := range []struct {
		name   string
		sc     openai.Scenario
		spec   runs.Spec
		target string // what the run must reach through the proxy besides the model
	}{
		// Full: in workspace_write Codex's own sandbox takes the
		// command's network away.
		{"tool command", openai.ToolTurn("curl -sS "+sink+"/tool-marker", "The command ran."),
			runs.Spec{Prompt: "Fetch the marker.", Permission: runs.Full}, proxytest.Target(sink)},
		{"remote MCP server", openai.MCPTurn("remote", "reverse_text", `{"text":"hello mcp"}`, "Reversed."),
			runs.Spec{Prompt: "Reverse hello mcp remotely.", Permission: runs.WorkspaceWrite,
				MCPServers: map[string]runs.MCPServer{"remote": {URL: mcp.URL}}},
			proxytest.Target(mcp.URL)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := proxytest.Start(t)
			model, endpoints := runProxied(t, p, c.sc, c.spec)
			t.Logf("the proxy carried %v", p.Requests())
			if got := p.To(model); !slices.ContainsFunc(got, isResponses) {
				t.Errorf("the proxy carried no model request to %s: the CLI bypassed it (it carried %v)", model, p.Requests())
			}
			if got := p.To(c.target); len(got) == 0 {
				t.Errorf("the proxy carried nothing to %s (it carried %v)", c.target, p.Requests())
			}
			if extra := p.Unexpected(append(endpoints, c.target)...); len(extra) > 0 {
				t.Errorf("the CLI asked the proxy for more than its model endpoints %v: %v", endpoints, extra)
			}
		})
	}
}

func isResponses(r proxytest.Request) bool {
	return r.Method == "POST" && strings.HasSuffix(r.Path, "/responses")
}

// runProxied runs the real CLI's conversation once for spec against a
// mock playing sc, with the proxy's variables, and requires it to
// succeed. It returns the mock's host:port and the adapter's
// ModelEndpoints for the run's home.
func runProxied(t *testing.T, p *proxytest.Proxy, sc openai.Scenario, spec runs.Spec) (string, []string) {
	t.Helper()
	bin := codexBin(t)
	srv, err := openai.Start("127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	home, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(mockConfig(srv.URL, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	spec.Model = openai.DefaultModel
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: dir, Bin: bin, Home: home,
		Files: runs.HostFiles{}, Timeout: time.Minute, CLIVersion: VerifiedVersion}
	a := New()
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	env := append(agenttest.MinimalEnv(home), cmd.Env...)
	env = append(env, testKeyEnv+"="+testKey)
	env = append(append(env, p.Env()...), a.ProxyEnv(p.URL)...)
	if perr := a.Preflight(t.Context(), inv, env); perr != nil {
		t.Fatalf("preflight: %+v", perr)
	}
	dec := a.NewDecoder(inv).(*decoder)
	conv := converse(t, bin, cmd.Args, env, dir, dec, cliCase{}, "", func() bool { return false })
	if o := dec.Finish(conv.exit, []byte(conv.stderr)); o.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v (exit %+v, stderr %q; the proxy carried %v)", o.Status, o.Error, conv.exit, tail(conv.stderr, 300), p.Requests())
	}
	return proxytest.Target(srv.URL), a.ModelEndpoints(func(string) string { return "" }, home)
}
