package api

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// smallSocketBuffer is the send buffer of a probed server connection and
// the receive buffer of its client: with them small, a client that does not
// read stops the server's write within a few KiB, and the server is known
// to be holding whatever it is writing.
const smallSocketBuffer = 16 << 10

// probedListener wraps the accepted connections in probedConns.
type probedListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*probedConn
}

func (l *probedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(smallSocketBuffer)
	}
	pc := &probedConn{Conn: c}
	l.mu.Lock()
	l.conns = append(l.conns, pc)
	l.mu.Unlock()
	return pc, nil
}

func (l *probedListener) all() []*probedConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*probedConn(nil), l.conns...)
}

// probedConn records the server's writes on one connection.
type probedConn struct {
	net.Conn
	// inBigWrite is set while a write of an event batch (not a header,
	// ping or chunk frame) is under way.
	inBigWrite atomic.Bool
	// largest is the longest write.
	largest atomic.Int64
}

func (c *probedConn) Write(p []byte) (int, error) {
	for {
		m := c.largest.Load()
		if int64(len(p)) <= m || c.largest.CompareAndSwap(m, int64(len(p))) {
			break
		}
	}
	if len(p) >= 64<<10 {
		c.inBigWrite.Store(true)
		defer c.inBigWrite.Store(false)
	}
	return c.Conn.Write(p)
}

// probedServer serves the API over a probedListener.
func probedServer(t *testing.T, cfg Config, svc Service) (*httptest.Server, *probedListener, *fakeObserver) {
	t.Helper()
	obs := &fakeObserver{}
	srv := httptest.NewUnstartedServer(New(cfg, svc, obs, http.NotFoundHandler(), zap.NewNop()))
	pl := &probedListener{Listener: srv.Listener}
	srv.Listener = pl
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, pl, obs
}

// bigLog is a run's log of n events whose envelopes are each about size
// bytes, every one different, ending with run.completed.
func bigLog(t testing.TB, n, size int, every func(seq int) bool) []runs.StoredEvent {
	t.Helper()
	evs := []runs.StoredEvent{storedEvent(t, runA, 1, runs.EventRunQueued, runs.RunQueuedData{Agent: "claude", Position: 1})}
	for i := 2; i < n; i++ {
		text := fmt.Sprintf("delta %d", i)
		if every(i) {
			text = strings.Repeat(string(rune('a'+i%26)), size) + text
		}
		evs = append(evs, storedEvent(t, runA, uint64(i), runs.EventMessageDelta, runs.MessageData{MessageID: "m1", Text: text}))
	}
	return append(evs, storedEvent(t, runA, uint64(n), runs.EventRunCompleted, runs.RunCompletedData{Status: runs.Succeeded}))
}

// dialSmall connects to srv with a small receive buffer and asks for the
// run's events.
func dialSmall(t *testing.T, srv *httptest.Server, header string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, smallSocketBuffer)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	req := "GET /v1/runs/" + runA + "/events HTTP/1.1\r\nHost: gateway\r\n" + header + "\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// heapInuse is the heap in use after a full collection.
func heapInuse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

const mib = 1 << 20

// promisedStepBytes is what docs/security.md promises a stream's write
// holds at most (or one event): a literal, so that a bound grown back
// fails here rather than moving the test with it.
const promisedStepBytes = 256 << 10

