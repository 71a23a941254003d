// Package runs is agentgate's domain: what a run is (Spec, Run, State),
// what it produces (Event and its typed payloads, Usage, Exit), how it fails
// (Class, RunError, the FieldError and ConflictError a request meets), and
// the small interfaces each role needs from the rest, in the consumer's
// terms: Adapter and Decoder, implemented once per agent CLI under
// internal/adapters; Store, Cursor and Observer, implemented by
// internal/store and internal/metrics.
//
// It imports none of them, and nothing that runs a process: every arrow
// points inward.
//
//	api → runs ← adapters
//	supervisor → runs ← store, metrics
//
// The machine that executes runs is package supervisor.
//
// # Where things live
//
//	run.go          Spec, Run, State, Usage, Exit
//	validate.go     Spec.Validate and the bounds of a request's fields
//	event.go        Event, its types and typed payloads; newevent.go the
//	                events every decoder makes (NewEvent, Unparsed, Warning)
//	interactive.go  approvals, turns, input, sessions: an interactive run
//	errors.go       Class, RunError, FieldError and the errors a request meets
//	adapter.go      the Adapter contract: Command, Decoder, Outcome,
//	                Description, AgentInfo, and CLIFiles, the one way an
//	                adapter reads its CLI's files
//	capabilities.go the fields an agent takes, and those the gateway enforces
//	fields.go       CheckFields: an optional field an agent does not take,
//	                refused once, with the reason its Description gives
//	store.go        Store (RunStore, EventLog, Queue, Bus, Sessions), Cursor,
//	                Observer: what the supervisor needs kept and told
//	actor.go        who asks: an API key's id and its tenant
//	network.go      a run's network policy (Network), its fields and codes;
//	                adapter.go's NetworkNeeds is where an agent's model is
//	mcpserver.go, webhook.go, attachment.go
//	                the records and codes of MCP servers, webhooks and
//	                attachments
//
// Uploaded files (internal/files), tenants' quotas (internal/tenants) and
// a run's artifacts (internal/artifacts) are packages of their own, which
// import this one and declare the store role they need.
package runs
