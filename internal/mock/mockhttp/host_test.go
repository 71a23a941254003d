package mockhttp

import (
	"io"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestListenRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", "example.com:0", "nonsense"} {
		if h, err := Listen("mock", addr); err == nil {
			h.Close()
			t.Errorf("Listen(%q) accepted", addr)
		}
	}
}

// A handler that hangs does not hold Close, and once closed the host
// takes no new handler.
func TestCloseDropsHangingHandlers(t *testing.T) {
	h, err := Listen("mock", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	h.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.Enter() {
			panic(http.ErrAbortHandler)
		}
		defer h.Leave()
		if r.URL.Path == "/quick" {
			if !h.Wait(r, time.Millisecond) {
				t.Error("a short wait was cut")
			}
			io.WriteString(w, "ok")
			return
		}
		close(entered)
		if !h.Wait(r, -1) {
			panic(http.ErrAbortHandler) // as the mocks drop a hung request
		}
		t.Error("an endless wait ended")
	}))
	resp, err := http.Get(h.URL + "/quick")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("quick = %q", b)
	}
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Get(h.URL + "/hang")
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-entered
	start := time.Now()
	h.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %s", took)
	}
	if err := <-errc; err == nil {
		t.Errorf("the hung request got %v, want it dropped", err)
	}
	select {
	case <-h.Done():
	default:
		t.Error("Done not closed by Close")
	}
	if h.Enter() {
		t.Error("Enter after Close")
	}
	h.Close() // twice is fine
}

func TestCloseWithoutServe(t *testing.T) {
	h, err := Listen("mock", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	h.Close()
}
