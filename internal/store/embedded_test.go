package store

import (
	"reflect"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestDurableAcrossRestart(t *testing.T) {
	e := newEnv(t)
	a, b := sampleRun(newID(t)), sampleRun(newID(t))
	b.Status = runs.Succeeded
	for _, r := range []runs.Run{a, b} {
		if err := e.s.CreateRun(ctx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	appendEvents(t, e.s, a.ID, 1, 20)
	appendEvents(t, e.s, b.ID, 1, 3)

	e.stop()
	e.start(Options{})

	for _, want := range []runs.Run{a, b} {
		got, err := e.s.GetRun(ctx(t), want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("after restart got %+v\nwant %+v", got, want)
		}
	}
	p, err := e.s.ListRuns(ctx(t), runs.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Runs) != 2 || p.Runs[0].ID != b.ID || p.Runs[1].ID != a.ID {
		t.Errorf("listing after restart: %+v", p)
	}
	if last, err := e.s.LastEvent(ctx(t), a.ID); err != nil || last.Seq != 20 {
		t.Errorf("LastEvent = %d, %v; want 20", last.Seq, err)
	}
	read(t, openCursor(t, e.s, a.ID, 0), a.ID, 1, 20)
	read(t, openCursor(t, e.s, b.ID, 1), b.ID, 2, 3)
	// The log goes on where it stopped.
	appendEvents(t, e.s, b.ID, 4, 4)
	if last, err := e.s.LastEvent(ctx(t), b.ID); err != nil || last.Seq != 4 {
		t.Errorf("LastEvent after append = %d, %v; want 4", last.Seq, err)
	}
}

func TestStartEmbeddedCreatesDir(t *testing.T) {
	e := &env{t: t, dir: t.TempDir() + "/a/b"}
	e.start(Options{})
	defer e.stop()
	if err := e.s.Ping(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// The server logs through zap, its routine notices at debug so that its
// start-up banner stays out of the gateway's info log.
func TestEmbeddedLogsThroughZap(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	srv, err := StartEmbedded(t.TempDir(), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	if logs.FilterLoggerName("nats").FilterMessageSnippet("JetStream").Len() == 0 {
		t.Errorf("no JetStream lines from the server among %d log entries", logs.Len())
	}
	if n := logs.FilterLoggerName("nats").Filter(func(e observer.LoggedEntry) bool { return e.Level >= zap.InfoLevel }).Len(); n != 0 {
		t.Errorf("%d routine server lines at info or above", n)
	}
}
