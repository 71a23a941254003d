package runs

import (
	"context"
	"time"
)

// Store keeps runs and their event logs durably, shared by every replica.
// internal/store implements it on NATS JetStream. It is the union of the
// roles below, each an interface of its own so that a consumer names only
// what it uses: the fan-out hub reads an EventLog, a test reads a run's
// RunStore and EventLog.
type Store interface {
	RunStore
	EventLog
	Queue
	Bus
	Sessions
}

// RunStore keeps runs' records: what the supervisor and the API read and
// write of a run, one record each.
type RunStore interface {
	// CreateRun stores a new run. It fails if the id exists.
	CreateRun(ctx context.Context, r Run) error
	// UpdateRun replaces a stored run. Only the run's owner calls it.
	UpdateRun(ctx context.Context, r Run) error
	// GetRun returns the run, or an error wrapping ErrNotFound.
	GetRun(ctx context.Context, id string) (Run, error)
	// ListRuns returns runs matching f, newest first.
	ListRuns(ctx context.Context, f Filter) (Page, error)
	// DeleteRun removes a run and its events: a submission recorded but
	// never queued.
	DeleteRun(ctx context.Context, runID string) error
	// ClaimIdempotencyKey records rec for key unless the key is recorded
	// already; then it returns the record and false.
	ClaimIdempotencyKey(ctx context.Context, key string, rec IdempotencyRecord) (IdempotencyRecord, bool, error)
}

// EventLog is each run's log of events, the source of truth every reader
// follows with its own cursor.
type EventLog interface {
	// AppendEvents appends envelopes, already encoded, to the run's log,
	// in order. Their sequence numbers are the caller's (1, 2, …).
	AppendEvents(ctx context.Context, runID string, events []StoredEvent) error
	// LastEvent returns the sequence and type of the run's last stored
	// event (JSON is not read); the zero StoredEvent when it has none.
	LastEvent(ctx context.Context, runID string) (StoredEvent, error)
	// OpenCursor reads the run's log from the event after seq `after`.
	OpenCursor(ctx context.Context, runID string, after uint64) (Cursor, error)
}

// Queue is the queue every replica shares, and the claim that makes one
// replica a queued run's owner.
type Queue interface {
	// Enqueue puts a recorded run in the queue every replica shares, with
	// its whole spec (the run's record keeps it bounded). It fails with
	// an error wrapping ErrCapacity when the queue is full; the same run
	// enqueued twice is queued once.
	Enqueue(ctx context.Context, runID string, spec Spec) error
	// Requeue puts back a run taken from the queue and never started.
	Requeue(ctx context.Context, runID string, spec Spec) error
	// Unqueue removes a run from the queue, if it is there.
	Unqueue(ctx context.Context, runID string) error
	// Dequeue waits for a queued run and takes it for this replica until
	// its Ack or Nak (or until the store gives it to another replica
	// after a while without either). It returns ctx's error when ctx
	// ends.
	Dequeue(ctx context.Context) (QueuedRun, error)
	// QueueLength is how many runs are in the queue.
	QueueLength(ctx context.Context) (int, error)
	// QueuePosition is the run's place in the queue (1 = next), 0 when it
	// is not in it.
	QueuePosition(ctx context.Context, runID string) (int, error)
	// ClaimRun makes replica the owner of a queued run that has none,
	// atomically. It fails with an error wrapping ErrClaimed when the run
	// has an owner or is no longer queued (returning the run as stored),
	// or ErrNotFound.
	ClaimRun(ctx context.Context, runID, replica string) (Run, error)
	// TakeOverRun makes replica the owner of a running run whose owner
	// is from, a replica that died; an error wrapping ErrClaimed when
	// the run is not that (another replica took it over first).
	TakeOverRun(ctx context.Context, runID, from, replica string) (Run, error)
	// ClaimHibernated makes replica the owner of a hibernated run and
	// sets its activity to next, atomically: of replicas waking or
	// closing one run at once, one does. from, when not empty, is the
	// owner the run must have. It fails with an error wrapping
	// ErrClaimed (returning the run as stored) when the run is not
	// hibernated or has another owner, or ErrNotFound.
	ClaimHibernated(ctx context.Context, runID, from, replica string, next Activity) (Run, error)
}

// Bus carries what replicas say to each other: that they are alive, a
// run's cancel, and input for a run another replica owns.
type Bus interface {
	// Heartbeat records that replica is alive. Without another heartbeat
	// it is taken for dead after the store's replica TTL.
	Heartbeat(ctx context.Context, replica string) error
	// LiveReplicas returns the replicas whose last heartbeat is recent.
	LiveReplicas(ctx context.Context) (map[string]bool, error)
	// RequestCancel asks whichever replica owns the run to cancel it.
	RequestCancel(ctx context.Context, runID string, by Actor) error
	// CancelRequests delivers the ids of runs whose cancel was requested on
	// any replica, until ctx ends.
	CancelRequests(ctx context.Context) (<-chan CancelRequest, error)
	// SendInput delivers body, an input for the run, to the replica that
	// owns it, and returns that replica's reply. It fails with an error
	// wrapping ErrOwnerUnavailable when the replica does not answer.
	SendInput(ctx context.Context, replica, runID string, body []byte) ([]byte, error)
	// Inputs delivers the input requests addressed to replica, until ctx
	// ends; each must be answered once.
	Inputs(ctx context.Context, replica string) (<-chan InputRequest, error)
}

