package metrics

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentgate/agentgate/internal/runs"
)

// namespace prefixes every metric name.
const namespace = "agentgate"

// Options say which agent and model names may appear as label values.
type Options struct {
	// Agents lists the agent names kept as label values, normally the
	// names of the configured adapters; any other agent is "other".
	Agents []string
	// Models lists the model names kept as label values; any other model
	// is "other" and an empty one "unknown". A name is also kept with the
	// suffix "[1m]". Nil means DefaultModels(). The list is exact, with no
	// patterns: a run that fails early reports the model its client asked
	// for, so a pattern would let clients create series.
	Models []string
}

// Recorder holds agentgate's collectors. It implements runs.Observer and the
// HTTP edge's observer; its methods are cheap, never block on I/O and are
// safe for concurrent use.
type Recorder struct {
	agents allowed
	models allowed

	runsCreated   *prometheus.CounterVec
	runsStarted   *prometheus.CounterVec
	runsFinished  *prometheus.CounterVec
	runDuration   *prometheus.HistogramVec
	queueWait     *prometheus.HistogramVec
	runsActive    prometheus.Gauge
	runsQueued    prometheus.Gauge
	inputTokens   *prometheus.CounterVec
	outputTokens  *prometheus.CounterVec
	inconsistent  *prometheus.CounterVec
	cost          *prometheus.CounterVec
	runErrors     *prometheus.CounterVec
	events        *prometheus.CounterVec
	firstEvent    *prometheus.HistogramVec
	sseClients    prometheus.Gauge
	agentInfo     *infoCollector
	httpRequests  *prometheus.CounterVec
	httpDurations *prometheus.HistogramVec

	approvalsRequested *prometheus.CounterVec
	approvalsResolved  *prometheus.CounterVec
	approvalWait       *prometheus.HistogramVec
	turnsStarted       *prometheus.CounterVec
	turnDuration       *prometheus.HistogramVec

	workspacePrepare *prometheus.HistogramVec
	gitClones        *prometheus.CounterVec
	snapshotBytes    *prometheus.CounterVec
	snapshotRestores *prometheus.CounterVec
	networkDenied    *prometheus.CounterVec

	scheduleFires, triggerDeliveries *prometheus.CounterVec
	scheduleLag                      prometheus.Histogram

	hibernations, wakes *prometheus.CounterVec
	wakeFirst           *prometheus.HistogramVec
	activities          *activityCollector

	fanout *fanoutCollector
	packs  *packCollector
}

var _ runs.Observer = (*Recorder)(nil)

