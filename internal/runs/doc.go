// Package runs is agentgate's domain: what a run is (Spec, Run, State),
// what it produces (Event and its typed payloads, Usage, Exit), how it fails
// (Class, RunError), and the Supervisor that executes runs as supervised
// child processes.
//
// The package declares the interfaces it consumes: Adapter and Decoder,
// implemented once per agent CLI under internal/adapters; Store, implemented
// by internal/store; and Observer, implemented by internal/metrics. It imports
// none of them, so every arrow points inward:
//
//	api → runs ← adapters
//	      runs ← store, metrics
package runs
