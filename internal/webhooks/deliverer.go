package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// Defaults of Options, for its zero fields.
const (
	DefaultTimeout     = 15 * time.Second
	DefaultMaxAttempts = 16
	DefaultRetryMin    = 5 * time.Second
	DefaultRetryMax    = 2 * time.Hour
	DefaultRetryFor    = 24 * time.Hour
	DefaultWorkers     = 4
	// DefaultIntake bounds the events waiting to be recorded as
	// deliveries; past it an event's webhooks are dropped (and counted).
	DefaultIntake = 1024
)

// MaxTimeout bounds Options.Timeout: a replica holds a message it took
// for a while (internal/store gives it to another after two minutes), and
// an attempt must end well within that.
const MaxTimeout = time.Minute

// Options configure a Deliverer.
type Options struct {
	// Secrets sign every webhook whose tenant has none of its own, the
	// current one first (AGENTGATE_WEBHOOK_SECRET, then
	// AGENTGATE_WEBHOOK_SECRET_PREVIOUS). Without them, and without a
	// tenant's, a run may not name a webhook_url.
	Secrets []Secret
	// Tenants returns the operator's tenant hooks as they are now (a
	// TenantsFile's Tenants); nil: none.
	Tenants func() *Tenants
	// Policy is where webhooks may go.
	Policy Policy
	// Timeout bounds one attempt, from dial to the end of the answer's
	// headers (DefaultTimeout, at most MaxTimeout).
	Timeout time.Duration
	// MaxAttempts, RetryMin, RetryMax and RetryFor bound the retries: the
	// n-th retry waits RetryMin·2^(n-1), at most RetryMax, less up to half
	// of it at random; a delivery gives up after MaxAttempts attempts, or
	// when the next would come more than RetryFor after the event.
	MaxAttempts int
	RetryMin    time.Duration
	RetryMax    time.Duration
	RetryFor    time.Duration
	// Workers is how many attempts this replica makes at once.
	Workers int
	// Intake bounds the events waiting to be recorded (DefaultIntake).
	Intake int
	// Resolver looks up receivers' names (net.DefaultResolver).
	Resolver Resolver
	// TLS, when set, is the client's TLS configuration (tests give their
	// own roots).
	TLS *tls.Config
	// Now is the clock (time.Now).
	Now func() time.Time
	// Rand returns a number in [0, 1) for the jitter (math/rand/v2).
	Rand func() float64
	// Observer counts deliveries and attempts; nil counts nothing.
	Observer Observer
	// Log; nil logs nothing.
	Log *zap.Logger
}

