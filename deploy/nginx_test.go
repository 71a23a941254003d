package deploy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// nginxBin finds Debian's nginx. The nginx tests fail without it: CI
// installs it (scripts/check-deploy.sh, apt-get install nginx-light).
func nginxBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	t.Fatal("nginx is not installed (apt-get install nginx-light)")
	return ""
}

var (
	upstreamServerLine = regexp.MustCompile(`(?m)^(\s*server\s+)\S+:\d+(\s[^;]*;\s*)$`)
	listenLine         = regexp.MustCompile(`(?m)^(\s*listen\s+)\S+;`)
)

// templateNginx is the shipped config with its upstream servers replaced,
// in order, by addrs, and its listen address by listen: what the fault rig
// does. It fails t when the config does not have that shape.
func templateNginx(t *testing.T, conf string, addrs []string, listen string) string {
	t.Helper()
	start := strings.Index(conf, "\nupstream agentgate {\n")
	end := start + strings.Index(conf[start:], "\n}\n")
	if start < 0 || end < start {
		t.Fatal("nginx/agentgate.conf: no upstream agentgate block")
	}
	block := conf[start:end]
	if n := len(upstreamServerLine.FindAllString(block, -1)); n < len(addrs) {
		t.Fatalf("nginx/agentgate.conf: %d server lines, want at least %d", n, len(addrs))
	}
	i := 0
	block = upstreamServerLine.ReplaceAllStringFunc(block, func(line string) string {
		if i >= len(addrs) {
			return "" // fewer replicas in this test
		}
		m := upstreamServerLine.FindStringSubmatch(line)
		i++
		return m[1] + addrs[i-1] + m[2]
	})
	out := conf[:start] + block + conf[end:]
	if !listenLine.MatchString(out) {
		t.Fatal("nginx/agentgate.conf: no listen line")
	}
	return listenLine.ReplaceAllString(out, "${1}"+listen+";")
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startNginx runs nginx with the shipped config in front of upstreams and
// returns its base URL. At cleanup it stops nginx and checks that none of
// its processes is left.
func startNginx(t *testing.T, upstreams []string) string {
	t.Helper()
	bin := nginxBin(t)
	dir := t.TempDir()
	// Workers run as nobody when nginx starts as root: they must reach
	// the temp paths.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	listen := freeAddr(t)
	conf := templateNginx(t, string(read(t, "nginx/agentgate.conf")), upstreams, listen)
	if err := os.WriteFile(filepath.Join(dir, "agentgate.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf(`worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events {}
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/agentgate.conf;
}
`, dir)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(wrapper), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// SIGTERM: fast shutdown, the master stops its workers and exits.
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		if err := syscall.Kill(-cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Errorf("an nginx process outlived its master (%v)", err)
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx error log:\n%s", log)
		}
	})
	// Wait until it listens, or has exited.
	for {
		if c, err := net.Dial("tcp", listen); err == nil {
			c.Close()
			return "http://" + listen
		}
		select {
		case err := <-exited:
			exited <- err
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %v\n%s", err, log)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// arrival is one request a fake replica received.
type arrival struct {
	replica, method, path, key, body string
}

type arrivals struct {
	mu  sync.Mutex
	all []arrival
}

func (a *arrivals) add(replica string, r *http.Request) arrival {
	b, _ := io.ReadAll(r.Body)
	v := arrival{replica, r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), string(b)}
	a.mu.Lock()
	a.all = append(a.all, v)
	a.mu.Unlock()
	return v
}

func (a *arrivals) list() []arrival {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]arrival(nil), a.all...)
}

// replica is a fake gateway replica: "healthy" takes runs and messages,
// "draining" answers as the gateway does after SIGTERM (503
// shutting_down, nothing created), "dropping" reads a POST and then drops
// the connection without an answer, as a replica killed mid-request.
func replica(t *testing.T, name, mode string, seen *arrivals, release <-chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := seen.add(name, r)
		switch {
		case mode == "dropping" && r.Method == http.MethodPost:
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		case mode == "draining" && (r.URL.Path == "/readyz" || r.Method == http.MethodPost && r.URL.Path == "/v1/runs"):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"code":"shutting_down","message":"gateway is shutting down"}}`)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/runs":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"replica":%q,"key":%q}`, name, a.key)
		case strings.HasSuffix(r.URL.Path, "/events"):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "id: 1\nevent: run.started\ndata: {}\n\n")
			w.(http.Flusher).Flush()
			// The second event only once the client has read the first:
			// a buffering proxy would hold the first until the end.
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "id: 2\nevent: run.completed\ndata: {}\n\n")
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

var client = &http.Client{Timeout: 30 * time.Second}

