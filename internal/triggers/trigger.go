package triggers

import (
	"time"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/runs"
)

// Kind names triggers among the owners of internal/autorun.
const Kind = "trigger"

// Trigger is a trigger as the store keeps it.
type Trigger struct {
	ID       string           `json:"id"`
	Tenant   string           `json:"tenant"`
	Name     string           `json:"name"`
	Verify   Verify           `json:"verify"`
	WhenBusy autorun.WhenBusy `json:"when_busy"`
	Paused   bool             `json:"paused"`
	// Run is the run request of each delivery, sealed; its prompt is the
	// template.
	Run []byte `json:"run"`
	// Secret and Previous are what the trigger checks proofs with: a
	// token's hash (HashToken), or a signing secret sealed for the
	// trigger (internal/seal).
	Secret        []byte    `json:"secret"`
	Previous      []byte    `json:"previous,omitempty"`
	PreviousUntil time.Time `json:"previous_until,omitzero"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func (t Trigger) owner() autorun.Owner {
	return autorun.Owner{Kind: Kind, ID: t.ID, Tenant: t.Tenant, WhenBusy: t.WhenBusy}
}

func triggerKey(tenant, id string) string { return "trigger." + autorun.TenantKey(tenant) + "." + id }

// indexKey finds a trigger by its id alone, as a delivery names it: its
// value is the trigger's key.
func indexKey(id string) string { return "triggerid." + id }

// Request is a new trigger, as the API decoded it.
type Request struct {
	Name     string
	Run      runs.Spec
	WhenBusy autorun.WhenBusy
	Verify   Verify
	Paused   bool
}

// Patch is a change to a trigger: the fields given. Its verify cannot
// change: its senders hold a secret of that kind.
type Patch struct {
	Name     *string
	Run      *runs.Spec
	WhenBusy *autorun.WhenBusy
	Paused   *bool
}

// Delivery is one delivery to a trigger and what became of it, as the
// API shows it.
type Delivery struct {
	ID         string             `json:"id"`
	DeliveryID string             `json:"delivery_id,omitempty"`
	Event      string             `json:"event,omitempty"`
	ReceivedAt time.Time          `json:"received_at"`
	Outcome    autorun.Outcome    `json:"outcome"`
	RunID      string             `json:"run_id,omitempty"`
	BusyRunID  string             `json:"busy_run_id,omitempty"`
	Error      *autorun.ErrorInfo `json:"error,omitempty"`
	// Duplicate is set in the answer to a delivery whose id came before:
	// the Delivery is the first one's.
	Duplicate bool `json:"duplicate,omitempty"`
}

func deliveryOf(r autorun.Record) Delivery {
	return Delivery{ID: r.ID, DeliveryID: r.DeliveryID, Event: r.Event, ReceivedAt: r.Time.UTC(), Outcome: r.Outcome,
		RunID: r.RunID, BusyRunID: r.BusyRunID, Error: r.Error}
}

// View is a trigger as the API shows it.
type View struct {
	ID       string           `json:"id"`
	Name     string           `json:"name"`
	Run      runs.Spec        `json:"run"`
	WhenBusy autorun.WhenBusy `json:"when_busy"`
	Verify   Verify           `json:"verify"`
	Paused   bool             `json:"paused"`
	// URL is where senders deliver: the API makes it absolute.
	URL string `json:"url"`
	// Secret is shown in the answers of create and rotate only.
	Secret                  string     `json:"secret,omitempty"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
	LastRunID               string     `json:"last_run_id,omitempty"`
	LastDeliveries          []Delivery `json:"last_deliveries"`
	CreatedAt               time.Time  `json:"created_at"`
	UpdatedAt               time.Time  `json:"updated_at"`
}

// DeliveriesPath is the path of a trigger's deliveries.
func DeliveriesPath(id string) string { return "/v1/triggers/" + id + "/deliveries" }

const lastDeliveriesShown = 5