// New builds a Recorder and registers its collectors on reg, all at once:
// when any of them clashes with a collector already there (a second
// Recorder on the same registry, say), New registers none and returns an
// error wrapping the registry's, a prometheus.AlreadyRegisteredError for a
// second Recorder. It also fails on an empty or non-UTF-8 name in opts, or
// one spelled "other" or "unknown".
func New(reg prometheus.Registerer, opts Options) (*Recorder, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil registerer")
	}
	models := opts.Models
	if models == nil {
		models = DefaultModels()
	}
	for _, n := range slices.Concat(opts.Agents, models) {
		if !validName(n) {
			return nil, fmt.Errorf("metrics: %q cannot be an agent or model label value", n)
		}
	}
	r := &Recorder{
		agents: newAllowed(opts.Agents),
		models: newAllowed(models),

		runsCreated: counterVec("runs_created_total",
			"Runs accepted and queued.", "agent"),
		runsStarted: counterVec("runs_started_total",
			"Runs whose agent process was started.", "agent"),
		runsFinished: counterVec("runs_finished_total",
			"Runs that reached a terminal status.", "agent", "status"),
		runDuration: histogramVec("run_duration_seconds",
			"Time from a run's start to its end.",
			[]float64{0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600},
			"agent", "status"),
		queueWait: histogramVec("run_queue_wait_seconds",
			"Time a run waited in the queue before it started.",
			[]float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600},
			"agent"),
		runsActive: gauge("runs_active", "Runs executing now on this replica."),
		runsQueued: gauge("runs_queued", "Runs waiting in the queue all replicas share, as this replica last saw it."),
		inputTokens: counterVec("input_tokens_total",
			"Input tokens of finished runs, split by prompt cache use into disjoint parts.",
			"agent", "model", "cache"),
		outputTokens: counterVec("output_tokens_total",
			"Output tokens of finished runs, split into visible text and reasoning.",
			"agent", "model", "kind"),
		inconsistent: counterVec("usage_inconsistent_total",
			"Finished runs whose reported usage or cost was negative or whose parts exceeded their totals.",
			"agent"),
		cost: counterVec("cost_usd_total",
			"Cost of finished runs as reported by the agent, in US dollars.",
			"agent", "model"),
		runErrors: counterVec("run_errors_total",
			"Finished runs that failed, by error class.", "agent", "class"),
		events: counterVec("events_total",
			"Events appended to run logs.", "agent", "type"),
		firstEvent: histogramVec("time_to_first_event_seconds",
			"Time from a run's start to the first event its agent produced.",
			[]float64{0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120},
			"agent"),
		sseClients: gauge("sse_clients", "Clients streaming events over SSE now."),
		agentInfo: &infoCollector{desc: prometheus.NewDesc(namespace+"_agent_info",
			"Installed agent CLIs: always 1, with the version found and its compatibility.",
			[]string{"agent", "version", "compatibility"}, nil)},
		httpRequests: counterVec("http_requests_total",
			"HTTP requests served, by route pattern, method and status code.",
			"route", "method", "code"),
		// The top buckets are for SSE streams, which last as long as runs.
		httpDurations: histogramVec("http_request_duration_seconds",
			"Time to serve an HTTP request, by route pattern and method.",
			[]float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
			"route", "method"),
		approvalsRequested: counterVec("approvals_requested_total",
			"Approval requests of tool calls, asked of clients.", "agent"),
		approvalsResolved: counterVec("approvals_resolved_total",
			"Approval requests resolved, by decision (none when withdrawn or the run ended) and reason.",
			"agent", "decision", "reason"),
		approvalWait: histogramVec("approval_wait_seconds",
			"Time an approval request waited until it was resolved.",
			[]float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
			"agent", "reason"),
		turnsStarted: counterVec("turns_started_total",
			"Turns of runs with a session (interactive, or asking for approvals).", "agent"),
		turnDuration: histogramVec("turn_duration_seconds",
			"Time from a turn's start to its end, approvals included.",
			[]float64{0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600},
			"agent", "status"),
		networkDenied: counterVec("network_denied_total",
			"Connections runs' network policies refused, by agent and tenant (the tenants are the keys file's, a bounded set).",
			"agent", "tenant"),
		fanout:     newFanoutCollector(),
		packs:      newPackCollector(),
		activities: newActivityCollector(),
	}
	r.hibernations, r.wakes, r.wakeFirst = hibernationCollectors()
	r.workspacePrepare, r.gitClones, r.snapshotBytes, r.snapshotRestores = workspaceCollectors()
	r.scheduleFires, r.triggerDeliveries, r.scheduleLag = autorunCollectors()
	// One collector for all of them makes registration all or nothing.
	set := collectorSet{
		r.runsCreated, r.runsStarted, r.runsFinished, r.runDuration, r.queueWait,
		r.runsActive, r.runsQueued, r.inputTokens, r.outputTokens, r.inconsistent,
		r.cost, r.runErrors, r.events, r.firstEvent, r.sseClients, r.agentInfo,
		r.httpRequests, r.httpDurations,
		r.approvalsRequested, r.approvalsResolved, r.approvalWait, r.turnsStarted, r.turnDuration,
		r.workspacePrepare, r.gitClones, r.snapshotBytes, r.snapshotRestores,
		r.networkDenied,
		r.scheduleFires, r.triggerDeliveries, r.scheduleLag,
		r.hibernations, r.wakes, r.wakeFirst, r.activities,
		r.fanout,
		r.packs,
	}
	if err := reg.Register(set); err != nil {
		return nil, fmt.Errorf("metrics: register collectors: %w", err)
	}
	return r, nil
}

// NewRegistry returns an empty registry with the Go runtime and process
// collectors, for the gateway to serve; New adds agentgate's own.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// RunQueued counts a run accepted into the queue. The queue's depth comes
// separately, from QueueDepth.
func (r *Recorder) RunQueued(agent string) {
	r.runsCreated.WithLabelValues(r.agents.label(agent)).Inc()
}

// RunStarted counts a started run and how long it waited.
func (r *Recorder) RunStarted(agent string, queueWaitSeconds float64) {
	a := r.agents.label(agent)
	r.runsStarted.WithLabelValues(a).Inc()
	r.queueWait.WithLabelValues(a).Observe(seconds(queueWaitSeconds))
}

