package egress

import (
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// refuseTimeout bounds writing a 503 to a connection beyond the bound.
const refuseTimeout = 250 * time.Millisecond

// maxRefusing bounds the 503s being written at once; beyond it a
// connection over the bound is closed without one.
const maxRefusing = 32

// limitListener hands out at most max open connections; one beyond gets a
// 503 and is closed, and Accept goes on to the next.
type limitListener struct {
	net.Listener
	max int

	mu   sync.Mutex
	open int

	refusing   sync.WaitGroup
	refuseSlot chan struct{} // a token per 503 being written
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		ok := l.open < l.max
		if ok {
			l.open++
		}
		l.mu.Unlock()
		if ok {
			return &limitedConn{Conn: c, l: l}, nil
		}
		select {
		case l.refuseSlot <- struct{}{}:
			l.refusing.Add(1)
			go l.refuse(c)
		default:
			_ = c.Close()
		}
	}
}

// wait waits for the 503s being written.
func (l *limitListener) wait() { l.refusing.Wait() }

// refuse answers c 503, lets the client read it, and closes c: input left
// unread would make the close a reset that can destroy the answer.
func (l *limitListener) refuse(c net.Conn) {
	defer func() {
		_ = c.Close()
		<-l.refuseSlot
		l.refusing.Done()
	}()
	_ = c.SetDeadline(time.Now().Add(refuseTimeout))
	body := "egress proxy: this run has " + strconv.Itoa(l.max) + " connections open, the most it may\n"
	_, err := io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body)
	if cw, ok := c.(interface{ CloseWrite() error }); ok && err == nil && cw.CloseWrite() == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}
}

// limitedConn frees its slot on its first Close.
type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
	})
	return err
}

// unwrap is the connection under c, so that copies between two TCP
// connections can use splice(2).
func unwrap(c net.Conn) net.Conn {
	if lc, ok := c.(*limitedConn); ok {
		return lc.Conn
	}
	return c
}
