package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A stream that met a full disk (TestFullDiskMarksStreamUntilRestart)
		// keeps its file store's flush loop after the server that held it
		// is shut down and replaced (nats-server 2.15.2), and the server
		// package's shared clock lives while any of them does. They are
		// the server's, bounded by the streams of one test; everything of
		// the store's own must still end.
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	)
}

// env is a store on a fresh embedded server.
type env struct {
	t   testing.TB
	dir string
	srv *Embedded
	nc  *nats.Conn
	s   *Store
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	e.start(Options{})
	t.Cleanup(e.stop)
	return e
}

func (e *env) start(opts Options) {
	e.t.Helper()
	srv, err := StartEmbedded(e.dir, zap.NewNop())
	if err != nil {
		e.t.Fatal(err)
	}
	e.srv = srv
	e.nc = e.connect()
	s, err := Open(ctx(e.t), e.nc, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.s = s
}

func (e *env) connect() *nats.Conn {
	e.t.Helper()
	nc, err := e.srv.Connect()
	if err != nil {
		e.t.Fatal(err)
	}
	return nc
}

func (e *env) stop() {
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv = nil
	}
}

// ctx returns a context that ends with the test, or after 10s.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func newID(t testing.TB) string {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

func TestOpenConcurrently(t *testing.T) {
	e := newEnv(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]*Store, n)
	for i := range n {
		nc := e.connect()
		wg.Go(func() {
			stores[i], errs[i] = Open(ctx(t), nc, Options{MaxAge: time.Hour})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	// The last Open's settings are in force, and every store works.
	info, err := stores[0].events.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxAge != time.Hour {
		t.Errorf("events max age = %s, want 1h", info.Config.MaxAge)
	}
	id := newID(t)
	if err := stores[1].CreateRun(ctx(t), runs.Run{ID: id, Agent: "claude", Status: runs.Queued}); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[3].GetRun(ctx(t), id); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRejectsNegativeOptions(t *testing.T) {
	e := newEnv(t)
	for _, o := range []Options{{Replicas: -1}, {MaxAge: -time.Second}, {Timeout: -time.Second}} {
		if _, err := Open(ctx(t), e.nc, o); err == nil {
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
}

func TestPing(t *testing.T) {
	e := newEnv(t)
	if err := e.s.Ping(ctx(t)); err != nil {
		t.Fatalf("ping: %v", err)
	}
	e.stop()
	if err := e.s.Ping(ctx(t)); err == nil {
		t.Fatal("ping succeeded after the server stopped")
	}
}

func TestInvalidRunIDsRejected(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	ev := []runs.StoredEvent{{Seq: 1, Type: runs.EventRunQueued, JSON: []byte(`{}`)}}
	bad := []string{"", "a.b", "a*", ">", "a>", "a b", "a\tb", "a\nb", "ü", "a/b", strings.Repeat("a", 65)}
	for _, id := range bad {
		calls := map[string]error{
			"CreateRun":     e.s.CreateRun(c, runs.Run{ID: id}),
			"UpdateRun":     e.s.UpdateRun(c, runs.Run{ID: id}),
			"AppendEvents":  e.s.AppendEvents(c, id, ev),
			"RequestCancel": e.s.RequestCancel(c, id, runs.Actor{}),
		}
		_, calls["GetRun"] = e.s.GetRun(c, id)
		_, calls["LastEvent"] = e.s.LastEvent(c, id)
		_, calls["OpenCursor"] = e.s.OpenCursor(c, id, 0)
		for name, err := range calls {
			if !errors.Is(err, runs.ErrInvalid) {
				t.Errorf("%s(%q) = %v, want ErrInvalid", name, id, err)
			}
		}
	}
	// Nothing reached the stream.
	info, err := e.s.events.Info(c)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("stream has %d messages", info.State.Msgs)
	}
}

func TestCheckIDAcceptsUUIDs(t *testing.T) {
	for range 100 {
		if err := checkID(newID(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkID(strings.Repeat("a", 64)); err != nil {
		t.Errorf("64 bytes: %v", err)
	}
}

// FuzzCheckID checks that every id checkID accepts is one subject token and
// a valid KV key.
func FuzzCheckID(f *testing.F) {
	for _, s := range []string{"", "0190b6a2-7c1e-7cc2-8f0e-3c9d2f7b9a10", "a.b", "*", ">", " ", "a_B-9", "\x00", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if checkID(id) != nil {
			return
		}
		if id == "" || len(id) > maxIDLen || strings.ContainsAny(id, ".*> \t\r\n/\\=") {
			t.Fatalf("accepted %q", id)
		}
		for _, r := range id {
			if r > 0x7f || r < 0x21 {
				t.Fatalf("accepted %q", id)
			}
		}
	})
}
