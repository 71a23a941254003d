package webhooks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testRunID = "0196f0c2-7e1a-7000-8000-0000000000aa"

func mustSecret(t testing.TB, s string) Secret {
	t.Helper()
	sec, err := ParseSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
	query  string
	at     time.Time
}

// receiver is an httptest server on 127.0.0.1 that answers the n-th
// request (from 1) as answer says, and keeps what it got.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{header: r.Header.Clone(), body: body, query: r.URL.RawQuery, at: time.Now()})
		n := len(rc.got)
		rc.mu.Unlock()
		rc.answer(n, w, r)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// status answers every request with the codes given in turn, the last one
// from then on.
func status(codes ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(codes[min(n, len(codes))-1])
	}
}

// fakeObserver counts what a Deliverer reports.
type fakeObserver struct {
	mu         sync.Mutex
	deliveries map[string]int
	attempts   map[string]int
	changed    chan struct{} // closed at the next count
}

func (o *fakeObserver) Delivery(outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.deliveries == nil {
		o.deliveries = map[string]int{}
	}
	o.deliveries[outcome]++
	o.signal()
}

func (o *fakeObserver) Attempt(result string, _ float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.attempts == nil {
		o.attempts = map[string]int{}
	}
	o.attempts[result]++
	o.signal()
}

// signal wakes until's waiters; o.mu is held.
func (o *fakeObserver) signal() {
	if o.changed != nil {
		close(o.changed)
		o.changed = nil
	}
}

// until waits for the counts to satisfy ok. A delivery's record is stored
// before its outcome is counted, so a test that saw the record waits for
// the count.
func (o *fakeObserver) until(t *testing.T, ok func(deliveries, attempts map[string]int) bool) {
	t.Helper()
	guard := time.NewTimer(20 * time.Second)
	defer guard.Stop()
	for {
		o.mu.Lock()
		if o.changed == nil {
			o.changed = make(chan struct{})
		}
		changed := o.changed
		o.mu.Unlock()
		d, a := o.counts()
		if ok(d, a) {
			return
		}
		select {
		case <-changed:
		case <-guard.C:
			t.Fatalf("metrics: deliveries %v, attempts %v", d, a)
		}
	}
}

func (o *fakeObserver) counts() (map[string]int, map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	d, a := map[string]int{}, map[string]int{}
	for k, v := range o.deliveries {
		d[k] = v
	}
	for k, v := range o.attempts {
		a[k] = v
	}
	return d, a
}