// RunFinished counts a finished run: its status, duration, tokens, cost
// and, when class is not empty, its error class. A status that is not
// terminal, or a class or model outside its set, is "other".
//
// The tokens are split into disjoint parts: input into cache=none|read|write
// and output into kind=text|reasoning, whose sums are usage.InputTokens and
// usage.OutputTokens. Usage that breaks that convention (a negative count,
// or parts larger than their total) is clamped so that no part is negative,
// and counted in agentgate_usage_inconsistent_total, as is a negative or
// non-finite cost, which is dropped.
func (r *Recorder) RunFinished(agent, model string, status runs.State, class runs.Class, durationSeconds float64, usage runs.Usage, costUSD *float64) {
	a, m := r.agents.label(agent), r.models.modelLabel(model)
	st := statusLabel(status)
	r.runsFinished.WithLabelValues(a, st).Inc()
	r.runDuration.WithLabelValues(a, st).Observe(seconds(durationSeconds))
	if class != "" {
		r.runErrors.WithLabelValues(a, classLabel(class)).Inc()
	}

	s := splitUsage(usage)
	r.inputTokens.WithLabelValues(a, m, "none").Add(float64(s.uncached))
	r.inputTokens.WithLabelValues(a, m, "read").Add(float64(s.cacheRead))
	r.inputTokens.WithLabelValues(a, m, "write").Add(float64(s.cacheWrite))
	r.outputTokens.WithLabelValues(a, m, "text").Add(float64(s.text))
	r.outputTokens.WithLabelValues(a, m, "reasoning").Add(float64(s.reasoning))
	ok := s.consistent
	if costUSD != nil {
		if c := *costUSD; c >= 0 && !math.IsInf(c, 1) {
			r.cost.WithLabelValues(a, m).Add(c)
		} else {
			ok = false
		}
	}
	if !ok {
		r.inconsistent.WithLabelValues(a).Inc()
	}
}

// Event counts one event appended to a run's log.
func (r *Recorder) Event(agent string, t runs.EventType) {
	r.events.WithLabelValues(r.agents.label(agent), eventTypeLabel(t)).Inc()
}

// FirstEvent records how long a run's agent took to produce its first event.
func (r *Recorder) FirstEvent(agent string, secs float64) {
	r.firstEvent.WithLabelValues(r.agents.label(agent)).Observe(seconds(secs))
}

// QueueDepth sets the number of queued and executing runs. A negative count
// is a caller's bug and reads as 0.
func (r *Recorder) QueueDepth(queued, active int) {
	r.runsQueued.Set(float64(max(queued, 0)))
	r.runsActive.Set(float64(max(active, 0)))
}

// ApprovalRequested counts an approval request.
func (r *Recorder) ApprovalRequested(agent string) {
	r.approvalsRequested.WithLabelValues(r.agents.label(agent)).Inc()
}

// ApprovalResolved counts a resolved approval and how long it waited. A
// decision or reason outside their sets is "other"; no decision is "none".
func (r *Recorder) ApprovalResolved(agent string, decision runs.Decision, reason string, waitSeconds float64) {
	a, rs := r.agents.label(agent), reasonLabel(reason)
	r.approvalsResolved.WithLabelValues(a, decisionLabel(decision), rs).Inc()
	r.approvalWait.WithLabelValues(a, rs).Observe(seconds(waitSeconds))
}

// TurnStarted counts a turn.
func (r *Recorder) TurnStarted(agent string) {
	r.turnsStarted.WithLabelValues(r.agents.label(agent)).Inc()
}

// TurnFinished records a turn's duration by its status.
func (r *Recorder) TurnFinished(agent string, status runs.State, secs float64) {
	r.turnDuration.WithLabelValues(r.agents.label(agent), statusLabel(status)).Observe(seconds(secs))
}

// workspaceCollectors are the metrics of runs' workspaces: how they were
// prepared, and what is kept of them in the cluster.
func workspaceCollectors() (prepare *prometheus.HistogramVec, clones, kept, restores *prometheus.CounterVec) {
	return histogramVec("workspace_prepare_seconds",
			"Time to make a run's directory from its source: a clone, an archive unpacked, another run's directory restored.",
			[]float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
			"source"),
		counterVec("git_clones_total",
			"Runs' directories cloned from a repository, by whether this replica's cache of it served the clone (hit) or it was cloned whole (miss).",
			"cache"),
		counterVec("snapshot_bytes_total",
			"Bytes this replica stored in the cluster's snapshots, by kind: runs' workspaces, sessions' files, patches, whole results.",
			"kind"),
		counterVec("snapshot_restores_total",
			"Snapshots restored on this replica, by kind.", "kind")
}

// WorkspacePrepared records how long making a run's directory from its
// source took, and counts a clone by whether the cache served it.
func (r *Recorder) WorkspacePrepared(source string, secs float64, cacheHit bool) {
	switch source {
	case runs.SourceGit, runs.SourceArchive, runs.SourceFromRun:
	default:
		source = "other"
	}
	r.workspacePrepare.WithLabelValues(source).Observe(seconds(secs))
	if source == runs.SourceGit {
		r.gitClones.WithLabelValues(map[bool]string{true: "hit", false: "miss"}[cacheHit]).Inc()
	}
}

// SnapshotKept counts bytes stored in the cluster's snapshots.
func (r *Recorder) SnapshotKept(kind runs.SnapshotKind, bytes int64) {
	if bytes > 0 {
		r.snapshotBytes.WithLabelValues(snapshotKindLabel(kind)).Add(float64(bytes))
	}
}

