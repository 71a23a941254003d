package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
)

// problems collects what is wrong with the configuration, each naming its
// setting, so that an operator sees every mistake at once.
type problems []error

// bad adds a problem with the setting AGENTGATE_<name>.
func (p *problems) bad(name, format string, args ...any) {
	*p = append(*p, fmt.Errorf("AGENTGATE_%s: "+format, append([]any{name}, args...)...))
}

// validate checks the settings, concern by concern in a fixed order (the
// order of the messages), and fills in the defaults that depend on other
// settings.
func (c *config) validate() error {
	var p problems
	for _, check := range []func(*config, *problems){
		(*config).checkListen,       // ADDR
		(*config).checkSandbox,      // SANDBOX
		(*config).checkTenantQuotas, // TENANT_MAX_RUNNING, TENANT_MAX_QUEUED, TENANT_DAILY_BUDGET_USD
		(*config).checkSecrets,      // STREAM_TOKEN_SECRET, SECRETS_KEY
		(*config).checkMCP,          // MCP_COMMANDS, MCP_URLS
		(*config).checkTenantLimits, // TENANT_RATE, TENANT_STREAMS
		(*config).checkDirs,         // DATA_DIR, WORKSPACE_ROOT
		(*config).checkNATS,         // NATS_URL, NATS_REPLICAS, EVENTS_PER_MESSAGE
		(*config).checkCapacity,     // MAX_CONCURRENT_RUNS, AGENT_NICE, QUEUE_SIZE
		(*config).checkRunTimes,     // RUN_TIMEOUT, MAX_RUN_TIMEOUT, KILL_GRACE
		(*config).checkIdleTimes,    // IDLE_TIMEOUT, MAX_IDLE_TIMEOUT, HIBERNATE_AFTER, MAX_HIBERNATE_AFTER
		(*config).checkIsolation,    // PROCESS_ISOLATION
		(*config).checkStore,        // STORE_RETRY, STORE_OPEN_TIMEOUT, DISK_LOW_WATER
		(*config).checkShutdown,     // SHUTDOWN_GRACE
		(*config).checkEvents,       // MAX_EVENT_TEXT, SSE_PING_INTERVAL
		(*config).checkReplicas,     // REPLICA_TTL
		(*config).checkRetention,    // RETENTION
		(*config).checkWebhooks,     // WEBHOOK_*
		(*config).checkLogLevel,     // LOG_LEVEL
	} {
		check(c, &p)
	}
	c.defaultReplicaID()
	if c.AgentPath == "" {
		c.AgentPath = os.Getenv("PATH")
	}
	return errors.Join(p...)
}

// checkListen defaults the address, and refuses one reachable from the
// network when nobody authenticates and the operator did not say so.
func (c *config) checkListen(p *problems) {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8080"
		if c.APIKeysFile != "" || c.InsecureNoAuth {
			c.Addr = ":8080"
		}
	}
	if host, _, err := net.SplitHostPort(c.Addr); err != nil {
		p.bad("ADDR", "%q is not host:port (%v)", c.Addr, err)
	} else if c.APIKeysFile == "" && !c.InsecureNoAuth && !loopbackHost(host) {
		p.bad("ADDR", "%q is not a loopback address, and no AGENTGATE_API_KEYS_FILE is set: anyone who reaches it could run commands on this machine; set a keys file (gateway keys new), or AGENTGATE_INSECURE_NO_AUTH=true to expose it without authentication", c.Addr)
	}
}

func (c *config) checkSandbox(p *problems) {
	if !slices.Contains([]string{"auto", "bubblewrap", "cli-only"}, c.Sandbox) {
		p.bad("SANDBOX", "%q is not one of auto, bubblewrap, cli-only", c.Sandbox)
	}
}

func (c *config) checkTenantQuotas(p *problems) {
	if c.TenantMaxRunning < 0 || c.TenantMaxQueued < 0 || c.TenantMaxOpen < 0 || c.TenantDailyBudgetUSD < 0 {
		p.bad("TENANT_MAX_RUNNING", "tenant quotas must not be negative")
	}
}

