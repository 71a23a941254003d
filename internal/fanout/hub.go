package fanout

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// Source is where a Hub reads runs' logs: the store. runs.Store implements
// it.
type Source interface {
	// OpenCursor reads the run's log from the event after seq after.
	OpenCursor(ctx context.Context, runID string, after uint64) (runs.Cursor, error)
	// LastEvent returns the run's last stored event (its JSON unread).
	LastEvent(ctx context.Context, runID string) (runs.StoredEvent, error)
}

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

// maxBatchBytes bounds the envelopes of one batch a reader gets from the
// ring, like a store cursor's buffer: a reader of big events gets them a
// few at a time (always at least one).
const maxBatchBytes = runs.ReaderStepBytes

// ErrClosed is what readers get once their Hub is closed, and what
// OpenCursor returns after it.
var ErrClosed = errors.New("event hub closed")

// errReaderClosed is what Next returns after Close.
var errReaderClosed = errors.New("cursor closed")

// Hub hands out cursors on runs' logs that share, per run, one store cursor
// and a ring of recent events. It is safe for concurrent use; each cursor
// it returns has one reader, like any runs.Cursor.
type Hub struct {
	src  Source
	opts Options
	log  *zap.Logger

	mu     sync.Mutex
	feeds  map[string]*feed // by run id, while they have readers
	closed bool
	pumps  sync.WaitGroup

	// storeReads counts the store cursors readers opened of their own:
	// starting before a ring, or fallen off it; fellOff those of readers
	// that fell off.
	storeReads atomic.Int64
	fellOff    atomic.Int64
	// onRing and onStore are the open readers in a ring and on a store
	// cursor of their own.
	onRing  atomic.Int64
	onStore atomic.Int64
	// delivered counts the events readers returned.
	delivered atomic.Int64
	// offered counts the events that entered rings from Offer;
	// localFeeds the feeds kept by Offer alone now, and fallbacks the
	// times one went back to a store cursor.
	offered    atomic.Int64
	localFeeds atomic.Int64
	fallbacks  atomic.Int64
}

// Stats is what a Hub holds and has done.
type Stats struct {
	// Feeds is the runs with a feed now.
	Feeds int
	// RingReaders and StoreReaders are the open readers reading from
	// their run's ring, and from a store cursor of their own.
	RingReaders, StoreReaders int64
	// StoreReads is how many times a reader read from a store cursor of
	// its own, because it started before its run's ring or fell off it.
	StoreReads int64
	// FellOff is how many of those were readers that fell off the ring,
	// slower than their run.
	FellOff int64
	// Delivered is how many events readers have returned.
	Delivered int64
	// Offered is how many events entered rings from this replica's own
	// appends (Offer) rather than from a store cursor.
	Offered int64
	// LocalFeeds is the feeds kept current by Offer alone now, without a
	// store cursor; LocalFallbacks how many times one found its run's
	// log written without it and went back to a store cursor.
	LocalFeeds     int
	LocalFallbacks int64
}

// Stats returns what the Hub holds now and has done so far.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	feeds := len(h.feeds)
	h.mu.Unlock()
	return Stats{
		Feeds:          feeds,
		RingReaders:    h.onRing.Load(),
		StoreReaders:   h.onStore.Load(),
		StoreReads:     h.storeReads.Load(),
		FellOff:        h.fellOff.Load(),
		Delivered:      h.delivered.Load(),
		Offered:        h.offered.Load(),
		LocalFeeds:     int(h.localFeeds.Load()),
		LocalFallbacks: h.fallbacks.Load(),
	}
}

// Offer hands the Hub events of the run that this replica has just stored:
// AppendEvents returned nil for them, so they are the log's, in order. A
// feed of the run whose ring ends right before them takes them at once,
// without waiting for its store cursor to deliver them, and then closes
// that cursor: while the run's events keep coming through Offer, in
// order, its readers cost the store nothing. A feed that sees a gap
// between its ring and an offer (its store cursor has not caught up, or
// another writer stored events in between) leaves it to the store cursor,
// and one kept by Offer alone goes back to a store cursor then, or when no
// offer came for Options.LocalCheck and the store holds events past its
// ring. Events the ring holds already are dropped, so offering a batch
// twice is harmless. Offer does not keep evs' slice; it keeps their JSON,
// which must not change after.
func (h *Hub) Offer(runID string, evs []runs.StoredEvent) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	f := h.feeds[runID]
	h.mu.Unlock()
	if f == nil {
		return
	}
	f.offer(evs)
}

