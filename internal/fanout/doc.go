// Package fanout shares one store cursor per run among the readers of the
// run's events on this replica.
//
// A Hub keeps, for each run that has local readers, a feed: one cursor on
// the store, read by one goroutine into a bounded ring of the run's most
// recent events (bounded in number and in bytes). Every reader the Hub
// opens is a runs.Cursor with its own position in that ring and nothing
// more. A reader that starts before the ring, or that falls off it because
// it reads more slowly than the run writes, reads on from a store cursor of
// its own until it has caught up, then rejoins the ring; it gets every event
// once, in order, either way. The feed never waits for a reader: a slow
// reader lags only itself.
//
// The store stays the source of truth. Each replica has its own Hub, fed
// from the store like any other reader, so a client on any replica sees
// every event of a run wherever it runs.
//
// The replica that runs a run also hands its Hub the events it has just
// stored (Offer, which the store calls after each append it makes). A
// feed whose ring ends right before an offer takes it at once and closes
// its store cursor: while offers keep coming in order, the run's local
// readers cost the store nothing and get each event as soon as it is
// acknowledged. Offers only ever extend the ring with what
// follows it, so they cannot reorder or repeat an event. A feed kept by
// offers goes back to a store cursor from its ring's end when an offer
// leaves a gap, or when none came for a while and the store holds events
// past the ring (another replica wrote to the run, having taken it over).
//
// A feed ends, and closes its store cursor, when the last reader of its run
// closes; its store cursor closes earlier, once it has read run.completed,
// since nothing follows it. A store cursor that fails ends its feed: the
// readers get what the ring holds, then the failure, as they would from a
// store cursor of their own.
package fanout
