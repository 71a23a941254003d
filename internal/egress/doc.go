// Package egress decides what a run's agent may reach over the network,
// and is the proxy through which it does.
//
// Under every policy but open, a run's agent (the CLI and all it starts)
// lives in a network namespace whose only interface is loopback. Its one
// way out is a listening socket inside that namespace whose descriptor the
// gateway holds: the agent's HTTP_PROXY and HTTPS_PROXY point there, and
// Proxy.Serve answers it from the gateway, under the run's Policy. Raw
// sockets, UDP and DNS go nowhere. This package owns the policy (Mode,
// Rule), what is never reachable (Guard), the decision for one host and
// port (Checker) and the proxy (Proxy); making the namespace and handing
// the descriptor over are not its.
//
// The threat is an agent that does what it is told by what it reads: a
// prompt injected into a web page, a file or a tool's answer. Such an agent
// may try to send the run's secrets somewhere, or to reach what only the
// gateway's host can reach: the gateway's own API and metrics, the NATS
// servers that hold every run's events, the cloud's metadata service with
// the host's credentials, the services of a private network. So:
//
//   - the Guard refuses the gateway's own ports on every local address,
//     the NATS servers, link-local, metadata, unspecified, multicast and
//     broadcast addresses, whatever the rules say;
//   - the operator's Trusted rules (the agent's model API) allow whatever
//     address their names resolve to, since the operator chose them;
//   - a run's own name rules allow only public addresses, so that a name
//     the run's author controls cannot be pointed at 127.0.0.1 or
//     10.0.0.5; an address or CIDR rule must name such an address itself;
//   - the proxy resolves a name once, checks the addresses, and dials the
//     address it checked: a name that answers differently the next time
//     (DNS rebinding) gains nothing;
//   - a name no rule could allow is refused without being looked up, so
//     that lookups are not a channel out (under a wildcard rule, names
//     under its domain still are: the author chose the domain).
//
// What is not defended: the contents of allowed traffic (an allowed host
// may receive anything the agent sends it), and an operator's endpoints
// the Guard was not told of. Tunnels carry TLS end to end: the proxy sees
// host and port, never the URL or the body of an https request.
package egress
