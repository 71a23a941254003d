package main

import (
	"context"
	"fmt"
	"github.com/agentgate/agentgate/internal/schedules"
	"github.com/agentgate/agentgate/internal/triggers"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/api"
	"github.com/agentgate/agentgate/internal/diskguard"
	"github.com/agentgate/agentgate/internal/fanout"
	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/metrics"
	"github.com/agentgate/agentgate/internal/netguard"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/store"
	"github.com/agentgate/agentgate/internal/supervisor"
	"github.com/agentgate/agentgate/internal/tenants"
	"github.com/agentgate/agentgate/internal/webhooks"
	"github.com/agentgate/agentgate/internal/workspace"
)

// instance is one gateway: what runWith builds, one phase after another,
// and takes apart again. Each phase sets the fields the later ones use
// and adds what undoes it to closers.
type instance struct {
	sm     seams
	getenv func(string) string
	stdout io.Writer

	cfg      config
	agentCfg map[string]agentSettings
	roster   []runs.Adapter // the enabled agents
	allNames []string       // every agent's name, enabled or not
	redactor *redact.Redactor
	log      *zap.Logger

	ln         *netguard.Listener
	handler    swapHandler
	srv        *http.Server
	serveErr   chan error
	endStreams context.CancelFunc

	st    *store.Store
	emb   *store.Embedded // nil with an external NATS
	hub   *fanout.Hub
	guard *diskguard.Guard
	reg   *prometheus.Registry
	rec   *metrics.Recorder
	hooks *webhooks.Deliverer

	self     string // this executable, the agents' reaper unless one is installed beside it
	cgroups  *proctree.Cgroups
	agents   []*supervisor.Agent
	keys     api.Keys
	tokens   api.Tokens
	seal     []byte
	tempRoot string
	// uploads keeps tenants' files; sources makes runs' workspaces from
	// theirs (workspaces.go).
	uploads *files.Uploads
	sources *workspace.Sources
	// gitTokenFiles are the token files the git credentials named at
	// start, hidden from agents with the credentials file.
	gitTokenFiles []string
	sandbox       supervisor.Sandbox
	network       supervisor.NetworkConfig
	sup           *supervisor.Supervisor
	stopLoops     context.CancelFunc
	schedules     *schedules.Service
	triggers      *triggers.Service
	stopSchedules context.CancelFunc
	draining      chan struct{}

	closers []func()
}

// onClose adds f to what close undoes, last added first undone.
func (g *instance) onClose(f func()) { g.closers = append(g.closers, f) }

// close undoes what the phases did, in the reverse order.
func (g *instance) close() {
	for _, f := range slices.Backward(g.closers) {
		f()
	}
}

// start runs the phases that take the gateway from its settings to
// serving the API.
func (g *instance) start(ctx context.Context) error {
	for _, phase := range []func(context.Context) error{
		g.loadConfig,
		g.startLogging,
		g.makeDirs,
		g.listen,
		g.openStore,
		g.openDiskGuard,
		g.openMetrics,
		g.containProcesses,
		g.makeAgentHomes,
		g.openIdentity,
		g.openWorkspaces,
		g.openSandbox,
		g.openEgress,
		g.startSupervisor,
		g.startSchedules,
		g.serveAPI,
	} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	return nil
}

// loadConfig reads the settings, and keeps of the roster the agents they
// enable.
func (g *instance) loadConfig(context.Context) error {
	all, err := roster(g.getenv)
	if err != nil {
		return fmt.Errorf("configuration: %s: %w", agentsFileSetting, err)
	}
	g.roster = all
	names := make([]string, len(g.roster))
	for i, a := range g.roster {
		names[i] = a.Name()
	}
	g.allNames = slices.Clone(names)
	cfg, agentCfg, err := loadConfig(g.getenv, names)
	if err != nil {
		return err
	}
	g.cfg, g.agentCfg = cfg, agentCfg
	g.roster = slices.DeleteFunc(g.roster, func(a runs.Adapter) bool { _, ok := agentCfg[a.Name()]; return !ok })
	return nil
}

// startLogging makes the logger, which redacts secrets from every log
// line as the redactor does from every event and record: the operator's
// patterns, the credentials the agents are given, and the gateway's own.
func (g *instance) startLogging(context.Context) error {
	redactor, err := newRedactor(g.cfg, g.roster, g.getenv)
	if err != nil {
		return err
	}
	log, err := newLogger(g.cfg.LogLevel, g.stdout, redactor)
	if err != nil {
		return err
	}
	g.onClose(func() { log.Sync() }) //nolint:errcheck // stdout may not support sync
	g.redactor, g.log = redactor, log.With(zap.String("replica", g.cfg.ReplicaID))
	for _, w := range unknownSettings(os.Environ(), g.allNames) {
		g.log.Warn(w)
	}
	return nil
}

