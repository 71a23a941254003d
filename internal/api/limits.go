package api

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// tenantLimits holds what the edge bounds per tenant on this replica: a
// request rate (a token bucket) and the event streams open at once. The
// rate is per replica: behind a balancer over n replicas a tenant gets up
// to n times it.
type tenantLimits struct {
	rate    float64 // requests per second; 0 is no limit
	burst   float64
	streams int // 0 is no limit
	now     func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	open    map[string]int
}

type bucket struct {
	tokens float64
	last   time.Time
}

// maxBuckets bounds the buckets kept: tenants come from the keys file, but
// a bucket idle long enough to be full again is forgotten anyway.
const maxBuckets = 100_000

func newTenantLimits(rate float64, burst, streams int) *tenantLimits {
	if burst <= 0 {
		burst = max(1, int(rate*2))
	}
	return &tenantLimits{rate: rate, burst: float64(burst), streams: streams, now: time.Now,
		buckets: map[string]*bucket{}, open: map[string]int{}}
}

// allow takes one request from the tenant's bucket, or says how long to
// wait for the next.
func (l *tenantLimits) allow(tenant string) error {
	if l == nil || l.rate <= 0 {
		return nil
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[tenant]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			l.forgetFull(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[tenant] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return nil
	}
	wait := time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
	return &edgeError{status: http.StatusTooManyRequests, code: CodeRateLimited, retryAfter: wait,
		msg: fmt.Sprintf("the tenant sends more than %g requests a second (burst %g); slow down", l.rate, l.burst)}
}

// forgetFull drops the buckets that have refilled: they hold nothing.
func (l *tenantLimits) forgetFull(now time.Time) {
	for t, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.buckets, t)
		}
	}
}

// openStream counts a stream of the tenant in; release counts it out.
func (l *tenantLimits) openStream(tenant string) (release func(), err error) {
	if l == nil || l.streams <= 0 {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[tenant] >= l.streams {
		return nil, &edgeError{status: http.StatusTooManyRequests, code: CodeTooManyStreams, retryAfter: 5 * time.Second,
			msg: fmt.Sprintf("the tenant holds %d event streams open on this replica, its limit; close one first", l.streams)}
	}
	l.open[tenant]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[tenant]--; l.open[tenant] <= 0 {
				delete(l.open, tenant)
			}
		})
	}, nil
}
