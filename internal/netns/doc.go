// Package netns gets a run's egress proxy into the run's network
// namespace, where the agent's CLI can reach nothing but its own loopback.
//
// The sandbox starts the CLI under a shim (RunShim: the gateway's binary,
// or agentgate-reaper, given ShimArg as its first argument). Inside the
// namespace the shim listens on ProxyAddr, hands that listening socket's
// descriptor to the gateway over a Unix socket in the run's temporary
// directory (SCM_RIGHTS), closes its own copy and execs the CLI. The
// gateway (Handoff.Receive) accepts the CLI's proxy connections on that
// descriptor itself: a socket belongs to the namespace it was made in, not
// to the process that holds it, so the gateway serves the namespace's
// 127.0.0.1:3128 from outside, and no process inside forwards bytes.
//
// Built with cgo, both binaries run the shim in C before the Go runtime
// starts (package lightshim), step by step as RunShim does; RunShim is
// what runs without cgo.
//
// The shim runs before the CLI, alone in the sandbox with bubblewrap's
// init, so the one connection Receive accepts is the shim's. Receive then
// removes the Unix socket: the CLI, which can write in the temporary
// directory, finds nothing there to hand the gateway.
package netns