func (c *config) checkSecrets(p *problems) {
	if s := c.StreamTokenSecret; s != "" && len(s) < 32 {
		p.bad("STREAM_TOKEN_SECRET", "must be at least 32 characters")
	}
	if s := c.SecretsKey; s != "" && len(s) < 32 {
		p.bad("SECRETS_KEY", "must be at least 32 characters")
	}
}

// checkMCP checks the allow-lists of runs' MCP servers.
func (c *config) checkMCP(p *problems) {
	for _, cmd := range c.MCPCommands {
		if !filepath.IsAbs(cmd) {
			p.bad("MCP_COMMANDS", "%q is not an absolute path: name each command, or a directory ending in /, by its full path", cmd)
		}
	}
	for _, u := range c.MCPURLs {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			p.bad("MCP_URLS", "%q is not an http or https URL", u)
		}
	}
}

func (c *config) checkTenantLimits(p *problems) {
	if c.HTTP.TenantRate < 0 || c.HTTP.TenantStreams < 0 {
		p.bad("TENANT_RATE", "tenant limits must not be negative")
	}
}

// checkDirs makes the data directory and the workspace root absolute; the
// workspace root defaults to one in the data directory.
func (c *config) checkDirs(p *problems) {
	if c.DataDir == "" {
		p.bad("DATA_DIR", "must not be empty")
	} else if abs, err := filepath.Abs(c.DataDir); err == nil {
		c.DataDir = abs
	}
	if c.WorkspaceRoot == "" {
		c.WorkspaceRoot = filepath.Join(c.DataDir, "workspaces")
	} else if abs, err := filepath.Abs(c.WorkspaceRoot); err == nil {
		c.WorkspaceRoot = abs
	}
}

func (c *config) checkNATS(p *problems) {
	if c.NATSURL != "" && !strings.Contains(c.NATSURL, "://") {
		p.bad("NATS_URL", "%q is not a URL such as nats://host:4222", redactURL(c.NATSURL))
	}
	if c.NATSReplicas < 1 || c.NATSReplicas > 5 {
		p.bad("NATS_REPLICAS", "must be 1 to 5, got %d", c.NATSReplicas)
	}
	if c.EventsPerMessage < 1 || c.EventsPerMessage > 4096 {
		p.bad("EVENTS_PER_MESSAGE", "must be 1 to 4096, got %d", c.EventsPerMessage)
	}
}

// checkCapacity checks how many runs this replica runs, at what niceness,
// and how many the queue holds.
func (c *config) checkCapacity(p *problems) {
	if c.MaxConcurrentRuns < 1 || c.MaxConcurrentRuns > 1024 {
		p.bad("MAX_CONCURRENT_RUNS", "must be 1 to 1024, got %d", c.MaxConcurrentRuns)
	}
	if c.AgentNice < 0 || c.AgentNice > proctree.MaxNice {
		p.bad("AGENT_NICE", "must be 0 to %d, got %d", proctree.MaxNice, c.AgentNice)
	}
	if c.QueueSize < 1 || c.QueueSize > 100000 {
		p.bad("QUEUE_SIZE", "must be 1 to 100000, got %d", c.QueueSize)
	}
}

func (c *config) checkRunTimes(p *problems) {
	if c.RunTimeout <= 0 {
		p.bad("RUN_TIMEOUT", "must be positive, got %s", c.RunTimeout)
	}
	if c.MaxRunTimeout < c.RunTimeout {
		p.bad("MAX_RUN_TIMEOUT", "%s is less than RUN_TIMEOUT %s", c.MaxRunTimeout, c.RunTimeout)
	}
	if c.KillGrace <= 0 || c.KillGrace > time.Minute {
		p.bad("KILL_GRACE", "must be between 0 and 1m, got %s", c.KillGrace)
	}
}

