package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/artifacts"
	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/probe"
	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/tenants"
	"github.com/agentgate/agentgate/internal/workspace"
)

// Why the supervisor ended a run, as the cause of the run's context.
var (
	errCancelled = errors.New("cancelled by request")
	errTimeout   = errors.New("run timeout")
	errShutdown  = errors.New("gateway shutdown")
	errDiskFull  = errors.New("disk full")
)

func stopReason(cause error) string {
	switch {
	case errors.Is(cause, errCancelled):
		return "cancelled"
	case errors.Is(cause, errTimeout):
		return "timeout"
	case errors.Is(cause, errShutdown):
		return "shutdown"
	case errors.Is(cause, errDiskFull):
		return "disk_full"
	case budgetError(cause) != nil:
		return stopBudget
	}
	return ""
}

// Config tunes a Supervisor. Zero values take the defaults noted.
type Config struct {
	// Replica names this gateway instance; runs record it as their owner.
	Replica string
	// MCPCommands allow-lists the commands a run's stdio MCP servers may
	// start (AGENTGATE_MCP_COMMANDS); MCPURLs the remote MCP servers'
	// URLs (AGENTGATE_MCP_URLS). Empty: none.
	MCPCommands []string
	MCPURLs     []string
	// SealKey seals the env and header values of a run's MCP servers in
	// its stored spec and queue entry (AES-GCM; 16, 24 or 32 bytes).
	// Every replica must have the same key. Nil: a random key made at
	// start, which opens only on this replica and only until it stops.
	SealKey []byte
	// MaxConcurrent bounds the runs executing at once (default 4).
	MaxConcurrent int
	// DefaultTimeout applies when a spec sets none (default 30 min);
	// MaxTimeout caps what a spec may ask for (default 24 h).
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	// KillGrace is the time between the steps of stopping a process:
	// interrupt, SIGTERM, SIGKILL (default 5 s).
	KillGrace time.Duration
	// WorkspaceRoot is where run directories live; cwd is relative to it.
	WorkspaceRoot string
	// Path is the PATH given to agent processes.
	Path string
	// Getenv reads the gateway's environment, for the variables each
	// adapter passes through. Nothing else of it reaches a child.
	Getenv func(string) string
	// Limits bound event payloads.
	Limits Limits
	// MaxLine bounds one line of agent output (default 64 MiB).
	MaxLine int
	// StderrTail is how much of stderr is kept (default 64 KiB).
	StderrTail int
	// Health, when set, is asked by Ready besides the store: a check of
	// what else the gateway needs, such as its disks.
	Health func(context.Context) error
	// StoreRetry is how long a failing store write (an append of events,
	// a run's record) is retried before it is given up (default 2 min):
	// longer than a leader election of a NATS cluster. A run whose events
	// were given up fails with class store_failed.
	StoreRetry time.Duration
	// AppendQueue bounds the events of one run waiting to be stored
	// (default 4096); beyond it, reading the agent's output waits.
	AppendQueue int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// ReplicaTTL, when positive, turns on liveness: the supervisor sends
	// a heartbeat every quarter of it, and marks interrupted the unfinished
	// runs of replicas whose heartbeat is older than it (the store's TTL).
	ReplicaTTL time.Duration
	// Reaper, when set, is a binary that runs each agent under a child
	// subreaper when given proctree.ReaperArg and the agent's argv:
	// agentgate-reaper beside the gateway's binary when it is installed,
	// else the gateway's own executable (see proctree.ReaperBeside,
	// proctree.Reap). Processes that escape the cookie scan are then still
	// killed when the agent exits.
	Reaper string
	// AgentNice, from 1 to 19, is the niceness the reaper starts each
	// agent at, which all the agent starts inherits; 0 leaves the
	// gateway's. It needs Reaper.
	AgentNice int
	// Cgroups, when set, gives each run a cgroup of its own, killed whole
	// when the run ends (see proctree.Cgroups); without it a run's
	// processes are contained by the reaper and the cookie alone.
	Cgroups *proctree.Cgroups
	// Network gives runs their network policy and enforces it.
	Network NetworkConfig
	// WorkspaceRetention, when positive, is how long the run directories
	// the supervisor creates are kept; older ones are removed.
	WorkspaceRetention time.Duration
	// ArtifactsDir, when set, is where the snapshots of each run's
	// directory and its whole diff are kept: under the data directory,
	// which the sandbox hides from agents. Without it no changed files
	// are found, and only an adapter's own diff is recorded.
	ArtifactsDir string
	// Sandbox, when set, confines every agent process (see Sandbox);
	// without it only the CLI enforces a run's Permission.
	Sandbox Sandbox
	// TempRoot is where each run gets its own temporary
	// directory (default: the system's).
	TempRoot string
	// Redact, when set, removes secrets from every event, record and log
	// line of a run: its patterns and literals, and the values of the
	// credential variables given to the run's agent.
	Redact *redact.Redactor
	// Quotas, when set, counts each tenant's runs against its quotas and
	// refuses those past them (see tenants.Ledger); nil: no quotas.
	Quotas *tenants.Ledger
	// Snapshots, when set, keeps runs' workspaces, patches and sessions'
	// state in the cluster, for every replica to serve and continue.
	// MaxWorkspaceBytes bounds one run's directory there (default
	// DefaultMaxWorkspaceBytes), MaxSessionBytes one session's files
	// (default DefaultMaxSessionBytes).
	Snapshots         runs.Snapshots
	MaxWorkspaceBytes int64
	MaxSessionBytes   int64
	// SessionLocks, when set, keeps a session to one run at a time.
	SessionLocks runs.SessionLocks
	// Sources, when set, makes runs' directories from their workspace
	// sources (a repository, an archive, another run's directory);
	// without it a run that names one is refused.
	Sources *workspace.Sources
	// HomesDir, when set, is where each run gets a CLI home of its own,
	// made from its agent's (Agent.Home, then the base) for an adapter
	// that is a runs.HomeKeeper, and removed when the run ends: under
	// the data directory, which the sandbox hides from agents.
	HomesDir string
	// Uploads keeps tenants' uploaded files, which runs and messages
	// attach; nil: none are kept, and attachments are refused.
	Uploads *files.Uploads
	// Cursors, when set, opens the cursors Events returns instead of the
	// store: a replica's shared feed of each run's recent events (see
	// internal/fanout), itself read from the store.
	Cursors CursorOpener
	// Webhooks, when set, checks runs' webhook URLs and is handed their
	// run.completed and approval.requested (see Webhooks); nil: a run
	// naming a webhook_url is refused.
	Webhooks Webhooks
	// VersionOutput runs an agent's version command when the supervisor
	// probes its CLI at Start (default RunVersion). Test harnesses that
	// build many supervisors over the same CLIs give them one cache of it
	// (runstest.VersionCache): a Node CLI's --version costs seconds of CPU.
	VersionOutput probe.VersionOutput
	// IdleTimeout is how long an interactive run that names no
	// idle_timeout_seconds stays open with no turn, asleep or not
	// (default runs.DefaultIdleTimeout); MaxIdleTimeout bounds what a
	// run may ask (default 24h, at most runs.MaxIdleTimeout).
	IdleTimeout    time.Duration
	MaxIdleTimeout time.Duration
	// HibernateAfter is how long an interactive run that names no
	// hibernate_after_seconds waits idle before it hibernates (0:
	// never); MaxHibernateAfter bounds what a run may ask (default 24h).
	HibernateAfter    time.Duration
	MaxHibernateAfter time.Duration
	// RunDeadline, when set, arms each run's timeout in place of a timer
	// of its length: the run times out, as by its timeout_seconds, once
	// the returned channel is closed or receives. Tests use it to strike a
	// deadline at the moment their scenario needs (a tool running, a
	// request unanswered), which a timer started with the process cannot
	// promise on a busy machine.
	RunDeadline func(runID string, timeout time.Duration) <-chan time.Time
}

