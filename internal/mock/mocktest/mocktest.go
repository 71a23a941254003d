// Package mocktest is what the tests of every mock model server share:
// clients that leave no goroutines behind, waits for a ledger condition,
// and Wiring, the behaviour every mock gets from its core (loopback only,
// a scenario required, a bounded ledger, hung requests that Close drops
// at once), checked the same way for each wire.
package mocktest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Client is an http.Client whose idle connections the test closes, so
// that a leak check sees no transport goroutines.
func Client(t testing.TB) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// WaitFor waits until cond holds, failing the test after a generous bound
// (the condition is a request arriving on loopback).
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Entry is what Wiring reads of a ledger entry.
type Entry struct {
	Seq    int
	Status int
	Hung   bool
}

// Server is a started mock, as Wiring sees it.
type Server interface {
	Close()
	Reset()
}

// Wire describes one mock package to Wiring.
type Wire[S Server] struct {
	// Start starts the package's server on addr: with the Hang scenario
	// when hang is set, else with a text answer; limit > 0 is a
	// LedgerLimit option. nilScenario starts it with a nil scenario.
	Start func(addr string, hang, nilScenario bool, limit int) (S, error)
	// URL is the URL of a model request to s; Body its body.
	URL  func(s S) string
	Body []byte
	// Entries reads s's ledger.
	Entries func(s S) []Entry
}

// Wiring checks the behaviour every mock gets from its core.
func Wiring[S Server](t *testing.T, w Wire[S]) {
	start := func(t *testing.T, hang bool, limit int) S {
		s, err := w.Start("127.0.0.1:0", hang, false, limit)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	post := func(ctx context.Context, c *http.Client, s S) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, w.URL(s), bytes.NewReader(w.Body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		return err
	}
	t.Run("start_refuses", func(t *testing.T) {
		for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", ":0", "nonsense"} {
			if s, err := w.Start(addr, false, false, 0); err == nil {
				s.Close()
				t.Errorf("Start(%q) accepted a non-loopback address", addr)
			}
		}
		if s, err := w.Start("127.0.0.1:0", false, true, 0); err == nil {
			s.Close()
			t.Error("Start accepted a nil scenario")
		}
	})
	t.Run("ledger_limit", func(t *testing.T) {
		s := start(t, false, 2)
		c := Client(t)
		for range 3 {
			if err := post(context.Background(), c, s); err != nil {
				t.Fatal(err)
			}
		}
		if l := w.Entries(s); len(l) != 2 || l[0].Seq != 2 || l[1].Seq != 3 {
			t.Errorf("ledger = %+v, want the requests 2 and 3", l)
		}
		s.Reset()
		if l := w.Entries(s); len(l) != 0 {
			t.Errorf("Reset kept %+v", l)
		}
	})
	t.Run("hang_close_is_prompt", func(t *testing.T) {
		s, err := w.Start("127.0.0.1:0", true, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		c := Client(t)
		done := make(chan error, 1)
		go func() { done <- post(context.Background(), c, s) }()
		WaitFor(t, func() bool { l := w.Entries(s); return len(l) == 1 && l[0].Hung })
		t0 := time.Now()
		s.Close()
		if d := time.Since(t0); d > 10*time.Second {
			t.Errorf("Close took %v with a hung request", d)
		}
		if err := <-done; err == nil {
			t.Error("the client got an answer, want the connection dropped")
		}
		if l := w.Entries(s); l[0].Status != 0 {
			t.Errorf("hung entry status = %d", l[0].Status)
		}
		s.Close() // twice is fine
	})
	t.Run("hang_client_goes_away", func(t *testing.T) {
		s := start(t, true, 0)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- post(ctx, Client(t), s) }()
		WaitFor(t, func() bool { l := w.Entries(s); return len(l) == 1 && l[0].Hung })
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "canceled") {
			t.Errorf("client error = %v", err)
		}
		// The handler returns on its own: the package's leak check sees
		// nothing left once Close returned.
	})
}

// WatchFirstRequest polls requests until the mock has one, and returns a
// func that tells when that was seen (within the poll's 20 ms) or, until
// then and for a run that never reached the mock, when the watch began.
// A bound measured from it leaves out the agent CLI's own start, which a
// loaded machine can stretch to many seconds.
func WatchFirstRequest(t testing.TB, requests func() int) func() time.Time {
	start := time.Now()
	var at atomic.Pointer[time.Time]
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if requests() > 0 {
					now := time.Now()
					at.Store(&now)
					return
				}
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return func() time.Time {
		if p := at.Load(); p != nil {
			return *p
		}
		return start
	}
}
