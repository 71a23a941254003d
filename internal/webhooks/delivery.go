package webhooks

import (
	"context"
	"errors"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// State is where a delivery is: Pending until it ends in one of the others.
type State string

// The states of a delivery.
const (
	// Pending: an attempt is due, under way, or waiting for its retry.
	Pending State = "pending"
	// Delivered: the receiver answered 2xx.
	Delivered State = "delivered"
	// Failed: no attempt succeeded within the bounds (attempts, time),
	// or the delivery could not be made at all.
	Failed State = "failed"
	// Gone: the receiver answered 410 Gone; nothing more is sent.
	Gone State = "gone"
	// Refused: the destination is an internal address the gateway's
	// allow-list refuses (a name that resolved to one).
	Refused State = "refused"
)

// Targets of a delivery: the URL a run named, or its tenant's, set by the
// operator.
const (
	TargetRun    = "run"
	TargetTenant = "tenant"
)

// Delivery is one message to one URL, and every attempt to send it. Its
// ID is the message's webhook-id, the same on every attempt.
type Delivery struct {
	ID    string         `json:"id"`
	RunID string         `json:"run_id"`
	Event runs.EventType `json:"event"`
	// Seq is the event's seq in the run's log.
	Seq uint64 `json:"seq"`
	// Target is TargetRun or TargetTenant.
	Target string `json:"target"`
	// URL is the destination without its query (see RedactURL).
	URL       string    `json:"url"`
	State     State     `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	// NextAttemptAt is when the next attempt is due, while Pending.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// FinishedAt is when the delivery left Pending.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Error says why a delivery that is not Delivered ended.
	Error    string    `json:"error,omitempty"`
	Attempts []Attempt `json:"attempts"`
	// Tenant is the run's tenant, whose secret signs the message.
	Tenant string `json:"tenant,omitempty"`
}

// Attempt is one POST of a delivery.
type Attempt struct {
	At time.Time `json:"at"`
	// StatusCode is the receiver's answer; 0 when there was none.
	StatusCode int `json:"status_code,omitempty"`
	// Error is why the attempt failed without an answer (or the answer
	// that failed it), without the URL's query.
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	// NextRetryAt is when the attempt after it is due, if one is.
	NextRetryAt *time.Time `json:"next_retry_at,omitempty"`
}

// Message is what a delivery sends: the whole URL (with its query) and the
// body, signed anew at each attempt. It is kept with the delivery's place
// in the queue, not in its record.
type Message struct {
	URL  string
	Body []byte
}

// Store keeps deliveries for every replica: their records, and a queue of
// the attempts due, from which any replica takes them. internal/store
// implements it on NATS JetStream.
type Store interface {
	// CreateDelivery records d and queues its message for an attempt at
	// once. A delivery whose id is recorded already is left as it is,
	// and nil returned: every replica that sees an event may create it.
	CreateDelivery(ctx context.Context, d Delivery, m Message) error
	// Delivery returns the run's delivery and its revision, or an error
	// wrapping runs.ErrNotFound.
	Delivery(ctx context.Context, runID, id string) (Delivery, uint64, error)
	// UpdateDelivery stores d if its record is still at rev, or fails
	// with an error wrapping ErrStale.
	UpdateDelivery(ctx context.Context, d Delivery, rev uint64) error
	// Deliveries returns the run's deliveries, oldest first.
	Deliveries(ctx context.Context, runID string) ([]Delivery, error)
	// TakeDelivery waits until a queued message is due and takes it for
	// this replica until its Done or Later (or, without either, until
	// the store gives it to another replica after a while). It returns
	// ctx's error once ctx ends.
	TakeDelivery(ctx context.Context) (Taken, error)
}

// Taken is a queued message taken by one replica.
type Taken struct {
	RunID, ID string
	Message   Message
	// Done removes the message from the queue for good; Later puts it
	// back, due after the delay, for any replica to take.
	Done  func() error
	Later func(delay time.Duration) error
}

// ErrStale is an update of a delivery that another one overtook.
var ErrStale = errors.New("webhook delivery changed since it was read")
