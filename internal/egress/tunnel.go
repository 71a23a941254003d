package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// tunnel dials addr, the address checked for t, answers the CONNECT and
// splices the two connections until both directions end or Serve ends.
func (s *session) tunnel(w http.ResponseWriter, r *http.Request, t target, addr netip.AddrPort) {
	ctx, cancel := context.WithTimeout(r.Context(), s.dialTimeout)
	d := net.Dialer{}
	up, err := d.DialContext(ctx, "tcp", addr.String())
	cancel()
	if err != nil {
		s.reply(w, http.StatusBadGateway, "cannot reach "+t.String()+": "+err.Error())
		return
	}
	client, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = up.Close()
		s.reply(w, http.StatusInternalServerError, "cannot take the connection over: "+err.Error())
		return
	}
	if !s.track(client, up) {
		return
	}
	defer s.untrack(client, up)
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	// Bytes the client sent after its CONNECT (a TLS hello) may already
	// sit in the server's buffer.
	if n := buf.Reader.Buffered(); n > 0 {
		early, _ := buf.Reader.Peek(n)
		if _, err := up.Write(early); err != nil {
			return
		}
	}
	splice(unwrap(client), up)
}

// splice copies a to b and b to a. A direction that ends cleanly half-closes
// its writer, so that the other may finish; one that fails ends both.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		copyHalf(b, a)
	}()
	copyHalf(a, b)
	wg.Wait()
}

// copyHalf copies src to dst, then half-closes dst; on a failure, closes both.
func copyHalf(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
	}
	_ = dst.Close()
	_ = src.Close()
}

// track registers a tunnel's two ends to be closed when Serve ends; false
// (both closed) if it already has.
func (s *session) track(conns ...net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		s.tunnelling[c] = struct{}{}
	}
	return true
}

// untrack closes a tunnel's ends and forgets them.
func (s *session) untrack(conns ...net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(s.tunnelling, c)
	}
}

// closeTunnels closes every tunnel's ends, and any tracked from now on.
func (s *session) closeTunnels() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.tunnelling {
		_ = c.Close()
	}
}
