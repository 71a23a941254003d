package store

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/natstest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// clusterConn connects to every node of c, reconnecting for ever.
func clusterConn(t *testing.T, c *natstest.Cluster, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Replicas started at once on an empty cluster, before it has elected a
// meta leader, all open the store, and the streams end as configured.
func TestColdStartOnCluster(t *testing.T) {
	c := natstest.Start(t, 3)
	const n = 5
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	octx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range n {
		nc := clusterConn(t, c, c.URL(i%c.Size()))
		wg.Go(func() {
			stores[i], errs[i] = Open(octx, nc, Options{Replicas: 3, MaxAge: time.Hour})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		t.Cleanup(stores[i].Close)
	}
	for _, name := range []string{eventsStream, packsStream, "KV_" + runsBucket, "KV_" + sessionsBucket, "KV_" + replicasBucket} {
		st, err := stores[0].js.Stream(octx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		cfg := st.CachedInfo().Config
		if cfg.Replicas != 3 {
			t.Errorf("%s: %d replicas, want 3", name, cfg.Replicas)
		}
		if name != "KV_"+replicasBucket && cfg.MaxAge != time.Hour {
			t.Errorf("%s: max age %s, want 1h", name, cfg.MaxAge)
		}
	}
	if cfg := stores[0].events.CachedInfo().Config; !cfg.AllowAtomicPublish || cfg.AllowDirect {
		t.Errorf("events stream: atomic publish %v, direct gets %v; want atomic publish, no direct gets", cfg.AllowAtomicPublish, cfg.AllowDirect)
	}
	if cfg := stores[0].packStream.CachedInfo().Config; !cfg.AllowDirect {
		t.Error("packs stream does not allow direct gets")
	}
	id := newID(t)
	if err := stores[1].CreateRun(octx, runs.Run{ID: id, Agent: "claude", Status: runs.Queued}); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[4].GetRun(octx, id); err != nil {
		t.Fatal(err)
	}
}

// openCluster is a 3-node cluster and a store on it with R3 streams.
func openCluster(t *testing.T, log *zap.Logger) (*natstest.Cluster, *Store) {
	t.Helper()
	return openClusterWith(t, Options{Log: log})
}

// openClusterWith is openCluster with opts, Replicas set to 3.
func openClusterWith(t *testing.T, opts Options) (*natstest.Cluster, *Store) {
	t.Helper()
	opts.Replicas = 3
	c := natstest.Start(t, 3)
	nc := clusterConn(t, c, c.URLs())
	octx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Open(octx, nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return c, s
}

// killLeader kills the node that leads stream, waits for another leader
// and restarts the node, and waits until every copy is current again.
func killLeader(t *testing.T, c *natstest.Cluster, stream string) {
	t.Helper()
	var leader int
	waitFor(t, time.Minute, "a leader of "+stream, func() bool { leader = c.StreamLeader(stream); return leader >= 0 })
	c.Kill(leader)
	waitFor(t, time.Minute, "a new leader of "+stream, func() bool { return c.StreamLeader(stream) >= 0 })
	c.Restart(leader)
	waitFor(t, time.Minute, "every copy of "+stream+" current", func() bool { return c.StreamCurrent(stream) })
}

// Writers append the events of several runs, in batches, retrying what
// fails as the run's appender does, while the events stream's leader is
// killed at random moments. Every run then reads back 1..N in order,
// nothing twice, and the stream holds exactly what was written. Messages
// hold at most 4 events, so that a batch is one message or an atomic
// batch of several.
func TestAppendsSurviveLeaderKills(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	c, s := openClusterWith(t, Options{Log: zap.New(core), EventsPerMessage: 4})
	const (
		nRuns  = 4
		perRun = 800
		kills  = 3
	)
	ids := make([]string, nRuns)
	for i := range ids {
		ids[i] = newID(t)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	failures := make([]int, nRuns)
	for r, id := range ids {
		wg.Go(func() {
			for seq := uint64(1); seq <= perRun; {
				n := uint64(1 + rand.IntN(24))
				to := min(seq+n-1, perRun)
				batch := mkEvents(id, seq, to)
				for {
					// A short deadline per call, as a caller bounded by
					// its run would have, so that calls fail and are
					// retried with the same batch across an election.
					actx, acancel := context.WithTimeout(wctx, 2*time.Second)
					err := s.AppendEvents(actx, id, batch)
					acancel()
					if err == nil {
						break
					}
					failures[r]++
					if wctx.Err() != nil {
						t.Errorf("run %d: append %d..%d: %v", r, seq, to, err)
						return
					}
				}
				seq = to + 1
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for k := 0; k < kills; k++ {
		select {
		case <-done:
		case <-time.After(time.Duration(rand.IntN(400)) * time.Millisecond):
		}
		killLeader(t, c, eventsStream)
	}
	<-done
	t.Logf("failed appends retried: %v", failures)

	for _, id := range ids {
		cur, err := s.OpenCursor(wctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		read(t, cur, id, 1, perRun)
		cur.Close()
	}
	// Read message by message, apart from any cursor: each run's log
	// holds its events once each, and nothing else.
	for _, id := range ids {
		checkStored(t, s, id, perRun)
	}
	// Retries are routine here; a cursor's warning is not.
	for _, l := range logs.FilterMessageSnippet("event").All() {
		t.Errorf("logged: %s %v", l.Message, l.ContextMap())
	}
	for _, l := range logs.FilterMessageSnippet("gap").All() {
		t.Errorf("logged: %s %v", l.Message, l.ContextMap())
	}
}

// An update of a run's record in flight while its bucket's leader dies is
// retried and lands once; an update that finds its own record stored (its
// ack lost) succeeds.
func TestUpdateRunAcrossLeaderKill(t *testing.T) {
	c, s := openCluster(t, zap.NewNop())
	r := sampleRun(newID(t))
	uctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.CreateRun(uctx, r); err != nil {
		t.Fatal(err)
	}
	stream := "KV_" + runsBucket
	var leader int
	waitFor(t, time.Minute, "a leader of "+stream, func() bool { leader = c.StreamLeader(stream); return leader >= 0 })
	c.Kill(leader)
	r.Status = runs.Succeeded
	if err := s.UpdateRun(context.Background(), r); err != nil {
		t.Fatalf("update across the leader's death: %v", err)
	}
	c.Restart(leader)
	if err := s.UpdateRun(uctx, r); err != nil {
		t.Fatalf("the same update again: %v", err)
	}
	got, err := s.GetRun(uctx, r.ID)
	if err != nil || got.Status != runs.Succeeded {
		t.Fatalf("GetRun = %s, %v; want succeeded", got.Status, err)
	}
}

// On a 3-node cluster, a finished run replays from its packs through a
// store connected to each node alone: the direct gets are answered by
// whichever copy is asked, and every event arrives once, in order.
func TestPacksReplayOnEveryNode(t *testing.T) {
	c, s := openCluster(t, zap.NewNop())
	id := newID(t)
	const n = 1500
	evs := packRun(id, n, nil)
	appendInBatches(t, s, id, evs, 100)
	packsSent(t, s)
	waitFor(t, time.Minute, "every copy of the packs current", func() bool { return c.StreamCurrent(packsStream) })
	octx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range c.Size() {
		node, err := Open(octx, clusterConn(t, c, c.URL(i)), Options{Replicas: 3})
		if err != nil {
			t.Fatal(err)
		}
		cur := openCursor(t, node, id, 0)
		readAll(t, cur, evs)
		cur.Close()
		if st := node.PackStats(); st.Read != int64(packOf(n)+1) {
			t.Errorf("node %d: %+v, want every pack read", i, st)
		}
		node.Close()
	}
}
