// Package store implements runs.Store on NATS JetStream, and runs an
// embedded NATS server for a gateway that has no cluster to talk to.
//
// It owns, in whatever NATS account its connection uses:
//
//   - The KV bucket "agentgate_runs": one key per run id, holding
//     {"run": …, "spec": …, "owner": …} as JSON, so the spec and owner,
//     which the public run object leaves out, survive a restart.
//   - The stream "AGENTGATE_EVENTS" on subjects "agentgate.events.<run_id>":
//     the run's log, each message holding a run of its consecutive
//     events (at most Options.EventsPerMessage, 256 by default, and 256
//     KiB). A message of one event has the event's JSON envelope as
//     appended as its body, and headers "Agentgate-Seq" (the run's own
//     sequence, 1, 2, …) and "Agentgate-Type"; a message of several has
//     those of its first event, "Agentgate-Last-Seq" and
//     "Agentgate-Last-Type" of its last, and a pack's framing (below) as
//     its body. Either has Nats-Msg-Id "<run_id>.<seq of its last
//     event>". Versions before grouping wrote and read only messages of
//     one event. The stream allows atomic batch publish. Cursors are
//     ordered consumers on one run's subject, deleted when the cursor is
//     closed.
//   - The stream "AGENTGATE_PACKS" on subjects
//     "agentgate.runpacks.<run_id>.<k>": a run's packs, pack k holding the
//     run's events k*512+1 .. (k+1)*512 in one message, to replay them
//     without a message per event. They are an index, never the log: see
//     Packs below. The stream allows direct gets. Versions before it kept
//     packs in the events stream, on "agentgate.packs.<run_id>.<k>",
//     which keeps that subject until they expire; they are no longer read.
//   - The KV bucket "agentgate_sessions": "<agent>.<session id>" → a JSON
//     runs.SessionRecord: the session's directory, so that a resumed run
//     continues there on any replica, and its cumulative cost, so that a
//     resumed run is charged only what it added.
//   - The KV bucket "agentgate_replicas": one key per live replica, its
//     heartbeat, expiring after Options.ReplicaTTL.
//   - The core NATS subjects "agentgate.cancel.<run_id>", which carry cancel
//     requests to every replica. They are not stored.
//   - The object store "agentgate_snapshots": runs' workspaces and
//     sessions' state, as gzipped tars, one object each, named
//     "<tenant>/<kind>/<id>" with the tenant and id escaped (every byte but
//     ASCII letters, digits and '-' as "=XX"; the empty tenant "_"), so no
//     crafted id names another tenant's object. PutSnapshot writes the
//     chunks, waits until all are stored, and then the object's record,
//     the one message that makes a version visible and replaces the one
//     before; a reader past its bound or failing stores nothing and keeps
//     the old version. A tenant's snapshots together stay within
//     Options.SnapshotTenantBytes (10 GiB), checked against a listing of
//     every record on each put, so puts of one tenant at once may pass it
//     by what they store. Snapshots expire after Options.MaxAge, if set.
//   - The KV bucket "agentgate_session_locks":
//     "<tenant>.<agent>.<session id>", escaped alike, → the id of the run
//     that holds the session, each write with its own TTL (per-message
//     TTL, nats-server 2.11 or later), so that a lock whose replica died
//     ends by itself. Taking, renewing and freeing a lock are writes that
//     expect the revision read, so of runs racing for one session exactly
//     one wins.
//
// Open creates the buckets and the stream, with file storage, when they are
// missing. Runs, sessions and events expire after Options.MaxAge, if it is
// set.
//
// What is retried: Open retries every transient answer (timeouts, no
// responders, no meta leader yet, peers not yet known, JetStream not yet
// enabled, a create racing another replica's) with backoff until its ctx
// ends, each request bounded by Options.Timeout; a configuration the server
// rejects (an invalid config, replicas > 1 on a server that is not
// clustered, overlapping subjects) fails at once. AppendEvents, CreateRun
// and UpdateRun retry transient failures within their ctx's deadline, or
// Options.RetryFor (30 s) without one, which outlasts a leader election.
// Reads are not retried.
//
// Guarantees: the stored events of a run are always a dense prefix 1..k in
// seq order. A batch that fits one message is one publish. On a cluster a
// batch of several messages is one atomic batch publish, stored whole or
// not at all; on one server, which stages an atomic batch in files synced
// at its commit, a batch's messages are sent together and acknowledged
// after, each expecting the message before it as the stream's last
// (Nats-Expected-Last-Msg-Id), so that one refused ends the batch there.
// Each publish lands only right after the run's last stored message (its
// first message expects that one's stream sequence), so an election can neither
// leave a gap nor store an earlier event after a later one; calling
// AppendEvents again with the same batch stores nothing twice. A cursor that
// meets an event out of order (a log written by an earlier version) skips it
// and logs it. An UpdateRun or CreateRun whose ack was lost finds its record
// stored on the retry and succeeds. GetRun reads from the runs bucket's
// leader, so a run created on one replica is found on any other at once.
//
// Connections: the store writes on the connection it was opened on, and
// reads cursors on connections it dials with the same options, at most 32
// cursors each, every pull bounded to one maximal message (1 MiB) in
// bytes: the server cuts a client whose pending bytes pass its max_pending
// (64 MiB by default), and pulls in bulk on the writer's connection once
// took the writes down with them. Close, or closing the store's
// connection, closes those. On a cluster a new consumer's first pull is
// sometimes lost (it reaches the client's node before the consumer's
// interest does), which the ordered consumer would notice only after two
// missed heartbeats, 10 s: a cursor without a first event after 300 ms
// whose consumer has events pending and no pull waiting is given a new
// consumer.
//
// Packs: JetStream delivers a consumer one message at a time, and a live
// run's log is mostly messages of a few events, which bounds a replay
// through a consumer to a few hundred thousand events a second. So as
// AppendEvents stores a run's events, the store also builds, from the
// events it stored itself, the run's packs, and sends each once it is full
// without waiting for its ack: a version byte, the first seq, each event's
// type and JSON prefixed by their lengths, and a CRC-32C. Only a dense run
// of seqs from a pack's first enters it: an event that does not follow the
// one before (another writer's, a retry's) abandons the pack, and so does a
// pack past 512 KiB. A run's run.completed sends its last, partial pack and
// frees its buffer, so that a finished run, short or long, replays from
// packs to its end. The store buffers packs for at most 1024 runs (the one
// appended least recently loses its buffer) and 32 MiB. A pack is stored
// once (its publish expects no message on its subject). A cursor reads the
// packs holding the events it must deliver, one direct get by subject each
// (answered by any copy of the packs stream, with the message as stored,
// a few in flight at once), and at the first pack
// missing, unreadable or partial goes on through an ordered consumer from
// the stored position of the next event, which then follows the live tail;
// the consumer is created only then, and after a run.completed only if its
// reader asks for more. A pack lost, abandoned or damaged costs its range
// (and the rest of that replay) the slower path, never an event; so does
// a pack that the copy answering a get does not have yet, since a pack is
// written once and never changed. DeleteRun purges a run's packs with its
// events; MaxAge expires them as it does events.
//
// Run ids are UUIDv7 strings made by the gateway; the store accepts any id
// of 1 to 64 ASCII letters, digits, '-' and '_', which keeps ids safe as
// subject tokens and keys, and rejects the rest with runs.ErrInvalid.
//
// Scale limits: ListRuns reads every key of the bucket on each call, which
// is fine for tens of thousands of stored runs; past that it needs an index,
// or a MaxAge that keeps the bucket small. A cursor starts at the stored
// position of the event after the reader's, found by a few reads of single
// messages (one for a run alone in the stream, a few for one interleaved
// with others, at most about twice the bits of the stream's length), reading
// down from the run's end, so that a client asking for the last events
// touches only the file blocks that hold them. A log that is not a dense
// prefix is replayed from its first event instead, with a warning. A replay
// from packs runs at about two million events a second in the cursor, and
// holds at most five packs (about 1 MiB of fetched packs, by the size of
// the last) plus 256 events ready for Next (and at most 1 MiB of them).
// Each open cursor on the log costs the server one in-memory consumer and
// the client a few goroutines and at most 1024 events pulled (and at most 1
// MiB of them) plus 256 ready for Next (and at most 1 MiB of them): a replica serves a few
// thousand concurrent cursors, on one connection per 32; past that, cursors
// should share one subscription per run. At most 50 runs per stream append a
// multi-event batch at the same instant (the server's limit on atomic
// batches in flight); more are answered "too many" and retried. An external
// server needs atomic batch publish (nats-server 2.12 or later) and the
// default max_pending or more. The embedded server syncs its files to disk
// every two minutes (the NATS default): a clean shutdown or a crash of the
// process loses nothing, a crash of the machine may lose the last two
// minutes.
package store