func (o *Options) setDefaults() {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	o.Timeout = min(o.Timeout, MaxTimeout)
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryMin <= 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax <= 0 {
		o.RetryMax = DefaultRetryMax
	}
	o.RetryMax = max(o.RetryMax, o.RetryMin)
	if o.RetryFor <= 0 {
		o.RetryFor = DefaultRetryFor
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Intake <= 0 {
		o.Intake = DefaultIntake
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Tenants == nil {
		o.Tenants = func() *Tenants { return nil }
	}
}

// Deliverer sends runs' webhooks. NotifyWebhooks takes events from the
// supervisor without blocking; one goroutine records each as deliveries
// in the Store, and Workers goroutines take the attempts due from the
// Store's queue, shared by every replica, and make them. Safe for
// concurrent use.
type Deliverer struct {
	opts   Options
	store  Store
	client *http.Client
	tr     *http.Transport
	log    *zap.Logger

	intake chan notice
	// ctx ends the workers, at Close; abandon ends the recorder's drain
	// of the intake, closeDrain after.
	ctx     context.Context
	stop    context.CancelFunc
	abandon chan struct{}
	wg      sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	started bool
}

// notice is one event handed to the deliverer.
type notice struct {
	run runs.Run
	ev  runs.StoredEvent
}

// New returns a deliverer over store. Start starts it; Close stops it.
func New(store Store, opts Options) *Deliverer {
	opts.setDefaults()
	tr := &http.Transport{
		// Never a proxy from the environment: it would dial for us,
		// past the policy.
		Proxy:                 nil,
		DialContext:           opts.Policy.dialer(opts.Resolver, opts.Timeout),
		TLSClientConfig:       opts.TLS,
		TLSHandshakeTimeout:   opts.Timeout,
		ResponseHeaderTimeout: opts.Timeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Deliverer{
		opts:  opts,
		store: store,
		tr:    tr,
		client: &http.Client{
			Transport: tr,
			// A redirect is a failure (the specification's advice): the
			// URL should be updated, and a redirect could lead anywhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log:     opts.Log,
		intake:  make(chan notice, opts.Intake),
		ctx:     ctx,
		stop:    stop,
		abandon: make(chan struct{}),
	}
}

// Start starts recording and sending. It may be called once.
func (d *Deliverer) Start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || d.closed {
		return
	}
	d.started = true
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.record()
	}()
	for range d.opts.Workers {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.work()
		}()
	}
}

// closeDrain bounds how long Close spends recording the events still in
// the intake.
const closeDrain = 5 * time.Second

// Close stops the deliverer: the events already handed to it are recorded
// (for up to a few seconds), an attempt under way is cut off and given
// back to the queue, and it returns once every goroutine of its own has
// ended. Deliveries waiting for a retry stay queued in the Store, where
// this replica after a restart, or any other replica, takes them up.
// Idempotent.
func (d *Deliverer) Close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	close(d.intake)
	started := d.started
	d.mu.Unlock()
	// The workers stop at once; the recorder drains the intake first.
	d.stop()
	if !started {
		for n := range d.intake {
			d.dropped(n, "never started")
		}
	}
	if started {
		done := make(chan struct{})
		go func() {
			defer close(done)
			d.wg.Wait()
		}()
		t := time.NewTimer(closeDrain)
		select {
		case <-done:
		case <-t.C:
			close(d.abandon)
			<-done
		}
		t.Stop()
	}
	d.tr.CloseIdleConnections()
}

// secretsFor returns the secrets that sign tenant's webhooks.
func (d *Deliverer) secretsFor(tenant string) []Secret {
	if h, ok := d.opts.Tenants().Lookup(tenant); ok && len(h.Secrets) > 0 {
		return h.Secrets
	}
	return d.opts.Secrets
}

// Codes of the field errors CheckWebhookURL returns.
const (
	// CodeWebhooksDisabled: no secret would sign the run's webhooks.
	CodeWebhooksDisabled = runs.CodeWebhooksDisabled
	// CodeWebhookRefused: the URL is a literal internal address.
	CodeWebhookRefused = runs.CodeWebhookURLRefused
)

// CheckWebhookURL implements runs.Webhooks: it refuses a run's
// webhook_url when nothing would sign it, when it is not a valid https
// URL (http only to an allowed host), or when its host is a literal
// internal address. A name that resolves to one is refused at delivery.
func (d *Deliverer) CheckWebhookURL(tenant, raw string) error {
	if len(d.secretsFor(tenant)) == 0 {
		return &runs.FieldError{Field: runs.FieldWebhookURL, Kind: runs.ErrInvalid, Code: CodeWebhooksDisabled,
			Reason: "this gateway signs no webhooks: its operator has set no AGENTGATE_WEBHOOK_SECRET"}
	}
	_, err := d.opts.Policy.CheckURL(raw)
	if ref, ok := errors.AsType[*RefusedError](err); ok {
		return &runs.FieldError{Field: runs.FieldWebhookURL, Kind: runs.ErrInvalid, Code: CodeWebhookRefused, Reason: ref.Error()}
	}
	if inv, ok := errors.AsType[*InvalidURLError](err); ok {
		return runs.Invalid(runs.FieldWebhookURL, inv.Reason)
	}
	return err
}

// target is one URL an event goes to.
type target struct{ kind, url string }

