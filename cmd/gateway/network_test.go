package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// TestNetworkPolicyEndToEnd runs Claude Code through a whole gateway on a
// real NATS server, under the shipped default (network model) and under
// allow: a tool's requests to a service on the host's loopback, to the
// gateway's own port and to NATS are refused and reported, the run still
// succeeds (its model calls went through the proxy), a name that resolves
// to loopback is refused although listed (the other service, reached by
// name: the resolution is the host's real one), and an address listed is
// reached. The API's refusals of a policy are checked on the same gateway.
func TestNetworkPolicyEndToEnd(t *testing.T) {
	natsURL := startNATS(t)
	service, other := serveReached(t, "service"), serveReached(t, "other")
	settings := gatewayEnv(t, t.TempDir())
	settings["AGENTGATE_AGENTS"] = "claude"
	settings["AGENTGATE_NATS_URL"] = natsURL
	settings["AGENTGATE_NETWORK_FORBID_OPEN"] = "*"
	g := startGateway(t, settings, mockCreds(startMock(t, promptedCommand())))
	gwPort, natsPort := portOf(t, g.URL), portOf(t, natsURL)

	code, body := httpDo(t, http.MethodGet, g.URL+"/v1/agents", "", nil)
	var list struct{ Agents []runs.AgentInfo }
	if err := json.Unmarshal(body, &list); code != http.StatusOK || err != nil || len(list.Agents) != 1 {
		t.Fatalf("GET /v1/agents = %d %s", code, body)
	}
	if got := list.Agents[0].Networks; !slices.Equal(got, []runs.Network{runs.NetworkOpen, runs.NetworkModel, runs.NetworkAllow}) {
		t.Errorf("claude's networks = %v, want open, model, allow", got)
	}

	fetch := fetchEach(service, gwPort, natsPort) + "(exec 3<>/dev/tcp/127.0.0.1/" + strconv.Itoa(gwPort) + ") 2>/dev/null && echo raw=open || echo raw=refused"
	model := g.finish(t, g.post(t, runRequest(fetch, "")).ID)
	out := model.toolOutput(t)
	if model.run.Status != runs.Succeeded || model.run.Network != runs.NetworkModel {
		t.Fatalf("a run under the default: %s network %q %+v; tool said %q", model.run.Status, model.run.Network, model.run.Error, out)
	}
	for _, p := range []int{service, gwPort, natsPort} {
		if !strings.Contains(out, fmt.Sprintf("port=%d code=403", p)) {
			t.Errorf("network model: the proxy did not refuse port %d: %q", p, out)
		}
	}
	if !strings.Contains(out, "raw=refused") {
		t.Errorf("network model: a raw connection to the gateway's port got through: %q", out)
	}
	assertDenied(t, model, map[string]int{hostPort("127.0.0.1", service): 1, hostPort("127.0.0.1", gwPort): 1, hostPort("127.0.0.1", natsPort): 1})
	if model.run.NetworkDenied != 3 {
		t.Errorf("the record counts %d refusals, want 3", model.run.NetworkDenied)
	}

	hosts := fmt.Sprintf(`,"network":"allow","allow_hosts":["127.0.0.1:%d","127.0.0.1:%d","localhost"]`, service, gwPort)
	allow := g.finish(t, g.post(t, runRequest(fetchEach(service, gwPort)+fetchURL("localhost", other), hosts)).ID)
	out = allow.toolOutput(t)
	switch {
	case allow.run.Status != runs.Succeeded:
		t.Fatalf("a run under allow: %s %+v", allow.run.Status, allow.run.Error)
	case !strings.Contains(out, fmt.Sprintf("port=%d code=200", service)) || !strings.Contains(out, "reached-service"):
		t.Errorf("network allow: the listed service was not reached: %q", out)
	case !strings.Contains(out, fmt.Sprintf("port=%d code=403", gwPort)):
		t.Errorf("network allow: the gateway's port, although listed, was not refused: %q", out)
	case !strings.Contains(out, fmt.Sprintf("localhost port=%d code=403", other)) || strings.Contains(out, "reached-other"):
		t.Errorf("network allow: a listed name that resolves to loopback was not refused: %q", out)
	}
	assertDenied(t, allow, map[string]int{hostPort("127.0.0.1", gwPort): 1, hostPort("localhost", other): 1})

	assertDeniedMetric(t, g, 5)
	assertPolicyRefusals(t, g)
}