// Offering returns st with AppendEvents offering what it stored to the
// Hub: the store a replica's supervisor writes through, so that the
// replica's own readers of its runs get their events from memory.
func (h *Hub) Offering(st runs.Store) runs.Store { return offeringStore{st, h} }

type offeringStore struct {
	runs.Store
	h *Hub
}

func (s offeringStore) AppendEvents(ctx context.Context, runID string, evs []runs.StoredEvent) error {
	err := s.Store.AppendEvents(ctx, runID, evs)
	if err == nil {
		s.h.Offer(runID, evs)
	}
	return err
}

// New returns a Hub reading from src.
func New(src Source, opts Options, log *zap.Logger) *Hub {
	opts.setDefaults()
	return &Hub{src: src, opts: opts, log: log, feeds: map[string]*feed{}}
}

// OpenCursor returns a cursor on the run's log from the event after seq
// after. The first reader of a run on this Hub starts the run's feed (a
// store cursor); errors opening it, or a store cursor of the reader's own
// when it starts before the ring, are returned as the store gave them
// (runs.ErrStreamCapacity among them). It fails with ErrClosed after
// Close.
func (h *Hub) OpenCursor(ctx context.Context, runID string, after uint64) (runs.Cursor, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, fmt.Errorf("open events of run %s: %w", runID, ErrClosed)
		}
		f := h.feeds[runID]
		opener := f == nil
		if opener {
			f = newFeed(h, runID)
			h.feeds[runID] = f
		}
		f.readers++
		h.mu.Unlock()

		if opener {
			f.openErr = f.start(ctx, after)
			if f.openErr != nil {
				// Gone before anyone waiting sees the failure, so that
				// they start feeds of their own.
				h.forget(f)
			}
			close(f.ready)
			if f.openErr != nil {
				h.leave(f)
				return nil, f.openErr
			}
		} else {
			select {
			case <-f.ready:
			case <-ctx.Done():
				h.leave(f)
				return nil, ctx.Err()
			}
			if f.openErr != nil {
				// The opener's attempt failed, perhaps for its own
				// context's sake: make one of our own.
				h.leave(f)
				continue
			}
		}
		r := &reader{f: f, last: after}
		if err := r.place(ctx); err != nil {
			r.Close()
			return nil, err
		}
		return r, nil
	}
}

// Close ends every feed and waits for their goroutines. Readers still open
// get ErrClosed once they have read what their feed's ring holds; they
// must still be closed.
func (h *Hub) Close() error {
	h.mu.Lock()
	h.closed = true
	feeds := h.feeds
	h.feeds = map[string]*feed{}
	h.mu.Unlock()
	for _, f := range feeds {
		f.cancel()
	}
	h.pumps.Wait()
	return nil
}

// leave drops one reader of f; the last one stops it.
func (h *Hub) leave(f *feed) {
	h.mu.Lock()
	f.readers--
	last := f.readers == 0
	if last && h.feeds[f.id] == f {
		delete(h.feeds, f.id)
	}
	h.mu.Unlock()
	if last {
		f.stop()
	}
}

// forget removes f, whose store cursor failed, so that the next reader of
// its run starts a new feed.
func (h *Hub) forget(f *feed) {
	h.mu.Lock()
	if h.feeds[f.id] == f {
		delete(h.feeds, f.id)
	}
	h.mu.Unlock()
}

