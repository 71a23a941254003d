// Package netguard bounds the connections the gateway holds open, so that
// no client, and no crowd of clients, can take the descriptors the process
// needs for everything else.
//
// A Listener wraps the gateway's net.Listener. It counts the connections it
// has handed out per client address and in total, and one that would pass
// either bound is refused at once: it gets a minimal HTTP response (429
// for a client over its own bound, 503 when the gateway is full), written
// with a short deadline and without reading the request, and is closed.
// A refused connection never reaches the HTTP server, so it costs no
// goroutine and holds its descriptor only while the refusal is written.
//
// A client is its IP address; an IPv6 client is its /64, the block an
// attacker gets as easily as one address. Behind a load balancer every
// connection comes from the balancer's own addresses, so the per-client
// bound there counts the balancer, not its clients: raise it (or turn it
// off) and have the balancer bound each client itself, with nginx's
// limit_conn for example.
//
// The total bound comes from the descriptor limit (see DefaultTotal), which
// RaiseNoFile reports and, where the Go runtime has not already done it,
// raises to the hard limit.
//
// What the listener does not do: time out a connection's reads and writes.
// That is the HTTP server's (ReadHeaderTimeout, IdleTimeout) and the
// handlers' (a deadline per body read, per event batch written).
package netguard
