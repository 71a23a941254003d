package store

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// lossyServer hands out in-process connections to an embedded server
// through a filter that, once armed, loses the answer to the next request
// published on a subject starting with prefix: the server handles the
// request, and its client never hears back. That is how a clustered server
// that now and then does not answer a consumer create looks to its client.
type lossyServer struct {
	srv    *Embedded
	prefix string
	armed  atomic.Bool
	// dropped counts the answers lost.
	dropped atomic.Int32

	mu      sync.Mutex
	replies map[string]bool // the reply subjects whose answer is lost
}

func (l *lossyServer) InProcessConn() (net.Conn, error) {
	server, err := l.srv.InProcessConn()
	if err != nil {
		return nil, err
	}
	client, inner := net.Pipe()
	closeBoth := func() {
		server.Close()
		inner.Close()
	}
	go func() {
		defer closeBoth()
		forwardProtocol(server, inner, l.sniffRequest)
	}()
	go func() {
		defer closeBoth()
		forwardProtocol(inner, server, l.keepAnswer)
	}()
	return client, nil
}

// sniffRequest notes the reply subject of the first request on prefix
// after the filter is armed; every command of the client goes through.
func (l *lossyServer) sniffRequest(fields [][]byte) bool {
	op := string(fields[0])
	if (op != "PUB" && op != "HPUB") || !bytes.HasPrefix(fields[1], []byte(l.prefix)) {
		return true
	}
	// PUB subject [reply] size, HPUB subject [reply] hdr-size total-size
	withReply := (op == "PUB" && len(fields) == 4) || (op == "HPUB" && len(fields) == 5)
	if withReply && l.armed.CompareAndSwap(true, false) {
		l.mu.Lock()
		l.replies[string(fields[2])] = true
		l.mu.Unlock()
	}
	return true
}

// keepAnswer drops the server's message to a reply subject sniffRequest
// noted.
func (l *lossyServer) keepAnswer(fields [][]byte) bool {
	op := string(fields[0])
	if op != "MSG" && op != "HMSG" {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.replies[string(fields[1])] {
		return true
	}
	delete(l.replies, string(fields[1]))
	l.dropped.Add(1)
	return false
}

// forwardProtocol copies NATS protocol commands from src to dst, whole,
// leaving out those keep refuses. A command is one line, and for PUB,
// HPUB, MSG and HMSG the payload whose size ends the line.
func forwardProtocol(dst io.Writer, src io.Reader, keep func(fields [][]byte) bool) {
	r := bufio.NewReaderSize(src, 1<<20)
	w := bufio.NewWriter(dst)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			continue
		}
		payload := int64(0)
		switch string(bytes.ToUpper(fields[0])) {
		case "PUB", "HPUB", "MSG", "HMSG":
			n, err := strconv.ParseInt(string(fields[len(fields)-1]), 10, 64)
			if err != nil {
				return
			}
			payload = n + 2 // and its CRLF
		}
		kept := keep(fields)
		if kept {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
		out := io.Writer(w)
		if !kept {
			out = io.Discard
		}
		if _, err := io.CopyN(out, r, payload); err != nil {
			return
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// openLossy opens a store on a fresh embedded server through a lossyServer
// for requests on prefix; the filter starts unarmed.
func openLossy(t *testing.T, prefix string) (*lossyServer, *Store) {
	t.Helper()
	srv, err := StartEmbedded(t.TempDir(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	lossy := &lossyServer{srv: srv, prefix: prefix, replies: map[string]bool{}}
	nc, err := nats.Connect("", nats.InProcessServer(lossy), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s, err := Open(ctx(t), nc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return lossy, s
}

// An owner's update of its run whose acknowledgement is lost costs one
// store timeout, then the update finds itself stored: the write without a
// read first is one attempt of the update's retries, not all of them. A
// write to a dead leader was that lost acknowledgement, and the update
// failed after its whole 30s (TestUpdateRunAcrossLeaderKill, on a busy
// machine).
func TestUpdateOutlivesALostAck(t *testing.T) {
	lossy, s := openLossy(t, "$KV."+runsBucket+".")
	r := sampleRun(newID(t))
	if err := s.CreateRun(ctx(t), r); err != nil {
		t.Fatal(err)
	}
	lossy.armed.Store(true)
	r.Status = runs.Succeeded
	// The deadline is what is tested: past the store's timeout of 5s,
	// which the lost ack costs, and short of the whole retry budget.
	uctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := s.UpdateRun(uctx, r); err != nil {
		t.Fatalf("update after its ack was lost: %v", err)
	}
	if n := lossy.dropped.Load(); n != 1 {
		t.Fatalf("%d answers lost, want the update's", n)
	}
	got, err := s.GetRun(ctx(t), r.ID)
	if err != nil || got.Status != runs.Succeeded {
		t.Fatalf("GetRun = %s, %v; want succeeded", got.Status, err)
	}
}

// A consumer create whose answer is lost costs a cursor about a second, not
// the store's whole timeout, and leaves no second consumer behind: the
// retry creates the same consumer, by name, which the server has made.
func TestCursorOutlivesALostConsumerCreate(t *testing.T) {
	lossy, s := openLossy(t, "$JS.API.CONSUMER.CREATE.")
	id := newID(t)
	if err := s.AppendEvents(ctx(t), id, mkEvents(id, 1, 20)); err != nil {
		t.Fatal(err)
	}
	before := consumers(t, s)
	lossy.armed.Store(true)
	// The deadline is what is tested: less than the store's timeout of
	// 5s, which a first attempt waited out whole before.
	octx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	c, err := s.OpenCursor(octx, id, 0)
	if err != nil {
		t.Fatalf("open after a lost create: %v", err)
	}
	defer c.Close()
	if n := lossy.dropped.Load(); n != 1 {
		t.Fatalf("%d answers lost, want the create's", n)
	}
	var got []uint64
	for len(got) < 20 {
		evs, err := c.Next(ctx(t), 100)
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		for _, ev := range evs {
			got = append(got, ev.Seq)
		}
	}
	for i, seq := range got {
		if seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i+1, seq)
		}
	}
	if n := consumers(t, s) - before; n != 1 {
		t.Errorf("%d consumers for one cursor after its create was retried", n)
	}
	c.Close()
	if n := consumers(t, s) - before; n != 0 {
		t.Errorf("%d consumers left after the cursor closed", n)
	}
}
