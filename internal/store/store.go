package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Names in NATS. doc.go describes them.
const (
	runsBucket     = "agentgate_runs"
	sessionsBucket = "agentgate_sessions"
	replicasBucket = "agentgate_replicas"
	eventsStream   = "AGENTGATE_EVENTS"
	eventsPrefix   = "agentgate.events."
	// packsStream holds runs' packs on packsPrefix. Versions before it
	// kept packs in the events stream, on legacyPacksPrefix, read with
	// the leader's message API; their packs are left to expire there
	// and their ranges replay from the log.
	packsStream       = "AGENTGATE_PACKS"
	packsPrefix       = "agentgate.runpacks."
	legacyPacksPrefix = "agentgate.packs."
	cancelPrefix      = "agentgate.cancel."
	headerSeq         = "Agentgate-Seq"
	headerType        = "Agentgate-Type"
	headerRun         = "Agentgate-Run"
	headerError       = "Agentgate-Error"
	maxIDLen          = 64
	defaultTimeout    = 5 * time.Second
	// dedupeWindow is how long the events stream remembers Nats-Msg-Id, so
	// that a batch retried after a lost ack is not stored twice.
	dedupeWindow = 2 * time.Minute
)

// ErrExists is returned by CreateRun when a run with the id is stored. Run
// ids are made by the gateway, so this is an internal fault, not a client
// error, and it deliberately wraps no runs sentinel.
var ErrExists = errors.New("run exists")

// Options configure Open. The zero value is valid.
type Options struct {
	// Replicas is how many servers of a cluster keep a copy of the runs
	// bucket and the events stream; 0 means 1.
	Replicas int
	// MaxAge is how long runs and events are kept; 0 keeps them forever.
	// A run expires MaxAge after its last update, an event MaxAge after it
	// was appended.
	MaxAge time.Duration
	// Timeout bounds each JetStream request, and each publish ack, whose
	// context has no deadline; 0 means 5s.
	Timeout time.Duration
	// Log receives what the store drops or skips; nil discards.
	Log *zap.Logger
	// ReplicaTTL is how long a replica's heartbeat counts as alive; 0
	// means 45s. Every replica of a deployment must use the same.
	ReplicaTTL time.Duration
	// QueueSize bounds the runs waiting in the queue all replicas share;
	// 0 means 64. Every replica of a deployment must use the same.
	QueueSize int
	// RetryFor is how long a write whose ctx has no deadline is retried
	// through transient failures (an election, a node restarting); 0
	// means 30s.
	RetryFor time.Duration
	// FileTTL is how long uploaded files are kept; 0 means 24h.
	FileTTL time.Duration
	// EventsPerMessage is how many of a run's events one message of its
	// log holds at most (see logmsgs.go); 0 means 256. Every version
	// reads messages of one event, but only versions that group write or
	// read messages of several: while replicas of a version that does not
	// group still run beside this one (a rolling upgrade from one), set 1.
	EventsPerMessage int
	// SnapshotTenantBytes bounds what one tenant's snapshots (workspaces
	// and sessions' state) hold together; 0 means 10 GiB, negative no
	// bound.
	SnapshotTenantBytes int64

	// webhookAckWait replaces webhookAckWait in tests; 0 keeps it.
	webhookAckWait time.Duration
}

// Store is the runs.Store on NATS JetStream. It is safe for concurrent use
// and does not own the connection it was opened on.
type Store struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	costs  jetstream.KeyValue // agent session → runs.SessionRecord (directory, cumulative cost)
	alive  jetstream.KeyValue // replica → heartbeat, expiring
	events jetstream.Stream
	// packStream holds the runs' packs (packs.go), read by direct gets.
	packStream jetstream.Stream
	queue      jetstream.Stream      // runs waiting for a slot on any replica
	workers    jetstream.Consumer    // the replicas' pulls from queue
	idem       jetstream.KeyValue    // Idempotency-Key → the run it made
	autoruns   jetstream.KeyValue    // schedules, triggers, their states (autoruns.go)
	claims     jetstream.KeyValue    // fire times' and deliveries' claims, expiring
	tenants    jetstream.KeyValue    // tenant → its quota usage
	files      jetstream.ObjectStore // uploaded files, expiring
	hooks      jetstream.KeyValue    // webhook deliveries (webhooks.go)
	senders    jetstream.Consumer    // the replicas' pulls of webhooks due
	snaps      jetstream.ObjectStore // workspaces and sessions' state (snapshots.go)
	locks      jetstream.KeyValue    // session → the run holding it, expiring (sessionlocks.go)
	timeout    time.Duration
	retryFor   time.Duration
	replicas   int
	log        *zap.Logger
	// snapTenantBytes bounds a tenant's snapshots; negative: no bound.
	snapTenantBytes int64
	// eventsPerMessage and groupBytes bound the messages of a run's log
	// (groupEvents).
	eventsPerMessage, groupBytes int
	readers                      *readers // the connections cursors read on, apart from nc

	packs     *packWriter // the packs of the runs this store appends to
	packStats packStats
	// onAppend is told of what AppendEvents stored (OnAppend); nil
	// while no one listens.
	onAppend atomic.Pointer[func(runID string, events []runs.StoredEvent)]

	mu   sync.Mutex
	last map[string]lastEvent // run → its last stored event, as this store last appended or read it
	// revs is run → the revision of its record that this store last
	// wrote, so that the owner's next update need not read the record
	// first (UpdateRun).
	revs map[string]uint64
}

