// Package natstest runs NATS JetStream clusters inside a test process, on
// loopback ports, with nodes that can be killed and restarted, so that
// tests can prove what a store does through a node loss.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long a node takes to accept clients, including
// recovering its store from disk on a restart.
const readyTimeout = 30 * time.Second

// Cluster is a JetStream cluster of nodes in this process. Its methods are
// safe for concurrent use. The test's cleanup shuts every node down.
type Cluster struct {
	t     testing.TB
	mu    sync.Mutex
	nodes []*node
}

type node struct {
	opts *server.Options
	srv  *server.Server // nil while killed
}

// Start starts an n-node cluster named "agentgate-test" and returns at once,
// once every node accepts clients: JetStream may not have elected its meta
// leader yet, as on a real cold start. Ports are chosen by the kernel on
// 127.0.0.1; each node keeps its ports and its store directory across
// Restart.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	// Every node lists every route, as a deployment's config does, so the
	// ports are reserved up front: holding all listeners at once makes them
	// distinct, and the short gap before the servers bind them is the only
	// race.
	ports := make([]int, 2*n)
	var lns []net.Listener
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("reserve a port: %v", err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	for _, ln := range lns {
		ln.Close()
	}
	var routes []*url.URL
	for i := range n {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", ports[n+i])})
	}
	c := &Cluster{t: t}
	root := t.TempDir()
	for i := range n {
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       ports[i],
			JetStream:  true,
			StoreDir:   fmt.Sprintf("%s/n%d", root, i+1),
			Cluster: server.ClusterOpts{
				Name: "agentgate-test",
				Host: "127.0.0.1",
				Port: ports[n+i],
			},
			Routes: routes,
			NoSigs: true,
			NoLog:  true,
		}
		c.nodes = append(c.nodes, &node{opts: opts})
	}
	t.Cleanup(c.shutdown)
	for i := range c.nodes {
		c.startNode(i)
	}
	return c
}

func (c *Cluster) startNode(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	srv, err := server.NewServer(nd.opts.Clone())
	if err != nil {
		c.t.Fatalf("node %d: %v", i, err)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		c.t.Fatalf("node %d not ready after %s", i, readyTimeout)
	}
	nd.srv = srv
}

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.nodes) }

// URL is a client URL of node i, running or not.
func (c *Cluster) URL(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].opts.Port)
}

// URLs is the client URLs of all nodes, comma-separated, as nats.Connect
// takes them.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.nodes))
	for i := range c.nodes {
		urls[i] = c.URL(i)
	}
	return strings.Join(urls, ",")
}

// Server returns node i's server, nil while it is killed.
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].srv
}

// Kill shuts node i down and waits until it has stopped. Its clients see
// their connection cut and reconnect to another node.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	srv := c.nodes[i].srv
	c.nodes[i].srv = nil
	c.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart starts node i again, on its ports and its store, if it is killed.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[i].srv == nil {
		c.startNode(i)
	}
}

// StreamLeader returns the index of the running node that leads the stream
// in the global account, or -1 when none does (an election is under way).
func (c *Cluster) StreamLeader(stream string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, nd := range c.nodes {
		if nd.srv != nil && nd.srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// StreamCurrent reports whether every node runs and has a current copy of
// the stream in the global account, so that killing any one of them
// leaves a quorum that has every stored message.
func (c *Cluster) StreamCurrent(stream string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.nodes {
		if nd.srv == nil || !nd.srv.JetStreamIsStreamCurrent(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return false
		}
	}
	return true
}

// MetaLeader returns the index of the running node that leads the
// JetStream meta group, or -1 when none does.
func (c *Cluster) MetaLeader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, nd := range c.nodes {
		if nd.srv != nil && nd.srv.JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

func (c *Cluster) shutdown() {
	for i := range c.nodes {
		c.Kill(i)
	}
}