// testOptions are a deliverer's options for tests: 127.0.0.1 allowed,
// the first spec vector's secret, retries in milliseconds.
func testOptions(t *testing.T) Options {
	t.Helper()
	pol, err := ParseAllowList([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Secrets: []Secret{mustSecret(t, specVectors[0].secret)}, Policy: pol,
		Timeout: 5 * time.Second, RetryMin: 10 * time.Millisecond, RetryMax: 40 * time.Millisecond,
		MaxAttempts: 5, RetryFor: time.Minute, Workers: 2,
	}
}

func startDeliverer(t *testing.T, st Store, opts Options) *Deliverer {
	t.Helper()
	d := New(st, opts)
	d.Start()
	t.Cleanup(d.Close)
	return d
}

func testRun(webhookURL string) runs.Run {
	return runs.Run{
		ID: testRunID, Agent: "claude", Status: runs.Succeeded, Result: "done", Diff: "diff --git a/x b/x\n",
		Metadata: map[string]string{"ticket": "T-1"}, Spec: runs.Spec{WebhookURL: webhookURL},
	}
}

func completedEvent(seq uint64) runs.StoredEvent {
	return runs.StoredEvent{Seq: seq, Type: runs.EventRunCompleted, JSON: []byte(fmt.Sprintf(
		`{"v":1,"run_id":%q,"seq":%d,"time":"2026-01-02T03:04:05.123Z","type":"run.completed","agent":"claude","data":{"status":"succeeded"}}`,
		testRunID, seq))}
}

func approvalEvent(seq uint64, id string) runs.StoredEvent {
	return runs.StoredEvent{Seq: seq, Type: runs.EventApprovalRequested, JSON: []byte(fmt.Sprintf(
		`{"v":1,"run_id":%q,"seq":%d,"time":"2026-01-02T03:04:05Z","type":"approval.requested","agent":"claude",`+
			`"data":{"id":%q,"tool":"Bash","input":{"command":"echo hi"},"options":["allow","deny"],"expires_at":"2026-01-02T03:09:05Z"}}`,
		testRunID, seq, id))}
}

func ended(d Delivery) bool { return d.State != Pending }

// TestDeliveryRetriesUntilDelivered: a receiver that fails twice gets the
// message a third time, with the same webhook-id, and each attempt's
// signature verifies; the three attempts are recorded.
func TestDeliveryRetriesUntilDelivered(t *testing.T) {
	rc := newReceiver(t, status(500, 502, 204))
	st := newMemStore()
	obs := &fakeObserver{}
	opts := testOptions(t)
	opts.Observer = obs
	d := startDeliverer(t, st, opts)
	d.NotifyWebhooks(testRun(rc.srv.URL+"/hook"), completedEvent(42))
	del := st.untilEnded(t, testRunID)
	if del.State != Delivered || len(del.Attempts) != 3 || del.FinishedAt == nil || del.NextAttemptAt != nil {
		t.Fatalf("delivery = %+v", del)
	}
	for i, want := range []int{500, 502, 204} {
		a := del.Attempts[i]
		if a.StatusCode != want {
			t.Errorf("attempt %d: status %d, want %d", i+1, a.StatusCode, want)
		}
		if last := i == 2; (a.NextRetryAt == nil) != last || (a.Error == "") != last {
			t.Errorf("attempt %d = %+v", i+1, a)
		}
		if a.NextRetryAt != nil && a.NextRetryAt.Before(a.At) {
			t.Errorf("attempt %d retries before it was made: %+v", i+1, a)
		}
	}
	if del.Event != runs.EventRunCompleted || del.Seq != 42 || del.Target != TargetRun || del.URL != rc.srv.URL+"/hook" {
		t.Errorf("delivery = %+v", del)
	}
	got := rc.requests()
	if len(got) != 3 {
		t.Fatalf("receiver got %d requests, want 3", len(got))
	}
	ver, _ := NewVerifier(mustSecret(t, specVectors[0].secret))
	for i, r := range got {
		if id := r.header.Get(HeaderID); id != del.ID {
			t.Errorf("request %d: webhook-id %q, want %q", i+1, id, del.ID)
		}
		if err := ver.Verify(r.header, r.body); err != nil {
			t.Errorf("request %d: %v", i+1, err)
		}
		if r.header.Get("Content-Type") != "application/json" || string(r.body) != string(got[0].body) {
			t.Errorf("request %d: %s %s", i+1, r.header.Get("Content-Type"), r.body)
		}
	}
	var p struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(got[0].body, &p); err != nil {
		t.Fatal(err)
	}
	var data struct {
		runs.Run
		Seq  uint64 `json:"seq"`
		Diff string `json:"diff"`
	}
	if err := json.Unmarshal(p.Data, &data); err != nil {
		t.Fatal(err)
	}
	if p.Type != "run.completed" || !p.Timestamp.Equal(time.Date(2026, 1, 2, 3, 4, 5, 123e6, time.UTC)) ||
		data.ID != testRunID || data.Status != runs.Succeeded || data.Result != "done" || data.Seq != 42 ||
		data.Metadata["ticket"] != "T-1" || data.Diff != "" {
		t.Errorf("payload = %s", got[0].body)
	}
	if strings.Contains(string(got[0].body), "webhook_url") {
		t.Errorf("payload shows the spec: %s", got[0].body)
	}
	obs.until(t, func(deliveries, attempts map[string]int) bool {
		return deliveries[string(Delivered)] == 1 && attempts["5xx"] == 2 && attempts["2xx"] == 1
	})
	st.until(t, "the message removed from the queue", func() bool { return len(st.queued()) == 0 })
}

// TestSameEventRecordedOnce: an event handed over twice (two replicas, a
// repaired run.completed) is one delivery.
func TestSameEventRecordedOnce(t *testing.T) {
	rc := newReceiver(t, status(200))
	st := newMemStore()
	d := startDeliverer(t, st, testOptions(t))
	d.NotifyWebhooks(testRun(rc.srv.URL), completedEvent(7))
	d.NotifyWebhooks(testRun(rc.srv.URL), completedEvent(7))
	d.NotifyWebhooks(testRun(rc.srv.URL), approvalEvent(3, "ap_1"))
	st.until(t, "both delivered", func() bool {
		ds, _ := st.Deliveries(context.Background(), testRunID)
		return len(ds) == 2 && ended(ds[0]) && ended(ds[1])
	})
	if n := len(rc.requests()); n != 2 {
		t.Errorf("receiver got %d requests, want 2", n)
	}
	if a, b := messageID(testRunID, 7, TargetRun, "u"), messageID(testRunID, 7, TargetRun, "u"); a != b || !strings.HasPrefix(a, "msg_") {
		t.Errorf("messageID not stable: %s %s", a, b)
	}
	if messageID(testRunID, 7, TargetRun, "u") == messageID(testRunID, 8, TargetRun, "u") ||
		messageID(testRunID, 7, TargetRun, "u") == messageID(testRunID, 7, TargetTenant, "u") {
		t.Error("messageID collides across events or targets")
	}
}

func TestApprovalRequestedPayload(t *testing.T) {
	rc := newReceiver(t, status(200))
	st := newMemStore()
	d := startDeliverer(t, st, testOptions(t))
	d.NotifyWebhooks(testRun(rc.srv.URL), approvalEvent(5, "ap_7"))
	st.untilEnded(t, testRunID)
	got := rc.requests()
	var p struct {
		Type string            `json:"type"`
		Data ApprovalRequested `json:"data"`
	}
	if err := json.Unmarshal(got[0].body, &p); err != nil {
		t.Fatal(err)
	}
	var ap struct {
		ID, Tool string
		Options  []string
	}
	if err := json.Unmarshal(p.Data.Approval, &ap); err != nil {
		t.Fatal(err)
	}
	if p.Type != "approval.requested" || p.Data.RunID != testRunID || p.Data.Seq != 5 || ap.ID != "ap_7" || ap.Tool != "Bash" ||
		p.Data.AnswerPath != "/v1/runs/"+testRunID+"/approvals/ap_7" || p.Data.Metadata["ticket"] != "T-1" {
		t.Errorf("payload = %s", got[0].body)
	}
}

// TestGoneStops: 410 ends the delivery at once.
func TestGoneStops(t *testing.T) {
	rc := newReceiver(t, status(410, 200))
	st := newMemStore()
	obs := &fakeObserver{}
	opts := testOptions(t)
	opts.Observer = obs
	d := startDeliverer(t, st, opts)
	d.NotifyWebhooks(testRun(rc.srv.URL), completedEvent(1))
	del := st.untilEnded(t, testRunID)
	st.until(t, "the queue empty", func() bool { return len(st.queued()) == 0 })
	if del.State != Gone || len(del.Attempts) != 1 || !strings.Contains(del.Error, "410") {
		t.Fatalf("delivery = %+v", del)
	}
	if n := len(rc.requests()); n != 1 {
		t.Errorf("receiver got %d requests after 410", n)
	}
	obs.until(t, func(deliveries, _ map[string]int) bool { return deliveries[string(Gone)] == 1 })
}

// TestRetryAfterRespected: a 429 with Retry-After waits that long, though
// the backoff is shorter.
func TestRetryAfterRespected(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	st := newMemStore()
	d := startDeliverer(t, st, testOptions(t))
	d.NotifyWebhooks(testRun(rc.srv.URL), completedEvent(1))
	del := st.untilEnded(t, testRunID)
	if del.State != Delivered || len(del.Attempts) != 2 {
		t.Fatalf("delivery = %+v", del)
	}
	first := del.Attempts[0]
	if first.StatusCode != 429 || first.NextRetryAt == nil || first.NextRetryAt.Sub(first.At) < time.Second {
		t.Errorf("first attempt = %+v: its retry is not a second later", first)
	}
	got := rc.requests()
	if gap := got[1].at.Sub(got[0].at); gap < time.Second-50*time.Millisecond {
		t.Errorf("retried %s after a Retry-After of 1s", gap)
	}
}

// TestRetryAfterBeyondWindowGivesUp: a Retry-After past RetryFor ends the
// delivery failed rather than retrying early.
func TestRetryAfterBeyondWindowGivesUp(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	st := newMemStore()
	opts := testOptions(t)
	opts.RetryFor = 10 * time.Second
	d := startDeliverer(t, st, opts)
	d.NotifyWebhooks(testRun(rc.srv.URL), completedEvent(1))
	del := st.untilEnded(t, testRunID)
	if del.State != Failed || len(del.Attempts) != 1 || !strings.Contains(del.Error, "more than 10s after the event") {
		t.Fatalf("delivery = %+v", del)
	}
}

// TestMaxAttempts: a receiver that always fails gets MaxAttempts tries.
func TestMaxAttempts(t *testing.T) {
	rc := newReceiver(t, status(500))
	st := newMemStore()
	opts := testOptions(t)
	opts.MaxAttempts = 3
	obs := &fakeObserver{}
	opts.Observer = obs
	d := startDeliverer(t, st, opts)
	d.NotifyWebhooks(testRun(rc.srv.URL), completedEvent(1))
	del := st.untilEnded(t, testRunID)
	if del.State != Failed || len(del.Attempts) != 3 || !strings.Contains(del.Error, "after 3 attempts") {
		t.Fatalf("delivery = %+v", del)
	}
	if n := len(rc.requests()); n != 3 {
		t.Errorf("receiver got %d requests", n)
	}
	obs.until(t, func(deliveries, attempts map[string]int) bool {
		return deliveries[string(Failed)] == 1 && attempts["5xx"] == 3
	})
}

// TestRedirectNotFollowed: a 3xx is a failed attempt, its Location never
// visited.
func TestRedirectNotFollowed(t *testing.T) {
	target := newReceiver(t, status(200))
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.srv.URL, http.StatusTemporaryRedirect)
	})
	st := newMemStore()
	opts := testOptions(t)
	opts.MaxAttempts = 2
	d := startDeliverer(t, st, opts)
	d.NotifyWebhooks(testRun(rc.srv.URL), completedEvent(1))
	del := st.untilEnded(t, testRunID)
	if del.State != Failed || del.Attempts[0].StatusCode != 307 || !strings.Contains(del.Attempts[0].Error, "redirects are not followed") {
		t.Fatalf("delivery = %+v", del)
	}
	if n := len(target.requests()); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
}