// CursorOpener opens cursors on runs' logs, as Store.OpenCursor does.
type CursorOpener interface {
	OpenCursor(ctx context.Context, runID string, after uint64) (runs.Cursor, error)
}

func (c *Config) setDefaults() {
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = 4
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = 30 * time.Minute
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = 24 * time.Hour
	}
	if c.KillGrace <= 0 {
		c.KillGrace = 5 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = runs.DefaultIdleTimeout
	}
	if c.MaxIdleTimeout <= 0 {
		c.MaxIdleTimeout = 24 * time.Hour
	}
	c.MaxIdleTimeout = min(c.MaxIdleTimeout, runs.MaxIdleTimeout)
	if c.MaxHibernateAfter <= 0 {
		c.MaxHibernateAfter = 24 * time.Hour
	}
	c.MaxHibernateAfter = min(c.MaxHibernateAfter, runs.MaxHibernateAfter)
	if c.Limits.MaxText <= 0 {
		c.Limits.MaxText = DefaultLimits.MaxText
	}
	if c.Limits.MaxToolInput <= 0 {
		c.Limits.MaxToolInput = DefaultLimits.MaxToolInput
	}
	if c.Limits.MaxEncoded <= 0 {
		c.Limits.MaxEncoded = DefaultLimits.MaxEncoded
	}
	if c.MaxLine <= 0 {
		c.MaxLine = 64 << 20
	}
	if c.MaxWorkspaceBytes <= 0 {
		c.MaxWorkspaceBytes = DefaultMaxWorkspaceBytes
	}
	if c.MaxSessionBytes <= 0 {
		c.MaxSessionBytes = DefaultMaxSessionBytes
	}
	if c.StderrTail <= 0 {
		c.StderrTail = 64 << 10
	}
	if c.StoreRetry <= 0 {
		c.StoreRetry = 2 * time.Minute
	}
	if c.AppendQueue <= 0 {
		c.AppendQueue = 4096
	}
	if c.Getenv == nil {
		c.Getenv = func(string) string { return "" }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.VersionOutput == nil {
		c.VersionOutput = probe.RunVersion
	}
	if c.Replica == "" {
		c.Replica = "local"
	}
	if c.SealKey == nil {
		c.SealKey = NewSealKey()
	}
}

