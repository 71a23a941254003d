package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/kelseyhightower/envconfig"

	"github.com/agentgate/agentgate/internal/api"
	"github.com/agentgate/agentgate/internal/levenshtein"
)

// config is the gateway's whole configuration, read once from AGENTGATE_*
// variables and validated before anything starts.
type config struct {
	// Addr defaults to :8080 with API keys, and to 127.0.0.1:8080
	// without: a gateway nobody authenticates must not be reachable from
	// the network unless its operator says so (InsecureNoAuth).
	Addr         string `envconfig:"ADDR" desc:"listen address; unset: :8080 with a keys file or INSECURE_NO_AUTH, else 127.0.0.1:8080; without a keys file only a loopback address"`
	DataDir      string `envconfig:"DATA_DIR" default:"agentgate-data" desc:"embedded store, agent homes, workspaces, run snapshots"`
	NATSURL      string `envconfig:"NATS_URL" desc:"external NATS server or cluster (nats://a:4222,nats://b:4222); unset: an embedded one under DATA_DIR"`
	NATSReplicas int    `envconfig:"NATS_REPLICAS" default:"1" desc:"JetStream replicas of the runs bucket and events stream (1 to 5)"`
	// EventsPerMessage bounds the events one message of a run's log
	// holds (store.Options); 1 while replicas of a version that does not
	// read such messages still run.
	EventsPerMessage int           `envconfig:"EVENTS_PER_MESSAGE" default:"256" desc:"most events of one run in one JetStream message; 1 while replicas of a version before this setting read the same store"`
	WorkspaceRoot    string        `envconfig:"WORKSPACE_ROOT" desc:"run directories, where a run's cwd is relative to; unset: DATA_DIR/workspaces"`
	ReplicaID        string        `envconfig:"REPLICA_ID" desc:"names this replica; unset: an id kept in DATA_DIR, or with NATS_URL the hostname"`
	ReplicaTTL       time.Duration `envconfig:"REPLICA_TTL" default:"45s" desc:"a replica silent this long is taken for dead: its running runs are marked interrupted, its interactive ones taken over asleep; the same on every replica"`
	LogLevel         string        `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error (zap JSON logs)"`
	AgentPath        string        `envconfig:"AGENT_PATH" desc:"PATH of agent processes; unset: the gateway's PATH"`
	// Agents, when set, enables only the agents named (comma-separated);
	// the others are neither probed nor offered.
	Agents    []string      `envconfig:"AGENTS" desc:"the agents to offer, comma-separated (claude,codex); unset: all"`
	Retention time.Duration `envconfig:"RETENTION" default:"0" desc:"how long runs and events are kept, longer than MAX_RUN_TIMEOUT; 0: forever"`

	// AgentsFile is read by roster, before the rest: it adds agents.
	AgentsFile string `envconfig:"AGENTS_FILE" desc:"a YAML file of ACP agents offered beside the built-in ones (docs/agents.md, Any ACP agent); a bad file fails the start"`

	MaxConcurrentRuns int           `envconfig:"MAX_CONCURRENT_RUNS" default:"4" desc:"runs executing at once on this replica (1 to 1024)"`
	QueueSize         int           `envconfig:"QUEUE_SIZE" default:"64" desc:"runs waiting in the queue all replicas share; beyond it POST answers 429; the same on every replica"`
	RunTimeout        time.Duration `envconfig:"RUN_TIMEOUT" default:"30m" desc:"a run's timeout when it names none"`
	MaxRunTimeout     time.Duration `envconfig:"MAX_RUN_TIMEOUT" default:"24h" desc:"the largest timeout_seconds a run may ask for"`
	KillGrace         time.Duration `envconfig:"KILL_GRACE" default:"5s" desc:"between interrupt, SIGTERM and SIGKILL when a run is stopped"`
	IdleTimeout       time.Duration `envconfig:"IDLE_TIMEOUT" default:"10m" desc:"how long an interactive run that names no idle_timeout_seconds stays open with no turn, hibernated or not"`
	MaxIdleTimeout    time.Duration `envconfig:"MAX_IDLE_TIMEOUT" default:"24h" desc:"the largest idle_timeout_seconds a run may ask for (at most 720h)"`
	HibernateAfter    time.Duration `envconfig:"HIBERNATE_AFTER" default:"5m" desc:"how long an idle interactive run that names no hibernate_after_seconds keeps its CLI before it hibernates; 0: only runs that ask hibernate"`
	MaxHibernateAfter time.Duration `envconfig:"MAX_HIBERNATE_AFTER" default:"24h" desc:"the largest hibernate_after_seconds a run may ask for (5s to 720h)"`
	ShutdownGrace     time.Duration `envconfig:"SHUTDOWN_GRACE" default:"30s" desc:"how long running runs may finish on shutdown"`
	// StoreRetry is how long a failing write to the store is retried;
	// StoreOpenTimeout how long the start waits for the store.
	StoreRetry       time.Duration `envconfig:"STORE_RETRY" default:"2m" desc:"how long a failing write to the store is retried before the run fails store_failed"`
	StoreOpenTimeout time.Duration `envconfig:"STORE_OPEN_TIMEOUT" default:"2m" desc:"how long the start waits for the store"`
	// StoreReserve and DiskLowWater are the disk guard's reserve and mark,
	// in bytes (see diskguard.Options).
	StoreReserve int64 `envconfig:"STORE_RESERVE" default:"67108864" desc:"bytes the embedded store keeps in reserve on its disk for its last writes; -1: none"`
	DiskLowWater int64 `envconfig:"DISK_LOW_WATER" default:"0" desc:"free bytes below which a disk is low (readyz fails, new runs 503 disk_full); 0: the reserve's size"`
	MaxEventText int   `envconfig:"MAX_EVENT_TEXT" default:"262144" desc:"bytes of text per event before it is truncated with a visible mark (1024 to 524288)"`

	// ProcessIsolation is how a run's processes are contained: "cgroup"
	// (a cgroup per run, or fail to start), "reaper" (the reaper and the
	// cookie alone), or "auto" (cgroup where the machine allows it).
	ProcessIsolation string `envconfig:"PROCESS_ISOLATION" default:"auto" desc:"how a run's processes are contained: cgroup, reaper, or auto (cgroup where the machine allows it)"`
	// CgroupRoot is where run cgroups are made (default: agentgate under
	// the cgroup v2 mount).
	CgroupRoot string `envconfig:"CGROUP_ROOT" desc:"where run cgroups are made; unset: agentgate under the cgroup v2 mount"`

	// APIKeysFile names the API keys file (see internal/auth); without it
	// the gateway has one anonymous tenant and listens on loopback only,
	// unless InsecureNoAuth.
	APIKeysFile    string `envconfig:"API_KEYS_FILE" desc:"API keys, one a line <key-id> <tenant> <role> sha256:<hex> (gateway keys new), re-read on change; unset: no keys, loopback only"`
	InsecureNoAuth bool   `envconfig:"INSECURE_NO_AUTH" default:"false" desc:"serve without keys on a non-loopback address: anyone who reaches it runs agents"`
	// StreamTokenSecret signs stream tokens; every replica must hold the
	// same. Unset, one is made once and kept in the store, shared by the
	// replicas. StreamTokenSecretPrevious still verifies, for rotation.
	StreamTokenSecret         string `envconfig:"STREAM_TOKEN_SECRET" desc:"signs browsers' stream tokens (at least 32 bytes, the same on every replica); unset: one kept in the store"`
	StreamTokenSecretPrevious string `envconfig:"STREAM_TOKEN_SECRET_PREVIOUS" desc:"a previous stream token secret that still verifies, for rotation"`
	// AgentNice is the niceness each agent, and all it starts, runs at
	// (0 to 19; 0, the default, leaves the gateway's). 19 makes busy runs
	// yield the CPUs to the gateway, which must keep storing and
	// streaming every run's events; lesser values did not help in the
	// benchmarks (docs/performance.md). It is not the default because it
	// also puts the agents below everything else on the host: beside
	// other busy work they crawl.
	AgentNice int `envconfig:"AGENT_NICE" default:"0" desc:"niceness (0 to 19) each agent and all it starts run at; 19 makes busy agents yield the CPUs to the gateway"`
	// Sandbox is how the gateway confines agents: "auto" or "bubblewrap"
	// (bubblewrap, or refuse to start), or "cli-only" (only each CLI's
	// own flags enforce a run's permission). SandboxHide lists more paths
	// the agents must not see.
	Sandbox     string   `envconfig:"SANDBOX" default:"auto" desc:"auto or bubblewrap: confine every agent with bubblewrap, or refuse to start; cli-only: only the CLIs' flags enforce permission"`
	SandboxHide []string `envconfig:"SANDBOX_HIDE" desc:"more paths agents must not see, comma-separated"`
	// Network is the policy of runs that name none (runs.Network):
	// unset, model where the sandbox can give runs network namespaces,
	// else open.
	Network           string            `envconfig:"NETWORK" desc:"network policy of runs that name none: model, open or none; unset: model where the sandbox can make network namespaces, else open"`
	TenantNetwork     map[string]string `envconfig:"TENANT_NETWORK" desc:"tenants' own default network policies, tenant:policy pairs, comma-separated"`
	NetworkForbidOpen []string          `envconfig:"NETWORK_FORBID_OPEN" desc:"tenants whose runs may not have network open, comma-separated; * for every tenant"`
	// RedactPatternsFile names a file of regular expressions, one a line,
	// whose matches are redacted from events, records and logs.
	RedactPatternsFile string `envconfig:"REDACT_PATTERNS_FILE" desc:"regular expressions, one a line, redacted from events, records and logs"`
	// Per-tenant quotas, on all replicas together (0: no limit).
	TenantMaxRunning     int     `envconfig:"TENANT_MAX_RUNNING" default:"0" desc:"runs of one tenant running at once, on all replicas; 0: no limit"`
	TenantMaxQueued      int     `envconfig:"TENANT_MAX_QUEUED" default:"0" desc:"runs of one tenant queued at once, on all replicas; 0: no limit"`
	TenantMaxOpen        int     `envconfig:"TENANT_MAX_OPEN_CONVERSATIONS" default:"0" desc:"interactive runs of one tenant open at once (queued, running or hibernated), on all replicas; 0: no limit"`
	TenantDailyBudgetUSD float64 `envconfig:"TENANT_DAILY_BUDGET_USD" default:"0" desc:"what one tenant's runs may cost a day, in USD; 0: no limit"`
	// Uploaded files are kept FILE_TTL; a tenant keeps at most
	// MAX_FILES_PER_TENANT. MAX_FILE_BYTES, MAX_ARCHIVE_BYTES and
	// MAX_INLINE_ATTACHMENT_BYTES are api.Config's.
	FileTTL time.Duration `envconfig:"FILE_TTL" default:"24h" desc:"how long uploaded files are kept"`
	// MCPCommands allow-lists the commands a run's stdio MCP servers may
	// start (exact paths, or directories ending in "/"); MCPURLs the
	// remote servers' URLs (prefixes). Empty: none.
	MCPCommands []string `envconfig:"MCP_COMMANDS" desc:"commands runs' stdio MCP servers may start: absolute paths, or directories ending in /; comma-separated; unset: none"`
	MCPURLs     []string `envconfig:"MCP_URLS" desc:"URL prefixes runs' remote MCP servers may have; comma-separated; unset: none"`
	// SecretsKey seals the env and header values of runs' MCP servers in
	// the store; unset, a key derived from the stream token secret.
	SecretsKey        string `envconfig:"SECRETS_KEY" desc:"seals the env and header values of runs' MCP servers in the store (at least 32 bytes); unset: derived from the stream token secret"`
	MaxFilesPerTenant int    `envconfig:"MAX_FILES_PER_TENANT" default:"1000" desc:"uploaded files a tenant keeps (429 too_many_files beyond)"`
	// MaxSchedulesPerTenant bounds a tenant's schedules.
	MaxSchedulesPerTenant int `envconfig:"MAX_SCHEDULES_PER_TENANT" default:"100" desc:"schedules a tenant keeps (429 too_many_schedules beyond)"`
	// MaxTriggersPerTenant bounds a tenant's triggers.
	MaxTriggersPerTenant int `envconfig:"MAX_TRIGGERS_PER_TENANT" default:"100" desc:"triggers a tenant keeps (429 too_many_triggers beyond)"`
	// MaxConnsPerClient and MaxConns bound open connections per client
	// address and in all (0: the defaults; negative: no bound, behind a
	// load balancer that bounds its clients itself).
	MaxConnsPerClient int `envconfig:"MAX_CONNS_PER_CLIENT" default:"0" desc:"open connections per client address; 0: 128; negative: no bound"`
	MaxConns          int `envconfig:"MAX_CONNS" default:"0" desc:"open connections in all; 0: from the descriptor limit; negative: no bound"`

	// Webhooks (internal/webhooks). WebhookSecret signs them, as
	// whsec_<base64 of 24 to 64 bytes>; WebhookSecretPrevious signs too,
	// while receivers move to a new secret. Without either, only tenants
	// with a secret of their own in WebhooksFile get webhooks. WebhooksFile
	// names the operator's per-tenant webhooks ("<tenant> <url> [<secrets>]"
	// a line), re-read when it changes. WebhookAllowHosts lists the host
	// names, addresses and CIDRs a webhook may reach though internal, and
	// over plain http. The rest bound each attempt and the retries.
	WebhookSecret         string        `envconfig:"WEBHOOK_SECRET" desc:"signs runs' webhooks, whsec_<base64 of 24 to 64 bytes>; unset: no webhooks but tenants' own in WEBHOOKS_FILE"`
	WebhookSecretPrevious string        `envconfig:"WEBHOOK_SECRET_PREVIOUS" desc:"a previous webhook secret that signs too while receivers move to the new one"`
	WebhooksFile          string        `envconfig:"WEBHOOKS_FILE" desc:"the operator's webhook per tenant, one a line <tenant> <url> [<secret>[,<previous>]], re-read on change"`
	WebhookAllowHosts     []string      `envconfig:"WEBHOOK_ALLOW_HOSTS" desc:"host names, addresses and CIDRs a webhook may reach although internal, and over plain http; comma-separated"`
	WebhookTimeout        time.Duration `envconfig:"WEBHOOK_TIMEOUT" default:"15s" desc:"bound of one webhook attempt"`
	WebhookMaxAttempts    int           `envconfig:"WEBHOOK_MAX_ATTEMPTS" default:"16" desc:"attempts of one webhook delivery"`
	WebhookRetryMin       time.Duration `envconfig:"WEBHOOK_RETRY_MIN" default:"5s" desc:"first backoff between webhook attempts"`
	WebhookRetryMax       time.Duration `envconfig:"WEBHOOK_RETRY_MAX" default:"2h" desc:"largest backoff between webhook attempts"`
	WebhookRetryFor       time.Duration `envconfig:"WEBHOOK_RETRY_FOR" default:"24h" desc:"how long after its event a webhook delivery is tried at all"`
	WebhookWorkers        int           `envconfig:"WEBHOOK_WORKERS" default:"4" desc:"concurrent webhook deliveries per replica"`

	// Runs' workspaces (internal/workspace). GitCredentialsFile names the
	// operator's git credentials ("<tenant> <name> <url-prefix> <token>"
	// a line), re-read when it changes; GitAllowHosts the git hosts a
	// workspace may reach over plain http or though internal. The git
	// cache of each replica is bounded by GitCacheBytes and GitCacheMaxAge;
	// what a run keeps in the cluster by MaxWorkspaceBytes and
	// MaxSessionBytes, and all a tenant keeps by SnapshotTenantBytes.
	GitCredentialsFile  string        `envconfig:"GIT_CREDENTIALS_FILE" desc:"the operator's git credentials, one a line <tenant|*> <name> <url-prefix> <token|@file>, re-read on change"`
	GitAllowHosts       []string      `envconfig:"GIT_ALLOW_HOSTS" desc:"git host names, addresses and CIDRs a workspace may clone from although internal, and over plain http; comma-separated"`
	GitCacheBytes       int64         `envconfig:"GIT_CACHE_BYTES" default:"5368709120" desc:"bound of this replica's cache of repositories; the least recently used go first"`
	GitCacheMaxAge      time.Duration `envconfig:"GIT_CACHE_MAX_AGE" default:"168h" desc:"a repository no run cloned for this long leaves the cache"`
	MaxWorkspaceBytes   int64         `envconfig:"MAX_WORKSPACE_BYTES" default:"1073741824" desc:"bound of one run's directory kept in the cluster, packed; a larger one is served only by the replica that ran it"`
	MaxSessionBytes     int64         `envconfig:"MAX_SESSION_BYTES" default:"268435456" desc:"bound of one session's files kept in the cluster, packed"`
	SnapshotTenantBytes int64         `envconfig:"SNAPSHOT_TENANT_BYTES" default:"10737418240" desc:"bound of all one tenant's directories, sessions and patches kept in the cluster"`

	// The HTTP edge's settings (AGENTGATE_SSE_*, MAX_BODY_BYTES, …) are
	// api.Config, read by the same envconfig call.
	HTTP api.Config `ignored:"true"`

	// Per-agent settings are read by agent name: AGENTGATE_<AGENT>_BIN
	// and AGENTGATE_<AGENT>_HOME; see agentSettings.
}

