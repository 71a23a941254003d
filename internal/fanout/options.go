package fanout

import (
	"time"
)

// Options tune a Hub. Zero values take the defaults noted.
type Options struct {
	// RingEvents bounds how many of a run's recent events its ring keeps
	// (default 4096): a reader that lags by more reads from the store.
	// RingBytes is what bounds the memory; 1,024 small events were one
	// second at 1,000 events/s, and readers that lagged that much on a
	// busy machine fell off together, each then costing a store cursor
	// that made the machine busier still.
	RingEvents int
	// RingBytes bounds the size of their envelopes (default 1 MiB, what
	// one store cursor buffered before), so that a replica with many
	// watched runs holds little for each; the newest event is kept
	// whatever its size.
	RingBytes int
	// ReadBatch is how many events a feed asks its store cursor for at
	// once (default 256).
	ReadBatch int
	// WakePerReader sets the least time between two wake-ups of a feed's
	// readers: this much for each reader in its ring (default 2µs), up to
	// MaxWakeDelay (default 2ms). Each wake-up costs every waiting reader
	// a goroutine switch and its client a write, so at a high rate many
	// readers wake once for a few events rather than once for each; an
	// event that comes after a quiet spell wakes them at once. A negative
	// value wakes them for every event.
	WakePerReader time.Duration
	MaxWakeDelay  time.Duration
	// LocalCheck is how long a feed kept current by this replica's own
	// appends (Offer) may go without one before it asks the store whether
	// the run's log has moved on without it (another replica wrote to the
	// run), and goes back to a store cursor if so (default 1s).
	LocalCheck time.Duration
}

func (o *Options) setDefaults() {
	if o.RingEvents <= 0 {
		o.RingEvents = 4096
	}
	if o.RingBytes <= 0 {
		o.RingBytes = 1 << 20
	}
	if o.ReadBatch <= 0 {
		o.ReadBatch = 256
	}
	if o.WakePerReader == 0 {
		o.WakePerReader = 2 * time.Microsecond
	}
	if o.MaxWakeDelay <= 0 {
		o.MaxWakeDelay = 2 * time.Millisecond
	}
	if o.LocalCheck <= 0 {
		o.LocalCheck = time.Second
	}
}