// feed is one run's store cursor and ring. Its pump goroutine alone
// appends to the ring; readers read it under mu.
type feed struct {
	h  *Hub
	id string

	readers int           // guarded by h.mu
	ready   chan struct{} // closed once start returned
	openErr error         // start's error; read after ready is closed

	ctx     context.Context
	cancel  context.CancelFunc
	stopped chan struct{} // closed when the pump has ended (or never began)

	mu sync.RWMutex
	// evs is the ring: the events read after seq floor, in order; the
	// absolute index of evs[0] is lo. Readers keep absolute indexes, so
	// that one that fell off the ring (its index below lo) knows it.
	evs   []runs.StoredEvent
	lo    uint64
	floor uint64
	bytes int
	// completed: run.completed is in the ring, and nothing follows it.
	completed bool
	// err is why the store cursor failed; readers get it after the ring.
	err error
	// wake is closed, and replaced, when the ring grows or the feed ends,
	// no sooner than wakeGap after the last time (woken): until then a
	// timer (wakeTimer) holds the wake-up back.
	wake      chan struct{}
	woken     time.Time
	wakeTimer *time.Timer
	// ringReaders is the feed's open readers in its ring, for wakeGap.
	ringReaders atomic.Int64

	// local: the ring is kept current by offers alone, and the pump has
	// no store cursor. dropCursor, while the pump reads a store cursor,
	// ends that read: an offer that brings the ring to the log's end
	// calls it. gap: an offer found the ring behind the log while local.
	// offeredAt is when the last offer came. poke wakes a local pump.
	local      bool
	dropCursor context.CancelFunc
	gap        bool
	offeredAt  time.Time
	poke       chan struct{}
}

func newFeed(h *Hub, id string) *feed {
	ctx, cancel := context.WithCancel(context.Background())
	return &feed{
		h: h, id: id,
		ready:   make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
		stopped: make(chan struct{}),
		wake:    make(chan struct{}),
		poke:    make(chan struct{}, 1),
	}
}

// start opens the feed's store cursor and its pump, for a first reader
// after seq after. The ring begins at most RingEvents before the run's
// end: a reader further back reads from the store until it has caught up,
// and the feed does not race through a long log only to drop it.
func (f *feed) start(ctx context.Context, after uint64) error {
	from := after
	last, err := f.h.src.LastEvent(ctx, f.id)
	if err != nil {
		close(f.stopped)
		return fmt.Errorf("open events of run %s: %w", f.id, err)
	}
	if n := uint64(f.h.opts.RingEvents); last.Seq > after+n {
		from = last.Seq - n
	}
	cur, err := f.h.src.OpenCursor(ctx, f.id, from)
	if err != nil {
		close(f.stopped)
		return err
	}
	f.floor = from
	f.h.mu.Lock()
	if f.h.closed {
		f.h.mu.Unlock()
		_ = cur.Close()
		close(f.stopped)
		return fmt.Errorf("open events of run %s: %w", f.id, ErrClosed)
	}
	// Under the Hub's lock, so that Close's Wait does not race the Add.
	f.h.pumps.Add(1)
	f.h.mu.Unlock()
	go f.pump(cur)
	f.h.log.Debug("event feed started", zap.String("run_id", f.id), zap.Uint64("after_seq", from))
	return nil
}

// pump moves events from the store cursor into the ring, never waiting
// for a reader, until run.completed, a failure, or the feed is stopped.
// While offers keep the ring current it closes its store cursor and waits
// (waitLocal), and opens another from the ring's end when they no longer
// do.
func (f *feed) pump(cur runs.Cursor) {
	defer f.h.pumps.Done()
	defer close(f.stopped)
	defer func() {
		f.mu.Lock()
		if f.local {
			f.local = false
			f.h.localFeeds.Add(-1)
		}
		f.mu.Unlock()
	}()
	for {
		err := f.follow(cur)
		_ = cur.Close()
		if err != nil {
			f.fail(err)
			return
		}
		if !f.waitLocal() {
			return
		}
		f.mu.RLock()
		after := f.lastLocked()
		f.mu.RUnlock()
		cur, err = f.h.src.OpenCursor(f.ctx, f.id, after)
		if err != nil {
			f.fail(err)
			return
		}
		f.h.log.Debug("event feed reads the store again", zap.String("run_id", f.id), zap.Uint64("after_seq", after))
	}
}