// agentSettings is one agent's binary and home directory.
type agentSettings struct{ Bin, Home string }

// loadConfig reads and validates the configuration. envconfig reads the
// process environment; getenv serves the per-agent variables, so that both
// come from the same place in production.
func loadConfig(getenv func(string) string, agentNames []string) (config, map[string]agentSettings, error) {
	var c config
	if err := envconfig.Process("agentgate", &c); err != nil {
		return c, nil, fmt.Errorf("configuration: %w", err)
	}
	if err := envconfig.Process("agentgate", &c.HTTP); err != nil {
		return c, nil, fmt.Errorf("configuration: %w", err)
	}
	if err := c.validate(); err != nil {
		return c, nil, fmt.Errorf("configuration: %w", err)
	}
	if c.ReplicaID == "" {
		id, err := embeddedReplicaID(c.DataDir)
		if err != nil {
			return c, nil, fmt.Errorf("configuration: replica id: %w", err)
		}
		c.ReplicaID = id
	}
	if len(c.Agents) > 0 {
		var enabled []string
		for _, name := range c.Agents {
			name = strings.TrimSpace(name)
			if !slices.Contains(agentNames, name) {
				return c, nil, fmt.Errorf("configuration: AGENTGATE_AGENTS: unknown agent %q; the agents are %s", name, strings.Join(agentNames, ", "))
			}
			if !slices.Contains(enabled, name) {
				enabled = append(enabled, name)
			}
		}
		agentNames = enabled
	}
	agents := map[string]agentSettings{}
	for _, name := range agentNames {
		up := agentSettingName(name)
		s := agentSettings{Bin: getenv("AGENTGATE_" + up + "_BIN"), Home: getenv("AGENTGATE_" + up + "_HOME")}
		if s.Home == "" {
			s.Home = filepath.Join(c.DataDir, "agents", name)
		}
		abs, err := filepath.Abs(s.Home)
		if err != nil {
			return c, nil, fmt.Errorf("configuration: AGENTGATE_%s_HOME: %w", up, err)
		}
		s.Home = abs
		agents[name] = s
	}
	return c, agents, nil
}

