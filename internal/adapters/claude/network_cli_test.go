package claude

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/agenttest/proxytest"
	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestProxyRealCLI runs the installed claude with HTTP_PROXY, HTTPS_PROXY
// and ALL_PROXY (and their lower-case forms, NO_PROXY empty) naming a
// logging proxy, and the adapter's ProxyEnv, as the gateway runs it in a
// run's network namespace: the model's requests, a Bash command's curl
// and the requests to an MCP server given by URL must all go through the
// proxy, and nothing else may be asked of it but the adapter's
// ModelEndpoints. It fails when the CLI reaches the mock directly.
func TestProxyRealCLI(t *testing.T) {
	sink := proxytest.StartSink(t)
	mcp := startHTTPMCP(t, "proxy-token")
	for _, c := range []struct {
		name   string
		sc     anthropic.Scenario
		spec   runs.Spec
		target string // what the run must reach through the proxy besides the model
	}{
		{"tool command", anthropic.ToolThenText("curl -sS "+sink+"/tool-marker", "The command ran."),
			runs.Spec{Prompt: "Fetch the marker.", Permission: runs.Full}, proxytest.Target(sink)},
		{"remote MCP server", anthropic.MCPCall("remote", "reverse_text", json.RawMessage(reverseInput), "The remote tool answered."),
			runs.Spec{Prompt: "Reverse hello mcp remotely.", MCPServers: map[string]runs.MCPServer{"remote": {URL: mcp.URL}}},
			proxytest.Target(mcp.URL)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := proxytest.Start(t)
			model, endpoints := runProxied(t, p, c.sc, c.spec)
			t.Logf("the proxy carried %v", p.Requests())
			if got := p.To(model); !slices.ContainsFunc(got, isMessages) {
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

func isMessages(r proxytest.Request) bool {
	return r.Method == "POST" && strings.HasPrefix(r.Path, "/v1/messages")
}

// runProxied runs the real CLI once for spec against a mock playing sc,
// with the proxy's variables, and requires it to succeed. It returns the
// mock's host:port and the adapter's ModelEndpoints for the run's
// environment.
func runProxied(t *testing.T, p *proxytest.Proxy, sc anthropic.Scenario, spec runs.Spec) (string, []string) {
	t.Helper()
	bin := agenttest.ClaudeBin(t)
	srv, err := anthropic.Start("127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	home, dir := t.TempDir(), t.TempDir()
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: dir, Bin: bin, Home: home,
		Files: runs.HostFiles{}, Timeout: time.Minute, CLIVersion: VerifiedVersion}
	a := New()
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	gateway := map[string]string{"ANTHROPIC_BASE_URL": srv.URL, "ANTHROPIC_API_KEY": testKey}
	env := append(agenttest.MinimalEnv(home), cmd.Env...)
	env = append(env, "ANTHROPIC_BASE_URL="+srv.URL, "ANTHROPIC_API_KEY="+testKey)
	env = append(append(env, p.Env()...), a.ProxyEnv(p.URL)...)
	proc := agenttest.Start(t, bin, cmd.Args, env, dir, cmd.Stdin)
	deadline := time.AfterFunc(runDeadline, proc.Kill)
	defer deadline.Stop()
	res := proc.Wait()
	dec := a.NewDecoder(inv)
	for _, l := range res.Stdout {
		dec.Decode(l)
	}
	if o := dec.Finish(res.Exit, res.Stderr); o.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v (exit %+v, stderr %q; the proxy carried %v)", o.Status, o.Error, res.Exit, tail(string(res.Stderr), 300), p.Requests())
	}
	return proxytest.Target(srv.URL), a.ModelEndpoints(func(k string) string { return gateway[k] }, home)
}
