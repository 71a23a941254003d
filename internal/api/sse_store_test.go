package api

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/store"
)

// TestStalledClientOnTheSameRunOverTheRealStore follows one run, stored in
// the real JetStream store, with two clients: one that never reads and one
// that reads everything. The publisher keeps appending meanwhile. Neither
// the publisher nor the reading client waits on the stalled one, which is
// dropped by the write deadline.
func TestStalledClientOnTheSameRunOverTheRealStore(t *testing.T) {
	emb, err := store.StartEmbedded(t.TempDir(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, nc, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRun(ctx, sampleRun(runA, runs.Running)); err != nil {
		t.Fatal(err)
	}
	svc := &fakeService{
		get: st.GetRun,
		events: func(ctx context.Context, id string, after uint64) (runs.Cursor, error) {
			return st.OpenCursor(ctx, id, after)
		},
		lastEventSeq: func(ctx context.Context, id string) (uint64, error) {
			last, err := st.LastEvent(ctx, id)
			return last.Seq, err
		},
	}
	const writeTimeout = 2 * time.Second
	h := newHarness(t, Config{WriteTimeout: writeTimeout, BatchSize: 64}, svc)

	// Enough of a log to fill every buffer between the server and a client
	// that does not read: 600 events of 16 KiB.
	payload := strings.Repeat("x", 16<<10)
	seq := uint64(0)
	appendN := func(n int, typ runs.EventType) time.Duration {
		var batch []runs.StoredEvent
		for range n {
			seq++
			batch = append(batch, storedEvent(t, runA, seq, typ, runs.MessageData{Text: payload}))
		}
		start := time.Now()
		if err := st.AppendEvents(ctx, runA, batch); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	for range 30 {
		appendN(20, runs.EventMessageDelta)
	}

	conn, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.(*net.TCPConn).SetReadBuffer(1024); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /v1/runs/%s/events HTTP/1.1\r\nHost: test\r\n\r\n", runA)
	waitFor(t, "the stalled client to connect", func() bool { return h.obs.clients.Load() == 1 })

	reqCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp := connectES(reqCtx, t, h.srv.Client(), h.srv.URL+"/v1/runs/"+runA+"/events", "")
	defer resp.Body.Close()
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(resp.Body)
		read <- b
	}()

	// The publisher goes on while one client is stalled: each append takes
	// a store round trip, never a client's pace.
	var slowest time.Duration
	for range 10 {
		slowest = max(slowest, appendN(20, runs.EventMessageDelta))
	}
	slowest = max(slowest, appendN(1, runs.EventRunCompleted))
	if slowest > writeTimeout {
		t.Fatalf("an append took %s while a client was stalled", slowest)
	}

	p := newEventSource()
	p.feed(<-read)
	if uint64(len(p.events)) != seq {
		t.Fatalf("the reading client got %d events, want %d", len(p.events), seq)
	}
	for i, ev := range p.events {
		if ev.lastEventID != fmt.Sprint(i+1) {
			t.Fatalf("event %d has id %s", i, ev.lastEventID)
		}
	}
	waitFor(t, "the stalled client to be dropped", func() bool { return h.obs.clients.Load() == 0 })
	// It was dropped by the write deadline, not served to the end.
	if n := h.logs.FilterMessage("event stream client dropped").Len(); n != 1 {
		t.Fatalf("%d clients dropped, want the stalled one", n)
	}
}