// embeddedReplicaID returns the replica id kept in the data directory,
// making one the first time. The embedded store belongs to one gateway,
// so the id only has to be stable across its restarts, whatever the
// hostname (a re-created container gets a new one), for its unfinished
// runs to be found and marked interrupted.
func embeddedReplicaID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "replica-id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", err
	}
	id := "embedded-" + uuid.NewString()[:8]
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", err
	}
	return id, nil
}

// otherSettings are AGENTGATE_* variables that are not the gateway's own
// settings but are expected beside them: the client CLI's, and the cookie
// every agent's process carries.
var otherSettings = []string{"AGENTGATE_URL", "AGENTGATE_API_KEY", "AGENTGATE_RUN"}

// knownSettings returns every variable the gateway reads: each field of
// config and api.Config, by its envconfig tag, and each agent's BIN and
// HOME.
func knownSettings(agentNames []string) []string {
	known := slices.Clone(otherSettings)
	for _, t := range []reflect.Type{reflect.TypeFor[config](), reflect.TypeFor[api.Config]()} {
		for f := range t.Fields() {
			if tag := f.Tag.Get("envconfig"); tag != "" {
				known = append(known, "AGENTGATE_"+tag)
			}
		}
	}
	for _, name := range agentNames {
		up := "AGENTGATE_" + agentSettingName(name)
		known = append(known, up+"_BIN", up+"_HOME")
	}
	return known
}

