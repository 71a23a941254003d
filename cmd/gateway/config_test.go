package main

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestConfigRejectsBadValues(t *testing.T) {
	for _, tc := range []struct{ env, value, want string }{
		{"AGENTGATE_MAX_CONCURRENT_RUNS", "0", "AGENTGATE_MAX_CONCURRENT_RUNS: must be 1 to 1024"},
		{"AGENTGATE_MAX_CONCURRENT_RUNS", "many", "MAX_CONCURRENT_RUNS"},
		{"AGENTGATE_AGENT_NICE", "20", "AGENTGATE_AGENT_NICE: must be 0 to 19, got 20"},
		{"AGENTGATE_AGENT_NICE", "-1", "AGENTGATE_AGENT_NICE: must be 0 to 19, got -1"},
		{"AGENTGATE_RUN_TIMEOUT", "soon", "RUN_TIMEOUT"},
		{"AGENTGATE_RUN_TIMEOUT", "48h", "AGENTGATE_MAX_RUN_TIMEOUT: 24h0m0s is less than RUN_TIMEOUT"},
		{"AGENTGATE_ADDR", "8080", "AGENTGATE_ADDR: \"8080\" is not host:port"},
		{"AGENTGATE_NATS_URL", "localhost", "AGENTGATE_NATS_URL"},
		{"AGENTGATE_LOG_LEVEL", "loud", "AGENTGATE_LOG_LEVEL"},
		{"AGENTGATE_KILL_GRACE", "0s", "AGENTGATE_KILL_GRACE"},
		{"AGENTGATE_SSE_PING_INTERVAL", "1ms", "AGENTGATE_SSE_PING_INTERVAL"},
		{"AGENTGATE_QUEUE_SIZE", "0", "AGENTGATE_QUEUE_SIZE: must be 1 to 100000"},
		{"AGENTGATE_EVENTS_PER_MESSAGE", "0", "AGENTGATE_EVENTS_PER_MESSAGE: must be 1 to 4096"},
		{"AGENTGATE_REPLICA_TTL", "100ms", "AGENTGATE_REPLICA_TTL: must be at least 1s"},
		{"AGENTGATE_MAX_EVENT_TEXT", "2097152", "AGENTGATE_MAX_EVENT_TEXT"},
		{"AGENTGATE_RETENTION", "1h", "AGENTGATE_RETENTION: 1h0m0s must be longer than MAX_RUN_TIMEOUT"},
		{"AGENTGATE_AGENTS", "claude,cladue", `AGENTGATE_AGENTS: unknown agent "cladue"`},
		// Nobody would authenticate: not on the network unless insisted.
		{"AGENTGATE_ADDR", ":8080", "AGENTGATE_ADDR: \":8080\" is not a loopback address, and no AGENTGATE_API_KEYS_FILE is set"},
		{"AGENTGATE_ADDR", "0.0.0.0:9000", "AGENTGATE_INSECURE_NO_AUTH=true"},
		{"AGENTGATE_SANDBOX", "none", `AGENTGATE_SANDBOX: "none" is not one of auto, bubblewrap, cli-only`},
		{"AGENTGATE_STREAM_TOKEN_SECRET", "short", "AGENTGATE_STREAM_TOKEN_SECRET: must be at least 32 characters"},
		{"AGENTGATE_NATS_URL", "user:hunter2@nats", "xxxxx"},
		{"AGENTGATE_SECRETS_KEY", "short", "AGENTGATE_SECRETS_KEY: must be at least 32 characters"},
		{"AGENTGATE_MCP_COMMANDS", "/usr/bin/python3,npx", `AGENTGATE_MCP_COMMANDS: "npx" is not an absolute path`},
		{"AGENTGATE_MCP_URLS", "ftp://tools.example", `AGENTGATE_MCP_URLS: "ftp://tools.example" is not an http or https URL`},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv("AGENTGATE_DATA_DIR", t.TempDir())
			t.Setenv(tc.env, tc.value)
			_, _, err := loadConfig(func(string) string { return "" }, []string{"claude"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			// run() refuses to start on it, before touching anything.
			if err := run(context.Background(), nil, func(string) string { return "" }, io.Discard); err == nil {
				t.Fatal("run started with a bad configuration")
			}
		})
	}
}

