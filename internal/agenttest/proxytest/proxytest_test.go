package proxytest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func origin(t *testing.T) *httptest.Server {
	t.Helper()
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "origin saw "+r.URL.Path)
	}))
	t.Cleanup(o.Close)
	return o
}

func clientVia(t *testing.T, p *Proxy) *http.Client {
	t.Helper()
	u, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(u)}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestForwardsAbsoluteFormAndRecords(t *testing.T) {
	p, o := Start(t), origin(t)
	code, body := get(t, clientVia(t, p), o.URL+"/v1/messages?x=1")
	if code != 200 || body != "origin saw /v1/messages" {
		t.Fatalf("through the proxy: %d %q", code, body)
	}
	target := o.Listener.Addr().String()
	want := []Request{{Method: "GET", Target: target, Path: "/v1/messages?x=1"}}
	if got := p.To(target); !slices.Equal(got, want) {
		t.Errorf("recorded %v, want %v", got, want)
	}
}

func TestTunnelsConnectAndSeesRequestLines(t *testing.T) {
	p, o := Start(t), origin(t)
	target := o.Listener.Addr().String()
	c, err := net.Dial("tcp", p.URL[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n", target)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "origin saw /mcp" {
		t.Errorf("through the tunnel: %q", b)
	}
	want := []Request{{Method: "POST", Target: target, Path: "/mcp", Tunnel: true}}
	if got := p.To(target); !slices.Equal(got, want) {
		t.Errorf("recorded %v, want %v", got, want)
	}
}

func TestRefusesWhatIsNotLoopback(t *testing.T) {
	p := Start(t)
	// .invalid never resolves, and the proxy does not try.
	code, _ := get(t, clientVia(t, p), "http://model.invalid/v1")
	if code != http.StatusForbidden {
		t.Errorf("status %d, want 403", code)
	}
	want := []Request{{Method: "GET", Target: "model.invalid:80", Path: "/v1", Refused: true}}
	if got := p.Requests(); !slices.Equal(got, want) {
		t.Errorf("recorded %v, want %v", got, want)
	}
	if got := p.To("model.invalid:80"); len(got) != 0 {
		t.Errorf("To lists refused requests: %v", got)
	}
}

func TestEnvNamesTheProxyAndClearsNoProxy(t *testing.T) {
	p := Start(t)
	env := p.Env()
	for _, want := range []string{"HTTP_PROXY=" + p.URL, "https_proxy=" + p.URL, "ALL_PROXY=" + p.URL, "NO_PROXY=", "no_proxy="} {
		if !slices.Contains(env, want) {
			t.Errorf("Env() = %v, lacks %s", env, want)
		}
	}
}