// TestQueryRedacted: the receiver gets its token, the record never shows
// it.
func TestQueryRedacted(t *testing.T) {
	rc := newReceiver(t, status(200))
	st := newMemStore()
	d := startDeliverer(t, st, testOptions(t))
	d.NotifyWebhooks(testRun(rc.srv.URL+"/hook?token=s3cr3t-t0ken"), completedEvent(1))
	del := st.untilEnded(t, testRunID)
	if b, _ := json.Marshal(del); strings.Contains(string(b), "s3cr3t") || del.URL != rc.srv.URL+"/hook?…" {
		t.Errorf("record shows the query: %s", b)
	}
	if got := rc.requests(); got[0].query != "token=s3cr3t-t0ken" {
		t.Errorf("receiver got query %q", got[0].query)
	}
	u, _ := url.Parse("https://hooks.example/x?token=s3cr3t-t0ken")
	msg := redactError(&url.Error{Op: "Post", URL: u.String(), Err: errors.New("dial tcp: lookup failed for https://hooks.example/x?token=s3cr3t-t0ken")}, u)
	if strings.Contains(msg, "s3cr3t") || !strings.Contains(msg, "lookup failed") {
		t.Errorf("redactError = %q", msg)
	}
}

// fakeResolver answers every name with the same addresses.
type fakeResolver []netip.Addr

