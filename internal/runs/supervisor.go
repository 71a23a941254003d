package runs

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/proctree"
)

// Why the supervisor ended a run, as the cause of the run's context.
var (
	errCancelled = errors.New("cancelled by request")
	errTimeout   = errors.New("run timeout")
	errShutdown  = errors.New("gateway shutdown")
)

func stopReason(cause error) string {
	switch {
	case errors.Is(cause, errCancelled):
		return "cancelled"
	case errors.Is(cause, errTimeout):
		return "timeout"
	case errors.Is(cause, errShutdown):
		return "shutdown"
	}
	return ""
}

// Config tunes a Supervisor. Zero values take the defaults noted.
type Config struct {
	// Replica names this gateway instance; runs record it as their owner.
	Replica string
	// MaxConcurrent bounds the runs executing at once (default 4).
	MaxConcurrent int
	// QueueSize bounds the runs waiting for a slot (default 64); beyond
	// it Submit fails with ErrCapacity.
	QueueSize int
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
	// subreaper when given proctree.ReaperArg and the agent's argv: the
	// gateway's own executable (see proctree.Reap). Processes that escape
	// the cookie scan are then still killed when the agent exits.
	Reaper string
	// WorkspaceRetention, when positive, is how long the run directories
	// the supervisor creates are kept; older ones are removed.
	WorkspaceRetention time.Duration
}

func (c *Config) setDefaults() {
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = 4
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 64
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
	if c.StderrTail <= 0 {
		c.StderrTail = 64 << 10
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
	if c.Replica == "" {
		c.Replica = "local"
	}
}

// Agent is an adapter as the operator configured it.
type Agent struct {
	Adapter Adapter
	// Bin is the CLI to run: a path, or a name looked up on Config.Path.
	Bin string
	// Home is the HOME of the CLI's processes, where its login and
	// sessions live.
	Home string

	info AgentInfo // filled by the startup probe
}

// Supervisor executes runs as supervised child processes, bounded in
// number and queue, and records their state and events in a Store. It
// implements the service the HTTP API consumes.
type Supervisor struct {
	cfg    Config
	store  Store
	obs    Observer
	log    *zap.Logger
	tree   *proctree.Tree
	agents map[string]*Agent
	names  []string
	// aliases maps another name of an agent to its adapter's Name.
	aliases map[string]string

	mu       sync.Mutex
	wake     *sync.Cond       // on mu: pending grew, or stopping
	pending  []*task          // queued here, oldest first
	tasks    map[string]*task // queued or running here
	queued   int              // pending plus places reserved by Submit
	active   int
	closing  bool            // no new runs
	stopping bool            // workers exit
	runCtx   context.Context // parent of every run; cancelled to force shutdown
	stopRuns context.CancelCauseFunc
	workers  sync.WaitGroup
	loops    sync.WaitGroup
	idle     chan struct{} // closed when active and queued reach 0 while closing
}

// task is a run queued or running on this supervisor.
type task struct {
	run   Run
	agent *Agent
	inv   Invocation
	cmd   Command

	mu      sync.Mutex
	seq     uint64
	started bool
	done    bool
	stopErr error                   // why it was stopped, first wins
	cancel  context.CancelCauseFunc // set while running
	app     *appender               // set while the agent's output is read
}

// NewSupervisor returns a supervisor over store for agents. Call Start
// before Submit.
func NewSupervisor(cfg Config, store Store, agents []*Agent, obs Observer, log *zap.Logger) *Supervisor {
	cfg.setDefaults()
	s := &Supervisor{
		cfg:    cfg,
		store:  store,
		obs:    obs,
		log:    log,
		tree:   proctree.New(),
		agents: map[string]*Agent{},
		tasks:  map[string]*task{},
		idle:   make(chan struct{}),
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
	s.wake = sync.NewCond(&s.mu)
	s.runCtx, s.stopRuns = context.WithCancelCause(context.Background())
	return s
}

// Start probes each agent's CLI, marks the runs this replica left
// unfinished as interrupted, and starts the workers. ctx bounds the
// startup work and, once it ends, the supervisor's background loops.
func (s *Supervisor) Start(ctx context.Context) error {
	// A Node CLI takes seconds to print its version; probe them together.
	var probes sync.WaitGroup
	for _, name := range s.names {
		a := s.agents[name]
		probes.Go(func() {
			a.info = Probe(ctx, a.Adapter, a.Bin, s.childEnv(a, Command{}))
			if hp, ok := a.Adapter.(HomePreparer); ok && a.info.Installed {
				if err := hp.PrepareHome(a.Home); err != nil {
					a.info.Installed = false
					a.info.Advisory = fmt.Sprintf("could not prepare its home %s: %v", a.Home, err)
				}
			}
			s.log.Info("agent probed", zap.String("agent", name), zap.String("path", a.info.Path),
				zap.String("version", a.info.Version), zap.String("compatibility", a.info.Compatibility))
		})
	}
	probes.Wait()
	if err := s.recover(ctx); err != nil {
		return fmt.Errorf("recover interrupted runs: %w", err)
	}
	cancels, err := s.store.CancelRequests(ctx)
	if err != nil {
		return fmt.Errorf("subscribe to cancel requests: %w", err)
	}
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		for id := range cancels {
			s.mu.Lock()
			t := s.tasks[id]
			s.mu.Unlock()
			if t != nil {
				s.stopTask(t, errCancelled)
			}
		}
	}()
	if s.cfg.ReplicaTTL > 0 {
		if err := s.store.Heartbeat(ctx, s.cfg.Replica); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			s.liveness(ctx)
		}()
	}
	if s.cfg.WorkspaceRetention > 0 {
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			s.janitor(ctx)
		}()
	}
	for range s.cfg.MaxConcurrent {
		s.workers.Add(1)
		go s.worker()
	}
	return nil
}

