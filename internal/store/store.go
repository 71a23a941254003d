package store

import (
	"context"
	"errors"
	"fmt"
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
	cancelPrefix   = "agentgate.cancel."
	headerSeq      = "Agentgate-Seq"
	headerType     = "Agentgate-Type"
	headerRun      = "Agentgate-Run"
	headerError    = "Agentgate-Error"
	maxIDLen       = 64
	defaultTimeout = 5 * time.Second
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
}

// Store is the runs.Store on NATS JetStream. It is safe for concurrent use
// and does not own the connection it was opened on.
type Store struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	costs   jetstream.KeyValue // agent session → runs.SessionRecord (directory, cumulative cost)
	alive   jetstream.KeyValue // replica → heartbeat, expiring
	events  jetstream.Stream
	queue   jetstream.Stream   // runs waiting for a slot on any replica
	idem    jetstream.KeyValue // Idempotency-Key → the run it made
	timeout time.Duration
	log     *zap.Logger
}

var _ runs.Store = (*Store)(nil)

// Open returns a Store on nc, creating the runs bucket and the events stream
// if they are missing and bringing their settings up to opts. Replicas that
// start at once may all call Open.
func Open(ctx context.Context, nc *nats.Conn, opts Options) (*Store, error) {
	if opts.Replicas < 0 || opts.MaxAge < 0 || opts.Timeout < 0 || opts.ReplicaTTL < 0 {
		return nil, fmt.Errorf("open store: negative option: %+v", opts)
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
	js, err := jetstream.New(nc,
		jetstream.WithDefaultTimeout(opts.Timeout),
		jetstream.WithPublishAsyncTimeout(opts.Timeout))
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{nc: nc, js: js, timeout: opts.Timeout, log: opts.Log}

	dedupe := dedupeWindow
	if opts.MaxAge > 0 && opts.MaxAge < dedupe {
		// The server rejects a dedupe window longer than MaxAge.
		dedupe = opts.MaxAge
	}
	streamCfg := jetstream.StreamConfig{
		Name:        eventsStream,
		Description: "agentgate run events",
		Subjects:    []string{eventsPrefix + "*"},
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
		MaxAge:      opts.MaxAge,
		Duplicates:  dedupe,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		// AllowDirect stays off: a direct get may be answered by a lagging
		// follower, and LastSeq must see the newest event.
	}
	err = retryCreate(func() error {
		s.events, err = js.CreateOrUpdateStream(ctx, streamCfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open store: stream %s: %w", eventsStream, err)
	}

	kvCfg := jetstream.KeyValueConfig{
		Bucket:      runsBucket,
		Description: "agentgate runs",
		History:     1,
		TTL:         opts.MaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
	}
	err = retryCreate(func() error {
		s.kv, err = js.CreateOrUpdateKeyValue(ctx, kvCfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open store: bucket %s: %w", runsBucket, err)
	}
	costCfg := kvCfg
	costCfg.Bucket, costCfg.Description = sessionsBucket, "agentgate agent sessions: directory and cumulative cost"
	err = retryCreate(func() error {
		s.costs, err = js.CreateOrUpdateKeyValue(ctx, costCfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open store: bucket %s: %w", sessionsBucket, err)
	}
	aliveCfg := kvCfg
	aliveCfg.Bucket, aliveCfg.Description, aliveCfg.TTL = replicasBucket, "agentgate replica heartbeats", opts.ReplicaTTL
	if aliveCfg.TTL == 0 {
		aliveCfg.TTL = 45 * time.Second
	}
	err = retryCreate(func() error {
		s.alive, err = js.CreateOrUpdateKeyValue(ctx, aliveCfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open store: bucket %s: %w", replicasBucket, err)
	}
	if err := s.openQueue(ctx, opts); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := s.openIdempotency(ctx, opts); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return s, nil
}

// retryCreate runs create a second time when it lost a race with another
// replica creating the same stream: the second try takes the update path.
func retryCreate(create func() error) error {
	err := create()
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		err = create()
	}
	return err
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