// targets lists where r's webhooks go: the URL the run named, and its
// tenant's, once each.
func (d *Deliverer) targets(r runs.Run) []target {
	var out []target
	if u := r.Spec.WebhookURL; u != "" {
		out = append(out, target{TargetRun, u})
	}
	if h, ok := d.opts.Tenants().Lookup(r.Tenant); ok && h.URL != r.Spec.WebhookURL {
		out = append(out, target{TargetTenant, h.URL})
	}
	return out
}

// NotifyWebhooks implements runs.Webhooks: it takes run.completed and
// approval.requested of a run that has a webhook, without blocking. When
// the intake is full, or closed, the event's webhooks are dropped, logged
// and counted.
func (d *Deliverer) NotifyWebhooks(r runs.Run, ev runs.StoredEvent) {
	if ev.Type != runs.EventRunCompleted && ev.Type != runs.EventApprovalRequested {
		return
	}
	if len(d.targets(r)) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		select {
		case d.intake <- notice{run: r, ev: ev}:
			return
		default:
		}
	}
	d.opts.Observer.Delivery(OutcomeDropped)
	d.log.Error("webhook dropped: too many events waiting to be recorded, or shutting down",
		zap.String("run_id", r.ID), zap.String("event", string(ev.Type)), zap.Uint64("seq", ev.Seq))
}

// record turns each event of the intake into its deliveries, until the
// intake is closed and drained, or the deliverer stops.
func (d *Deliverer) record() {
	for {
		select {
		case n, ok := <-d.intake:
			if !ok {
				return
			}
			d.recordOne(n)
		case <-d.abandon:
			// Close has waited long enough: what is left is lost.
			for n := range d.intake {
				d.dropped(n, "shut down before it was recorded")
			}
			return
		}
	}
}

func (d *Deliverer) dropped(n notice, why string) {
	d.opts.Observer.Delivery(OutcomeDropped)
	d.log.Error("webhook dropped: "+why, zap.String("run_id", n.run.ID), zap.String("event", string(n.ev.Type)),
		zap.Uint64("seq", n.ev.Seq))
}

// recordTimeout bounds recording one delivery in the store.
const recordTimeout = 30 * time.Second

func (d *Deliverer) recordOne(n notice) {
	body, err := buildPayload(n.run, n.ev)
	if err != nil {
		d.opts.Observer.Delivery(OutcomeDropped)
		d.log.Error("webhook dropped: no payload", zap.String("run_id", n.run.ID), zap.Error(err))
		return
	}
	now := d.opts.Now().UTC()
	for _, t := range d.targets(n.run) {
		shown := "(invalid URL)"
		if u, err := url.Parse(t.url); err == nil {
			shown = RedactURL(u)
		}
		del := Delivery{
			ID: messageID(n.run.ID, n.ev.Seq, t.kind, t.url), RunID: n.run.ID, Event: n.ev.Type, Seq: n.ev.Seq,
			Target: t.kind, URL: shown, State: Pending, CreatedAt: now, NextAttemptAt: &now,
			Attempts: []Attempt{}, Tenant: n.run.Tenant,
		}
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		err := d.store.CreateDelivery(ctx, del, Message{URL: t.url, Body: body})
		cancel()
		if err != nil {
			d.opts.Observer.Delivery(OutcomeDropped)
			d.log.Error("webhook dropped: could not be recorded", zap.String("run_id", n.run.ID),
				zap.String("webhook_id", del.ID), zap.Error(err))
		}
	}
}