func (f fakeResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return f, nil
}

// TestNameResolvingToRefusedAddress: a name that passes the URL check but
// resolves to a refused address is refused at the dial, and recorded so;
// the receiver, on that address, is never reached.
func TestNameResolvingToRefusedAddress(t *testing.T) {
	rc := newReceiver(t, status(200))
	_, port, _ := strings.Cut(strings.TrimPrefix(rc.srv.URL, "http://"), ":")
	st := newMemStore()
	obs := &fakeObserver{}
	opts := testOptions(t)
	opts.Policy = Policy{} // nothing allowed
	opts.Resolver = fakeResolver{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("127.0.0.1")}
	opts.Observer = obs
	d := startDeliverer(t, st, opts)
	hook := "https://hooks.example.com:" + port + "/hook"
	if err := d.CheckWebhookURL("", hook); err != nil {
		t.Fatalf("CheckWebhookURL(%s) = %v; a name is checked at delivery", hook, err)
	}
	d.NotifyWebhooks(testRun(hook), completedEvent(1))
	del := st.untilEnded(t, testRunID)
	if del.State != Refused || len(del.Attempts) != 1 || !strings.Contains(del.Error, "resolves to 10.1.2.3") {
		t.Fatalf("delivery = %+v", del)
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("the refused address got %d requests", n)
	}
	obs.until(t, func(deliveries, attempts map[string]int) bool {
		return deliveries[string(Refused)] == 1 && attempts["refused"] == 1
	})
}