func (g *instance) makeDirs(context.Context) error {
	for _, dir := range []string{g.cfg.DataDir, g.cfg.WorkspaceRoot} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	return nil
}

// listen listens first: a port in use fails the start before anything
// runs. It serves at once too, answering 503 until the gateway is ready:
// a connection to a port that is listening but not served would wait (a
// load balancer's request hangs there), while a 503 sends it to another
// replica at once.
func (g *instance) listen(context.Context) error {
	ln, err := listenGuarded(g.cfg.Addr, g.cfg.MaxConnsPerClient, g.cfg.MaxConns, g.cfg.MaxConcurrentRuns, g.log)
	if err != nil {
		return err
	}
	g.ln = ln
	g.onClose(func() { ln.Close() })
	g.handler.set(startingHandler())
	// Requests hang off their own base context, not ctx: runs belong to
	// the supervisor, and open streams are ended only after the runs
	// they follow have had their grace period.
	baseCtx, endStreams := context.WithCancel(context.Background())
	g.endStreams = endStreams
	g.onClose(endStreams)
	srv := newHTTPServer(&g.handler, baseCtx, serverOptions{BodyTimeout: g.cfg.HTTP.BodyReadTimeout, Log: g.log.Named("http")})
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	g.srv, g.serveErr = srv, serveErr
	g.onClose(func() { srv.Close() }) // on a failed start; a clean stop shuts it down first
	return nil
}

// openStore connects to NATS and opens the store, and the hub through
// which the clients of a run on this replica share one store cursor on
// it, or none while this replica runs the run: the store hands the hub
// what it stored.
func (g *instance) openStore(ctx context.Context) error {
	nc, emb, closeNATS, err := connectNATS(g.cfg, g.log)
	if err != nil {
		return err
	}
	g.emb = emb
	g.onClose(closeNATS)
	// Replicas that start at once on an empty cluster all wait for it;
	// one that cannot reach it in StoreOpenTimeout says so and exits.
	openCtx, cancelOpen := context.WithTimeout(ctx, g.cfg.StoreOpenTimeout)
	st, err := store.Open(openCtx, nc, store.Options{
		Replicas: g.cfg.NATSReplicas, MaxAge: g.cfg.Retention, ReplicaTTL: g.cfg.ReplicaTTL,
		QueueSize: g.cfg.QueueSize, Log: g.log.Named("store"), FileTTL: g.cfg.FileTTL,
		SnapshotTenantBytes: g.cfg.SnapshotTenantBytes,
		EventsPerMessage:    g.cfg.EventsPerMessage,
	})
	cancelOpen()
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	g.st = st
	g.onClose(func() { st.Close() })
	g.hub = fanout.New(st, fanout.Options{}, g.log.Named("fanout"))
	st.OnAppend(g.hub.Offer)
	g.onClose(func() { g.hub.Close() })
	return nil
}

// openDiskGuard watches the disks: a full one must not break the store.
// See diskguard.
func (g *instance) openDiskGuard(context.Context) error {
	opts := diskguard.Options{
		Dirs: []string{g.cfg.WorkspaceRoot}, Reserve: g.cfg.StoreReserve, LowWater: g.cfg.DiskLowWater,
		Log: g.log.Named("disk"),
	}
	if g.emb != nil {
		opts.StoreDir, opts.Store = filepath.Join(g.cfg.DataDir, "nats"), g.emb
	}
	guard, err := diskguard.New(opts)
	g.guard = guard
	return err
}

// openMetrics makes the metrics, and the runs' webhooks, sent by
// whichever replica is up (webhooks.go), which count into them.
func (g *instance) openMetrics(ctx context.Context) error {
	g.reg = metrics.NewRegistry()
	names := make([]string, len(g.roster))
	for i, a := range g.roster {
		names[i] = a.Name()
	}
	rec, err := metrics.New(g.reg, metrics.Options{Agents: names})
	if err != nil {
		return err
	}
	g.rec = rec
	rec.ObserveFanout(g.hub)
	rec.ObservePacks(g.st)
	hooks, closeHooks, err := openWebhooks(ctx, g.cfg, g.st, g.reg, g.log.Named("webhooks"))
	if err != nil {
		return err
	}
	g.hooks = hooks
	g.onClose(closeHooks)
	return nil
}