// follow reads cur into the ring until run.completed (nil, the feed
// done), an offer brings the ring to the log's end (nil, the feed local),
// or cur fails.
func (f *feed) follow(cur runs.Cursor) error {
	ctx, drop := context.WithCancel(f.ctx)
	defer drop()
	f.mu.Lock()
	f.dropCursor = drop
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.dropCursor = nil
		f.mu.Unlock()
	}()
	for {
		evs, err := cur.Next(ctx, f.h.opts.ReadBatch)
		if err != nil {
			if f.ctx.Err() != nil {
				return ErrClosed
			}
			f.mu.RLock()
			local := f.local
			f.mu.RUnlock()
			if ctx.Err() != nil && local {
				return nil
			}
			return err
		}
		f.mu.Lock()
		f.appendLocked(evs)
		done := f.completed
		if done {
			f.wakeLocked()
		} else {
			f.wakeSoonLocked()
		}
		f.mu.Unlock()
		if done {
			// Nothing is stored after run.completed: the store
			// cursor goes now, and the ring stays for the readers.
			return nil
		}
	}
}

// fail ends the feed with err: its readers get what the ring holds, then
// err.
func (f *feed) fail(err error) {
	if f.ctx.Err() != nil {
		err = ErrClosed
	} else {
		f.h.log.Warn("event feed failed", zap.String("run_id", f.id), zap.Error(err))
		f.h.forget(f)
	}
	f.mu.Lock()
	f.err = err
	f.wakeLocked()
	f.mu.Unlock()
}

// waitLocal waits while the feed is kept by offers alone, and reports
// whether it needs a store cursor again: an offer found a gap, or none came
// for LocalCheck and the store holds events past the ring. It returns
// false when the run has completed or the feed is stopped.
func (f *feed) waitLocal() bool {
	check := f.h.opts.LocalCheck
	timer := time.NewTimer(check)
	defer timer.Stop()
	for {
		f.mu.Lock()
		switch {
		case f.completed:
			f.mu.Unlock()
			return false
		case !f.local:
			// Not kept by offers: only a store cursor keeps it.
			f.mu.Unlock()
			return true
		case f.gap:
			f.leaveLocalLocked()
			f.mu.Unlock()
			return true
		}
		idle := time.Since(f.offeredAt)
		f.mu.Unlock()
		if idle >= check {
			stored, err := f.h.src.LastEvent(f.ctx, f.id)
			if f.ctx.Err() != nil {
				return false
			}
			f.mu.Lock()
			// A store that cannot answer is asked again next period:
			// a cursor opened on it now would only fail the feed, and
			// creating a consumer on a store in trouble (its disk
			// full) adds to the trouble.
			behind := err == nil && stored.Seq > f.lastLocked()
			if behind && f.local && !f.completed {
				// Written without this replica (another took the
				// run over): the store cursor brings it.
				f.leaveLocalLocked()
				f.mu.Unlock()
				return true
			}
			f.offeredAt = time.Now() // checked: wait another period
			f.mu.Unlock()
			idle = 0
		}
		timer.Reset(check - idle)
		select {
		case <-f.ctx.Done():
			return false
		case <-f.poke:
		case <-timer.C:
		}
	}
}

// leaveLocalLocked marks the feed as reading a store cursor again.
func (f *feed) leaveLocalLocked() {
	f.local, f.gap = false, false
	f.h.localFeeds.Add(-1)
	f.h.fallbacks.Add(1)
}

// lastLocked is the seq of the ring's last event, or the seq it begins
// after.
func (f *feed) lastLocked() uint64 {
	if n := len(f.evs); n > 0 {
		return f.evs[n-1].Seq
	}
	return f.floor
}