// TestDialerControl: the socket's own check refuses what the policy
// refuses, whatever resolved it, and lets a name the operator allowed
// reach any address.
func TestDialerControl(t *testing.T) {
	var p Policy
	ctx := context.Background()
	for _, addr := range []string{"127.0.0.1:80", "[::1]:443", "169.254.169.254:80", "10.0.0.1:443", "[::ffff:192.168.1.1]:443"} {
		if err := p.control(ctx, "tcp", addr, nil); !isRefused(err) {
			t.Errorf("control(%s) = %v", addr, err)
		}
	}
	if err := p.control(ctx, "tcp", "93.184.215.14:443", nil); err != nil {
		t.Errorf("control(public) = %v", err)
	}
	if err := p.control(context.WithValue(ctx, allowedByName{}, true), "tcp", "127.0.0.1:80", nil); err != nil {
		t.Errorf("control(allowed by name) = %v", err)
	}
	// A name the operator allows dials what it resolves to.
	rc := newReceiver(t, status(200))
	_, port, _ := strings.Cut(strings.TrimPrefix(rc.srv.URL, "http://"), ":")
	byName, _ := ParseAllowList([]string{"hooks.internal"})
	dial := byName.dialer(fakeResolver{netip.MustParseAddr("127.0.0.1")}, time.Second)
	conn, err := dial(ctx, "tcp", "hooks.internal:"+port)
	if err != nil {
		t.Fatalf("dial an allowed name = %v", err)
	}
	conn.Close()
	if _, err := dial(ctx, "tcp", "other.example:"+port); !isRefused(err) {
		t.Errorf("dial a name not allowed, resolving to loopback = %v", err)
	}
	if _, err := dial(ctx, "tcp", "127.0.0.1:"+port); !isRefused(err) {
		t.Errorf("dial a literal refused address = %v", err)
	}
}