// unknownSettings returns a warning for each AGENTGATE_* variable of
// environ that the gateway does not read, with the setting it most likely
// meant: a misspelled setting is otherwise silently ignored, and its
// default silently used. Variables of the gateway's own tests
// (AGENTGATE_TEST_*) are not settings.
func unknownSettings(environ []string, agentNames []string) []string {
	known := knownSettings(agentNames)
	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "AGENTGATE_") || strings.HasPrefix(name, "AGENTGATE_TEST_") || slices.Contains(known, name) {
			continue
		}
		w := name + " is not a setting of the gateway and is ignored"
		if near := nearest(name, known); near != "" {
			w += "; did you mean " + near + "?"
		}
		warnings = append(warnings, w)
	}
	slices.Sort(warnings)
	return warnings
}

// nearest returns the name of names closest to s by edit distance, if it
// is close enough to be a likely misspelling: at most a third of s's
// length (past the common prefix) apart.
func nearest(s string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		d := levenshtein.Distance(strings.TrimPrefix(s, "AGENTGATE_"), strings.TrimPrefix(n, "AGENTGATE_"))
		if bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	if bestD < 0 || bestD > max(1, (len(s)-len("AGENTGATE_"))/3) {
		return ""
	}
	return best
}

// agentSettingName is an agent's part of its settings' names:
// AGENTGATE_<it>_BIN. A configured agent's name may hold '-', which no
// shell can put in a variable's name, so it becomes '_'.
func agentSettingName(agent string) string {
	return strings.ToUpper(strings.ReplaceAll(agent, "-", "_"))
}