// checkIdleTimes checks how long interactive runs stay open and when they
// hibernate, against the domain's bounds.
func (c *config) checkIdleTimes(p *problems) {
	if c.MaxIdleTimeout < time.Second || c.MaxIdleTimeout > runs.MaxIdleTimeout {
		p.bad("MAX_IDLE_TIMEOUT", "must be between 1s and %s, got %s", runs.MaxIdleTimeout, c.MaxIdleTimeout)
	}
	if c.IdleTimeout < time.Second || c.IdleTimeout > c.MaxIdleTimeout {
		p.bad("IDLE_TIMEOUT", "must be between 1s and MAX_IDLE_TIMEOUT %s, got %s", c.MaxIdleTimeout, c.IdleTimeout)
	}
	if c.MaxHibernateAfter < runs.MinHibernateAfter || c.MaxHibernateAfter > runs.MaxHibernateAfter {
		p.bad("MAX_HIBERNATE_AFTER", "must be between %s and %s, got %s", runs.MinHibernateAfter, runs.MaxHibernateAfter, c.MaxHibernateAfter)
	}
	if c.HibernateAfter != 0 && (c.HibernateAfter < runs.MinHibernateAfter || c.HibernateAfter > c.MaxHibernateAfter) {
		p.bad("HIBERNATE_AFTER", "must be 0 or between %s and MAX_HIBERNATE_AFTER %s, got %s", runs.MinHibernateAfter, c.MaxHibernateAfter, c.HibernateAfter)
	}
}

func (c *config) checkIsolation(p *problems) {
	if !slices.Contains([]string{"auto", "cgroup", "reaper"}, c.ProcessIsolation) {
		p.bad("PROCESS_ISOLATION", "%q is not one of auto, cgroup, reaper", c.ProcessIsolation)
	}
}

func (c *config) checkStore(p *problems) {
	if c.StoreRetry < time.Second {
		p.bad("STORE_RETRY", "must be at least 1s, got %s", c.StoreRetry)
	}
	if c.StoreOpenTimeout < time.Second {
		p.bad("STORE_OPEN_TIMEOUT", "must be at least 1s, got %s", c.StoreOpenTimeout)
	}
	if c.DiskLowWater < 0 {
		p.bad("DISK_LOW_WATER", "must not be negative, got %d", c.DiskLowWater)
	}
}

func (c *config) checkShutdown(p *problems) {
	if c.ShutdownGrace < 0 {
		p.bad("SHUTDOWN_GRACE", "must not be negative, got %s", c.ShutdownGrace)
	}
}

func (c *config) checkEvents(p *problems) {
	if c.MaxEventText < 1024 || c.MaxEventText > 512<<10 {
		p.bad("MAX_EVENT_TEXT", "must be 1024 to 524288 bytes (an event must fit one NATS message), got %d", c.MaxEventText)
	}
	if c.HTTP.PingInterval < 100*time.Millisecond {
		p.bad("SSE_PING_INTERVAL", "must be at least 100ms, got %s", c.HTTP.PingInterval)
	}
}

func (c *config) checkReplicas(p *problems) {
	if c.ReplicaTTL < time.Second {
		p.bad("REPLICA_TTL", "must be at least 1s, got %s", c.ReplicaTTL)
	}
}

func (c *config) checkRetention(p *problems) {
	if c.Retention < 0 {
		p.bad("RETENTION", "must not be negative, got %s", c.Retention)
	} else if c.Retention > 0 && c.Retention <= c.MaxRunTimeout {
		// Otherwise a long run's record and first events expire while it
		// is still going.
		p.bad("RETENTION", "%s must be longer than MAX_RUN_TIMEOUT %s, or 0 to keep everything", c.Retention, c.MaxRunTimeout)
	}
}

func (c *config) checkWebhooks(p *problems) {
	*p = append(*p, c.validateWebhooks()...)
}

func (c *config) checkLogLevel(p *problems) {
	if _, err := zapcore.ParseLevel(c.LogLevel); err != nil {
		p.bad("LOG_LEVEL", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
}

// defaultReplicaID names a replica of an external NATS by its hostname
// when the operator named none: replicas sharing a NATS server must
// differ, and the hostname is stable in a StatefulSet and under
// docker-compose. (With the embedded store, loadConfig keeps an id in the
// data directory.)
func (c *config) defaultReplicaID() {
	if c.ReplicaID != "" || c.NATSURL == "" {
		return
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "local"
	}
	c.ReplicaID = host
}

// loopbackHost reports whether a listen host reaches only this machine.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
