package mockhttp

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Scenario decides a mock server's answer to each model request. Req and
// Resp are the wire's own request and response types; each mock package
// names its instance (anthropic.Scenario, openai.Scenario, …).
type Scenario[Req, Resp any] interface {
	Respond(req *Req) Resp
}

// Func adapts a function to a Scenario.
type Func[Req, Resp any] func(req *Req) Resp

// Respond calls f.
func (f Func[Req, Resp]) Respond(req *Req) Resp { return f(req) }

// Script plays a Scenario for a server: one Respond at a time, so that a
// scenario may keep state without a lock of its own.
type Script[Req, Resp any] struct {
	mu sync.Mutex
	sc Scenario[Req, Resp]
}

// NewScript returns a script playing sc.
func NewScript[Req, Resp any](sc Scenario[Req, Resp]) *Script[Req, Resp] {
	return &Script[Req, Resp]{sc: sc}
}

// Respond asks the scenario, serialised.
func (s *Script[Req, Resp]) Respond(req *Req) Resp {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.Respond(req)
}

// Sequence answers the i-th request it sees with steps[i], and every later
// one with the last step; with no steps it answers empty.
func Sequence[Req, Resp any](empty Resp, steps ...Scenario[Req, Resp]) Func[Req, Resp] {
	var mu sync.Mutex
	n := 0
	return func(req *Req) Resp {
		if len(steps) == 0 {
			return empty
		}
		mu.Lock()
		i := min(n, len(steps)-1)
		n++
		mu.Unlock()
		return steps[i].Respond(req)
	}
}

// Counter numbers the requests a scenario answers, from 1, for scenarios
// whose answer depends on how many came before.
type Counter struct {
	mu sync.Mutex
	n  int
}

// Next returns the next number.
func (c *Counter) Next() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}

// Catalog is a mock's built-in scenarios by name, for the mock's command
// line and for tests that pick a scenario by name. command replaces the
// shell command of the tool scenarios when not empty.
type Catalog[S any] func(command string) map[string]func() S

// Names lists the names, sorted.
func (c Catalog[S]) Names() []string {
	m := c("")
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Named returns the scenario called name.
func (c Catalog[S]) Named(name, command string) (S, error) {
	if f, ok := c(command)[name]; ok {
		return f(), nil
	}
	var zero S
	return zero, fmt.Errorf("unknown scenario %q (known: %s)", name, strings.Join(c.Names(), ", "))
}

// Or returns command, or def when command is empty: the catalogs' way of
// giving each tool scenario its default command.
func Or(command, def string) string {
	if command != "" {
		return command
	}
	return def
}
