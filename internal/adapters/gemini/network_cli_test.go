package gemini

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/agenttest/proxytest"
	"github.com/agentgate/agentgate/internal/mock/googleai"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestProxyRealCLI runs the installed gemini with HTTP_PROXY, HTTPS_PROXY
// and ALL_PROXY (and their lower-case forms, NO_PROXY empty) naming a
// logging proxy, and the adapter's ProxyEnv, as the gateway runs it in a
// run's network namespace: the model's requests and a shell command's
// curl must go through the proxy, and nothing else may be asked of it but
// the adapter's ModelEndpoints. It fails when the CLI reaches the mock
// directly.
func TestProxyRealCLI(t *testing.T) {
	sink := proxytest.StartSink(t)
	p := proxytest.Start(t)
	model, endpoints := runProxied(t, p, googleai.ToolThenText("curl -sS "+sink+"/tool-marker", "The command ran."),
		runs.Spec{Prompt: "Fetch the marker.", Permission: runs.Full})
	t.Logf("the proxy carried %v", p.Requests())
	if got := p.To(model); !slices.ContainsFunc(got, isGenerate) {
		t.Errorf("the proxy carried no model request to %s: the CLI bypassed it (it carried %v)", model, p.Requests())
	}
	if got := p.To(proxytest.Target(sink)); len(got) == 0 {
		t.Errorf("the proxy carried nothing to the tool's target %s (it carried %v)", sink, p.Requests())
	}
	if extra := p.Unexpected(append(endpoints, proxytest.Target(sink))...); len(extra) > 0 {
		t.Errorf("the CLI asked the proxy for more than its model endpoints %v: %v", endpoints, extra)
	}
}

func isGenerate(r proxytest.Request) bool {
	return r.Method == "POST" && strings.Contains(r.Path, ":streamGenerateContent")
}

// runProxied runs the real CLI once for spec against a mock playing sc,
// with the proxy's variables, and requires it to succeed. It returns the
// mock's host:port and the adapter's ModelEndpoints for the run.
func runProxied(t *testing.T, p *proxytest.Proxy, sc googleai.Scenario, spec runs.Spec) (string, []string) {
	t.Helper()
	bin := agenttest.Bin(t, "gemini")
	srv, err := googleai.Start("127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	home, dir := preparedHome(t), t.TempDir()
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: spec, Dir: dir, Bin: bin, Home: home,
		Files: runs.HostFiles{}, Timeout: time.Minute, CLIVersion: VerifiedVersion}
	a := New()
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	gateway := map[string]string{"GOOGLE_GEMINI_BASE_URL": srv.URL, "GEMINI_API_KEY": testKey}
	env := append(agenttest.MinimalEnv(home), cmd.Env...)
	env = append(env, "GOOGLE_GEMINI_BASE_URL="+srv.URL, "GEMINI_API_KEY="+testKey)
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