// offer adds evs, stored by this replica, to the ring if they follow it
// (see Hub.Offer).
func (f *feed) offer(evs []runs.StoredEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.completed || f.err != nil || f.ctx.Err() != nil || (!f.local && f.dropCursor == nil) {
		// Done, or the pump is not reading (not yet started, or
		// opening a store cursor again), which then brings these.
		return
	}
	last := f.lastLocked()
	i := 0
	for i < len(evs) && evs[i].Seq <= last {
		i++
	}
	if i < len(evs) && evs[i].Seq != last+1 {
		// The ring is behind the log: its store cursor brings what is
		// between, and a feed kept by offers alone needs one again.
		if f.local {
			f.gap = true
			f.pokeLocked()
		}
		return
	}
	f.offeredAt = time.Now()
	if i < len(evs) {
		f.appendLocked(evs[i:])
		f.h.offered.Add(int64(len(evs) - i))
	}
	if !f.local && f.dropCursor != nil {
		// The ring is at the log's end, having taken these events or
		// holding them already (its store cursor, racing this
		// replica's acknowledgement, often brings them first): the
		// store cursor is not needed while offers keep it there.
		f.local = true
		f.h.localFeeds.Add(1)
		f.dropCursor()
	}
	switch {
	case f.completed:
		f.wakeLocked()
		f.pokeLocked()
	case i < len(evs):
		f.wakeSoonLocked()
	}
}

func (f *feed) pokeLocked() {
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// appendLocked adds evs to the ring and drops its oldest events beyond its
// bounds.
func (f *feed) appendLocked(evs []runs.StoredEvent) {
	opts := f.h.opts
	for _, ev := range evs {
		if f.completed {
			return
		}
		if n := len(f.evs); (n > 0 && ev.Seq <= f.evs[n-1].Seq) || (n == 0 && ev.Seq <= f.floor) {
			continue // a store cursor never gives it; a reader must never get it twice
		}
		f.evs = append(f.evs, ev)
		f.bytes += len(ev.JSON)
		f.completed = ev.Type == runs.EventRunCompleted
		for len(f.evs) > opts.RingEvents || (f.bytes > opts.RingBytes && len(f.evs) > 1) {
			f.floor = f.evs[0].Seq
			f.bytes -= len(f.evs[0].JSON)
			// Cleared, so that the backing array does not keep its
			// envelope alive until the next reallocation.
			f.evs[0] = runs.StoredEvent{}
			f.evs = f.evs[1:]
			f.lo++
		}
	}
}

// wakeLocked wakes the readers now.
func (f *feed) wakeLocked() {
	if f.wakeTimer != nil {
		f.wakeTimer.Stop()
		f.wakeTimer = nil
	}
	close(f.wake)
	f.wake = make(chan struct{})
	f.woken = time.Now()
}

// wakeSoonLocked wakes the readers now if the last wake-up is wakeGap ago,
// or else when it will be: a wake-up of many readers is one goroutine
// switch and one client write each, which at a thousand readers and a
// thousand events a second is more than a small machine has, while a
// few milliseconds' wait lets each take several events at once.
func (f *feed) wakeSoonLocked() {
	if f.wakeTimer != nil {
		return // the pending wake-up takes these events too
	}
	gap := f.wakeGap()
	wait := gap - time.Since(f.woken)
	if gap <= 0 || wait <= 0 {
		f.wakeLocked()
		return
	}
	f.wakeTimer = time.AfterFunc(wait, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.wakeTimer != nil {
			f.wakeTimer = nil
			f.wakeLocked()
		}
	})
}

// wakeGap is the least time between two wake-ups of f's readers.
func (f *feed) wakeGap() time.Duration {
	o := f.h.opts
	if o.WakePerReader < 0 {
		return 0
	}
	return min(o.MaxWakeDelay, time.Duration(f.ringReaders.Load())*o.WakePerReader)
}

// indexAfterLocked is the absolute index of the first event of the ring
// above seq (the ring's end when there is none).
func (f *feed) indexAfterLocked(seq uint64) uint64 {
	i := sort.Search(len(f.evs), func(i int) bool { return f.evs[i].Seq > seq })
	return f.lo + uint64(i)
}

// stop ends the pump, which closes the store cursor, and waits for it.
func (f *feed) stop() {
	f.cancel()
	<-f.stopped
	f.h.log.Debug("event feed stopped", zap.String("run_id", f.id))
}