// SnapshotRestored counts a snapshot restored on this replica.
func (r *Recorder) SnapshotRestored(kind runs.SnapshotKind) {
	r.snapshotRestores.WithLabelValues(snapshotKindLabel(kind)).Inc()
}

// NetworkDenied counts a connection a run's network policy refused.
func (r *Recorder) NetworkDenied(agent, tenant string) {
	if tenant == "" {
		tenant = "default"
	}
	r.networkDenied.WithLabelValues(r.agents.label(agent), tenant).Inc()
}

func snapshotKindLabel(k runs.SnapshotKind) string {
	switch k {
	case runs.SnapshotWorkspace, runs.SnapshotSession, runs.SnapshotPatch, runs.SnapshotResult:
		return string(k)
	}
	return "other"
}

// HTTPRequest counts one served request. route is the router's pattern
// ("/v1/runs/{id}"), "" or "unmatched" when no route matched; a method
// outside the standard ones (the api's "OTHER" among them) and a status
// outside 100–599 are "other".
func (r *Recorder) HTTPRequest(route, method string, status int, secs float64) {
	rt, m := routeLabel(route), methodLabel(method)
	r.httpRequests.WithLabelValues(rt, m, codeLabel(status)).Inc()
	r.httpDurations.WithLabelValues(rt, m).Observe(seconds(secs))
}

// SSEClientsAdd moves the number of connected SSE clients by delta: +1 when
// a stream opens, -1 when it closes.
func (r *Recorder) SSEClientsAdd(delta int) {
	r.sseClients.Add(float64(delta))
}

// SetAgents replaces the agent_info series with one per distinct agent,
// version and compatibility in infos; series of agents no longer listed
// disappear. A scrape sees the old set or the new one, never a mix.
func (r *Recorder) SetAgents(infos []runs.AgentInfo) {
	seen := make(map[[3]string]bool, len(infos))
	labels := make([][3]string, 0, len(infos))
	for _, in := range infos {
		l := [3]string{r.agents.label(in.Name), versionLabel(in.Version), compatibilityLabel(in.Compatibility)}
		if !seen[l] {
			seen[l] = true
			labels = append(labels, l)
		}
	}
	r.agentInfo.set(labels)
}

// usageSplit is a run's usage as disjoint, non-negative parts.
type usageSplit struct {
	uncached, cacheRead, cacheWrite int64
	text, reasoning                 int64
	consistent                      bool
}

// splitUsage applies the runs.Usage convention (input includes both cache
// counts, output includes reasoning). When u keeps it, the input parts sum
// to u.InputTokens and the output parts to u.OutputTokens.
func splitUsage(u runs.Usage) usageSplit {
	in, out := max(u.InputTokens, 0), max(u.OutputTokens, 0)
	s := usageSplit{
		cacheRead:  max(u.CacheReadTokens, 0),
		cacheWrite: max(u.CacheWriteTokens, 0),
		reasoning:  max(u.ReasoningTokens, 0),
	}
	s.consistent = u.InputTokens >= 0 && u.OutputTokens >= 0 &&
		u.CacheReadTokens >= 0 && u.CacheWriteTokens >= 0 && u.ReasoningTokens >= 0
	// Compared by subtraction: the sum of two huge counts could overflow.
	if s.cacheRead <= in && s.cacheWrite <= in-s.cacheRead {
		s.uncached = in - s.cacheRead - s.cacheWrite
	} else {
		s.consistent = false
	}
	if s.reasoning <= out {
		s.text = out - s.reasoning
	} else {
		s.consistent = false
	}
	return s
}

// seconds keeps a duration a histogram can hold: NaN, negative (a clock
// step) and infinite values read as 0, since one of them would make the
// histogram's sum useless for good.
func seconds(v float64) float64 {
	if v >= 0 && !math.IsInf(v, 1) {
		return v
	}
	return 0
}

// infoCollector exports agent_info from a snapshot that SetAgents replaces
// whole, so that a scrape never sees half of an update.
type infoCollector struct {
	desc *prometheus.Desc

	mu     sync.Mutex
	labels [][3]string // never modified once set; replaced whole
}

func (c *infoCollector) set(labels [][3]string) {
	c.mu.Lock()
	c.labels = labels
	c.mu.Unlock()
}

func (c *infoCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *infoCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	labels := c.labels
	c.mu.Unlock()
	for _, l := range labels {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, l[0], l[1], l[2])
	}
}

// collectorSet is several collectors registered as one.
type collectorSet []prometheus.Collector

func (s collectorSet) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range s {
		c.Describe(ch)
	}
}

func (s collectorSet) Collect(ch chan<- prometheus.Metric) {
	for _, c := range s {
		c.Collect(ch)
	}
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
}
