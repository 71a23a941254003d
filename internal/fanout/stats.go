package fanout

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
