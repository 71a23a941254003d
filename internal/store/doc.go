// Package store implements runs.Store on NATS JetStream, and runs an
// embedded NATS server for a gateway that has no cluster to talk to.
//
// It owns, in whatever NATS account its connection uses:
//
//   - The KV bucket "agentgate_runs": one key per run id, holding
//     {"run": …, "spec": …, "owner": …} as JSON, so the spec and owner,
//     which the public run object leaves out, survive a restart.
//   - The stream "AGENTGATE_EVENTS" on subjects "agentgate.events.<run_id>":
//     one message per event, its body the event's JSON envelope as
//     appended, its headers "Agentgate-Seq" (the run's own sequence,
//     1, 2, …) and "Agentgate-Type", and Nats-Msg-Id "<run_id>.<seq>" so a
//     retried append is not stored twice. Cursors are ordered consumers on
//     one run's subject, deleted when the cursor is closed.
//   - The KV bucket "agentgate_sessions": "<agent>.<session id>" → a JSON
//     runs.SessionRecord: the session's directory, so that a resumed run
//     continues there on any replica, and its cumulative cost, so that a
//     resumed run is charged only what it added.
//   - The KV bucket "agentgate_replicas": one key per live replica, its
//     heartbeat, expiring after Options.ReplicaTTL.
//   - The core NATS subjects "agentgate.cancel.<run_id>", which carry cancel
//     requests to every replica. They are not stored.
//
// Open creates the buckets and the stream, with file storage, when they are
// missing. Runs, sessions and events expire after Options.MaxAge, if it is
// set.
//
// Run ids are UUIDv7 strings made by the gateway; the store accepts any id
// of 1 to 64 ASCII letters, digits, '-' and '_', which keeps ids safe as
// subject tokens and keys, and rejects the rest with runs.ErrInvalid.
//
// Scale limits: ListRuns reads every key of the bucket on each call, which
// is fine for tens of thousands of stored runs; past that it needs an index,
// or a MaxAge that keeps the bucket small. A cursor that does not start at
// the end of its run's log replays the run from its first event, which is
// cheap for runs of thousands of events. Each open cursor costs the server
// one in-memory consumer and the client a few goroutines and at most 128
// buffered events (64 pulled, 64 ready for Next): a replica serves a few
// thousand concurrent cursors; past that, cursors should share one
// subscription per run. The embedded server syncs its files to disk every two
// minutes (the NATS default): a clean shutdown or a crash of the process
// loses nothing, a crash of the machine may lose the last two minutes.
package store