var _ runs.Store = (*Store)(nil)

// Open returns a Store on nc, creating the runs bucket and the events stream
// if they are missing and bringing their settings up to opts. Replicas that
// start at once on an empty cluster may all call Open: it retries what a
// cluster still forming answers (no meta leader, peers not yet known, a
// create racing another) until ctx ends, and fails at once on a
// configuration the server rejects.
func Open(ctx context.Context, nc *nats.Conn, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc,
		jetstream.WithDefaultTimeout(opts.Timeout),
		jetstream.WithPublishAsyncTimeout(opts.Timeout))
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{nc: nc, js: js, timeout: opts.Timeout, retryFor: opts.RetryFor, replicas: opts.Replicas, log: opts.Log, last: map[string]lastEvent{}, revs: map[string]uint64{}}
	s.snapTenantBytes = opts.SnapshotTenantBytes
	// A server that takes smaller messages than the default (1 MiB) gets
	// smaller groups; one event alone is bounded by runs.Limits, as ever.
	s.eventsPerMessage = opts.EventsPerMessage
	s.groupBytes = min(maxGroupBytes, max(1, int(nc.MaxPayload())/4))
	s.readers = newReaders(nc, opts.Timeout, opts.Log)
	s.packs = newPackWriter(opts.Log, &s.packStats)
	if err := s.create(ctx, opts); err != nil {
		s.readers.close()
		return nil, err
	}
	// The connections the store dialed for its cursors end with the one
	// it was opened on, which its owner closes.
	prev := nc.Opts.ClosedCB
	nc.SetClosedHandler(func(c *nats.Conn) {
		s.readers.close()
		if prev != nil {
			prev(c)
		}
	})
	return s, nil
}

// withDefaults returns opts with the defaults its zero values stand for,
// or an error for a negative one.
func (opts Options) withDefaults() (Options, error) {
	if opts.Replicas < 0 || opts.MaxAge < 0 || opts.Timeout < 0 || opts.ReplicaTTL < 0 || opts.RetryFor < 0 || opts.EventsPerMessage < 0 {
		return opts, fmt.Errorf("open store: negative option: %+v", opts)
	}
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	if opts.Timeout == 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.RetryFor == 0 {
		opts.RetryFor = defaultRetryFor
	}
	if opts.EventsPerMessage == 0 {
		opts.EventsPerMessage = defaultEventsPerMessage
	}
	if opts.SnapshotTenantBytes == 0 {
		opts.SnapshotTenantBytes = DefaultSnapshotTenantBytes
	}
	return opts, nil
}

// create makes the store's streams and buckets where they are missing,
// and brings their settings up to opts. Replicas started at once on an
// empty cluster all get here before it has a meta leader, and race each
// other's creates: every step is retried until ctx ends (see transient
// for what is not).
func (s *Store) create(ctx context.Context, opts Options) error {
	var err error
	if s.events, err = s.createStream(ctx, eventsStreamConfig(opts)); err != nil {
		return fmt.Errorf("open store: stream %s: %w", eventsStream, err)
	}
	if s.packStream, err = s.createStream(ctx, packsStreamConfig(opts)); err != nil {
		return fmt.Errorf("open store: stream %s: %w", packsStream, err)
	}
	if err := s.createBuckets(ctx, opts); err != nil {
		return err
	}
	for _, open := range []func(context.Context, Options) error{
		s.openQueue, s.openTenants, s.openIdempotency, s.openFiles, s.openWebhooks,
		s.openSnapshots, s.openSessionLocks, s.openAutoruns,
	} {
		if err := open(ctx, opts); err != nil {
			return fmt.Errorf("open store: %w", err)
		}
	}
	return nil
}

