package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/runs"
)

// agentsOf reads GET /v1/agents.
func agentsOf(t *testing.T, g *gateway) map[string]runs.AgentInfo {
	t.Helper()
	resp, err := http.Get(g.URL + "/v1/agents")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Agents []runs.AgentInfo }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	out := map[string]runs.AgentInfo{}
	for _, a := range body.Agents {
		out[a.Name] = a
	}
	return out
}

// Every agent of the roster is offered, each with its pinned CLI probed
// and found verified, and a CLI that is missing is reported as such, with
// its install command, and refused with 422.
func TestAllAgentsAreListed(t *testing.T) {
	roster := adapters(func(string) string { return "" })
	if len(roster) < 5 {
		t.Errorf("the roster has %d agents, want the five", len(roster))
	}
	settings := gatewayEnv(t, t.TempDir())
	delete(settings, "AGENTGATE_AGENTS")
	t.Setenv("AGENTGATE_AGENTS", "")
	for _, a := range roster {
		settings["AGENTGATE_"+strings.ToUpper(a.Name())+"_BIN"] = agenttest.Bin(t, a.Describe().DefaultBin)
	}
	missing := roster[len(roster)-1]
	settings["AGENTGATE_"+strings.ToUpper(missing.Name())+"_BIN"] = "/nonexistent/" + missing.Describe().DefaultBin
	g := startGateway(t, settings, nil)

	listed := agentsOf(t, g)
	if len(listed) != len(roster) {
		t.Errorf("listed %d agents, the roster has %d", len(listed), len(roster))
	}
	for _, a := range roster {
		d := a.Describe()
		info, ok := listed[a.Name()]
		switch {
		case !ok:
			t.Errorf("%s is not listed", a.Name())
		case a.Name() == missing.Name():
			if info.Installed || info.Compatibility != runs.CompatMissing || !strings.Contains(info.Advisory, d.InstallCommand) {
				t.Errorf("%s with its CLI missing: %+v; want missing with `%s` in the advisory", a.Name(), info, d.InstallCommand)
			}
		case !info.Installed || info.Compatibility != runs.CompatVerified || info.Version != d.VerifiedVersion:
			t.Errorf("%s: %+v; want its pinned %s found and verified", a.Name(), info, d.VerifiedVersion)
		}
		// Every agent takes interactive runs, and says how.
		if in := info.Interaction; in == nil || in.Steer != d.Interaction.Steer || in.DenyEndsTurn != d.Interaction.DenyEndsTurn {
			t.Errorf("%s: interaction %+v, want %+v", a.Name(), in, d.Interaction)
		}
	}
	resp, err := http.Post(g.URL+"/v1/runs", "application/json",
		strings.NewReader(`{"agent":"`+missing.Name()+`","prompt":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(e.Error.Message, missing.Describe().InstallCommand) {
		t.Errorf("a run of %s: %d %+v, want 422 with the install command", missing.Name(), resp.StatusCode, e)
	}
}
