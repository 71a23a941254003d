package store

import (
	"testing"
	"time"
)

func TestHeartbeatsExpire(t *testing.T) {
	e := &env{t: t, dir: t.TempDir()}
	e.start(Options{ReplicaTTL: time.Second})
	defer e.stop()
	if live, err := e.s.LiveReplicas(ctx(t)); err != nil || len(live) != 0 {
		t.Fatalf("live before any heartbeat: %v, %v", live, err)
	}
	for _, r := range []string{"gateway-1", "host.example.com"} {
		if err := e.s.Heartbeat(ctx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	live, err := e.s.LiveReplicas(ctx(t))
	if err != nil || !live["gateway-1"] || !live["host.example.com"] || len(live) != 2 {
		t.Fatalf("live = %v, %v", live, err)
	}
	// One keeps beating; the other stops and expires.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := e.s.Heartbeat(ctx(t), "gateway-1"); err != nil {
			t.Fatal(err)
		}
		live, err = e.s.LiveReplicas(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if !live["host.example.com"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a replica that stopped its heartbeat is still live")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !live["gateway-1"] {
		t.Fatal("the replica that kept beating expired")
	}
}