// recover marks the runs this replica owned and did not finish as failed
// with class interrupted, and kills any process they left behind.
func (s *Supervisor) recover(ctx context.Context) error {
	left := map[string]bool{}
	for _, st := range []State{Queued, Running} {
		cursor := ""
		for {
			page, err := s.store.ListRuns(ctx, Filter{Status: st, Limit: 500, Cursor: cursor})
			if err != nil {
				return err
			}
			for _, r := range page.Runs {
				if r.Owner == s.cfg.Replica {
					left[r.ID] = true
				}
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
	}
	if len(left) == 0 {
		return nil
	}
	if procs, err := s.tree.FindAny(); err == nil {
		for id := range procs {
			if left[id] {
				_ = s.tree.Kill(ctx, id)
			}
		}
	}
	for id := range left {
		r, err := s.store.GetRun(ctx, id)
		if err != nil {
			return err
		}
		last, err := s.store.LastEvent(ctx, id)
		if err != nil {
			return err
		}
		t := &task{run: r, seq: last.Seq}
		s.finish(ctx, t, Outcome{}, NewRunError(Interrupted,
			"the gateway stopped while the run was in progress", "submit the run again"), nil)
		s.log.Warn("run interrupted by a gateway restart", zap.String("run_id", id), zap.String("agent", r.Agent))
	}
	return nil
}

// Agents returns what the startup probe found, by name.
func (s *Supervisor) Agents() []AgentInfo {
	out := make([]AgentInfo, 0, len(s.names))
	for _, n := range s.names {
		out = append(out, s.agents[n].info)
	}
	return out
}

// Submit validates spec, records a queued run and puts it in the queue.
// Errors: ErrShuttingDown, ErrUnknownAgent, ErrAgentUnavailable, a
// *FieldError (ErrInvalid, ErrUnsupported), ErrCapacity, or the store's.
func (s *Supervisor) Submit(ctx context.Context, spec Spec) (Run, error) {
	if name, ok := s.aliases[spec.Agent]; ok {
		spec.Agent = name
	}
	a, ok := s.agents[spec.Agent]
	if !ok {
		return Run{}, fmt.Errorf("%w %q", ErrUnknownAgent, spec.Agent)
	}
	if !a.info.Installed {
		return Run{}, fmt.Errorf("%w: %s; %s", ErrAgentUnavailable, spec.Agent, a.info.Advisory)
	}
	if err := spec.Validate(); err != nil {
		return Run{}, err
	}
	if err := checkSessionFields(a.Adapter.Describe(), spec); err != nil {
		return Run{}, err
	}
	if spec.Permission == "" {
		spec.Permission = WorkspaceWrite
	}
	timeout := s.cfg.DefaultTimeout
	if spec.TimeoutSeconds > 0 {
		timeout = time.Duration(spec.TimeoutSeconds) * time.Second
		if timeout > s.cfg.MaxTimeout {
			return Run{}, Invalid(FieldTimeoutSeconds, fmt.Sprintf("must be at most %d", int(s.cfg.MaxTimeout/time.Second)))
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Run{}, fmt.Errorf("new run id: %w", err)
	}
	inv := Invocation{
		RunID: id.String(), Spec: spec, Bin: a.info.Path, Home: a.Home,
		Timeout: timeout, CLIVersion: a.info.Version,
	}
	cwd := spec.Cwd
	if cwd == "" && spec.ResumeSessionID != "" {
		// A resumed conversation continues where it began by default:
		// some CLIs find a session by its directory as well as its id,
		// and its files are there.
		if rec, ok, err := s.store.Session(ctx, spec.Agent, spec.ResumeSessionID); err == nil && ok && rec.Cwd != "" {
			cwd = rec.Cwd
		} else if prev, err := s.store.GetRun(ctx, spec.ResumeSessionID); err == nil && prev.Spec.Cwd != "" {
			cwd = prev.Spec.Cwd // a session the gateway began before it kept sessions' directories
		}
	}
	// Check the agent's own constraints before touching the disk.
	inv.Dir = s.cfg.WorkspaceRoot
	if _, err := a.Adapter.Command(inv); err != nil {
		return Run{}, err
	}

	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		return Run{}, ErrShuttingDown
	case s.queued >= s.cfg.QueueSize:
		s.mu.Unlock()
		return Run{}, ErrCapacity
	}
	s.queued++ // reserve a place in the queue
	s.mu.Unlock()
	release := func() {
		s.mu.Lock()
		s.queued--
		s.signalIdleLocked()
		s.mu.Unlock()
	}

	dir, created, err := ResolveCwd(s.cfg.WorkspaceRoot, cwd, id.String())
	if err != nil {
		release()
		return Run{}, err
	}
	inv.Dir = dir
	cmd, err := a.Adapter.Command(inv)
	if err != nil {
		release()
		if created {
			os.Remove(dir)
		}
		return Run{}, err
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(dir, realPath(s.cfg.WorkspaceRoot)), "/")
	if rel == "" {
		rel = "." // the root itself; empty would mean "a fresh directory"
	}
	spec.Cwd = rel
	inv.Spec = spec
	r := Run{
		ID: id.String(), Agent: spec.Agent, Model: spec.Model, Status: Queued,
		CreatedAt: s.cfg.Now().UTC(), AgentVersion: a.info.Version, Metadata: spec.Metadata,
		Spec: spec, Owner: s.cfg.Replica,
	}
	// The record must not depend on the client staying: a write cut off
	// half way could store a run that no task executes.
	storeCtx, cancelStore := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelStore()
	if err := s.store.CreateRun(storeCtx, s.cfg.Limits.record(r)); err != nil {
		release()
		if created {
			os.Remove(dir)
		}
		return Run{}, fmt.Errorf("create run: %w", err)
	}
	t := &task{run: r, agent: a, inv: inv, cmd: cmd}
	s.emit(t, NewEvent(EventRunQueued, RunQueuedData{Agent: r.Agent, Metadata: r.Metadata}))
	s.obs.RunQueued(r.Agent)
	s.log.Info("run queued", zap.String("run_id", r.ID), zap.String("agent", r.Agent))
	// The task becomes visible to Cancel and Shutdown and to the workers
	// at once, so that exactly one of them finishes it.
	s.mu.Lock()
	if s.closing {
		// Shutdown began while the run was being recorded, and has
		// already finished the queued runs it saw: finish this one too.
		s.queued--
		t.mu.Lock()
		t.done, t.stopErr = true, errShutdown
		t.mu.Unlock()
		s.signalIdleLocked()
		s.mu.Unlock()
		s.finish(context.Background(), t, Outcome{}, stopError(errShutdown, r.Agent), nil)
		return t.run, nil
	}
	s.tasks[r.ID] = t
	s.pending = append(s.pending, t) // the place reserved above
	s.obs.QueueDepth(s.queued, s.active)
	s.wake.Signal()
	s.mu.Unlock()
	return r, nil
}

func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// Get returns the stored run.
func (s *Supervisor) Get(ctx context.Context, id string) (Run, error) {
	return s.store.GetRun(ctx, id)
}

// List returns stored runs, newest first.
func (s *Supervisor) List(ctx context.Context, f Filter) (Page, error) {
	return s.store.ListRuns(ctx, f)
}

// Events opens a cursor on the run's log after seq after.
func (s *Supervisor) Events(ctx context.Context, id string, after uint64) (Cursor, error) {
	if _, err := s.store.GetRun(ctx, id); err != nil {
		return nil, err
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
	if r.Status.Terminal() && last.Type != EventRunCompleted {
		s.repairCompleted(r, last.Seq)
		return last.Seq + 1, nil
	}
	return last.Seq, nil
}

// completedRepairAfter is how long after a run was recorded finished its
// run.completed may still be on its way. Past it, the event was lost.
const completedRepairAfter = 30 * time.Second

// repairCompleted appends the run.completed a finished run lacks: its
// supervisor recorded the run finished and died before the event was
// stored. Without it a stream of the run would wait for ever. Any replica
// may repair it; the store's de-duplication by run and seq keeps one copy
// when several do at once.
func (s *Supervisor) repairCompleted(r Run, lastSeq uint64) {
	s.mu.Lock()
	_, local := s.tasks[r.ID]
	s.mu.Unlock()
	finished := r.CreatedAt
	if r.FinishedAt != nil {
		finished = *r.FinishedAt
	}
	if local || s.cfg.Now().Sub(finished) < completedRepairAfter {
		return // still on its way
	}
	var dur time.Duration
	if r.StartedAt != nil {
		dur = finished.Sub(*r.StartedAt)
	}
	s.log.Warn("run.completed was lost; appending it from the run record", zap.String("run_id", r.ID),
		zap.String("agent", r.Agent), zap.Uint64("seq", lastSeq+1))
	s.emit(&task{run: r, seq: lastSeq}, NewEvent(EventRunCompleted, RunCompletedData{
		Status: r.Status, Result: r.Result, StructuredOutput: r.StructuredOutput, Usage: r.Usage,
		CostUSD: r.CostUSD, NumTurns: r.NumTurns, DurationMS: dur.Milliseconds(), Exit: r.Exit, Error: r.Error,
	}))
}

// Ready reports whether the supervisor can take runs.
func (s *Supervisor) Ready(ctx context.Context) error {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return ErrShuttingDown
	}
	if p, ok := s.store.(Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// Pinger is a Store that can say whether it is reachable; Ready asks it
// when the store has it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Cancel stops the run wherever it executes. It is idempotent: cancelling
// a finished run returns it unchanged. A queued run is cancelled at once;
// a running one is stopped, so the run returned may still say running for
// the moment its process takes to end.
func (s *Supervisor) Cancel(ctx context.Context, id string) (Run, error) {
	s.mu.Lock()
	t := s.tasks[id]
	s.mu.Unlock()
	if t != nil {
		s.stopTask(t, errCancelled)
		return s.store.GetRun(ctx, id)
	}
	r, err := s.store.GetRun(ctx, id)
	if err != nil {
		return Run{}, err
	}
	if !r.Status.Terminal() {
		if err := s.store.RequestCancel(ctx, id); err != nil {
			return Run{}, fmt.Errorf("request cancel of run %s: %w", id, err)
		}
	}
	return r, nil
}

// stopTask ends t for cause: a queued task is finished on the spot, a
// running one has its context cancelled.
func (s *Supervisor) stopTask(t *task, cause error) {
	s.mu.Lock() // s.mu before t.mu, as in worker
	t.mu.Lock()
	if t.done || t.stopErr != nil {
		t.mu.Unlock()
		s.mu.Unlock()
		return
	}
	t.stopErr = cause
	if t.started {
		// execute cancels with stopErr itself if it has not yet set
		// cancel.
		cancel := t.cancel
		t.mu.Unlock()
		s.mu.Unlock()
		if cancel != nil {
			cancel(cause)
		}
		return
	}
	t.done = true
	t.mu.Unlock()
	if i := slices.Index(s.pending, t); i >= 0 {
		s.pending = slices.Delete(s.pending, i, i+1)
		s.queued--
	}
	s.mu.Unlock()
	s.finish(context.Background(), t, Outcome{}, stopError(cause, t.run.Agent), nil)
	s.untrack(t)
}

func stopError(cause error, agent string) *RunError {
	switch {
	case errors.Is(cause, errCancelled):
		return NewRunError(ClassCancelled, "the run was cancelled", "")
	case errors.Is(cause, errTimeout):
		return NewRunError(Timeout, "the run exceeded its timeout", "raise timeout_seconds, or check that the model server answers")
	case errors.Is(cause, errShutdown):
		return NewRunError(Interrupted, "the gateway shut down before the run finished", "submit the run again")
	}
	return nil
}

func (s *Supervisor) untrack(t *task) {
	s.mu.Lock()
	delete(s.tasks, t.run.ID)
	s.obs.QueueDepth(s.queued, s.active)
	s.signalIdleLocked()
	s.mu.Unlock()
}

// signalIdleLocked tells a waiting Shutdown that nothing is queued or
// running any more. s.mu must be held.
func (s *Supervisor) signalIdleLocked() {
	if s.closing && s.queued == 0 && s.active == 0 {
		select {
		case <-s.idle:
		default:
			close(s.idle)
		}
	}
}

// worker executes queued runs, oldest first, until the supervisor stops.
func (s *Supervisor) worker() {
	defer s.workers.Done()
	for {
		s.mu.Lock()
		for len(s.pending) == 0 && !s.stopping {
			s.wake.Wait()
		}
		if s.stopping {
			s.mu.Unlock()
			return
		}
		t := s.pending[0]
		s.pending = slices.Delete(s.pending, 0, 1)
		s.queued--
		s.active++
		t.mu.Lock()
		t.started = true
		t.mu.Unlock()
		s.obs.QueueDepth(s.queued, s.active)
		s.mu.Unlock()

		s.execute(t)

		s.mu.Lock()
		s.active--
		s.mu.Unlock()
		s.untrack(t)
	}
}

// execute runs t's process to the end and records the outcome.
func (s *Supervisor) execute(t *task) {
	log := s.log.With(zap.String("run_id", t.run.ID), zap.String("agent", t.run.Agent))
	ctx, cancel := context.WithCancelCause(s.runCtx)
	defer cancel(nil)
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, t.inv.Timeout, errTimeout)
	defer cancelTimeout()
	t.mu.Lock()
	t.cancel = cancel
	stopped := t.stopErr
	t.mu.Unlock()
	if stopped != nil {
		cancel(stopped)
	}

	bg := context.Background() // store writes outlive the run's context
	now := s.cfg.Now().UTC()
	t.run.Status, t.run.StartedAt = Running, &now
	if err := s.store.UpdateRun(bg, s.cfg.Limits.record(t.run)); err != nil {
		log.Error("store run", zap.Error(err))
	}
	s.obs.RunStarted(t.run.Agent, now.Sub(t.run.CreatedAt).Seconds())
	log.Info("run started", zap.Duration("queue_wait", now.Sub(t.run.CreatedAt)))
	info := t.agent.info
	s.emit(t, NewEvent(EventRunStarted, RunStartedData{
		Prompt: t.inv.Spec.Prompt, SystemPrompt: t.inv.Spec.SystemPrompt, Model: t.inv.Spec.Model,
		Effort: t.inv.Spec.Effort, Permission: t.inv.Spec.Permission, Cwd: t.inv.Dir,
		ResumeSessionID: t.inv.Spec.ResumeSessionID,
		CLIVersion:      info.Version, VersionStatus: info.Compatibility,
	}))

	// Output is appended behind the reader while the agent runs; close
	// drains it before the outcome is recorded, so run.completed stays
	// last.
	app := newAppender(s.store, t.run.ID, s.cfg.AppendQueue, log)
	t.mu.Lock()
	t.app = app
	t.mu.Unlock()
	drain := func() {
		t.mu.Lock()
		t.app = nil
		t.mu.Unlock()
		app.close()
	}
	if pf, ok := t.agent.Adapter.(Preflighter); ok {
		if runErr := pf.Preflight(ctx, t.inv, s.childEnv(t.agent, t.cmd)); runErr != nil {
			drain()
			log.Info("preflight failed", zap.String("class", string(runErr.Class)), zap.String("message", runErr.Message))
			var override *RunError
			if ctx.Err() != nil {
				override = stopError(context.Cause(ctx), t.run.Agent)
			}
			s.finish(bg, t, Outcome{Status: Failed, Error: runErr}, override, nil)
			return
		}
	}
	dec := t.agent.Adapter.NewDecoder(t.inv)
	start := time.Now()
	first := true
	path, args := t.inv.Bin, t.cmd.Args
	if s.cfg.Reaper != "" {
		path, args = s.cfg.Reaper, append([]string{proctree.ReaperArg, t.inv.Bin}, t.cmd.Args...)
	}
	p := process{
		RunID: t.run.ID, Path: path, Args: args, Dir: t.inv.Dir,
		Env: s.childEnv(t.agent, t.cmd), Stdin: t.cmd.Stdin,
		Interrupt: syscall.Signal(t.cmd.InterruptSignal), Grace: s.cfg.KillGrace,
		MaxLine: s.cfg.MaxLine, StderrTail: s.cfg.StderrTail,
	}
	if conv, ok := dec.(Conversation); ok {
		p.Conversation = conv
	}
	exit, stderrTail, err := runProcess(ctx, s.tree, p, func(l line) {
		if first {
			first = false
			s.obs.FirstEvent(t.run.Agent, time.Since(start).Seconds())
		}
		if l.Dropped > 0 {
			keep := l.Bytes[:min(len(l.Bytes), s.cfg.Limits.MaxText)] // Bound would cut it anyway
			s.emit(t, NewEvent(EventAgentUnparsed, UnparsedData{
				Line: string(keep), Truncated: true, Bytes: len(l.Bytes) + l.Dropped,
				Reason: fmt.Sprintf("line longer than the %d-byte limit", s.cfg.MaxLine),
			}))
			return
		}
		s.emit(t, dec.Decode(l.Bytes)...)
	})
	drain()
	if err != nil {
		log.Error("start agent process", zap.Error(err))
		s.finish(bg, t, Outcome{}, NewRunError(NotInstalled, "could not start the agent CLI: "+err.Error(),
			t.agent.info.Advisory), &Exit{Code: -1})
		return
	}
	log.Info("process exited", zap.Int("code", exit.Code), zap.String("signal", exit.Signal), zap.String("reason", exit.Reason))
	out := dec.Finish(exit, stderrTail)
	// The supervisor's verdict wins only when it did stop the process: one
	// that finished on its own as the deadline passed keeps its outcome.
	var override *RunError
	if exit.Reason != "" {
		override = stopError(context.Cause(ctx), t.run.Agent)
	}
	s.finish(bg, t, out, override, &exit)
}

// finish emits the outcome's events and run.completed, and stores the
// run's final state. override, when set, replaces the decoder's verdict:
// the supervisor ended the run (cancel, timeout, shutdown), or it never
// ran.
func (s *Supervisor) finish(ctx context.Context, t *task, out Outcome, override *RunError, exit *Exit) {
	s.emit(t, out.Events...)
	status, runErr := out.Status, out.Error
	if override != nil {
		runErr = override
		switch override.Class {
		case ClassCancelled:
			status = Cancelled
		case Timeout:
			status = TimedOut
		default:
			status = Failed
		}
	}
	if status == "" || !status.Terminal() {
		status = Failed
	}
	if status == Failed && runErr == nil {
		runErr = NewRunError(Internal, "the run failed without a reason", "")
	}
	if status == Succeeded {
		runErr = nil
	}
	if session := cmp.Or(out.SessionID, t.run.SessionID); session != "" {
		out.CostUSD, out.Usage = s.recordSession(ctx, t, session, out)
	} else {
		if out.SessionCostUSD != nil {
			out.CostUSD = out.SessionCostUSD
		}
		if out.SessionUsage != nil {
			out.Usage = *out.SessionUsage
		}
	}
	now := s.cfg.Now().UTC()
	r := &t.run
	r.Status, r.FinishedAt, r.Error, r.Exit = status, &now, runErr, exit
	r.Result, r.StructuredOutput, r.Usage, r.CostUSD, r.NumTurns = out.Result, out.StructuredOutput, out.Usage, out.CostUSD, out.NumTurns
	r.Diff = out.Diff
	if out.SessionID != "" {
		r.SessionID = out.SessionID
	}
	if out.Model != "" {
		r.Model = out.Model
	}
	var dur time.Duration
	if r.StartedAt != nil {
		dur = now.Sub(*r.StartedAt)
	}
	// The record first, then the event: whoever reads run.completed and
	// then the run finds it finished. LastEventSeq covers the moment in
	// between, so that a stream does not end before run.completed.
	if err := s.store.UpdateRun(ctx, s.cfg.Limits.record(*r)); err != nil {
		s.log.Error("store finished run", zap.String("run_id", r.ID), zap.Error(err))
	}
	s.emit(t, NewEvent(EventRunCompleted, RunCompletedData{
		Status: status, StopReason: out.StopReason, Result: out.Result,
		StructuredOutput: json.RawMessage(out.StructuredOutput), Usage: out.Usage, CostUSD: out.CostUSD,
		NumTurns: out.NumTurns, Diff: out.Diff, DurationMS: dur.Milliseconds(), Exit: exit, Error: runErr,
	}))
	class := Class("")
	if runErr != nil {
		class = runErr.Class
	}
	s.obs.RunFinished(r.Agent, r.Model, status, class, dur.Seconds(), r.Usage, r.CostUSD)
	s.log.Info("run finished", zap.String("run_id", r.ID), zap.String("agent", r.Agent),
		zap.String("status", string(status)), zap.String("class", string(class)), zap.Duration("duration", dur))
}

// recordSession records the run's session for the runs that resume it:
// its directory, and the cumulative cost and usage its CLI reported. It
// returns the run's cost and usage. A CLI that reports the session's
// cumulative cost or usage gets the run's own: the session's total now,
// less its total when the run began, as recorded by the run before it.
// When the earlier total is unknown (the session began outside this
// gateway, or its record expired) the whole total is the run's.
func (s *Supervisor) recordSession(ctx context.Context, t *task, session string, out Outcome) (*float64, Usage) {
	cost, usage := out.CostUSD, out.Usage
	var prev SessionRecord
	if t.inv.Spec.ResumeSessionID != "" {
		var err error
		if prev, _, err = s.store.Session(ctx, t.run.Agent, session); err != nil {
			s.log.Warn("read session", zap.String("run_id", t.run.ID), zap.Error(err))
		}
	}
	rec := SessionRecord{Cwd: t.run.Spec.Cwd, CostUSD: prev.CostUSD, Usage: prev.Usage}
	if total := out.SessionCostUSD; total != nil {
		own := *total
		if prev.CostUSD != nil {
			own = max(*total-*prev.CostUSD, 0)
		}
		cost, rec.CostUSD = &own, total
	}
	if total := out.SessionUsage; total != nil {
		own := *total
		if prev.Usage != nil {
			own = total.Sub(*prev.Usage)
		}
		usage, rec.Usage = own, total
	}
	if err := s.store.SetSession(ctx, t.run.Agent, session, rec); err != nil {
		s.log.Warn("record session", zap.String("run_id", t.run.ID), zap.Error(err))
	}
	return cost, usage
}

// emit stamps, bounds, encodes and appends events to t's log. It is the one
// point where events leave a decoder. While the agent runs, events go
// through the run's appender; otherwise they are appended at once. A store
// that fails is retried briefly; the events are logged if it still fails.
func (s *Supervisor) emit(t *task, evs ...Event) {
	if len(evs) == 0 {
		return
	}
	batch := make([]StoredEvent, 0, len(evs))
	t.mu.Lock()
	for _, ev := range evs {
		t.seq++
		ev.V, ev.RunID, ev.Seq, ev.Time, ev.Agent = EnvelopeVersion, t.run.ID, t.seq, s.cfg.Now().UTC(), t.run.Agent
		// A helper's events (a sub-agent, under a tool call) carry its
		// own session; only the root's say which session the run is.
		switch {
		case ev.SessionID == "":
			ev.SessionID = t.run.SessionID
		case ev.ParentToolCallID == "":
			t.run.SessionID = ev.SessionID
		}
		b, err := s.encodeBounded(&ev)
		if err != nil {
			// A payload that cannot be encoded is a decoder bug; keep
			// the sequence dense with a warning in its place.
			ev.Type, ev.Data = EventWarning, WarningData{Code: "encode_failed", Message: err.Error()}
			b, _ = encodeEvent(ev)
		}
		batch = append(batch, StoredEvent{Seq: ev.Seq, Type: ev.Type, JSON: b})
		s.obs.Event(t.run.Agent, ev.Type)
	}
	app := t.app
	t.mu.Unlock()
	if app != nil {
		app.add(batch)
		return
	}
	appendWithRetry(s.store, t.run.ID, batch, s.log)
}

// childEnv is the whole environment of an agent process: a minimal base,
// the adapter's fixed settings, and the variables it passes through from
// the gateway's environment. The gateway's own secrets never reach it.
func (s *Supervisor) childEnv(a *Agent, c Command) []string {
	env := []string{"PATH=" + s.cfg.Path, "HOME=" + a.Home, "LANG=C.UTF-8", "TERM=dumb"}
	for _, name := range c.PassEnv {
		if v := s.cfg.Getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	return append(env, c.Env...)
}

// Shutdown stops taking runs, lets running ones finish until ctx ends,
// then stops them; queued runs are finished as interrupted at once. It
// returns when every process of every run is gone.
func (s *Supervisor) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	var queued []*task
	for _, t := range s.tasks {
		t.mu.Lock()
		if !t.started {
			queued = append(queued, t)
		}
		t.mu.Unlock()
	}
	s.signalIdleLocked()
	s.mu.Unlock()
	for _, t := range queued {
		s.stopTask(t, errShutdown)
	}
	var err error
	select {
	case <-s.idle:
	case <-ctx.Done():
		err = fmt.Errorf("grace period over: stopping the runs left: %w", ctx.Err())
	}
	s.stopRuns(errShutdown)
	s.mu.Lock()
	s.stopping = true
	s.wake.Broadcast()
	s.mu.Unlock()
	s.workers.Wait()
	return err
}

// encodeBounded bounds ev's payload and encodes it, bounding it more
// tightly while the encoding is over Limits.MaxEncoded (text that JSON
// escapes heavily). As a last resort the payload is replaced by a warning
// saying what was dropped.
func (s *Supervisor) encodeBounded(ev *Event) ([]byte, error) {
	l := s.cfg.Limits
	for range 4 {
		*ev = l.Bound(*ev)
		b, err := encodeEvent(*ev)
		if err != nil || l.MaxEncoded <= 0 || len(b) <= l.MaxEncoded {
			return b, err
		}
		l = l.tighter()
	}
	ev.Type, ev.Data = EventWarning, WarningData{Code: "event_too_large",
		Message: fmt.Sprintf("a %s event was dropped: larger than %d bytes even when bounded", ev.Type, l.MaxEncoded)}
	return encodeEvent(*ev)
}

// encodeEvent encodes an envelope as one line of JSON. HTML is not escaped:
// the stream is JSON, not HTML, and tool inputs such as "a > b" should read
// as they were written.
func encodeEvent(ev Event) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