// reader is a runs.Cursor on a feed: a position in its ring, or, while it
// is behind the ring, a store cursor of its own.
type reader struct {
	f *feed
	// last is the seq of the last event returned (at first, the one it
	// starts after): nothing at or below it is returned.
	last uint64
	// next is the absolute index in the ring of the next event to look
	// at, while own is nil.
	next   uint64
	own    runs.Cursor
	closed bool
	// at is where the reader reads from now, as the Hub's Stats count it.
	at readerPlace
	// polled holds what the last Poll returned, reused by the next: a
	// stream polls again only once it has written it. A reader that finds
	// nothing new gives it back to pollBatches before it waits. (A
	// pointer, as the pool keeps it, so that giving it back allocates
	// nothing.)
	polled *[]runs.StoredEvent
}

// pollBatches holds the batches of readers that wait, for readers that
// have events to take. A thousand readers of a busy run each take a
// batch several hundred times a second, and clients that lag a little
// take a few dozen events at a time: allocating each batch afresh was
// most of what the gateway allocated with a thousand clients, and the
// collection it drove about a quarter of its CPU. Pooled, a reader holds
// a batch only between taking events and polling again, so a thousand
// waiting readers hold none.
var pollBatches = sync.Pool{New: func() any {
	b := make([]runs.StoredEvent, 0, newPollBatch)
	return &b
}}

// newPollBatch is the room of a new batch in pollBatches: a few dozen
// events, what a reader a little behind a busy run takes at a time.
const newPollBatch = 64

// maxPooledPoll is the largest batch kept in pollBatches: a stream's
// usual batch of 256 events.
const maxPooledPoll = 256

// releasePolled gives the reader's batch back to pollBatches: its caller
// is done with it, and polls no more until it has waited or read on with
// Next.
func (r *reader) releasePolled() {
	putPollBatch(r.polled)
	r.polled = nil
}

// putPollBatch gives b back to pollBatches, cleared so that the pool does
// not keep its events' bytes alive. Only b's length is cleared: a batch
// is cleared before each reuse as well, so what lies past its length was
// cleared before.
func putPollBatch(b *[]runs.StoredEvent) {
	if b == nil || cap(*b) > maxPooledPoll {
		return
	}
	clear(*b)
	*b = (*b)[:0]
	pollBatches.Put(b)
}

// readerPlace is where a reader reads from.
type readerPlace int

const (
	nowhere readerPlace = iota // not yet placed, or closed
	inRing
	onStoreCursor
)

// move records that the reader now reads from p.
func (r *reader) move(p readerPlace) {
	h := r.f.h
	switch r.at {
	case inRing:
		h.onRing.Add(-1)
		r.f.ringReaders.Add(-1)
	case onStoreCursor:
		h.onStore.Add(-1)
	}
	switch p {
	case inRing:
		h.onRing.Add(1)
		r.f.ringReaders.Add(1)
	case onStoreCursor:
		h.onStore.Add(1)
	}
	r.at = p
}

// place puts a new reader in the ring, or on a store cursor of its own
// when it starts before the ring.
func (r *reader) place(ctx context.Context) error {
	if r.join() {
		r.move(inRing)
		return nil
	}
	cur, err := r.f.h.src.OpenCursor(ctx, r.f.id, r.last)
	if err != nil {
		return err
	}
	r.f.h.storeReads.Add(1)
	r.own = cur
	r.move(onStoreCursor)
	return nil
}

// join moves the reader into the ring if the ring holds every event after
// the reader's last, or will: it reports whether it did.
func (r *reader) join() bool {
	f := r.f
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.err != nil || r.last < f.floor {
		return false
	}
	r.next = f.indexAfterLocked(r.last)
	return true
}

