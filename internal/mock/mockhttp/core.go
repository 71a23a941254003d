package mockhttp

import (
	"errors"
	"net/http"
)

// Core is what every mock server is made of: a Host on loopback, the
// Book of its requests, and the Script that plays its Scenario. A mock
// package's Server embeds a Core and adds its wire: how a request body is
// read into Req and how a Resp is written back. E is the server's ledger
// entry.
type Core[E, Req, Resp any] struct {
	// URL is the server's base URL: the host's, plus the wire's path
	// prefix (such as "/v1").
	URL string

	host   *Host
	book   Book[E]
	script *Script[Req, Resp]
}

// Listen listens on addr, which must be a loopback address ("127.0.0.1:0"
// picks a free port), to play sc; name prefixes errors and prefix is added
// to URL. Serve then starts serving.
func (c *Core[E, Req, Resp]) Listen(name, addr, prefix string, sc Scenario[Req, Resp]) error {
	if sc == nil {
		return errors.New(name + ": nil scenario")
	}
	host, err := Listen(name, addr)
	if err != nil {
		return err
	}
	c.host, c.script, c.URL = host, NewScript(sc), host.URL+prefix
	return nil
}

// Serve serves h, the wire, until Close.
func (c *Core[E, Req, Resp]) Serve(h http.Handler) { c.host.Serve(h) }

// Close stops the server: hung and stalled requests are dropped without
// an answer, and Close returns once every handler has returned. It is
// safe to call more than once.
func (c *Core[E, Req, Resp]) Close() { c.host.Close() }

// Reset empties the ledger.
func (c *Core[E, Req, Resp]) Reset() { c.book.Reset() }

// Host is the server's host, for waits and hangs.
func (c *Core[E, Req, Resp]) Host() *Host { return c.host }

// Book is the server's ledger.
func (c *Core[E, Req, Resp]) Book() *Book[E] { return &c.book }

// Respond asks the scenario for the answer to req, one request at a time.
func (c *Core[E, Req, Resp]) Respond(req *Req) Resp { return c.script.Respond(req) }