// Agent is an adapter as the operator configured it.
type Agent struct {
	Adapter runs.Adapter
	// Bin is the CLI to run: a path, or a name looked up on Config.Path.
	Bin string
	// Home is the HOME of the CLI's processes, where its login and
	// sessions live.
	Home string

	info runs.AgentInfo // filled by the startup probe
}

// Supervisor executes runs as supervised child processes, bounded in
// number and queue, and records their state and events in a Store. It
// implements the service the HTTP API consumes.
type Supervisor struct {
	cfg    Config
	store  runs.Store
	obs    runs.Observer
	log    *zap.Logger
	tree   *proctree.Tree
	agents map[string]*Agent
	names  []string
	// aliases maps another name of an agent to its adapter's Name.
	aliases map[string]string
	// artifacts keeps the runs' snapshots and serves their files.
	artifacts *artifacts.Keeper
	// ws keeps runs' directories and sessions' files in the cluster (nil
	// without Config.Snapshots).
	ws *workspace.Store

	// queueKick asks queueObserver for a read (observeQueue).
	queueKick chan struct{}

	mu    sync.Mutex
	tasks map[string]*task // being taken from the queue, or running, here
	// sleepers close the hibernated runs this replica owns at their
	// ClosesAt (hibernate.go).
	sleepers map[string]sleeper
	active   int  // slots busy
	closing  bool // no new runs
	// takeCtx ends when the workers stop taking runs from the queue.
	takeCtx    context.Context
	stopTaking context.CancelFunc
	runCtx     context.Context // parent of every run; cancelled to force shutdown
	stopRuns   context.CancelCauseFunc
	workers    sync.WaitGroup
	loops      sync.WaitGroup
	idle       chan struct{} // closed when no slot is busy while closing
	// degraded, when set, is why this replica takes no runs for now (its
	// disk is full); resume is closed when that ends.
	degraded error
	resume   chan struct{}
	// localDirs maps a directory on this replica to the run whose end
	// left it as it is, so that a resumed session restores it only when
	// another replica has run it since.
	localDirs map[string]string
	// restoring serialises restoring runs' directories for the artifact
	// routes.
	restoring sync.Mutex
	// noAgent, set by Start's probe, is why no run can succeed here:
	// none of the agents' CLIs was found.
	noAgent error
}

