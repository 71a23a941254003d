package opencode

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/agenttest/proxytest"
	"github.com/agentgate/agentgate/internal/mock/chat"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestProxyRealCLI runs the installed opencode with HTTP_PROXY,
// HTTPS_PROXY and ALL_PROXY (and their lower-case forms, NO_PROXY empty)
// naming a logging proxy, and the adapter's ProxyEnv, as the gateway runs
// it in a run's network namespace: the model's requests and a bash
// command's curl must go through the proxy, and nothing else may be asked
// of it but the adapter's ModelEndpoints. It fails when the CLI reaches
// the mock directly.
func TestProxyRealCLI(t *testing.T) {
	bin := opencodeBin(t)
	sink := proxytest.StartSink(t)
	p := proxytest.Start(t)
	srv, err := chat.Start("127.0.0.1:0", chat.ToolTurn(chat.Bash("curl -sS "+sink+"/tool-marker"), "The command ran."))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	gateway := map[string]string{"OPENCODE_CONFIG_CONTENT": mockConfig(srv.URL, "OPENAI_API_KEY"), "OPENAI_API_KEY": testKey}
	home, dir := t.TempDir(), t.TempDir()
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Spec: runs.Spec{Prompt: "Fetch the marker.", Permission: runs.Full},
		Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{}, Timeout: time.Minute, CLIVersion: VerifiedVersion}
	a := New()
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	env := append(agenttest.MinimalEnv(home), "TERM=dumb")
	for _, name := range cmd.PassEnv {
		if v, ok := gateway[name]; ok {
			env = append(env, name+"="+v)
		}
	}
	env = append(env, cmd.Env...)
	env = append(append(env, p.Env()...), a.ProxyEnv(p.URL)...)
	if perr := a.Preflight(t.Context(), inv, env); perr != nil {
		t.Fatalf("preflight: %+v", perr)
	}
	proc := agenttest.Start(t, bin, cmd.Args, env, dir, cmd.Stdin)
	deadline := time.AfterFunc(runDeadline, proc.Kill)
	defer deadline.Stop()
	res := proc.Wait()
	t.Logf("the proxy carried %v", p.Requests())
	dec := a.NewDecoder(inv)
	for _, l := range res.Stdout {
		dec.Decode(l)
	}
	if o := dec.Finish(res.Exit, res.Stderr); o.Status != runs.Succeeded {
		t.Errorf("run %s: %+v (exit %+v, stderr %q)", o.Status, o.Error, res.Exit, tail(string(res.Stderr), 300))
	}
	model := proxytest.Target(srv.URL)
	if got := p.To(model); !slices.ContainsFunc(got, isCompletions) {
		t.Errorf("the proxy carried no model request to %s: the CLI bypassed it (it carried %v)", model, p.Requests())
	}
	if got := p.To(proxytest.Target(sink)); len(got) == 0 {
		t.Errorf("the proxy carried nothing to the tool's target %s (it carried %v)", sink, p.Requests())
	}
	endpoints := a.ModelEndpoints(func(k string) string { return gateway[k] }, home)
	// OpenCode looks its provider's npm package up at the registry; the
	// run goes on without an answer, so that is no model endpoint.
	if extra := p.Unexpected(append(endpoints, proxytest.Target(sink), npmRegistry)...); len(extra) > 0 {
		t.Errorf("the CLI asked the proxy for more than its model endpoints %v: %v", endpoints, extra)
	}
}

// npmRegistry is where OpenCode 1.18.33 asks for its provider packages.
const npmRegistry = "registry.npmjs.org:443"

func isCompletions(r proxytest.Request) bool {
	return r.Method == "POST" && strings.HasSuffix(r.Path, "/chat/completions")
}
