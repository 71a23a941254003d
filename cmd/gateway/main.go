// Command gateway is agentgate: an HTTP service that runs coding-agent CLIs
// headless, streams their normalized events over SSE and exports metrics.
//
// It is configured by AGENTGATE_* environment variables (see README.md).
// With no AGENTGATE_NATS_URL it stores runs and events in an embedded NATS
// JetStream server under AGENTGATE_DATA_DIR.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/agentgate/agentgate/internal/adapters/claude"
	"github.com/agentgate/agentgate/internal/adapters/codex"
	"github.com/agentgate/agentgate/internal/adapters/copilot"
	"github.com/agentgate/agentgate/internal/adapters/gemini"
	"github.com/agentgate/agentgate/internal/adapters/opencode"
	"github.com/agentgate/agentgate/internal/api"
	"github.com/agentgate/agentgate/internal/diskguard"
	"github.com/agentgate/agentgate/internal/fanout"
	"github.com/agentgate/agentgate/internal/metrics"
	"github.com/agentgate/agentgate/internal/proctree"
	_ "github.com/agentgate/agentgate/internal/proctree/lightreaper"
	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/store"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == proctree.ReaperArg {
		// The supervisor runs each agent under this binary as its
		// subreaper; see proctree.Reap. Built with cgo, this binary's
		// reapers never get here: lightreaper reaps before the Go
		// runtime, and so before every package here, starts.
		os.Exit(proctree.Reap(os.Args[2:]))
	}
	if len(os.Args) > 1 {
		if c, ok := lookupCommand(os.Args[1]); ok {
			os.Exit(c.run(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// adapters is the roster of agents, in one place: adding an agent is one
// line here plus its package. getenv is the gateway's environment, where
// OpenCode's adapter reads the operator's configuration of the models.
func adapters(getenv func(string) string) []runs.Adapter {
	return []runs.Adapter{
		claude.New(),
		codex.New(),
		copilot.New(),
		gemini.New(),
		opencode.New(opencode.WithGetenv(getenv)),
	}
}

// run starts the gateway and serves until ctx ends, then shuts down
// gracefully. It prints the address it listens on to stdout.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return runWith(ctx, seams{}, args, getenv, stdout)
}

// seams are what tests put in place of the gateway's own; a nil field
// keeps the gateway's.
type seams struct {
	// versionOutput runs an agent's version command at startup
	// (runs.Config.VersionOutput): the tests' gateways share one cache.
	versionOutput runs.VersionOutput
	// runDeadline arms runs' timeouts (runs.Config.RunDeadline).
	runDeadline func(runID string, timeout time.Duration) <-chan time.Time
}

// runWith is run with the seams sm.
func runWith(ctx context.Context, sm seams, args []string, getenv func(string) string, stdout io.Writer) error {
	roster := adapters(getenv)
	if len(args) > 0 {
		if len(args) == 1 && isHelp(args[0]) {
			writeHelp(stdout, agentNames())
			return nil
		}
		return usageError{fmt.Sprintf("unexpected arguments %q: the gateway is configured by AGENTGATE_* environment variables", args)}
	}
	names := make([]string, len(roster))
	for i, a := range roster {
		names[i] = a.Name()
	}
	allNames := slices.Clone(names)
	cfg, agentCfg, err := loadConfig(getenv, names)
	if err != nil {
		return err
	}
	// Only the agents the configuration enables.
	roster = slices.DeleteFunc(roster, func(a runs.Adapter) bool { _, ok := agentCfg[a.Name()]; return !ok })
	names = names[:0]
	for _, a := range roster {
		names = append(names, a.Name())
	}
	// Secrets are redacted from every log line, event and record: the
	// operator's patterns, the credentials the agents are given, and the
	// gateway's own.
	redactor, err := newRedactor(cfg, roster, getenv)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg.LogLevel, stdout, redactor)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // stdout may not support sync
	log = log.With(zap.String("replica", cfg.ReplicaID))
	for _, w := range unknownSettings(os.Environ(), allNames) {
		log.Warn(w)
	}

	for _, dir := range []string{cfg.DataDir, cfg.WorkspaceRoot} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}

	// Listen first: a port in use fails the start before anything runs.
	// Serve at once too, answering 503 until the gateway is ready: a
	// connection to a port that is listening but not served would wait
	// (a load balancer's request hangs there), while a 503 sends it to
	// another replica at once.
	ln, err := listenGuarded(cfg.Addr, cfg.MaxConnsPerClient, cfg.MaxConns, cfg.MaxConcurrentRuns, log)
	if err != nil {
		return err
	}
	defer ln.Close()
	var handler swapHandler
	handler.set(startingHandler())
	// Requests hang off their own base context, not ctx: runs belong to
	// the supervisor, and open streams are ended only after the runs
	// they follow have had their grace period.
	baseCtx, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	srv := newHTTPServer(&handler, baseCtx, serverOptions{BodyTimeout: cfg.HTTP.BodyReadTimeout, Log: log.Named("http")})
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	defer srv.Close() // on a failed start; a clean stop shuts it down first

	nc, emb, closeNATS, err := connectNATS(cfg, log)
	if err != nil {
		return err
	}
	defer closeNATS()
	// Replicas that start at once on an empty cluster all wait for it;
	// one that cannot reach it in StoreOpenTimeout says so and exits.
	openCtx, cancelOpen := context.WithTimeout(ctx, cfg.StoreOpenTimeout)
	st, err := store.Open(openCtx, nc, store.Options{
		Replicas: cfg.NATSReplicas, MaxAge: cfg.Retention, ReplicaTTL: cfg.ReplicaTTL,
		QueueSize: cfg.QueueSize, Log: log.Named("store"), FileTTL: cfg.FileTTL,
		EventsPerMessage: cfg.EventsPerMessage,
	})
	cancelOpen()
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	// The clients of a run on this replica share one store cursor on it,
	// or none while this replica runs the run: the supervisor writes
	// through hub.Offering, which hands the hub what it stored.
	hub := fanout.New(st, fanout.Options{}, log.Named("fanout"))
	defer hub.Close()

	// The disks: a full one must not break the store. See diskguard.
	guardOpts := diskguard.Options{
		Dirs: []string{cfg.WorkspaceRoot}, Reserve: cfg.StoreReserve, LowWater: cfg.DiskLowWater,
		Log: log.Named("disk"),
	}
	if emb != nil {
		guardOpts.StoreDir, guardOpts.Store = filepath.Join(cfg.DataDir, "nats"), emb
	}
	guard, err := diskguard.New(guardOpts)
	if err != nil {
		return err
	}

	reg := metrics.NewRegistry()
	rec, err := metrics.New(reg, metrics.Options{Agents: names})
	if err != nil {
		return err
	}
	rec.ObserveFanout(hub)
	rec.ObservePacks(st)
	// Runs' webhooks, sent by whichever replica is up (webhooks.go).
	hooks, closeHooks, err := openWebhooks(ctx, cfg, st, reg, log.Named("webhooks"))
	if err != nil {
		return err
	}
	defer closeHooks()

	// Each agent runs under a subreaper, so that processes escaping the
	// run's cookie scan still die with the run: agentgate-reaper beside
	// this binary when installed (proctree.ReaperBeside), or else this
	// same binary.
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable for the agent reaper: %w", err)
	}
	cgroups, err := openCgroups(ctx, cfg, log)
	if err != nil {
		return err
	}
	if cgroups != nil {
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := cgroups.Close(cctx); err != nil {
				log.Warn("remove the runs' cgroups", zap.Error(err))
			}
		}()
	}
	var agents []*runs.Agent
	for _, a := range roster {
		s := agentCfg[a.Name()]
		if err := os.MkdirAll(s.Home, 0o700); err != nil {
			return fmt.Errorf("create home of agent %s: %w", a.Name(), err)
		}
		agents = append(agents, &runs.Agent{Adapter: a, Bin: s.Bin, Home: s.Home})
	}
	keys, tokens, seal, err := openIdentity(ctx, cfg, st, log)
	if err != nil {
		return err
	}
	// Every agent runs confined (unless the operator chose cli-only): the
	// gateway's own files, other runs and the gateway's processes out of
	// sight. Runs' temporary directories live under the data directory,
	// so that they too are hidden from every other run.
	tempRoot := filepath.Join(cfg.DataDir, "tmp")
	if err := os.MkdirAll(tempRoot, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", tempRoot, err)
	}
	hide := []string{cfg.DataDir, cfg.WorkspaceRoot}
	for _, p := range append([]string{cfg.APIKeysFile, cfg.RedactPatternsFile, cfg.WebhooksFile}, cfg.SandboxHide...) {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("AGENTGATE_SANDBOX_HIDE: %w", err)
		}
		hide = append(hide, abs)
	}
	sandbox, err := newSandbox(ctx, cfg.Sandbox, hide, log.Named("sandbox"))
	if err != nil {
		return err
	}
	sup := runs.NewSupervisor(runs.Config{
		Replica: cfg.ReplicaID, ReplicaTTL: cfg.ReplicaTTL, MaxConcurrent: cfg.MaxConcurrentRuns,
		DefaultTimeout: cfg.RunTimeout, MaxTimeout: cfg.MaxRunTimeout, KillGrace: cfg.KillGrace, StoreRetry: cfg.StoreRetry,
		Reaper: proctree.ReaperBeside(self), AgentNice: cfg.AgentNice, Cgroups: cgroups,
		WorkspaceRoot: cfg.WorkspaceRoot, WorkspaceRetention: cfg.Retention, Path: cfg.AgentPath, Getenv: getenv,
		Limits: runs.Limits{MaxText: cfg.MaxEventText, MaxToolInput: runs.DefaultLimits.MaxToolInput},
		// Snapshots of run directories are hidden with the data directory.
		Redact: redactor, Sandbox: sandbox, TempRoot: tempRoot, ArtifactsDir: filepath.Join(cfg.DataDir, "artifacts"),
		Quotas:      runs.Quotas{MaxRunning: cfg.TenantMaxRunning, MaxQueued: cfg.TenantMaxQueued, DailyBudgetUSD: cfg.TenantDailyBudgetUSD},
		Files:       runs.FileLimits{TTL: cfg.FileTTL, MaxBytes: cfg.HTTP.MaxFileBytes, MaxPerTenant: cfg.MaxFilesPerTenant},
		MCPCommands: cfg.MCPCommands, MCPURLs: cfg.MCPURLs, SealKey: seal,
		Cursors: hub, Webhooks: hooks,
		VersionOutput: sm.versionOutput, RunDeadline: sm.runDeadline,
	}, hub.Offering(st), agents, rec, log)
	loopCtx, stopLoops := context.WithCancel(context.Background())
	defer stopLoops()
	if err := sup.Start(loopCtx); err != nil {
		return err
	}
	rec.SetAgents(sup.Agents())
	// A low disk stops this replica's runs and keeps it from taking more
	// until there is room again.
	guard.OnChange(sup.Degrade)
	guard.HoldReserveWhile(sup.StoppingForDisk)
	sup.Degrade(guard.Healthy())
	go func() { _ = guard.Run(loopCtx) }()

	// draining is closed at SIGTERM: streams end at once with a hint to
	// reconnect elsewhere, and new ones are refused.
	draining := make(chan struct{})
	httpCfg := cfg.HTTP
	httpCfg.Draining = draining
	httpCfg.Tokens = tokens
	if keys != nil {
		httpCfg.Keys = keys
	} else {
		httpCfg.LoopbackHostsOnly = !cfg.InsecureNoAuth
	}
	handler.set(api.New(httpCfg, service{sup, hooks}, rec, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), log))
	fmt.Fprintf(stdout, "agentgate listening on http://%s\n", ln.Addr())
	log.Info("gateway started", zap.String("addr", ln.Addr().String()), zap.String("data_dir", cfg.DataDir),
		zap.Bool("embedded_nats", cfg.NATSURL == ""))

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("shutting down", zap.Duration("grace", cfg.ShutdownGrace))
	// Stop taking runs at once (/readyz and POST answer 503, and a load
	// balancer sends new runs elsewhere), end the streams with a hint to
	// resume on another replica, which reads the same log, and let
	// running runs finish within the grace period; then stop them.
	graceCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	shutdown := make(chan error, 1)
	go func() { shutdown <- sup.Shutdown(graceCtx) }()
	close(draining)
	if err := <-shutdown; err != nil {
		log.Warn("runs stopped at the end of the grace period", zap.Error(err))
	}
	endStreams()
	httpCtx, cancelHTTP := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelHTTP()
	if err := srv.Shutdown(httpCtx); err != nil {
		srv.Close()
	}
	stopLoops()
	log.Info("gateway stopped")
	return nil
}