// work takes the attempts due and makes them until the deliverer stops.
func (d *Deliverer) work() {
	for {
		tk, err := d.store.TakeDelivery(d.ctx)
		if err != nil {
			if d.ctx.Err() != nil {
				return
			}
			d.log.Warn("take a webhook delivery", zap.Error(err))
			select {
			case <-d.ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		d.handle(tk)
	}
}

// storeTimeout bounds a read or write of a delivery's record; it is not
// cut by Close, so that an attempt made is recorded.
const storeTimeout = 10 * time.Second

// handle makes the attempt of a message taken from the queue, if it is
// due, records it and gives the message back for its retry or removes it.
func (d *Deliverer) handle(tk Taken) {
	log := d.log.With(zap.String("run_id", tk.RunID), zap.String("webhook_id", tk.ID))
	sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	del, rev, err := d.store.Delivery(sctx, tk.RunID, tk.ID)
	switch {
	case errors.Is(err, runs.ErrNotFound):
		log.Warn("webhook queued without its record: dropped")
		_ = tk.Done()
		return
	case err != nil:
		log.Warn("read webhook delivery", zap.Error(err))
		_ = tk.Later(d.opts.RetryMin)
		return
	case del.State != Pending:
		_ = tk.Done()
		return
	}
	if d.ctx.Err() != nil {
		_ = tk.Later(0) // closing: for whoever takes it next
		return
	}
	now := d.opts.Now()
	if del.NextAttemptAt != nil && del.NextAttemptAt.After(now) {
		// Taken early (another replica gave it back): not due yet.
		_ = tk.Later(del.NextAttemptAt.Sub(now))
		return
	}
	cancel()
	res := d.attempt(d.ctx, del, tk.Message)
	if d.ctx.Err() != nil {
		// Cut off by Close: not an attempt of the receiver's. The next
		// replica to take it makes it again.
		_ = tk.Later(0)
		return
	}
	d.opts.Observer.Attempt(res.label, res.duration.Seconds())
	sctx, cancel = context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	for range 3 {
		next := d.apply(&del, res)
		err = d.store.UpdateDelivery(sctx, del, rev)
		if err != nil && !errors.Is(err, ErrStale) {
			// The store is down: the message stays queued and the
			// attempt is made again, rather than its outcome lost (a
			// receiver may see a delivered message twice: it has the
			// webhook-id to tell).
			log.Warn("record webhook attempt", zap.Error(err))
			_ = tk.Later(max(next, d.opts.RetryMin))
			return
		}
		if err == nil {
			if del.State == Pending {
				_ = tk.Later(next)
				return
			}
			d.opts.Observer.Delivery(string(del.State))
			if del.State != Delivered {
				log.Warn("webhook not delivered", zap.String("state", string(del.State)), zap.String("error", del.Error),
					zap.Int("attempts", len(del.Attempts)))
			}
			_ = tk.Done()
			return
		}
		// Another replica wrote the record meanwhile (it took the
		// message after this one's hold lapsed): add to its version.
		if del, rev, err = d.store.Delivery(sctx, tk.RunID, tk.ID); err != nil || del.State != Pending {
			_ = tk.Done()
			return
		}
	}
	_ = tk.Later(d.opts.RetryMin)
}

// result is what one attempt found.
type result struct {
	at         time.Time
	duration   time.Duration
	status     int
	err        string
	label      string
	retryAfter time.Duration // the receiver's Retry-After, if it sent one
	final      State         // set when no retry may follow
}

// attempt signs the message anew and POSTs it once.
func (d *Deliverer) attempt(ctx context.Context, del Delivery, m Message) result {
	start := d.opts.Now()
	res := result{at: start.UTC()}
	done := func() result { res.duration = d.opts.Now().Sub(start); return res }
	u, err := d.opts.Policy.CheckURL(m.URL)
	if err != nil {
		res.err, res.label, res.final = err.Error(), "refused", Refused
		if _, invalid := errors.AsType[*InvalidURLError](err); invalid {
			res.final = Failed
		}
		return done()
	}
	secrets := d.secretsFor(del.Tenant)
	if len(secrets) == 0 {
		res.err, res.label, res.final = "no secret signs this tenant's webhooks", "error", Failed
		return done()
	}
	actx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, m.URL, bytes.NewReader(m.Body))
	if err != nil {
		res.err, res.label, res.final = "webhook URL cannot be requested", "error", Failed
		return done()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentgate-webhooks")
	SetHeaders(req.Header, secrets, del.ID, d.opts.Now(), m.Body)
	resp, err := d.client.Do(req)
	if err != nil {
		res.err, res.label = redactError(err, u), "error"
		if isRefused(err) {
			res.label, res.final = "refused", Refused
		}
		return done()
	}
	// Read a little of the answer, so that the connection can be kept.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	res.status, res.label = resp.StatusCode, statusResult(resp.StatusCode)
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		res.final = Delivered
	case code == http.StatusGone:
		res.err, res.final = "the receiver answered 410 Gone: it takes no more webhooks", Gone
	default:
		res.err = "the receiver answered " + strconv.Itoa(code)
		if code >= 300 && code < 400 {
			res.err += " (redirects are not followed: update the URL)"
		}
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), d.opts.Now())
		}
	}
	return done()
}