// containProcesses prepares what keeps a run's processes together. Each
// agent runs under a subreaper, so that processes escaping the run's
// cookie scan still die with the run: agentgate-reaper beside this binary
// when installed (proctree.ReaperBeside), or else this same binary. And
// each run gets a cgroup where the settings and the machine allow it.
func (g *instance) containProcesses(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable for the agent reaper: %w", err)
	}
	g.self = self
	cgroups, err := openCgroups(ctx, g.cfg, g.log)
	if err != nil || cgroups == nil {
		return err
	}
	g.cgroups = cgroups
	g.onClose(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cgroups.Close(cctx); err != nil {
			g.log.Warn("remove the runs' cgroups", zap.Error(err))
		}
	})
	return nil
}

// makeAgentHomes makes each enabled agent's home directory.
func (g *instance) makeAgentHomes(context.Context) error {
	for _, a := range g.roster {
		s := g.agentCfg[a.Name()]
		if err := os.MkdirAll(s.Home, 0o700); err != nil {
			return fmt.Errorf("create home of agent %s: %w", a.Name(), err)
		}
		g.agents = append(g.agents, &supervisor.Agent{Adapter: a, Bin: s.Bin, Home: s.Home})
	}
	return nil
}

// openIdentity reads the API keys and the secrets of stream tokens and of
// sealed values (identity.go).
func (g *instance) openIdentity(ctx context.Context) error {
	keys, tokens, seal, err := openIdentity(ctx, g.cfg, g.st, g.log)
	g.keys, g.tokens, g.seal = keys, tokens, seal
	return err
}

// openSandbox confines every agent (unless the operator chose cli-only):
// the gateway's own files, other runs and the gateway's processes out of
// sight. Runs' temporary directories live under the data directory, so
// that they too are hidden from every other run.
func (g *instance) openSandbox(ctx context.Context) error {
	g.tempRoot = filepath.Join(g.cfg.DataDir, "tmp")
	if err := os.MkdirAll(g.tempRoot, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", g.tempRoot, err)
	}
	hide, err := g.hiddenPaths()
	if err != nil {
		return err
	}
	sandbox, err := newSandbox(ctx, g.cfg.Sandbox, hide, g.log.Named("sandbox"))
	g.sandbox = sandbox
	return err
}

// hiddenPaths are what no agent may see: the data directory, other runs,
// the agents' own homes and the gateway's files of secrets.
func (g *instance) hiddenPaths() ([]string, error) {
	hide := []string{g.cfg.DataDir, g.cfg.WorkspaceRoot}
	// Runs get homes of their own, made from their agent's: the agents'
	// homes, with their logins, are the gateway's alone.
	for _, a := range g.roster {
		if _, own := a.(runs.HomeKeeper); own {
			hide = append(hide, g.agentCfg[a.Name()].Home)
		}
	}
	secrets := []string{g.cfg.APIKeysFile, g.cfg.RedactPatternsFile, g.cfg.WebhooksFile, g.cfg.GitCredentialsFile}
	secrets = append(secrets, g.gitTokenFiles...)
	for _, p := range append(secrets, g.cfg.SandboxHide...) {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("AGENTGATE_SANDBOX_HIDE: %w", err)
		}
		hide = append(hide, abs)
	}
	return hide, nil
}

// startSupervisor starts the runs' supervisor, and has a low disk stop
// this replica's runs and keep it from taking more until there is room
// again.
func (g *instance) startSupervisor(context.Context) error {
	g.sup = supervisor.New(g.supervisorConfig(), g.st, g.agents, g.rec, g.log)
	g.rec.ObserveActivities(g.sup.ActivityCounts)
	// The loops outlive ctx: they stop after the shutdown's grace.
	loopCtx, stopLoops := context.WithCancel(context.Background())
	g.stopLoops = stopLoops
	g.onClose(stopLoops)
	if err := g.sup.Start(loopCtx); err != nil {
		return err
	}
	g.rec.SetAgents(g.sup.Agents())
	g.guard.OnChange(g.sup.Degrade)
	g.guard.HoldReserveWhile(g.sup.StoppingForDisk)
	g.sup.Degrade(g.guard.Healthy())
	go func() { _ = g.guard.Run(loopCtx) }()
	return nil
}

