package cline

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestPrepareHomeWritesProvidersFromEnv(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{BaseURLEnv: "http://127.0.0.1:9/v1", ModelEnv: "m1", KeyEnv: "sk-2"}
	if err := New(WithGetenv(func(k string) string { return env[k] })).PrepareHome(home); err != nil {
		t.Fatal(err)
	}
	p, ok := readProviders(runs.HostFiles{}, home)
	if !ok || p.ID != openAICompatible || p.BaseURL != env[BaseURLEnv] || p.Model != "m1" || p.Key != "sk-2" {
		t.Fatalf("provider = %+v, %v", p, ok)
	}
	var settings map[string]any
	b, _ := os.ReadFile(globalSettingsPath(home))
	if json.Unmarshal(b, &settings) != nil || settings["telemetryOptOut"] != true || settings["autoUpdateEnabled"] != false {
		t.Errorf("global settings = %s", b)
	}
}

func TestPreflightKey(t *testing.T) {
	home := t.TempDir()
	a := New()
	inv := runs.Invocation{Home: home}
	if e := a.Preflight(t.Context(), inv, []string{KeyEnv + "=k"}); e == nil || e.Class != runs.NotAuthenticated {
		t.Fatalf("without providers.json: %+v", e)
	}
	if err := os.MkdirAll(settingsDir(home), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(providersPath(home), ProvidersJSON("http://127.0.0.1:9/v1", "m", ""), 0o600); err != nil {
		t.Fatal(err)
	}
	if e := a.Preflight(t.Context(), inv, nil); e == nil || e.Class != runs.NotAuthenticated {
		t.Fatalf("without a key: %+v", e)
	}
	if e := a.Preflight(t.Context(), inv, []string{KeyEnv + "=sk-1"}); e != nil {
		t.Fatalf("with a key: %+v", e)
	}
	// cline --json reads its key only from providers.json.
	if p, _ := readProviders(runs.HostFiles{}, home); p.Key != "sk-1" || p.BaseURL != "http://127.0.0.1:9/v1" {
		t.Errorf("after preflight: %+v", p)
	}
}

func TestTurnUsageIsTheSessionsGrowth(t *testing.T) {
	home := t.TempDir()
	u := &sessionUsage{files: runs.HostFiles{}, home: home}
	write := func(in, out int) {
		if err := os.MkdirAll(sessionPath(home, "s1")[:len(sessionPath(home, "s1"))-len("/s1.json")], 0o700); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"usage": map[string]int{"inputTokens": in, "outputTokens": out, "cacheReadTokens": 10}}})
		if err := os.WriteFile(sessionPath(home, "s1"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(100, 7)
	if got, ok, _ := u.turnUsage("s1", nil); !ok || got != (runs.Usage{InputTokens: 100, OutputTokens: 7, CacheReadTokens: 10}) {
		t.Errorf("turn 1 = %+v %v", got, ok)
	}
	write(250, 20)
	if got, ok, _ := u.turnUsage("s1", nil); !ok || got != (runs.Usage{InputTokens: 150, OutputTokens: 13}) {
		t.Errorf("turn 2 = %+v %v", got, ok)
	}
	if _, ok, evs := u.turnUsage("../x", nil); ok || len(evs) != 0 {
		t.Error("a session id that is a path was read")
	}
}