// apply records res in del and returns the delay before the next attempt
// when del stays Pending.
func (d *Deliverer) apply(del *Delivery, res result) time.Duration {
	res.err = clip.Text(res.err, maxErrorBytes)
	a := Attempt{At: res.at, StatusCode: res.status, Error: res.err, DurationMS: res.duration.Milliseconds()}
	now := res.at.Add(res.duration)
	finish := func(st State, why string) time.Duration {
		del.State, del.Error, del.NextAttemptAt = st, why, nil
		del.FinishedAt = &now
		del.Attempts = append(del.Attempts, a)
		return 0
	}
	switch {
	case res.final == Delivered:
		return finish(Delivered, "")
	case res.final != "":
		return finish(res.final, res.err)
	case len(del.Attempts)+1 >= d.opts.MaxAttempts:
		return finish(Failed, fmt.Sprintf("gave up after %d attempts; the last: %s", len(del.Attempts)+1, res.err))
	}
	delay := Backoff(len(del.Attempts)+1, d.opts.RetryMin, d.opts.RetryMax, d.opts.Rand)
	delay = max(delay, res.retryAfter)
	next := now.Add(delay)
	if next.After(del.CreatedAt.Add(d.opts.RetryFor)) {
		return finish(Failed, fmt.Sprintf("gave up: the next attempt would come more than %s after the event; the last: %s",
			d.opts.RetryFor, res.err))
	}
	a.NextRetryAt = &next
	del.Attempts = append(del.Attempts, a)
	del.NextAttemptAt = &next
	return delay
}

// Backoff is the wait before retry n (1 for the first): lo·2^(n-1), at
// most hi, less a random part of up to half of it (rnd returns [0, 1)),
// so that retries of many deliveries that failed together spread out.
func Backoff(n int, lo, hi time.Duration, rnd func() float64) time.Duration {
	d := hi
	if n < 1 {
		n = 1
	}
	if n <= 62 {
		if step := lo << (n - 1); step > 0 && step>>(n-1) == lo && step < hi {
			d = step
		}
	}
	r := rnd()
	if r < 0 || r >= 1 {
		r = 0
	}
	return d - time.Duration(float64(d/2)*r)
}

// maxErrorBytes bounds an error kept in a record, which holds many.
const maxErrorBytes = 512

// parseRetryAfter reads a Retry-After header, in seconds or as an HTTP
// date; 0 when there is none or it cannot be read.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	const most = 365 * 24 * time.Hour // past any delivery's window anyway
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(most/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), most)
	}
	return 0
}

// redactError describes a failed request without its URL, whose query may
// hold a token.
func redactError(err error, u *url.URL) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	var msg string
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = "no answer within the timeout"
	default:
		msg = err.Error()
	}
	if q := u.RawQuery; q != "" {
		msg = strings.ReplaceAll(msg, q, "…")
		for _, vs := range u.Query() {
			for _, v := range vs {
				if len(v) >= 4 {
					msg = strings.ReplaceAll(msg, v, "…")
				}
			}
		}
	}
	return msg
}

// Deliveries returns the run's deliveries, oldest first, for GET
// /v1/runs/{id}/webhooks.
func (d *Deliverer) Deliveries(ctx context.Context, runID string) ([]Delivery, error) {
	out, err := d.store.Deliveries(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("webhook deliveries of %s: %w", runID, err)
	}
	for i := range out {
		out[i].Tenant = "" // the run's own; said once, by the run
	}
	return out, nil
}
