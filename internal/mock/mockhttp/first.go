package mockhttp

import (
	"sync"
	"time"
)

// FirstRequest plays a scenario and notes when its first request came,
// for a test that counts a bound from the request rather than from its
// client's start, which takes seconds more on a loaded machine.
type FirstRequest[Req, Resp any] struct {
	sc    Scenario[Req, Resp]
	mu    sync.Mutex
	first time.Time
}

// NewFirstRequest returns sc, noting when its first request comes.
func NewFirstRequest[Req, Resp any](sc Scenario[Req, Resp]) *FirstRequest[Req, Resp] {
	return &FirstRequest[Req, Resp]{sc: sc}
}

// Respond notes the first request's time and answers as the scenario does.
func (f *FirstRequest[Req, Resp]) Respond(req *Req) Resp {
	f.mu.Lock()
	if f.first.IsZero() {
		f.first = time.Now()
	}
	f.mu.Unlock()
	return f.sc.Respond(req)
}

// At returns when the first request came, or zero before it.
func (f *FirstRequest[Req, Resp]) At() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}
