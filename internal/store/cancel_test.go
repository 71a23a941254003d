package store

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestCancelRequestReachesEveryReplica(t *testing.T) {
	e := newEnv(t)
	// Another replica, on its own connection.
	other, err := Open(ctx(t), e.connect(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	listen, stop := context.WithCancel(ctx(t))
	mine, err := e.s.CancelRequests(listen)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := other.CancelRequests(listen)
	if err != nil {
		t.Fatal(err)
	}
	id := newID(t)
	by := runs.Actor{KeyID: "k1", Tenant: "acme"}
	if err := other.RequestCancel(ctx(t), id, by); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan runs.CancelRequest{"same replica": theirs, "other replica": mine} {
		select {
		case got := <-ch:
			if got.RunID != id || got.By != by {
				t.Errorf("%s got %+v, want %q by %+v", name, got, id, by)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s got no cancel request", name)
		}
	}
	stop()
	for _, ch := range []<-chan runs.CancelRequest{mine, theirs} {
		select {
		case id, ok := <-ch:
			if ok {
				t.Errorf("got %q after ctx ended", id)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("channel not closed after ctx ended")
		}
	}
}

func TestCancelRequestsDropWhenReaderLags(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	e := newEnv(t)
	s, err := Open(ctx(t), e.nc, Options{Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	listen, stop := context.WithCancel(ctx(t))
	defer stop()
	ch, err := s.CancelRequests(listen)
	if err != nil {
		t.Fatal(err)
	}
	const extra = 5
	ids := make([]string, cancelBuffer+extra)
	for i := range ids {
		ids[i] = newID(t)
		if err := e.s.RequestCancel(ctx(t), ids[i], runs.Actor{}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); logs.FilterMessageSnippet("dropped").Len() < extra; {
		if time.Now().After(deadline) {
			t.Fatalf("%d drops logged, want %d", logs.FilterMessageSnippet("dropped").Len(), extra)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The first ones are kept, in order.
	for i := range cancelBuffer {
		if got := <-ch; got.RunID != ids[i] {
			t.Fatalf("request %d = %q, want %q", i, got, ids[i])
		}
	}
	if dropped := logs.FilterMessageSnippet("dropped").All(); dropped[0].ContextMap()["run_id"] != ids[cancelBuffer] {
		t.Errorf("first drop logged %v, want run %s", dropped[0].ContextMap(), ids[cancelBuffer])
	}
}