// fetchEach is a shell command that requests each port on the host's
// loopback through the proxy the agent was given and prints its status.
func fetchEach(ports ...int) string {
	var b strings.Builder
	for _, p := range ports {
		b.WriteString(fetchURL("127.0.0.1", p))
	}
	return b.String()
}

func fetchURL(host string, port int) string {
	u := "http://" + hostPort(host, port) + "/"
	label := "port=" + strconv.Itoa(port)
	if host != "127.0.0.1" {
		label = host + " " + label
	}
	return fmt.Sprintf("echo; curl -sS -m 60 -w '%s code=%%{http_code}' %s 2>&1; echo; ", label, u)
}

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// serveReached serves "reached-<name>" on a port of 127.0.0.1.
func serveReached(t *testing.T, name string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "reached-"+name) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func portOf(t *testing.T, raw string) int {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("no port in %s", raw)
	}
	return p
}

// assertDenied checks that the run's network_denied warnings name exactly
// want's host:ports, each as many times as want says.
func assertDenied(t *testing.T, r runEvents, want map[string]int) {
	t.Helper()
	got := map[string]int{}
	for _, e := range r.events {
		var d runs.WarningData
		if e.Type != string(runs.EventWarning) || e.data(&d) != nil || d.Code != runs.WarningNetworkDenied {
			continue
		}
		got[d.Message[strings.LastIndexByte(d.Message, ' ')+1:]]++
	}
	for hp, n := range want {
		if got[hp] != n {
			t.Errorf("run %s (network %s): %d network_denied warnings name %s, want %d; all: %v", r.run.ID, r.run.Network, got[hp], hp, n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("run %s: network_denied warnings name %v, want %v", r.run.ID, got, want)
	}
}

// assertDeniedMetric checks the refusals counted for claude's default
// tenant on /metrics.
func assertDeniedMetric(t *testing.T, g *gateway, want int) {
	t.Helper()
	_, body := httpDo(t, http.MethodGet, g.URL+"/metrics", "", nil)
	m := regexp.MustCompile(`(?m)^agentgate_network_denied_total\{agent="claude",tenant="default"\} (\d+)$`).FindSubmatch(body)
	if m == nil || string(m[1]) != strconv.Itoa(want) {
		t.Errorf("agentgate_network_denied_total for claude = %q, want %d", m, want)
	}
}

// assertPolicyRefusals checks the 400s of a policy the gateway will not
// give.
func assertPolicyRefusals(t *testing.T, g *gateway) {
	t.Helper()
	for _, tc := range []struct{ extra, code, field, say string }{
		{`,"network":"none"`, "unsupported_option", "network", `"none" is only for`},
		{`,"network":"open"`, runs.CodeNetworkForbidden, "network", "not allowed for this tenant"},
		{`,"network":"allow"`, "invalid_field", "allow_hosts", "is required"},
		{`,"network":"allow","allow_hosts":["http://x.example.com/"]}`, "invalid_field", "allow_hosts", "entry 0"},
		{`,"network":"model","allow_hosts":["x.example.com"]`, "invalid_field", "allow_hosts", `only for network "allow"`},
	} {
		code, body := httpDo(t, http.MethodPost, g.URL+"/v1/runs", "application/json", []byte(runRequest("true", strings.TrimSuffix(tc.extra, "}"))))
		var e struct {
			Error struct{ Code, Field, Agent, Message string }
		}
		_ = json.Unmarshal(body, &e)
		if code != http.StatusBadRequest || e.Error.Code != tc.code || e.Error.Field != tc.field || !strings.Contains(e.Error.Message, tc.say) {
			t.Errorf("%s: %d %s, want 400 %s on %s saying %q", tc.extra, code, body, tc.code, tc.field, tc.say)
		}
		if tc.code == "unsupported_option" && e.Error.Agent != "claude" {
			t.Errorf("%s: the refusal does not name the agent: %s", tc.extra, body)
		}
	}
}