// task is a run queued or running on this supervisor.
type task struct {
	// Fixed once the run starts, read without mu: who runs it, how, and
	// where (set by Supervisor.prepare, scrub by execution.prepare).
	agent *Agent
	inv   runs.Invocation
	cmd   runs.Command
	// tmp is the run's temporary directory, made by prepare (with the
	// run's attachments in it) and removed by execute.
	tmp string
	// home is the run's own CLI home, made by prepareWork ("" when the
	// run uses its agent's); prepared says how its directory was made,
	// when it was made from a source or restored.
	home     string
	prepared *workspace.Prepared
	// woken: the run was hibernated (or taken over from a replica that
	// died), and its CLI starts again resuming its session; keepMu
	// serialises what its turns' ends keep in the cluster, and kept,
	// under keepMu, says the run's end has kept its work: a turn's end
	// that comes after keeps nothing.
	woken  bool
	keepMu sync.Mutex
	kept   bool
	// scrub removes the run's secrets from what it stores; set before
	// the run's process starts, never changed (read without mu).
	scrub *redact.Events

	// run is the run's record. The goroutine executing the run writes
	// its phases' fields (Status, StartedAt, the outcome); what changes
	// while the run runs (its session, usage, turns, approvals, files)
	// is written under mu.
	run runs.Run
	// netDenied counts the connections the run's network policy refused.
	netDenied atomic.Int64

	// Everything below changes while the run runs, and is guarded by mu.
	mu      sync.Mutex
	seq     uint64
	started bool // claimed by this replica: run and seq are the stored ones
	done    bool
	stopErr error                   // why it was stopped, first wins
	cancel  context.CancelCauseFunc // set while running
	app     *appender               // set while the agent's output is read
	lost    int                     // events the store never took
	sess    *session                // set while a run with a Session runs
	// cancelledBy is who asked for the cancel that stopped the run.
	cancelledBy *runs.Actor
	// budget follows the run's budgets (nil: none).
	budget *budget
	// process is true while the agent's processes may live: from just
	// before they start until every one of them is gone.
	process bool
	// wakeMessageID is the message that woke a hibernated run, its next
	// turn's, and wokenAt when it came; slept is closed once a run that
	// falls asleep sleeps (or ended), for the input that waits for it.
	wakeMessageID string
	wokenAt       time.Time
	wokeFrom      string // the replica that owned the run asleep
	// usageBefore and costBefore are a woken run's usage and cost when
	// it woke: its CLI's live figures count from there.
	usageBefore runs.Usage
	costBefore  *float64
	slept       chan struct{}
	// usageDirty: the record's usage changed since it was last stored;
	// usageStoredAt is when a usage change was last stored.
	usageDirty    bool
	usageStoredAt time.Time
}

func (t *task) setProcess(on bool) {
	t.mu.Lock()
	t.process = on
	t.mu.Unlock()
}

// New returns a supervisor over store for agents. Call Start
// before Submit.
func New(cfg Config, store runs.Store, agents []*Agent, obs runs.Observer, log *zap.Logger) *Supervisor {
	cfg.setDefaults()
	s := &Supervisor{
		cfg:    cfg,
		store:  store,
		obs:    obs,
		log:    log,
		tree:   proctree.New(),
		agents: map[string]*Agent{},
		tasks:  map[string]*task{}, sleepers: map[string]sleeper{},
		idle: make(chan struct{}),

		queueKick: make(chan struct{}, 1),
	}
	for _, a := range agents {
		s.agents[a.Adapter.Name()] = a
		s.names = append(s.names, a.Adapter.Name())
	}
	s.aliases = map[string]string{}
	for _, a := range agents {
		for _, alias := range a.Adapter.Describe().Aliases {
			if _, taken := s.agents[alias]; !taken {
				s.aliases[alias] = a.Adapter.Name()
			}
		}
	}
	sort.Strings(s.names)
	s.artifacts = s.newKeeper()
	if cfg.Snapshots != nil {
		s.ws = workspace.NewStore(cfg.Snapshots, cfg.TempRoot, workspace.RestoreLimits(cfg.MaxWorkspaceBytes))
	}
	s.takeCtx, s.stopTaking = context.WithCancel(context.Background())
	s.runCtx, s.stopRuns = context.WithCancelCause(context.Background())
	return s
}