// Sessions keeps what the gateway knows of agents' sessions: whose they
// are and where they last ran.
type Sessions interface {
	// Session returns what was recorded of an agent session by
	// SetSession; ok is false when nothing is.
	Session(ctx context.Context, agent, sessionID string) (rec SessionRecord, ok bool, err error)
	// SetSession records an agent session, replacing what was recorded.
	SetSession(ctx context.Context, agent, sessionID string, rec SessionRecord) error
}

// QueuedRun is a run taken from the shared queue.
type QueuedRun struct {
	RunID string
	// Spec is the run's whole spec, as queued; nil when the queue did not
	// carry it (then the record's, bounded, is used).
	Spec *Spec
	// Ack removes the run from the queue for good; Nak gives it back at
	// once, for any replica to take.
	Ack, Nak func() error
}

// CancelRequest asks the replica that owns a run to cancel it.
type CancelRequest struct {
	RunID string
	// By is who asked, for the run's audit trail.
	By Actor
}

// IdempotencyRecord is what an Idempotency-Key made: the run, and the hash
// of the request that made it, so that a retry with another body is told
// apart from a retry.
type IdempotencyRecord struct {
	RunID       string    `json:"run_id"`
	RequestHash string    `json:"request_hash"`
	CreatedAt   time.Time `json:"created_at"`
}

// InputRequest is an input for one of a replica's runs, sent by any
// replica, waiting for its answer.
type InputRequest struct {
	RunID string
	Body  []byte
	// Reply answers the sender; it must be called exactly once.
	Reply func([]byte)
}

// SessionRecord is what the gateway keeps of an agent session between the
// runs that continue it.
type SessionRecord struct {
	// CostUSD is the session's cumulative cost as its CLI last reported
	// it, for a CLI that reports cost per session; nil when unknown.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// Usage is the session's cumulative usage as its CLI last reported
	// it, for a CLI that reports usage per session; nil when unknown.
	Usage *Usage `json:"usage,omitempty"`
	// Cwd is the working directory of the session's last run, relative to
	// the workspace root, so that a resumed run continues where it began.
	Cwd string `json:"cwd,omitempty"`
	// Tenant is the tenant whose run began the session: only its runs may
	// resume it.
	Tenant string `json:"tenant,omitempty"`
	// RunID is the session's last run, whose directory's snapshot a run
	// that resumes it on another replica starts from; WorkDir is that
	// directory, relative to the tenant's workspace root.
	RunID   string `json:"run_id,omitempty"`
	WorkDir string `json:"work_dir,omitempty"`
}

// ReaderStepBytes is what each layer between the store and one reader's
// connection holds of the events at once: a store cursor's pulls and its
// buffer of events ready, a fan-out reader's batch, a stream's write. The
// layers hold at most this each (or one event, when a single event is
// bigger), so a client's memory is a few times this however big the
// events and however slowly it reads. 256 KiB is about 800 small events,
// so a replay of small events still moves hundreds per step.
const ReaderStepBytes = 256 << 10

// Cursor reads one run's log in order. It belongs to one reader and is not
// safe for concurrent use.
type Cursor interface {
	// Next returns the next events, at most max, waiting until at least
	// one is available or ctx ends. It never returns an empty batch with
	// a nil error.
	Next(ctx context.Context, max int) ([]StoredEvent, error)
	// Close releases the cursor.
	Close() error
}

// Observer is told what runs do, for metrics. internal/metrics implements
// it; every method must be cheap and must not block.
type Observer interface {
	RunQueued(agent string)
	RunStarted(agent string, queueWaitSeconds float64)
	RunFinished(agent, model string, status State, class Class, durationSeconds float64, usage Usage, costUSD *float64)
	Event(agent string, t EventType)
	FirstEvent(agent string, seconds float64)
	QueueDepth(queued, active int)
	// ApprovalRequested counts an approval request of an agent.
	ApprovalRequested(agent string)
	// ApprovalResolved counts a resolved approval, by decision (empty when
	// withdrawn or the run ended) and reason, with how long it waited.
	ApprovalResolved(agent string, decision Decision, reason string, waitSeconds float64)
	// TurnStarted counts a turn of an interactive run.
	TurnStarted(agent string)
	// TurnFinished records a turn's status and duration.
	TurnFinished(agent string, status State, seconds float64)
	// WorkspacePrepared records how a run's directory was made from its
	// source ("git", "archive", "from_run"), how long it took, and
	// whether a replica's cache served a clone.
	WorkspacePrepared(source string, seconds float64, cacheHit bool)
	// SnapshotKept counts bytes kept in the cluster, by SnapshotKind;
	// SnapshotRestored a snapshot restored on this replica.
	SnapshotKept(kind SnapshotKind, bytes int64)
	SnapshotRestored(kind SnapshotKind)
	// NetworkDenied counts a connection a run's network policy refused.
	NetworkDenied(agent, tenant string)
	// RunHibernated counts a run that hibernated; RunWoken one a message
	// woke, and WokenFirstEvent the time from that message to the first
	// event of the CLI started again.
	RunHibernated(agent string)
	RunWoken(agent string)
	WokenFirstEvent(agent string, seconds float64)
}
