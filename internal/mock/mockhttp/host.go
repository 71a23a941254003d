// Package mockhttp is the core every mock model server is made of: serving on a
// loopback address only, and a Close that drops requests a scenario left
// hanging and returns once every handler has. Each mock API
// (internal/mock/anthropic, openai, googleai, chat) is a handler on a
// Host.
package mockhttp

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Host serves one handler on a loopback address.
type Host struct {
	// URL is "http://127.0.0.1:PORT".
	URL string

	ln        net.Listener
	srv       *http.Server  // set by Serve
	serveDone chan struct{} // closed when Serve's loop returned
	// done is closed by Close; handlers that hang watch it, so that
	// Close never waits on a client.
	done chan struct{}

	mu     sync.Mutex
	closed bool
	active sync.WaitGroup // handlers in flight; Add only under mu while !closed
}

// Listen listens on addr, which must be a loopback address
// ("127.0.0.1:0" picks a free port); name prefixes its errors. Serve then
// starts serving, once the handler knows its Host; the caller must Close
// the Host either way.
func Listen(name, addr string) (*Host, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s: address %q: %w", name, addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%s: address %q is not loopback", name, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen: %w", name, err)
	}
	return &Host{
		URL:       "http://" + ln.Addr().String(),
		ln:        ln,
		serveDone: make(chan struct{}),
		done:      make(chan struct{}),
	}, nil
}

// Serve serves h, in the background, until Close. Call it once.
func (s *Host) Serve(h http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv = &http.Server{Handler: s.guard(h), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.serveDone)
		_ = s.srv.Serve(s.ln) // returns http.ErrServerClosed after Close
	}()
}

// guard wraps h so that a request arriving while the host closes is
// dropped, and Close waits for every request h is answering.
func (s *Host) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.Enter() {
			Abort()
		}
		defer s.Leave()
		h.ServeHTTP(w, r)
	})
}

// Enter is called first by every handler: it reports false once the host
// is closing, and the handler must then abort. After true the handler
// must call Leave when it returns.
func (s *Host) Enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.active.Add(1)
	return true
}

// Leave ends what Enter began.
func (s *Host) Leave() { s.active.Done() }

// Done is closed when Close begins.
func (s *Host) Done() <-chan struct{} { return s.done }

// Wait blocks until d passed (true), or until the client went away or the
// host closed (false). d < 0 waits for those alone.
func (s *Host) Wait(r *http.Request, d time.Duration) bool {
	var after <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		after = t.C
	}
	select {
	case <-after:
		return true
	case <-r.Context().Done():
	case <-s.done:
	}
	return false
}

// Close stops serving: requests still hanging are dropped without an
// answer, and Close returns once every handler has returned. It is safe
// to call more than once.
func (s *Host) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.serveDone
		return
	}
	s.closed = true
	close(s.done)
	srv := s.srv
	s.mu.Unlock()
	if srv == nil { // never served
		_ = s.ln.Close()
		close(s.serveDone)
		return
	}
	_ = srv.Close()
	s.active.Wait()
	<-s.serveDone
}