// openCgroups gives runs a cgroup each as AGENTGATE_PROCESS_ISOLATION
// says: nil for "reaper", and for "auto" on a machine that does not allow
// it. Opening them kills what a dead gateway of this replica left.
func openCgroups(ctx context.Context, cfg config, log *zap.Logger) (*proctree.Cgroups, error) {
	if cfg.ProcessIsolation == "reaper" {
		return nil, nil
	}
	cgs, err := proctree.OpenCgroups(ctx, proctree.CgroupOptions{Root: cfg.CgroupRoot, Replica: cfg.ReplicaID})
	if errors.Is(err, proctree.ErrSweep) {
		// Stuck processes must not keep the replica from starting.
		log.Error("processes a dead gateway of this replica left survive", zap.Error(err))
		err = nil
	}
	switch {
	case err == nil:
		log.Info("each run gets a cgroup", zap.String("cgroup_dir", cgs.Dir()))
		return cgs, nil
	case cfg.ProcessIsolation == "auto" && errors.Is(err, proctree.ErrNoCgroups):
		log.Warn("runs are contained by their reaper alone", zap.Error(err))
		return nil, nil
	}
	return nil, fmt.Errorf("AGENTGATE_PROCESS_ISOLATION=%s: %w", cfg.ProcessIsolation, err)
}