func TestConfigDefaultsAndAgentSettings(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AGENTGATE_DATA_DIR", dir)
	getenv := func(k string) string {
		return map[string]string{"AGENTGATE_CLAUDE_BIN": "/opt/claude"}[k]
	}
	c, agents, err := loadConfig(getenv, []string{"claude"})
	if err != nil {
		t.Fatal(err)
	}
	// Without a keys file, loopback only.
	if c.Addr != "127.0.0.1:8080" || c.Sandbox != "auto" || c.WorkspaceRoot != dir+"/workspaces" || c.MaxConcurrentRuns != 4 || !strings.HasPrefix(c.ReplicaID, "embedded-") {
		t.Fatalf("defaults = %+v", c)
	}
	if a := agents["claude"]; a.Bin != "/opt/claude" || a.Home != dir+"/agents/claude" {
		t.Fatalf("claude settings = %+v", a)
	}
	// With the embedded store the replica id lives in the data directory,
	// so a restart, even in a new container, finds its own runs.
	again, _, err := loadConfig(getenv, []string{"claude"})
	if err != nil || again.ReplicaID != c.ReplicaID {
		t.Fatalf("replica id after a restart = %q (%v), want %q", again.ReplicaID, err, c.ReplicaID)
	}
	// With an external NATS server it is the hostname, unless set.
	t.Setenv("AGENTGATE_NATS_URL", "nats://127.0.0.1:4222")
	ext, _, err := loadConfig(getenv, []string{"claude"})
	if host, _ := os.Hostname(); err != nil || ext.ReplicaID != host {
		t.Fatalf("replica id with NATS_URL = %q (%v), want the hostname %q", ext.ReplicaID, err, host)
	}
}

func TestConfigEnablesNamedAgents(t *testing.T) {
	t.Setenv("AGENTGATE_DATA_DIR", t.TempDir())
	t.Setenv("AGENTGATE_AGENTS", "codex, claude,codex")
	_, agents, err := loadConfig(func(string) string { return "" }, []string{"claude", "codex", "gemini"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := agents["gemini"]; ok || len(agents) != 2 {
		t.Fatalf("agents = %v, want claude and codex only", agents)
	}
}

func TestRunRejectsArguments(t *testing.T) {
	err := run(context.Background(), []string{"--port", "1"}, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "AGENTGATE_") {
		t.Fatalf("err = %v", err)
	}
}

// With a keys file, or when the operator insists, the default address is
// every interface; insisting lets a non-loopback address through.
func TestConfigAddrWithKeysOrInsecure(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"AGENTGATE_API_KEYS_FILE": "/etc/agentgate/keys"}, ":8080"},
		{map[string]string{"AGENTGATE_INSECURE_NO_AUTH": "true"}, ":8080"},
		{map[string]string{"AGENTGATE_INSECURE_NO_AUTH": "true", "AGENTGATE_ADDR": "0.0.0.0:9000"}, "0.0.0.0:9000"},
		{map[string]string{"AGENTGATE_ADDR": "[::1]:9000"}, "[::1]:9000"},
		{map[string]string{"AGENTGATE_ADDR": "localhost:9000"}, "localhost:9000"},
	} {
		t.Setenv("AGENTGATE_DATA_DIR", t.TempDir())
		for _, k := range []string{"AGENTGATE_API_KEYS_FILE", "AGENTGATE_INSECURE_NO_AUTH", "AGENTGATE_ADDR"} {
			t.Setenv(k, c.env[k]) // restored when the test ends
			if c.env[k] == "" {
				os.Unsetenv(k)
			}
		}
		cfg, _, err := loadConfig(func(string) string { return "" }, []string{"claude"})
		if err != nil || cfg.Addr != c.want {
			t.Errorf("%v: addr %q, err %v; want %q", c.env, cfg.Addr, err, c.want)
		}
	}
}

func TestSealKeyIsSharedAndItsOwn(t *testing.T) {
	stream := []byte("0123456789abcdef0123456789abcdef")
	a, b := sealKey("", stream), sealKey("", stream)
	if len(a) != 32 || string(a) != string(b) {
		t.Fatalf("keys from one stream secret differ or are not AES-256: %x %x", a, b)
	}
	if string(a) == string(stream[:32]) {
		t.Fatal("the seal key is the stream token secret itself")
	}
	if own := sealKey("an operator key of thirty-two chars!", stream); string(own) == string(a) {
		t.Fatal("AGENTGATE_SECRETS_KEY did not change the seal key")
	}
}

func TestUnknownSettingsAreNamed(t *testing.T) {
	env := []string{
		"AGENTGATE_MAX_CONCURENT_RUNS=8", // misspelled
		"AGENTGATE_LOGLEVEL=debug",       // misspelled
		"AGENTGATE_FROBNICATE=1",         // nothing like any setting
		"AGENTGATE_MAX_CONCURRENT_RUNS=8",
		"AGENTGATE_SSE_PING_INTERVAL=5s", // api.Config's
		"AGENTGATE_GEMINI_HOME=/x",       // an agent's
		"AGENTGATE_URL=http://127.0.0.1:8080",
		"AGENTGATE_TEST_AS_GATEWAY=1",
		"PATH=/bin",
	}
	got := unknownSettings(env, []string{"claude", "gemini"})
	want := []string{
		"AGENTGATE_FROBNICATE is not a setting of the gateway and is ignored",
		"AGENTGATE_LOGLEVEL is not a setting of the gateway and is ignored; did you mean AGENTGATE_LOG_LEVEL?",
		"AGENTGATE_MAX_CONCURENT_RUNS is not a setting of the gateway and is ignored; did you mean AGENTGATE_MAX_CONCURRENT_RUNS?",
	}
	if !slices.Equal(got, want) {
		t.Errorf("unknownSettings:\n got %q\nwant %q", got, want)
	}
}