// TestEventsSlowReadersMemoryBounded: 50 clients that never read a run of
// 256 KiB events cost the gateway a bounded heap while their writes are
// stuck, about one batch each (the stream's maxBatchBytes), not BatchSize
// events (64 MiB each), and the memory comes back once they are gone.
func TestEventsSlowReadersMemoryBounded(t *testing.T) {
	const (
		clients   = 50
		events    = 96
		eventSize = 256 << 10
	)
	l := newMemLog(bigLog(t, events, eventSize, func(int) bool { return true })...)
	srv, pl, obs := probedServer(t, Config{WriteTimeout: 5 * time.Minute, BatchSize: 256},
		streamService(l, fixed(runs.Succeeded)))
	base := heapInuse()

	var conns []net.Conn
	for range clients {
		conns = append(conns, dialSmall(t, srv, ""))
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// Every stream is stuck in writing a batch to its client, which reads
	// nothing: each holds all it holds.
	waitFor30(t, "every stream stuck in a write", func() bool {
		cs := pl.all()
		if len(cs) < clients {
			return false
		}
		for _, c := range cs {
			if !c.inBigWrite.Load() {
				return false
			}
		}
		return true
	})
	held := heapInuse() - base
	t.Logf("%d stuck streams of %d KiB events hold %.1f MiB of heap", clients, eventSize>>10, float64(held)/mib)
	if held > 150*mib {
		t.Fatalf("%d stuck streams hold %.1f MiB of heap, want < 150 MiB", clients, float64(held)/mib)
	}
	for _, c := range pl.all() {
		if n := c.largest.Load(); n > promisedStepBytes+eventSize+4<<10 {
			t.Fatalf("a write of %d bytes, above one batch (%d) and one event", n, promisedStepBytes)
		}
	}

	for _, c := range conns {
		c.Close()
	}
	waitFor30(t, "every stream to end", func() bool { return obs.clients.Load() == 0 })
	var after int64
	waitFor30(t, "the streams' memory to come back", func() bool {
		after = heapInuse() - base
		return after < 16*mib
	})
	t.Logf("after the clients left: %.1f MiB above the baseline", float64(after)/mib)
}

// waitFor30 is waitFor with a deadline for work that loads the machine.
func waitFor30(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEventsBigBatchesKeepEveryEvent: a slow reader of a run whose events
// are big and small in turn gets every event once, in order, as stored,
// though batches are cut by bytes and carried over from one write to the
// next; over SSE and NDJSON, and while the log grows.
func TestEventsBigBatchesKeepEveryEvent(t *testing.T) {
	for _, ndjson := range []bool{false, true} {
		t.Run(fmt.Sprintf("ndjson=%v", ndjson), func(t *testing.T) {
			const n = 200
			// Big ones in runs of various lengths, small ones between.
			all := bigLog(t, n, 300<<10, func(seq int) bool { return seq%7 < 3 || seq%23 == 0 })
			l := newMemLog(all[:n/2]...)
			srv, pl, _ := probedServer(t, Config{WriteTimeout: time.Minute, BatchSize: 256},
				streamService(l, fixed(runs.Running)))
			header := ""
			if ndjson {
				header = "Accept: application/x-ndjson\r\n"
			}
			c := dialSmall(t, srv, header)
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
			// A slow reader: a few KiB at a time.
			br := bufio.NewReaderSize(&slowReader{r: c, chunk: 4 << 10}, 4<<10)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body := bufio.NewReaderSize(resp.Body, 64<<10)
			next := 0 // index in all of the next event expected
			appended := false
			for next < n {
				seq, data, err := readEvent(body, ndjson)
				if err != nil {
					t.Fatalf("after seq %d of %d: %v", next, n, err)
				}
				want := all[next]
				if seq != want.Seq || !bytes.Equal(data, want.JSON) {
					t.Fatalf("event %d: got seq %d (%d bytes), want seq %d (%d bytes)", next, seq, len(data), want.Seq, len(want.JSON))
				}
				next++
				if !appended && next == n/4 {
					// The rest of the run arrives while the stream is
					// behind.
					l.append(all[n/2:]...)
					appended = true
				}
			}
			if _, _, err := readEvent(body, ndjson); err != io.EOF {
				t.Fatalf("after run.completed: %v, want the end of the stream", err)
			}
			for _, pc := range pl.all() {
				if m := pc.largest.Load(); m > promisedStepBytes+(300<<10)+4<<10 {
					t.Fatalf("a write of %d bytes, above one batch and one event", m)
				}
			}
		})
	}
}

// slowReader reads at most chunk bytes at a time.
type slowReader struct {
	r     io.Reader
	chunk int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(p) > s.chunk {
		p = p[:s.chunk]
	}
	runtime.Gosched()
	return s.r.Read(p)
}

// readEvent reads the next event of a stream: its seq and envelope. SSE
// comments and the retry line are skipped.
func readEvent(br *bufio.Reader, ndjson bool) (uint64, []byte, error) {
	if ndjson {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if err == io.EOF && len(line) == 0 {
				return 0, nil, io.EOF
			}
			return 0, nil, fmt.Errorf("read line: %w", err)
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		i := bytes.Index(line, []byte(`"seq":`))
		if i < 0 {
			return 0, nil, fmt.Errorf("line without seq: %.80s", line)
		}
		rest := line[i+len(`"seq":`):]
		j := bytes.IndexAny(rest, ",}")
		seq, err := strconv.ParseUint(string(rest[:j]), 10, 64)
		return seq, line, err
	}
	var seq uint64
	var data []byte
	seen := false
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if err == io.EOF && len(line) == 0 && !seen {
				return 0, nil, io.EOF
			}
			return 0, nil, fmt.Errorf("read line: %w", err)
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		switch {
		case len(line) == 0:
			if seen {
				return seq, data, nil
			}
		case bytes.HasPrefix(line, []byte("id: ")):
			seen = true
			if seq, err = strconv.ParseUint(string(line[4:]), 10, 64); err != nil {
				return 0, nil, err
			}
		case bytes.HasPrefix(line, []byte("data: ")):
			data = line[6:]
		}
	}
}
