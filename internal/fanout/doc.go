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
// A feed ends, and closes its store cursor, when the last reader of its run
// closes; its store cursor closes earlier, once it has read run.completed,
// since nothing follows it. A store cursor that fails ends its feed: the
// readers get what the ring holds, then the failure, as they would from a
// store cursor of their own.
package fanout