// Next returns the next events after the reader's position, at most max,
// waiting for one until ctx ends. A reader that fell off the ring opens a
// store cursor from where it is, and comes back to the ring once that has
// caught up. After its feed fails, a reader gets the events the ring still
// holds, then the failure.
func (r *reader) Next(ctx context.Context, max int) ([]runs.StoredEvent, error) {
	if max <= 0 {
		return nil, runs.Invalid("max", "must be positive")
	}
	if r.closed {
		return nil, errReaderClosed
	}
	f := r.f
	for {
		if r.own != nil {
			evs, err := r.own.Next(ctx, max)
			if err != nil {
				return nil, err
			}
			out := evs[:0]
			for _, ev := range evs {
				if ev.Seq > r.last {
					out = append(out, ev)
					r.last = ev.Seq
				}
			}
			if r.join() {
				_ = r.own.Close()
				r.own = nil
				r.move(inRing)
			}
			if len(out) > 0 {
				f.h.delivered.Add(int64(len(out)))
				return out, nil
			}
			continue
		}

		f.mu.RLock()
		if r.next < f.lo {
			f.mu.RUnlock()
			// Fell off the ring: read on from the store.
			cur, err := f.h.src.OpenCursor(ctx, f.id, r.last)
			if err != nil {
				return nil, err
			}
			f.h.storeReads.Add(1)
			f.h.fellOff.Add(1)
			r.own = cur
			r.move(onStoreCursor)
			continue
		}
		if int(r.next-f.lo) < len(f.evs) {
			out := r.takeLocked(max, nil)
			f.mu.RUnlock()
			if len(out) > 0 {
				return out, nil
			}
			continue
		}
		err, wake := f.err, f.wake
		f.mu.RUnlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// takeLocked returns the ring's events from the reader's position on, at
// most limit and about maxBatchBytes, and moves the reader past them: in
// reuse when they fit in it, else in a new slice. It returns none when the
// ring has nothing newer than the reader's last.
func (r *reader) takeLocked(limit int, reuse []runs.StoredEvent) []runs.StoredEvent {
	f := r.f
	for int(r.next-f.lo) < len(f.evs) {
		i := int(r.next - f.lo)
		out := reuse[:0]
		if n := min(limit, len(f.evs)-i); cap(out) < n {
			out = make([]runs.StoredEvent, 0, n)
		}
		size := 0
		for ; i < len(f.evs) && len(out) < limit; i++ {
			ev := f.evs[i]
			if len(out) > 0 && size+len(ev.JSON) > maxBatchBytes {
				break
			}
			r.next++
			if ev.Seq <= r.last {
				continue
			}
			out = append(out, ev)
			size += len(ev.JSON)
			r.last = ev.Seq
		}
		if len(out) > 0 {
			f.h.delivered.Add(int64(len(out)))
			return out
		}
	}
	return nil
}

// Poll is Next without the wait, for a caller that waits on other things
// too and would rather not spend a goroutine on each reader: it returns
// the events the ring holds after the reader's position now, at most max,
// in a slice that is the reader's again at its next Poll (a caller polls
// once it is done with them; Next's are the caller's to keep).
// With none, it returns a channel that is closed when the ring may have
// more (Poll again then), or the feed's failure once the ring has nothing
// left for the reader. A reader that reads from a store cursor of its own,
// or has just fallen off the ring, returns no events and no channel: its
// caller calls Next, which reads the store.
func (r *reader) Poll(max int) ([]runs.StoredEvent, <-chan struct{}, error) {
	if max <= 0 {
		return nil, nil, runs.Invalid("max", "must be positive")
	}
	if r.closed {
		return nil, nil, errReaderClosed
	}
	if r.own != nil {
		r.releasePolled() // its caller reads with Next now
		return nil, nil, nil
	}
	f := r.f
	f.mu.RLock()
	defer f.mu.RUnlock()
	if r.next < f.lo {
		r.releasePolled()
		return nil, nil, nil
	}
	if r.polled == nil {
		r.polled = pollBatches.Get().(*[]runs.StoredEvent)
	} else {
		clear(*r.polled) // see putPollBatch: what is past its length is zero
	}
	if out := r.takeLocked(max, *r.polled); len(out) > 0 {
		*r.polled = out // a batch it outgrew is dropped
		return out, nil, nil
	}
	// Nothing new: the caller is done with the last batch, and is about
	// to wait.
	r.releasePolled()
	if f.err != nil {
		return nil, nil, f.err
	}
	return nil, f.wake, nil
}

// Close releases the reader, and its store cursor if it has one; the last
// reader of a run stops the run's feed.
func (r *reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.move(nowhere)
	if r.own != nil {
		_ = r.own.Close()
		r.own = nil
	}
	r.f.h.leave(r.f)
	return nil
}