// Start probes each agent's CLI, marks the runs this replica left
// unfinished as interrupted, and starts the workers. ctx bounds the
// startup work and, once it ends, the supervisor's background loops.
func (s *Supervisor) Start(ctx context.Context) error {
	s.probeAgents(ctx)
	if err := s.recover(ctx); err != nil {
		return fmt.Errorf("recover interrupted runs: %w", err)
	}
	if err := s.startLoops(ctx); err != nil {
		return err
	}
	for range s.cfg.MaxConcurrent {
		s.workers.Add(1)
		go s.worker()
	}
	return nil
}

// probeAgents finds each agent's CLI and its version, prepares its home
// and asks what the host lacks for it. A Node CLI takes seconds to print
// its version: the agents are probed together.
func (s *Supervisor) probeAgents(ctx context.Context) {
	var probes sync.WaitGroup
	for _, name := range s.names {
		a := s.agents[name]
		probes.Go(func() { s.probeAgent(ctx, name, a) })
	}
	probes.Wait()
	s.mu.Lock()
	s.noAgent = s.unusableLocked()
	s.mu.Unlock()
}

func (s *Supervisor) probeAgent(ctx context.Context, name string, a *Agent) {
	a.info = probe.With(ctx, a.Adapter, a.Bin, s.childEnv(a.Home, runs.Command{}), s.cfg.VersionOutput)
	if hp, ok := a.Adapter.(runs.HomePreparer); ok && a.info.Installed {
		if err := hp.PrepareHome(a.Home); err != nil {
			a.info.Installed = false
			a.info.Advisory = fmt.Sprintf("could not prepare its home %s: %v", a.Home, err)
		}
	}
	if ha, ok := a.Adapter.(runs.HostAdvisor); ok && a.info.Installed {
		if note := ha.HostAdvisory(s.childEnv(a.Home, runs.Command{})); note != "" {
			a.info.Advisory += "; " + note
			s.log.Warn("agent degraded on this host", zap.String("agent", name), zap.String("advisory", note))
		}
	}
	fields := []zap.Field{zap.String("agent", name), zap.String("path", a.info.Path),
		zap.String("version", a.info.Version), zap.String("compatibility", a.info.Compatibility)}
	if !a.info.Installed || a.info.Compatibility == runs.CompatUnrecognized {
		// An operator who expected this agent must see why it will
		// fail every run, without turning on info logs.
		s.log.Warn("agent not usable", append(fields, zap.String("advisory", a.info.Advisory))...)
		return
	}
	s.log.Info("agent probed", fields...)
}

// startLoops starts what a replica runs beside its workers: cancels and
// input from other replicas, its heartbeat, the workspace janitor and
// the queue's observer.
func (s *Supervisor) startLoops(ctx context.Context) error {
	s.clearHomes()
	cancels, err := s.store.CancelRequests(ctx)
	if err != nil {
		return fmt.Errorf("subscribe to cancel requests: %w", err)
	}
	s.loop(func() { s.serveCancels(cancels) })
	inputs, err := s.store.Inputs(ctx, s.cfg.Replica)
	if err != nil {
		return fmt.Errorf("subscribe to input: %w", err)
	}
	s.loop(func() { s.serveInputs(inputs) })
	if s.cfg.ReplicaTTL > 0 {
		if err := s.store.Heartbeat(ctx, s.cfg.Replica); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		s.loop(func() { s.liveness(ctx) })
	}
	s.loop(func() { s.janitor(ctx) })
	s.loop(func() { s.queueObserver(ctx) })
	return nil
}

// loop runs f on a goroutine of its own that Shutdown waits for.
func (s *Supervisor) loop(f func()) {
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		f()
	}()
}