// TestShutdownDuringBackoff: Close while a delivery waits for its retry
// returns at once, leaves the delivery pending with its next attempt
// recorded and its message queued for then, and leaves no goroutine.
func TestShutdownDuringBackoff(t *testing.T) {
	rc := newReceiver(t, status(503))
	st := newMemStore()
	opts := testOptions(t)
	opts.RetryMin, opts.RetryMax, opts.RetryFor = time.Hour, time.Hour, 24*time.Hour
	d := New(st, opts)
	d.Start()
	d.NotifyWebhooks(testRun(rc.srv.URL), completedEvent(1))
	st.until(t, "the first attempt recorded", func() bool {
		ds, _ := st.Deliveries(context.Background(), testRunID)
		q := st.queued()
		return len(ds) == 1 && len(ds[0].Attempts) == 1 && len(q) == 1 && !q[0].taken
	})
	start := time.Now()
	d.Close()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %s", took)
	}
	del := st.only(t, testRunID)
	q := st.queued()
	if del.State != Pending || del.NextAttemptAt == nil || time.Until(*del.NextAttemptAt) < 20*time.Minute {
		t.Errorf("delivery after Close = %+v", del)
	}
	if len(q) != 1 || q[0].taken || time.Until(q[0].due) < 20*time.Minute {
		t.Errorf("queue after Close = %+v", q)
	}
	d.NotifyWebhooks(testRun(rc.srv.URL), completedEvent(2)) // after Close: dropped, no panic
	rc.srv.Close()
	goleak.VerifyNone(t)
}

// TestShutdownCutsAttempt: Close during an attempt cuts it off without
// recording it, and gives its message back, due at once, for whoever
// takes it next.
func TestShutdownCutsAttempt(t *testing.T) {
	arrived := make(chan struct{}, 1)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done() // the gateway hangs up
	})
	st := newMemStore()
	d := New(st, testOptions(t))
	d.Start()
	d.NotifyWebhooks(testRun(rc.srv.URL), completedEvent(1))
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("no attempt")
	}
	d.Close()
	del := st.only(t, testRunID)
	q := st.queued()
	if del.State != Pending || len(del.Attempts) != 0 {
		t.Errorf("delivery = %+v", del)
	}
	if len(q) != 1 || q[0].taken || time.Until(q[0].due) > time.Second {
		t.Errorf("queue = %+v", q)
	}
	rc.srv.Close()
	goleak.VerifyNone(t)
}

// TestResumedByAnotherDeliverer: a delivery given back at Close is made
// by the next deliverer on the store, as another replica would.
func TestResumedByAnotherDeliverer(t *testing.T) {
	rc := newReceiver(t, status(500, 200))
	st := newMemStore()
	opts := testOptions(t)
	opts.RetryMin, opts.RetryMax = time.Second, time.Second
	first := New(st, opts)
	first.Start()
	first.NotifyWebhooks(testRun(rc.srv.URL), completedEvent(1))
	st.until(t, "the first attempt recorded", func() bool {
		ds, _ := st.Deliveries(context.Background(), testRunID)
		return len(ds) == 1 && len(ds[0].Attempts) == 1
	})
	first.Close()
	closed := time.Now()
	startDeliverer(t, st, opts)
	st.untilEnded(t, testRunID)
	if del := st.only(t, testRunID); del.State != Delivered || len(del.Attempts) != 2 {
		t.Fatalf("delivery = %+v", del)
	}
	if got := rc.requests(); len(got) != 2 || got[1].at.Before(closed) {
		t.Errorf("the retry was not made by the second deliverer: %d requests", len(got))
	}
}