func post(t *testing.T, url, key, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestDeployNginxSendsSubmitsPastDrainingReplicas: with the shipped config,
// a POST /v1/runs that a draining replica answers 503, or that a dying
// replica drops, is sent on to another replica, with its body and with the
// same Idempotency-Key on every try (the client's, or nginx's request id),
// and the client gets the other replica's 201.
func TestDeployNginxSendsSubmitsPastDrainingReplicas(t *testing.T) {
	seen := &arrivals{}
	base := startNginx(t, []string{
		replica(t, "draining", "draining", seen, nil),
		replica(t, "dropping", "dropping", seen, nil),
		replica(t, "healthy", "healthy", seen, nil),
	})
	const n = 12
	for i := range n {
		key := ""
		if i%2 == 0 {
			key = fmt.Sprintf("client-key-%d", i)
		}
		body := fmt.Sprintf(`{"agent":"claude","prompt":"run %d"}`, i)
		code, resp, _ := post(t, base+"/v1/runs", key, body)
		if code != http.StatusCreated || !strings.Contains(resp, `"replica":"healthy"`) {
			t.Errorf("POST %d: %d %s, want 201 from the healthy replica", i, code, resp)
		}
	}

	tries := map[string][]arrival{} // by body
	for _, a := range seen.list() {
		if a.method == http.MethodPost && a.path == "/v1/runs" {
			tries[a.body] = append(tries[a.body], a)
		}
	}
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	passedOn := 0
	for i := range n {
		body := fmt.Sprintf(`{"agent":"claude","prompt":"run %d"}`, i)
		ts := tries[body]
		if len(ts) == 0 || ts[len(ts)-1].replica != "healthy" {
			t.Errorf("run %d: tries %+v, want the last one on the healthy replica", i, ts)
			continue
		}
		created := 0
		for _, a := range ts {
			if a.replica == "healthy" {
				created++
			}
			if a.key != ts[0].key {
				t.Errorf("run %d: Idempotency-Key %q on one try, %q on another", i, ts[0].key, a.key)
			}
		}
		if created != 1 {
			t.Errorf("run %d reached the healthy replica %d times", i, created)
		}
		if len(ts) > 1 {
			passedOn++
		}
		if i%2 == 0 && ts[0].key != fmt.Sprintf("client-key-%d", i) {
			t.Errorf("run %d: the client's Idempotency-Key arrived as %q", i, ts[0].key)
		}
		if i%2 == 1 && !hex32.MatchString(ts[0].key) {
			t.Errorf("run %d: sent without a key, arrived with %q, want nginx's request id", i, ts[0].key)
		}
	}
	// Each of the two bad replicas got requests (nginx keeps every replica
	// in the rotation, max_fails=0) and passed every one on: no request
	// is tried more than once per replica.
	for _, bad := range []string{"draining", "dropping"} {
		got := 0
		for _, a := range seen.list() {
			if a.replica == bad {
				got++
			}
		}
		if got == 0 || got > n {
			t.Errorf("the %s replica got %d submits, want 1 to %d: each request tried once there at most", bad, got, n)
		}
	}
	if passedOn == 0 {
		t.Error("no submit was passed on")
	}
}

// TestDeployNginxAnswersDrainingWhenAllDrain: when every replica drains,
// the client gets the gateway's own 503 shutting_down with its Retry-After,
// and it is never sent twice to one replica.
func TestDeployNginxAnswersDrainingWhenAllDrain(t *testing.T) {
	seen := &arrivals{}
	base := startNginx(t, []string{
		replica(t, "draining-1", "draining", seen, nil),
		replica(t, "draining-2", "draining", seen, nil),
	})
	code, body, h := post(t, base+"/v1/runs", "", `{"agent":"claude","prompt":"x"}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"shutting_down"`) || h.Get("Retry-After") != "5" {
		t.Errorf("all draining: %d %q Retry-After %q, want 503 shutting_down with Retry-After 5", code, body, h.Get("Retry-After"))
	}
	per := map[string]int{}
	for _, a := range seen.list() {
		per[a.replica]++
	}
	if per["draining-1"] != 1 || per["draining-2"] != 1 {
		t.Errorf("tries per replica %v, want one each", per)
	}
}

// TestDeployNginxSendsMessagesOnce: a POST to a run (here a follow-up
// message) that reached a replica which then dropped it is not sent again
// elsewhere: the message is delivered at most once and the client learns
// of the failure.
func TestDeployNginxSendsMessagesOnce(t *testing.T) {
	seen := &arrivals{}
	base := startNginx(t, []string{
		replica(t, "dropping", "dropping", seen, nil),
		replica(t, "healthy", "healthy", seen, nil),
	})
	failed := 0
	const n = 6
	for i := range n {
		code, _, _ := post(t, base+"/v1/runs/run-1/messages", "", fmt.Sprintf(`{"text":"message %d"}`, i))
		if code != http.StatusAccepted {
			failed++
		}
	}
	count := map[string]int{}
	for _, a := range seen.list() {
		count[a.body]++
	}
	for body, c := range count {
		if c != 1 {
			t.Errorf("%s delivered %d times", body, c)
		}
	}
	if failed == 0 || failed == n {
		t.Errorf("%d of %d messages failed: want the dropped ones (at least one) only", failed, n)
	}
}

// TestDeployNginxStreamsUnbuffered: an event stream passes through as the
// replica writes it, and a GET whose replica is gone goes to another.
func TestDeployNginxStreamsUnbuffered(t *testing.T) {
	seen := &arrivals{}
	release := make(chan struct{})
	base := startNginx(t, []string{freeAddr(t), replica(t, "healthy", "healthy", seen, release)})
	for i := range 2 {
		resp, err := client.Get(base + "/v1/runs/run-1/events")
		if err != nil {
			t.Fatalf("GET events: %v", err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET events %d: %d", i, resp.StatusCode)
		}
		rd := bufio.NewReader(resp.Body)
		if line, err := rd.ReadString('\n'); err != nil || line != "id: 1\n" {
			t.Fatalf("first line %q (%v)", line, err)
		}
		if i == 0 {
			close(release) // the replica holds event 2 until now
		}
		rest, err := io.ReadAll(rd)
		resp.Body.Close()
		if err != nil || !strings.Contains(string(rest), "id: 2\n") {
			t.Errorf("rest of the stream %q (%v)", rest, err)
		}
	}
}
