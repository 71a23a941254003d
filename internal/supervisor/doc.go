// Package supervisor executes runs: it admits them, queues them, takes them
// from the queue, runs each as a supervised child process of its agent's
// CLI, records what the adapter decodes from its output, and drives the
// turns, approvals and messages of interactive runs.
//
// What a run is, and the interfaces the supervisor needs from the rest
// (Adapter, Store, Observer, Session), are declared in package runs, the
// domain; this package implements the machine between them:
//
//	api → runs ← adapters
//	api ⇢ supervisor → runs ← store, metrics
//
// The API reaches the supervisor only through the interfaces it declares
// itself (api.Service); cmd/gateway builds the one from the other.
//
// # The queue
//
// Submit records a queued run that no replica owns and puts it, with its
// whole spec, in the queue every replica shares (Store.Enqueue). Each
// replica runs Config.MaxConcurrent workers; a worker takes a run from the
// queue only while it is free, claims the run's record (Store.ClaimRun:
// of replicas claiming one run, one wins) and executes it. A cancel of a
// queued run claims it the same way and finishes it. A replica that stops
// leaves queued runs where they are; runs it had claimed and not started
// go back to the queue, at its restart or by another replica's sweep. A
// replica whose disk is low (Degrade) takes nothing and stops its runs.
//
// # Process ownership
//
// One goroutine owns each run's process from start to reap. The agent runs
// in its own process group, in a cgroup of its own where the machine
// allows it (Config.Cgroups, see proctree.Cgroups), under a reaper (a
// child subreaper: agentgate-reaper beside the gateway's binary, or the
// gateway's binary itself, see proctree.Reap), with a minimal
// environment that carries the run's cookie. Cancel, timeout and shutdown
// send the adapter's interrupt signal, then SIGTERM, then SIGKILL, a grace
// period apart; after the agent exits, however it exits, the run's cgroup
// is killed whole and every process with the cookie or below one is
// killed, and stdout is drained with a deadline so that nothing the run
// started can hold it open.
//
// # Events
//
// Decoders return events; the supervisor's emit is the one place they are
// stamped (run id, seq, time, session), bounded (Limits) and encoded, then
// queued to the run's appender, which stores them in order, in batches. What
// arrives while an append is in flight goes in the next; while the run
// writes in bursts, an event finding the appender idle waits up to 1 ms for
// the rest of its burst. The stored log is the source of truth that every
// reader follows with its own cursor. A failing store write is retried for
// Config.StoreRetry, through a NATS leader election; the store makes a
// retried append safe. A run is recorded finished before its run.completed
// event is stored (the record is retried in the background if need be, and
// the event waits for it), and run.completed is always the last event. A run
// some of whose events the store never took fails with class store_failed:
// it never reports succeeded over a log that is not whole.
//
// # Where things live
//
//	supervisor.go  Config, the Supervisor, Start, reads, Shutdown
//	admission.go   Submit, the queue's workers (take), Cancel
//	submission.go  Submit's steps: check, admit, record, enqueue
//	lifecycle.go   one run's execution, from start to the recorded outcome,
//	               phase by phase (execution)
//	process.go     the process itself: pipes, signals, stdin, the reaper
//	child.go       runProcess's phases: start, read, supervise, reap
//	recorder.go    emit and finish: stamping, bounding, storing; sessions' costs
//	recovery.go    runs left unfinished by a gateway that stopped
//	turns.go       the turns, approvals and messages of a run with a Session
//	input.go       input from outside, here or routed to the run's owner
//	tenancy.go     tenants' workspace roots, resumable sessions, the audit trail
//	attachments.go a run's or message's attachments, over Config.Uploads
//	artifacts.go   a run's artifacts, over an artifacts.Keeper
//	mcp.go         MCP servers, checked and sealed at rest
//	redaction.go   which redactor a run gets (internal/redact/runs.go redacts)
//	network.go     a run's network policy: resolved at submission, enforced
//	               around its process by the egress proxy (internal/egress)
//	               behind the shim's handoff (internal/netns)
//	budget.go      a run's budgets: turns, tokens, dollars; schema.go its
//	               structured output checked against its output_schema
//
// # Interactive runs
//
// A run that is interactive, or asks for approvals, gets a Session from
// its adapter: a Conversation that takes input while it runs. One session
// object per run (turns.go, with the run's activity diagram) serializes
// every call into the decoder, whether it comes from the output reader,
// from a client (Supervisor.Input) or from a deadline, and writes what the
// decoder has for stdin before it lets go. The supervisor numbers turns,
// stamps and enforces approval deadlines, queues messages, closes a run
// that is not interactive after its turn, and keeps turns, pending
// approvals and the activity in the run record. Input for a run another
// replica owns is sent there through the Store and answered by it.
package supervisor