// serveCancels cancels the runs of this replica whose cancel another
// replica asked for.
func (s *Supervisor) serveCancels(cancels <-chan runs.CancelRequest) {
	for req := range cancels {
		s.mu.Lock()
		t := s.tasks[req.RunID]
		s.mu.Unlock()
		switch {
		case t != nil && t.beingPutToSleep():
			// Taken over, it sleeps in a moment: ended asleep then.
			s.loop(func() {
				if t.waitAsleep(context.Background()) == nil {
					s.cancelHibernated(req.RunID, req.By)
				}
			})
		case t != nil:
			s.cancelTask(t, req.By)
		default:
			// Asleep here: the replica that asked may have read it
			// awake, or the request came straight to the store.
			s.cancelHibernated(req.RunID, req.By)
		}
	}
}

// Agents returns what the startup probe found, by name.
func (s *Supervisor) Agents() []runs.AgentInfo {
	out := make([]runs.AgentInfo, 0, len(s.names))
	for _, n := range s.names {
		info := s.agents[n].info
		info.Enforcement = runs.EnforcementCLI
		if s.cfg.Sandbox != nil {
			info.Enforcement, info.Sandbox = runs.EnforcementSandbox, s.cfg.Sandbox.Enforcement()
		}
		info.Networks = s.networks(s.agents[n])
		if info.Interaction != nil {
			in := *info.Interaction
			in.Hibernate = s.canHibernate(s.agents[n])
			info.Interaction = &in
		}
		out = append(out, info)
	}
	return out
}

// Get returns the stored run, with its place in the queue when it is
// queued.
func (s *Supervisor) Get(ctx context.Context, id string) (runs.Run, error) {
	r, err := s.store.GetRun(ctx, id)
	if err == nil {
		s.AddQueuePosition(ctx, &r)
	}
	return r, err
}

// AddQueuePosition sets a queued run's QueuePosition, for a caller that
// read it with Record. Best effort: a queue that does not answer leaves
// it unknown (0).
func (s *Supervisor) AddQueuePosition(ctx context.Context, r *runs.Run) {
	if r.Status == runs.Queued {
		r.QueuePosition, _ = s.store.QueuePosition(ctx, r.ID)
	}
}

// Record returns the run as stored: Get without the queue position, which
// costs a queued run two more reads of the queue. It is for callers that
// need the run's tenant, status or session, such as the API's check that a
// run is the caller's before it streams its events.
func (s *Supervisor) Record(ctx context.Context, id string) (runs.Run, error) {
	return s.store.GetRun(ctx, id)
}

// List returns stored runs, newest first.
func (s *Supervisor) List(ctx context.Context, f runs.Filter) (runs.Page, error) {
	return s.store.ListRuns(ctx, f)
}

// Events opens a cursor on the run's log after seq after. It does not look
// the run up: its callers have (the API's tenant check, a submission), and
// a cursor on an id never stored waits for events that never come.
func (s *Supervisor) Events(ctx context.Context, id string, after uint64) (runs.Cursor, error) {
	if s.cfg.Cursors != nil {
		return s.cfg.Cursors.OpenCursor(ctx, id, after)
	}
	return s.store.OpenCursor(ctx, id, after)
}

// LastEventSeq returns the seq of the run's last event: of its last stored
// event, or of the run.completed on its way when the run is already
// recorded as finished but that event is not stored yet (finish records
// the run first, so that a client who sees run.completed and then reads
// the run finds it finished).
func (s *Supervisor) LastEventSeq(ctx context.Context, id string) (uint64, error) {
	r, err := s.store.GetRun(ctx, id)
	if err != nil {
		return 0, err
	}
	last, err := s.store.LastEvent(ctx, id)
	if err != nil {
		return 0, err
	}
	if r.Status.Terminal() && last.Type != runs.EventRunCompleted {
		s.repairCompleted(r, last.Seq)
		return last.Seq + 1, nil
	}
	return last.Seq, nil
}

// unusableLocked returns ErrNoAgent, with each agent's advisory, when the
// startup probe found none of them installed; nil when one is.
func (s *Supervisor) unusableLocked() error {
	why := make([]string, 0, len(s.names))
	for _, n := range s.names {
		info := s.agents[n].info
		if info.Installed {
			return nil
		}
		why = append(why, n+": "+info.Advisory)
	}
	return fmt.Errorf("%w: %s", runs.ErrNoAgent, strings.Join(why, "; "))
}

