package netguard

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPerClient is the default bound on one client's open connections.
// A browser opens six per host, an SSE-heavy script a few dozen; 128 leaves
// room for a busy client behind one NAT address.
const DefaultPerClient = 128

// refuseTimeout bounds the whole refusal of one connection: writing the
// response, then waiting for the client to close its side.
const refuseTimeout = 250 * time.Millisecond

// maxRefusing is how many refusals run at once, each for at most
// refuseTimeout. Beyond it a connection to refuse is closed without a
// response: under a flood the refusal must stay cheap, and a client that
// reads nothing loses nothing. DefaultTotal keeps descriptors for them.
const maxRefusing = 32

// Options are a Listener's bounds. The zero value is the defaults.
type Options struct {
	// PerClient bounds the open connections of one client: one IPv4
	// address, or one IPv6 /64. 0 means DefaultPerClient; a negative
	// value turns the bound off (behind a load balancer that bounds each
	// client itself).
	PerClient int
	// Total bounds all open connections. 0 means DefaultTotal for the
	// process's descriptor limit and no runs; a negative value turns the
	// bound off.
	Total int
}

// Listener is a net.Listener that hands out at most Options.PerClient open
// connections per client and Options.Total in all. A connection over a
// bound is refused with a minimal HTTP response and closed, and Accept goes
// on to the next one: the caller only ever sees connections within bounds.
// A connection's slot is freed by its first Close.
//
// Accept is safe to call from one goroutine at a time, as http.Server does;
// Close and the counters from any.
type Listener struct {
	inner     net.Listener
	perClient int
	total     int

	mu     sync.Mutex
	open   int
	byAddr map[netip.Addr]int
	closed bool

	refusing  chan struct{} // a token per refusal running
	refuserWG sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	refusedClient atomic.Uint64
	refusedTotal  atomic.Uint64
}

// Listen wraps inner.
func Listen(inner net.Listener, opts Options) *Listener {
	l := &Listener{
		inner:     inner,
		perClient: opts.PerClient,
		total:     opts.Total,
		byAddr:    map[netip.Addr]int{},
		refusing:  make(chan struct{}, maxRefusing),
	}
	if l.perClient == 0 {
		l.perClient = DefaultPerClient
	}
	if l.total == 0 {
		l.total = DefaultTotal(NoFile(), 0)
	}
	return l
}

// Accept returns the next connection within the bounds, refusing the ones
// over them on the way.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.inner.Accept()
		if err != nil {
			return nil, err
		}
		key, keyed := clientKey(c.RemoteAddr())
		l.mu.Lock()
		var status int
		switch {
		case l.closed:
			l.mu.Unlock()
			_ = c.Close()
			return nil, net.ErrClosed
		case l.total > 0 && l.open >= l.total:
			status = 503
		case keyed && l.perClient > 0 && l.byAddr[key] >= l.perClient:
			status = 429
		}
		if status == 0 {
			l.open++
			if keyed {
				l.byAddr[key]++
			}
			l.mu.Unlock()
			return &conn{Conn: c, l: l, key: key, keyed: keyed}, nil
		}
		if status == 503 {
			l.refusedTotal.Add(1)
		} else {
			l.refusedClient.Add(1)
		}
		// Started under mu, which Close takes before it waits for
		// the refusals: none starts after that wait began.
		select {
		case l.refusing <- struct{}{}:
			l.refuserWG.Add(1)
			go func() {
				defer l.refuserWG.Done()
				refuse(c, status)
				<-l.refusing
			}()
		default:
			_ = c.Close()
		}
		l.mu.Unlock()
	}
}

// release frees the slot of a connection of key.
func (l *Listener) release(key netip.Addr, keyed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if keyed {
		if n := l.byAddr[key] - 1; n > 0 {
			l.byAddr[key] = n
		} else {
			delete(l.byAddr, key)
		}
	}
}

// Close closes the inner listener and waits for the refusals under way,
// each at most refuseTimeout. Connections already accepted stay open: they
// are their owners'.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		l.closeErr = l.inner.Close()
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		l.refuserWG.Wait()
	})
	return l.closeErr
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Open returns how many accepted connections are open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Refused returns how many connections were refused since Listen, because
// their client was at its bound and because the listener was full.
func (l *Listener) Refused() (perClient, total uint64) {
	return l.refusedClient.Load(), l.refusedTotal.Load()
}

// Bounds returns the bounds in force; a value <= 0 is no bound.
func (l *Listener) Bounds() (perClient, total int) { return l.perClient, l.total }

// refuse writes c's refusal, lets the client read it, and closes c. The
// request is never parsed. Closing a socket with unread input makes the
// kernel send a reset, which can destroy the response before the client
// reads it; so the write side is shut first and the input drained until the
// client closes, all within refuseTimeout.
func refuse(c net.Conn, status int) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refuseTimeout))
	if _, err := c.Write(refusal(status)); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
		}
	}
}

// refusal is the whole HTTP response refusing a connection with status.
func refusal(status int) []byte {
	msg := "too many connections from this client"
	if status == 503 {
		msg = "the gateway has too many open connections"
	}
	body := fmt.Sprintf(`{"error":{"code":"too_many_connections","message":%q}}`, msg)
	reason := "Too Many Requests"
	if status == 503 {
		reason = "Service Unavailable"
	}
	return []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + reason + "\r\n" +
		"Content-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n" +
		"Retry-After: 1\r\n" +
		"Connection: close\r\n\r\n" + body)
}

// clientKey is the client a remote address counts against: its IP, or for
// IPv6 its /64. An address that is not IP (a unix socket) has no client
// and only counts in the total.
func clientKey(a net.Addr) (netip.Addr, bool) {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	default:
		if a == nil {
			return netip.Addr{}, false
		}
		var err error
		if ap, err = netip.ParseAddrPort(a.String()); err != nil {
			return netip.Addr{}, false
		}
	}
	ip := ap.Addr().Unmap()
	if !ip.IsValid() {
		return netip.Addr{}, false
	}
	if ip.Is6() {
		p, err := ip.WithZone("").Prefix(64)
		if err != nil {
			return netip.Addr{}, false
		}
		ip = p.Addr()
	}
	return ip, true
}

// conn is an accepted connection holding a slot until its first Close.
type conn struct {
	net.Conn
	l     *Listener
	key   netip.Addr
	keyed bool
	once  sync.Once
}

// Write passes p on, with net/http's own plain-text error answers in the
// gateway's JSON error shape (see rewritePlainError). A rewritten write
// reports p's length: the server wrote all it meant to.
func (c *conn) Write(p []byte) (int, error) {
	if q, ok := rewritePlainError(p); ok {
		if _, err := c.Conn.Write(q); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.key, c.keyed) })
	return err
}

// CloseWrite shuts the write side when the connection can, as the HTTP
// server does before it closes a connection with unread input.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
