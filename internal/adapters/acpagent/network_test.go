package acpagent

import (
	"slices"
	"testing"

	"github.com/agentgate/agentgate/internal/agentsfile"
	"github.com/agentgate/agentgate/internal/runs"
)

// Only an entry that says where its model is gets network policies
// beyond open: the gateway must not confine a CLI to endpoints it
// guessed.
func TestForEntryKnowsTheModelOnlyWhenTold(t *testing.T) {
	plain := testEntry(t)
	if _, ok := ForEntry(plain, gatewayEnv).(runs.NetworkNeeds); ok {
		t.Errorf("an entry without model_endpoints claims to know where its model is")
	}
	told := testEntry(t)
	told.Env["FIXED_URL"] = "https://fixed.example.com/v1"
	told.ModelEndpoints = []agentsfile.ModelEndpoint{
		{HostPort: "api.example.com:443"}, {URLVar: "ACME_BASE_URL"}, {URLVar: "FIXED_URL"}, {URLVar: "UNSET_URL"},
	}
	needs, ok := ForEntry(told, gatewayEnv).(runs.NetworkNeeds)
	if !ok {
		t.Fatal("an entry with model_endpoints does not implement runs.NetworkNeeds")
	}
	getenv := func(k string) string {
		return map[string]string{"ACME_BASE_URL": "http://127.0.0.1:4010/v1", "FIXED_URL": "http://ignored.example.com"}[k]
	}
	got := needs.ModelEndpoints(getenv, t.TempDir())
	want := []string{"api.example.com:443", "127.0.0.1:4010", "fixed.example.com:443"}
	if !slices.Equal(got, want) {
		t.Errorf("ModelEndpoints = %q, want %q (the entry's env before the gateway's; an unset variable adds nothing)", got, want)
	}
	if a, ok := ForEntry(told, gatewayEnv).(Networked); !ok || a.Name() != "acme" || !a.PrefersSession(runs.Spec{}) {
		t.Errorf("the networked adapter is not the entry's adapter: %#v", a)
	}
}
