package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// startGatewayNoFile runs the gateway as a process of its own whose
// descriptor limit is nofile, soft and hard, as a machine with the common
// ulimit -n of 1024 gives it. The limit is set on the child by prlimit:
// setrlimit would change this whole test process.
func startGatewayNoFile(t *testing.T, settings map[string]string, nofile int) (*gateway, *exec.Cmd) {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatalf("prlimit (util-linux) is needed to start a gateway with a descriptor limit: %v", err)
	}
	return startGatewayUnder(t, []string{prlimit, fmt.Sprintf("--nofile=%d:%d", nofile, nofile)}, settings, nil)
}

// processNoFile reads a process's descriptor limits from /proc.
func processNoFile(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			return strings.Join(strings.Fields(line)[3:5], " ")
		}
	}
	t.Fatalf("no descriptor limit in /proc/%d/limits", pid)
	return ""
}

// attacker is one slowloris connection and what became of it.
type attacker struct {
	conn     net.Conn
	dialedAt time.Time
	mu       sync.Mutex
	closedAt time.Time // zero while the server keeps it open
	answer   string    // the first bytes the server sent, if any
}

func (a *attacker) closed() (time.Time, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closedAt, a.answer
}

// TestSlowlorisLeavesHealthzAnswering: 1,100 connections from one client
// that send part of a request and stall (headers cut off, or a body that
// never comes) against a gateway limited to 1,024 descriptors. The client's
// connection bound refuses most at once, so /healthz from another client
// still answers while the ones it holds are open; the server then closes
// those by its header and body timeouts.
func TestSlowlorisLeavesHealthzAnswering(t *testing.T) {
	const (
		attackers = 1100
		bodyLate  = 100 // of them send headers and part of a body
		// held is how long after its dial a connection must have
		// lived to count as held by the server rather than refused
		// without an answer: such a refusal closes within
		// milliseconds of the accept (a 429 may come later), the
		// timeouts (body 8 s, headers 10 s) come after seconds.
		held = 3 * time.Second
	)
	// A 429 is the client bound's refusal however late it came: on a
	// loaded machine the accept queue alone held some for seconds.
	refused := func(answer string) bool { return strings.HasPrefix(answer, "HTTP/1.1 429 ") }
	settings := gatewayEnv(t, t.TempDir())
	settings["AGENTGATE_BODY_READ_TIMEOUT"] = "8s"
	g, cmd := startGatewayNoFile(t, settings, 1024)
	if got := processNoFile(t, cmd.Process.Pid); got != "1023 1024" && got != "1024 1024" {
		t.Fatalf("the gateway's descriptor limit is %q, want 1024", got)
	}
	addr := strings.TrimPrefix(g.URL, "http://")

	// The attack, from 127.0.0.1.
	as := make([]*attacker, attackers)
	var readers sync.WaitGroup
	t.Cleanup(func() {
		for _, a := range as {
			if a != nil {
				a.conn.Close()
			}
		}
		readers.Wait()
	})
	work := make(chan int)
	var dialers sync.WaitGroup
	var dialErr error
	var errOnce sync.Once
	for range 50 {
		dialers.Add(1)
		go func() {
			defer dialers.Done()
			for i := range work {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, Timeout: 30 * time.Second}
				c, err := d.Dial("tcp", addr)
				if err != nil {
					errOnce.Do(func() { dialErr = err })
					continue
				}
				a := &attacker{conn: c, dialedAt: time.Now()}
				as[i] = a
				req := "GET /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
				if i < bodyLate {
					req = "POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
						"Content-Length: 100000\r\n\r\n{\"agent\":\"claude\",\"prompt\":\""
				}
				_, _ = io.WriteString(c, req)
				readers.Add(1)
				go func() {
					defer readers.Done()
					b := make([]byte, 512)
					n, _ := io.ReadAtLeast(c, b, 1)
					a.mu.Lock()
					a.closedAt, a.answer = time.Now(), string(b[:n])
					a.mu.Unlock()
				}()
			}
		}()
	}
	for i := range attackers {
		work <- i
	}
	close(work)
	dialers.Wait()
	if dialErr != nil {
		t.Fatalf("an attacker could not connect: %v", dialErr)
	}
	attackedAt := time.Now()

	// /healthz from another client, 127.0.0.2, while they are held.
	tr := &http.Transport{
		DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	var healthyAt time.Time
	var lastErr error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		resp, err := client.Get(g.URL + "/healthz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				healthyAt = time.Now()
				break
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	if healthyAt.IsZero() {
		t.Fatalf("/healthz did not answer 200 under the attack: %v", lastErr)
	}
	open, refusedWith429, duringDial := 0, 0, 0
	for _, a := range as {
		closedAt, answer := a.closed()
		switch {
		case closedAt.IsZero() || closedAt.After(healthyAt):
			open++
		case refused(answer):
			refusedWith429++
		case closedAt.Sub(a.dialedAt) >= held && closedAt.Before(attackedAt):
			// Its timeout came while this test was still dialing the
			// attack (seconds, on a loaded machine), before /healthz
			// was asked: it says nothing of /healthz.
			duringDial++
		case closedAt.Sub(a.dialedAt) >= held:
			t.Errorf("a connection held %v was closed before /healthz answered: it did not answer until a timeout freed the gateway (answer %q)",
				closedAt.Sub(a.dialedAt), answer)
		}
	}
	t.Logf("/healthz answered %v after the attack, with %d attackers held open; %d refused with a 429; %d timed out while the attack was being dialed",
		healthyAt.Sub(attackedAt), open, refusedWith429, duringDial)
	if open == 0 {
		t.Fatal("no attacker was still connected when /healthz answered")
	}
	if refusedWith429 == 0 {
		t.Error("no attacker was refused with a 429")
	}

	// The server ends what it holds by its timeouts: every attacker ends
	// closed, the ones it held after seconds, and without an answer to a
	// request that never came whole (or a 408 for the late body).
	stillOpen := func() (headers, bodies int) {
		for i, a := range as {
			if at, _ := a.closed(); at.IsZero() {
				if i < bodyLate {
					bodies++
				} else {
					headers++
				}
			}
		}
		return headers, bodies
	}
	waitGateway(t, "every attacker to be closed by the gateway", 90*time.Second, func() bool {
		h, b := stillOpen()
		return h+b == 0
	}, func() string {
		h, b := stillOpen()
		return fmt.Sprintf("open: %d with headers cut off, %d with a late body", h, b)
	})
	heldByServer := 0
	for _, a := range as {
		closedAt, answer := a.closed()
		if closedAt.Sub(a.dialedAt) < held || refused(answer) {
			continue
		}
		heldByServer++
		if answer != "" && !strings.HasPrefix(answer, "HTTP/1.1 408 ") {
			t.Errorf("a stalled connection was answered %q", answer)
		}
	}
	if heldByServer == 0 || heldByServer > 128 {
		t.Fatalf("the gateway held %d of the attacker's connections, want 1 to 128 (its per-client bound)", heldByServer)
	}
	t.Logf("the gateway held %d connections until its timeouts closed them", heldByServer)

	// And it is still well.
	resp, err := client.Get(g.URL + "/healthz")
	if err != nil {
		t.Fatalf("/healthz after the attack: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz after the attack: %d", resp.StatusCode)
	}
}

// waitGateway polls cond until it holds or within passes; state says
// what there is instead.
func waitGateway(t *testing.T, what string, within time.Duration, cond func() bool, state func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s: %s", within, what, state())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