func (g *instance) supervisorConfig() supervisor.Config {
	cfg := g.cfg
	return supervisor.Config{
		Replica: cfg.ReplicaID, ReplicaTTL: cfg.ReplicaTTL, MaxConcurrent: cfg.MaxConcurrentRuns,
		DefaultTimeout: cfg.RunTimeout, MaxTimeout: cfg.MaxRunTimeout, KillGrace: cfg.KillGrace, StoreRetry: cfg.StoreRetry,
		Reaper: proctree.ReaperBeside(g.self), AgentNice: cfg.AgentNice, Cgroups: g.cgroups,
		WorkspaceRoot: cfg.WorkspaceRoot, WorkspaceRetention: cfg.Retention, Path: cfg.AgentPath, Getenv: g.getenv,
		Limits: supervisor.Limits{MaxText: cfg.MaxEventText, MaxToolInput: supervisor.DefaultLimits.MaxToolInput},
		// Snapshots of run directories are hidden with the data directory.
		Redact: g.redactor, Sandbox: g.sandbox, TempRoot: g.tempRoot, ArtifactsDir: filepath.Join(cfg.DataDir, "artifacts"),
		IdleTimeout: cfg.IdleTimeout, MaxIdleTimeout: cfg.MaxIdleTimeout,
		HibernateAfter: cfg.HibernateAfter, MaxHibernateAfter: cfg.MaxHibernateAfter,
		Quotas: tenants.NewLedger(tenants.Quotas{MaxRunning: cfg.TenantMaxRunning, MaxQueued: cfg.TenantMaxQueued,
			MaxOpen: cfg.TenantMaxOpen, DailyBudgetUSD: cfg.TenantDailyBudgetUSD},
			g.st, nil, g.log),
		Uploads:   g.uploads,
		Snapshots: g.st, SessionLocks: g.st, Sources: g.sources, HomesDir: filepath.Join(cfg.DataDir, "homes"),
		MaxWorkspaceBytes: cfg.MaxWorkspaceBytes, MaxSessionBytes: cfg.MaxSessionBytes,
		MCPCommands: cfg.MCPCommands, MCPURLs: cfg.MCPURLs, SealKey: g.seal,
		Cursors: g.hub, Webhooks: g.hooks, Network: g.network,
		VersionOutput: g.sm.versionOutput, RunDeadline: g.sm.runDeadline,
	}
}

// serveAPI puts the API in place of the starting handler, and says where
// it listens.
func (g *instance) serveAPI(context.Context) error {
	// draining is closed at SIGTERM: streams end at once with a hint to
	// reconnect elsewhere, and new ones are refused.
	g.draining = make(chan struct{})
	httpCfg := g.cfg.HTTP
	httpCfg.Draining = g.draining
	httpCfg.Tokens = g.tokens
	if g.keys != nil {
		httpCfg.Keys = g.keys
	} else {
		httpCfg.LoopbackHostsOnly = !g.cfg.InsecureNoAuth
	}
	metricsHandler := promhttp.HandlerFor(g.reg, promhttp.HandlerOpts{Registry: g.reg})
	g.handler.set(api.New(httpCfg, service{g.sup, g.hooks, g.schedules, g.triggers}, g.rec, metricsHandler, g.log))
	fmt.Fprintf(g.stdout, "agentgate listening on http://%s\n", g.ln.Addr())
	g.log.Info("gateway started", zap.String("addr", g.ln.Addr().String()), zap.String("data_dir", g.cfg.DataDir),
		zap.Bool("embedded_nats", g.cfg.NATSURL == ""))
	return nil
}

// serve serves until ctx ends, or the server fails.
func (g *instance) serve(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-g.serveErr:
		return fmt.Errorf("serve: %w", err)
	}
}

// shutdown stops taking runs at once (/readyz and POST answer 503, and a
// load balancer sends new runs elsewhere), ends the streams with a hint
// to resume on another replica, which reads the same log, and lets
// running runs finish within the grace period; then stops them.
func (g *instance) shutdown() {
	g.log.Info("shutting down", zap.Duration("grace", g.cfg.ShutdownGrace))
	graceCtx, cancel := context.WithTimeout(context.Background(), g.cfg.ShutdownGrace)
	defer cancel()
	g.stopSchedules()
	shutdown := make(chan error, 1)
	go func() { shutdown <- g.sup.Shutdown(graceCtx) }()
	close(g.draining)
	if err := <-shutdown; err != nil {
		g.log.Warn("runs stopped at the end of the grace period", zap.Error(err))
	}
	g.endStreams()
	httpCtx, cancelHTTP := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelHTTP()
	if err := g.srv.Shutdown(httpCtx); err != nil {
		g.srv.Close()
	}
	g.stopLoops()
	g.log.Info("gateway stopped")
}