// TestTenantHook: a tenant's operator-set hook gets its runs' events,
// signed with the tenant's own secret, beside a run's own URL.
func TestTenantHook(t *testing.T) {
	tenantRC := newReceiver(t, status(200))
	runRC := newReceiver(t, status(200))
	tenantSecret := mustSecret(t, specVectors[1].secret)
	tenants, err := ParseTenants(strings.NewReader("acme "+tenantRC.srv.URL+"/t "+specVectors[1].secret+"\n"), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	st := newMemStore()
	opts := testOptions(t)
	opts.Tenants = func() *Tenants { return tenants }
	d := startDeliverer(t, st, opts)

	r := testRun("")
	r.Tenant = "acme"
	d.NotifyWebhooks(r, completedEvent(1)) // only the tenant's
	r.Spec.WebhookURL = runRC.srv.URL
	d.NotifyWebhooks(r, completedEvent(2)) // both
	other := testRun("")
	other.Tenant = "globex"
	d.NotifyWebhooks(other, completedEvent(3)) // none
	st.until(t, "three delivered", func() bool {
		ds, _ := st.Deliveries(context.Background(), testRunID)
		if len(ds) != 3 {
			return false
		}
		for _, d := range ds {
			if !ended(d) {
				return false
			}
		}
		return true
	})
	tenantVer, _ := NewVerifier(tenantSecret)
	globalVer, _ := NewVerifier(mustSecret(t, specVectors[0].secret))
	tenantGot, runGot := tenantRC.requests(), runRC.requests()
	if len(tenantGot) != 2 || len(runGot) != 1 {
		t.Fatalf("tenant hook got %d, run hook %d", len(tenantGot), len(runGot))
	}
	for _, got := range append(tenantGot, runGot...) {
		if err := tenantVer.Verify(got.header, got.body); err != nil {
			t.Errorf("not signed with the tenant's secret: %v", err)
		}
		if err := globalVer.Verify(got.header, got.body); err == nil {
			t.Error("signed with the gateway's secret though the tenant has its own")
		}
	}
	ds, _ := d.Deliveries(context.Background(), testRunID)
	targets := map[string]int{}
	for _, del := range ds {
		targets[del.Target]++
		if del.Tenant != "" {
			t.Errorf("listed delivery shows its tenant: %+v", del)
		}
	}
	if targets[TargetTenant] != 2 || targets[TargetRun] != 1 {
		t.Errorf("targets = %v", targets)
	}
}

func TestCheckWebhookURL(t *testing.T) {
	opts := testOptions(t)
	d := New(newMemStore(), opts)
	defer d.Close()
	code := func(err error) string {
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Field != runs.FieldWebhookURL || !errors.Is(err, runs.ErrInvalid) {
			return fmt.Sprintf("not a field error: %v", err)
		}
		return fe.Code
	}
	if err := d.CheckWebhookURL("", "https://hooks.example.com/x?token=1"); err != nil {
		t.Errorf("public https = %v", err)
	}
	if err := d.CheckWebhookURL("", "http://127.0.0.1:9/x"); err != nil {
		t.Errorf("allowed http = %v", err)
	}
	for raw, want := range map[string]string{
		"https://169.254.169.254/latest/meta-data": CodeWebhookRefused,
		"https://10.0.0.1/":                        CodeWebhookRefused,
		"https://localhost/":                       CodeWebhookRefused,
		"http://hooks.example.com/":                "",
		"ftp://hooks.example.com/":                 "",
	} {
		if got := code(d.CheckWebhookURL("", raw)); got != want {
			t.Errorf("CheckWebhookURL(%s) code %q, want %q", raw, got, want)
		}
	}
	// No secret: refused, unless the tenant has its own.
	opts.Secrets = nil
	tenants, _ := ParseTenants(strings.NewReader("acme https://hooks.example.com/ "+specVectors[1].secret+"\n"), nil, false)
	opts.Tenants = func() *Tenants { return tenants }
	unsigned := New(newMemStore(), opts)
	defer unsigned.Close()
	if got := code(unsigned.CheckWebhookURL("globex", "https://hooks.example.com/")); got != CodeWebhooksDisabled {
		t.Errorf("no secret: code %q", got)
	}
	if err := unsigned.CheckWebhookURL("acme", "https://hooks.example.com/"); err != nil {
		t.Errorf("tenant with its own secret = %v", err)
	}
}

// TestNotifyDrops: a full intake drops the event's webhooks and counts
// them; an event of another type or a run without a hook is ignored.
func TestNotifyDrops(t *testing.T) {
	obs := &fakeObserver{}
	opts := testOptions(t)
	opts.Intake, opts.Observer = 1, obs
	d := New(newMemStore(), opts) // not started: nothing takes from the intake
	defer d.Close()
	d.NotifyWebhooks(testRun(""), completedEvent(1))
	d.NotifyWebhooks(testRun("https://hooks.example.com/"), runs.StoredEvent{Seq: 1, Type: runs.EventMessageCompleted})
	d.NotifyWebhooks(testRun("https://hooks.example.com/"), completedEvent(2))
	d.NotifyWebhooks(testRun("https://hooks.example.com/"), completedEvent(3))
	if deliveries, _ := obs.counts(); deliveries[OutcomeDropped] != 1 {
		t.Errorf("dropped = %v, want 1", deliveries)
	}
}

// TestRecordFailureCounted: a delivery the store will not record is
// counted dropped.
func TestRecordFailureCounted(t *testing.T) {
	st := newMemStore()
	st.failCreate = errors.New("store down")
	obs := &fakeObserver{}
	opts := testOptions(t)
	opts.Observer = obs
	d := startDeliverer(t, st, opts)
	d.NotifyWebhooks(testRun("https://hooks.example.com/"), completedEvent(1))
	d.Close()
	if deliveries, _ := obs.counts(); deliveries[OutcomeDropped] != 1 {
		t.Errorf("dropped = %v", deliveries)
	}
}

func TestPayloadTruncated(t *testing.T) {
	r := testRun("")
	r.Result = strings.Repeat("x", MaxPayloadBytes)
	r.Files = []runs.ChangedFile{{Path: "a.txt"}}
	b, err := buildPayload(r, completedEvent(9))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Truncated bool
		Data      struct {
			ID             string
			Result         string
			Files          []runs.ChangedFile
			FilesTruncated bool `json:"files_truncated"`
		}
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxPayloadBytes || !p.Truncated || p.Data.ID != testRunID || p.Data.Result != "" || len(p.Data.Files) != 0 || !p.Data.FilesTruncated {
		t.Errorf("payload of %d bytes: %+v", len(b), p)
	}
	if _, err := buildPayload(r, runs.StoredEvent{Type: runs.EventRunCompleted, JSON: []byte("{")}); err == nil {
		t.Error("an undecodable event made a payload")
	}
}

func TestBackoffBounds(t *testing.T) {
	lo, hi := 5*time.Second, time.Hour
	for n := 1; n <= 80; n++ {
		want := hi
		if n <= 20 && lo<<(n-1) < hi {
			want = lo << (n - 1)
		}
		top := Backoff(n, lo, hi, func() float64 { return 0 })
		bottom := Backoff(n, lo, hi, func() float64 { return 0.999999 })
		if top != want || bottom < want/2 || bottom > top {
			t.Errorf("Backoff(%d) in [%s, %s], want [%s, %s]", n, bottom, top, want/2, want)
		}
	}
	if d := Backoff(0, lo, hi, func() float64 { return 0 }); d != lo {
		t.Errorf("Backoff(0) = %s", d)
	}
	if d := Backoff(3, lo, hi, func() float64 { return 7 }); d != 4*lo {
		t.Errorf("Backoff with a rand out of range = %s", d)
	}
	// Jitter spreads: two draws differ.
	if Backoff(4, lo, hi, func() float64 { return 0.1 }) == Backoff(4, lo, hi, func() float64 { return 0.9 }) {
		t.Error("no jitter")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"0":                             0,
		"-5":                            0,
		"120":                           2 * time.Minute,
		" 7 ":                           7 * time.Second,
		"1e3":                           0,
		"99999999999999":                365 * 24 * time.Hour,
		"Fri, 02 Jan 2026 03:05:05 GMT": time.Minute,
		"Fri, 02 Jan 2026 03:00:00 GMT": 0, // past
		"soon":                          0,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

// TestHTTPS: an https receiver is reached through the guarded dialer, with
// the roots the options give.
func TestHTTPS(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	st := newMemStore()
	opts := testOptions(t)
	opts.TLS = &tls.Config{RootCAs: pool}
	d := startDeliverer(t, st, opts)
	d.NotifyWebhooks(testRun(srv.URL+"/hook"), completedEvent(1))
	st.untilEnded(t, testRunID)
	if del := st.only(t, testRunID); del.State != Delivered || hits.Load() != 1 {
		t.Fatalf("delivery = %+v, %d requests", del, hits.Load())
	}
	d.Close()
}
