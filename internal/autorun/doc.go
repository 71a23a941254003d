// Package autorun is what schedules and triggers share: runs that start
// themselves, without a client's POST /v1/runs.
//
// Each owner (a schedule or a trigger) has one State record in the store,
// changed only by compare-and-set: the run it started last, a start in
// progress (Pending, a lease), at most one start waiting for the previous
// run to end (Queued), and its recent Records, the fires or deliveries the
// API lists. The Starter applies the owner's WhenBusy rule under that
// record, so that replicas starting the same owner at once start one run.
//
// Claims are the other half of "exactly once": a fire time or a delivery
// id is claimed by creating its key, which one replica in the cluster
// wins; a claim whose holder died is taken over after its lease, and the
// run's idempotency key (the claim's key) makes the taker find the run
// the holder may already have made rather than make a second.
package autorun