// connectNATS dials AGENTGATE_NATS_URL, or starts the embedded server under
// the data directory when it is unset.
// The embedded server is returned too, for the disk guard; nil with
// NATS_URL.
func connectNATS(cfg config, log *zap.Logger) (*nats.Conn, *store.Embedded, func(), error) {
	if cfg.NATSURL != "" {
		// RetryOnFailedConnect: a replica started with the cluster, or
		// while one node is down, keeps trying instead of exiting.
		nc, err := nats.Connect(cfg.NATSURL, nats.Name("agentgate "+cfg.ReplicaID), nats.MaxReconnects(-1),
			nats.RetryOnFailedConnect(true), nats.ReconnectWait(250*time.Millisecond))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("connect to %s: %w", redactURL(cfg.NATSURL), err)
		}
		return nc, nil, func() { nc.Drain() }, nil
	}
	emb, err := store.StartEmbedded(filepath.Join(cfg.DataDir, "nats"), log)
	if err != nil {
		return nil, nil, nil, err
	}
	nc, err := emb.Connect()
	if err != nil {
		emb.Shutdown()
		return nil, nil, nil, err
	}
	return nc, emb, func() { nc.Close(); emb.Shutdown() }, nil
}

// newLogger returns a JSON logger at level, writing to w, that redacts
// what r finds.
func newLogger(level string, w io.Writer, r *redact.Redactor) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, errors.New("bad log level")
	}
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey, enc.EncodeTime = "time", zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(w), lvl)
	return zap.New(redact.Core(core, r)), nil
}

// swapHandler serves whichever handler was set last: the starting one,
// then the API.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// startingHandler answers while the gateway starts: /healthz 200 (the
// process is alive), everything else 503 not_ready with Retry-After, in the
// API's error shape.
func startingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"status":"ok"}`+"\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"code":"not_ready","message":"the gateway is starting; retry in a moment"}}`+"\n")
	})
}