// createStream creates the stream of cfg, or updates it to cfg.
func (s *Store) createStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	var stream jetstream.Stream
	err := s.ensure(ctx, "create stream", func(ctx context.Context) error {
		var err error
		stream, err = s.js.CreateOrUpdateStream(ctx, cfg)
		return err
	})
	return stream, err
}

// eventsStreamConfig is the stream of runs' events, many a message.
// CreateOrUpdateStream adds the subject of the packs it held before they
// had a stream of their own (packsStreamConfig) to a stream made before
// them.
func eventsStreamConfig(opts Options) jetstream.StreamConfig {
	dedupe := dedupeWindow
	if opts.MaxAge > 0 && opts.MaxAge < dedupe {
		// The server rejects a dedupe window longer than MaxAge.
		dedupe = opts.MaxAge
	}
	return jetstream.StreamConfig{
		Name:        eventsStream,
		Description: "agentgate run events",
		Subjects:    []string{eventsPrefix + "*", legacyPacksPrefix + "*.*"},
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
		MaxAge:      opts.MaxAge,
		Duplicates:  dedupe,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		// A batch of events is stored whole or not at all, so that a
		// batch cut by a leader election leaves no gap for a later one
		// to land after (AppendEvents).
		AllowAtomicPublish: true,
		// AllowDirect stays off: a direct get may be answered by a lagging
		// follower, and LastSeq must see the newest event.
	}
}

// packsStreamConfig is the stream of runs' packs. The packs have a stream
// of their own so that they can be read by direct gets: any copy answers
// one, with the message as it is stored rather than in JSON with it
// base64-encoded. The events stream keeps them off, since a copy behind
// its leader would miss the newest event. A pack is written once and never
// changed, so a copy can only be behind by whole packs, and a pack it does
// not have yet is read from the log, as any missing pack is.
func packsStreamConfig(opts Options) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        packsStream,
		Description: "agentgate run event packs: an index of the events stream, for replays",
		Subjects:    []string{packsPrefix + "*.*"},
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
		MaxAge:      opts.MaxAge,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		AllowDirect: true,
	}
}

// createBuckets creates the runs, sessions and replicas buckets, or
// updates them to opts.
func (s *Store) createBuckets(ctx context.Context, opts Options) error {
	kvCfg := jetstream.KeyValueConfig{
		Bucket:      runsBucket,
		Description: "agentgate runs",
		History:     1,
		TTL:         opts.MaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
	}
	costCfg := kvCfg
	costCfg.Bucket, costCfg.Description = sessionsBucket, "agentgate agent sessions: directory and cumulative cost"
	aliveCfg := kvCfg
	aliveCfg.Bucket, aliveCfg.Description, aliveCfg.TTL = replicasBucket, "agentgate replica heartbeats", opts.ReplicaTTL
	if aliveCfg.TTL == 0 {
		aliveCfg.TTL = 45 * time.Second
	}
	for _, b := range []struct {
		cfg jetstream.KeyValueConfig
		kv  *jetstream.KeyValue
	}{{kvCfg, &s.kv}, {costCfg, &s.costs}, {aliveCfg, &s.alive}} {
		err := s.ensure(ctx, "create bucket", func(ctx context.Context) error {
			var err error
			*b.kv, err = s.js.CreateOrUpdateKeyValue(ctx, b.cfg)
			return err
		})
		if err != nil {
			return fmt.Errorf("open store: bucket %s: %w", b.cfg.Bucket, err)
		}
	}
	return nil
}

// Close closes the connections the store dialed for its cursors, which
// also happens when the connection it was opened on closes. It does not
// close that one.
func (s *Store) Close() {
	s.readers.close()
}

// Ping reports whether JetStream answers, for readiness checks.
func (s *Store) Ping(ctx context.Context) error {
	if _, err := s.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("ping jetstream: %w", err)
	}
	return nil
}

// checkID accepts ids made of 1 to 64 ASCII letters, digits, '-' and '_'.
// Those are safe as one subject token and as a KV key; a UUID qualifies.
func checkID(id string) error {
	if id == "" {
		return runs.Invalid("run_id", "empty")
	}
	if len(id) > maxIDLen {
		return runs.Invalid("run_id", fmt.Sprintf("longer than %d bytes", maxIDLen))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return runs.Invalid("run_id", fmt.Sprintf("character %q not allowed", c))
		}
	}
	return nil
}

// withTimeout gives ctx the store's timeout unless it has a deadline.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}