// Ready reports whether the supervisor can take runs: not while it shuts
// down, is degraded, or has no agent whose CLI it found.
func (s *Supervisor) Ready(ctx context.Context) error {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return runs.ErrShuttingDown
	}
	if err := s.degradedErr(); err != nil {
		return err
	}
	s.mu.Lock()
	noAgent := s.noAgent
	s.mu.Unlock()
	if noAgent != nil {
		return noAgent
	}
	if s.cfg.Health != nil {
		if err := s.cfg.Health(ctx); err != nil {
			return err
		}
	}
	if p, ok := s.store.(Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// Degrade stops this replica taking runs while why holds (nil ends it):
// new submissions fail with an error wrapping ErrStorageFull, the workers
// leave queued runs to other replicas, and running runs are stopped with
// class disk_full, so that the store can still record them before the
// disk is full. It is what a disk watcher calls.
func (s *Supervisor) Degrade(why error) {
	s.mu.Lock()
	was := s.degraded
	switch {
	case why != nil && was == nil:
		s.degraded = fmt.Errorf("%w: %w", runs.ErrStorageFull, why)
		s.resume = make(chan struct{})
	case why != nil:
		// Still degraded, for a reason that changed: say the new one.
		s.degraded = fmt.Errorf("%w: %w", runs.ErrStorageFull, why)
	case why == nil && was != nil:
		s.degraded = nil
		close(s.resume)
	}
	var running []*task
	if why != nil && was == nil {
		for _, t := range s.tasks {
			running = append(running, t)
		}
	}
	s.mu.Unlock()
	switch {
	case why != nil && was == nil:
		s.log.Error("taking no runs: the disk is low; stopping the running ones", zap.Error(why), zap.Int("running", len(running)))
	case why == nil && was != nil:
		s.log.Info("taking runs again: the disk has room")
	}
	for _, t := range running {
		s.stopTask(t, errDiskFull)
	}
}

// StoppingForDisk reports whether a run that Degrade stopped still has
// processes: until none has, one of them may go on filling the disk, and
// a disk watcher should not yet free the space it keeps for the store's
// last writes.
func (s *Supervisor) StoppingForDisk() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tasks {
		t.mu.Lock()
		busy := t.process && errors.Is(t.stopErr, errDiskFull)
		t.mu.Unlock()
		if busy {
			return true
		}
	}
	return false
}

func (s *Supervisor) degradedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.degraded
}

// waitHealthy returns once the replica is not degraded, or ctx ended.
func (s *Supervisor) waitHealthy(ctx context.Context) {
	s.mu.Lock()
	resume := s.resume
	degraded := s.degraded != nil
	s.mu.Unlock()
	if !degraded {
		return
	}
	select {
	case <-resume:
	case <-ctx.Done():
	}
}

// Pinger is a Store that can say whether it is reachable; Ready asks it
// when the store has it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Shutdown stops taking runs, lets running ones finish until ctx ends,
// then stops them. Queued runs stay in the shared queue, for another
// replica, or this one once it is back. It returns when every process of
// every run is gone.
func (s *Supervisor) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	var sessions []*session
	for _, t := range s.tasks {
		t.mu.Lock()
		if t.sess != nil {
			sessions = append(sessions, t.sess)
		}
		t.mu.Unlock()
	}
	// Left to the replica that adopts them, or to this one restarted:
	// not ended by a replica that has stopped.
	s.stopSleepersLocked()
	s.signalIdleLocked()
	s.mu.Unlock()
	s.stopTaking()
	// A session waiting for a person (a message, an approval) has nothing
	// to finish in the grace period; one in a turn finishes the turn.
	for _, ss := range sessions {
		ss.drain()
	}
	var err error
	select {
	case <-s.idle:
	case <-ctx.Done():
		err = fmt.Errorf("grace period over: stopping the runs left: %w", ctx.Err())
	}
	s.stopRuns(errShutdown)
	s.workers.Wait()
	return err
}
