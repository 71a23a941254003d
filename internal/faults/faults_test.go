package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/proctree"
	"github.com/agentgate/agentgate/internal/runs"
)

// TestColdStartReplicasAtOnce starts the 3 gateways at the same moment on a
// cluster that has never held the gateway's streams and buckets, as an
// orchestrator does: all of them come up, and they serve runs through
// nginx.
func TestColdStartReplicasAtOnce(t *testing.T) {
	r := newRig(t, startMock(t), rigOptions{Parallel: true})
	if err := r.start(); err != nil {
		t.Fatalf("3 replicas started at once on an empty cluster: %v", err)
	}
	var made []string
	var problems []string
	for i := range 3 {
		s, err := post(r.Nginx, runBody(1, fmt.Sprintf("tool-cold-%d", i)), "")
		if err != nil || s.Status != http.StatusCreated {
			t.Fatalf("POST through nginx = %d %s %v", s.Status, s.Raw, err)
		}
		made = append(made, s.Run.ID)
	}
	problems = append(problems, r.verifyAll(t, made, want{Status: runs.Succeeded}, settleWithin)...)
	report(t, append(problems, checkListing(r.Nginx, made)...))
}

// settleWithin bounds the wait for a case's runs to end after its fault:
// against a hang, not a target. Under two suites at once, and another
// test's cluster beside them, a rolling restart's last runs were still
// queued or running after the 2 minutes this once was.
const settleWithin = 5 * time.Minute

// steadyWindow is how many of TestRollingRestartThroughNginx's steady
// runs may be unfinished at once: two a replica.
const steadyWindow = 6

// seed is the random seed of a case: FAULTS_SEED when set, so that a
// logged failure can be replayed.
func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("FAULTS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FAULTS_SEED=%q: %v", v, err)
		}
		s = n
	}
	t.Logf("seed %d (FAULTS_SEED=%d replays it)", s, s)
	return s
}

// submission is one client's submission of a run, with its retries.
type submission struct {
	Tag      string
	Key      string
	ID       string
	Attempts []string // "201", "503 shutting_down", "error: …"
}

// submit POSTs body to base with an Idempotency-Key, retrying a transport
// error or a 5xx for up to within, as a client that knows a retry with its
// key is safe does.
func submit(base, body, key string, within time.Duration) submission {
	sub := submission{Key: key}
	deadline := time.Now().Add(within)
	for {
		s, err := post(base, body, key)
		switch {
		case err != nil:
			sub.Attempts = append(sub.Attempts, "error: "+err.Error())
		case s.Status == http.StatusOK || s.Status == http.StatusCreated:
			sub.Attempts = append(sub.Attempts, strconv.Itoa(s.Status))
			sub.ID = s.Run.ID
			return sub
		default:
			sub.Attempts = append(sub.Attempts, fmt.Sprintf("%d %s", s.Status, s.Code))
			if s.Status < 500 {
				return sub
			}
		}
		if time.Now().After(deadline) {
			return sub
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestNATSNodeKilledDuringRuns kills -9 one NATS node after another, at
// seeded random moments, while runs are submitted and streamed through
// nginx; each node is started again before the next is killed, so that
// the cluster always keeps a quorum. Every run succeeds with its whole
// log, in order, and one record per submission.
func TestNATSNodeKilledDuringRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 9))
	r := newRig(t, startMock(t), rigOptions{})
	r.mustStart()

	const total = 8
	type plan struct {
		wait    time.Duration
		seconds int
	}
	var plans []plan
	for range total {
		plans = append(plans, plan{wait: time.Duration(300+rng.IntN(900)) * time.Millisecond, seconds: 1 + rng.IntN(3)})
	}
	// Each kill takes the leader of the events stream, the leader of the
	// runs bucket, or any node, as the seed says.
	targets := []string{"AGENTGATE_EVENTS", "KV_agentgate_runs", ""}
	type kill struct {
		target     string
		node       int
		wait, down time.Duration
	}
	var kills []kill
	for range 3 {
		kills = append(kills, kill{target: targets[rng.IntN(len(targets))], node: 1 + rng.IntN(3),
			wait: time.Duration(200+rng.IntN(2500)) * time.Millisecond,
			down: time.Duration(rng.IntN(3000)) * time.Millisecond})
	}

	var wg sync.WaitGroup
	subs := make([]submission, total)
	live := make([]followed, total)
	wg.Go(func() {
		var followers sync.WaitGroup
		for i, p := range plans {
			time.Sleep(p.wait)
			tag := fmt.Sprintf("tool-nats-%d", i)
			subs[i] = submit(r.Nginx, runBody(p.seconds, tag), "nats-kill-"+tag, 90*time.Second)
			subs[i].Tag = tag
			if subs[i].ID != "" {
				followers.Go(func() { live[i] = follow(r.Nginx, subs[i].ID, 3*time.Minute) })
			}
		}
		followers.Wait()
	})
	for _, k := range kills {
		time.Sleep(k.wait)
		if k.target != "" {
			if n := r.leader(k.target); n != 0 {
				k.node = n
			}
			t.Logf("killing nats node %d, the leader of %s", k.node, k.target)
		}
		r.do("kill-nats", k.node)
		time.Sleep(k.down)
		r.do("start-nats", k.node)
	}
	wg.Wait()

	var problems, made []string
	for _, s := range subs {
		if s.ID == "" {
			problems = append(problems, fmt.Sprintf("%s was never accepted: %v", s.Tag, s.Attempts))
			continue
		}
		if len(s.Attempts) > 1 {
			t.Logf("%s (run %s) took %d attempts: %v", s.Tag, s.ID, len(s.Attempts), s.Attempts)
		}
		made = append(made, s.ID)
	}
	problems = append(problems, r.verifyAll(t, made, want{Status: runs.Succeeded}, settleWithin)...)
	for i, s := range subs {
		if s.ID == "" {
			continue
		}
		for _, p := range live[i].Problems {
			problems = append(problems, fmt.Sprintf("run %s, followed live: %s", s.ID, p))
		}
		if again := follow(r.Nginx, s.ID, time.Minute); !sameEvents(live[i], again) {
			problems = append(problems, fmt.Sprintf("run %s: the live stream (%d events) and the stored log (%d) differ", s.ID, len(live[i].Events), len(again.Events)))
		}
	}
	report(t, append(problems, checkListing(r.Nginx, made)...))
}

func sameEvents(a, b followed) bool {
	if len(a.Events) != len(b.Events) {
		return false
	}
	for i := range a.Events {
		if a.Events[i].Data != b.Events[i].Data {
			return false
		}
	}
	return true
}

// TestReplicaKilledMidRun kills -9 the gateway whose agent is running a
// tool: another replica marks the run failed, interrupted, once the dead
// one's REPLICA_TTL is over, and every process of that run dies with its
// gateway or, at the latest, when that gateway starts again on its data.
func TestReplicaKilledMidRun(t *testing.T) {
	const ttl = 4 * time.Second
	r := newRig(t, startMock(t), rigOptions{Env: map[string]string{"AGENTGATE_REPLICA_TTL": ttl.String()}})
	r.mustStart()
	s, err := post(r.Nginx, runBody(120, "tool-replica-kill"), "")
	if err != nil || s.Status != http.StatusCreated {
		t.Fatalf("POST = %d %s %v", s.Status, s.Raw, err)
	}
	id := s.Run.ID
	r.track(id)
	posted := time.Now()
	if !waitEvent(r.Nginx, id, runs.EventToolCallStarted, 90*time.Second) {
		t.Fatal("the run's tool never started")
	}
	t.Logf("tool_call.started seen through nginx %s after the POST", time.Since(posted).Round(time.Millisecond))
	var perl bool
	waitFor(30*time.Second, func() bool {
		pids, _ := proctree.New().Find(id)
		perl = bytes.Contains([]byte(describe(pids)), []byte("perl"))
		return perl
	})
	if !perl {
		t.Fatal("no perl process of the run")
	}
	n := r.owner(id)
	if n == 0 {
		t.Fatal("no gateway's process tree holds the run")
	}
	pids, _ := proctree.New().Find(id)
	t.Logf("run %s executes on gateway %d: %s", id, n, describe(pids))
	killed := time.Now()
	r.do("kill-gateway", n)
	defer func() { t.Logf("the case took %s after the kill", time.Since(killed).Round(time.Second)) }()

	var problems []string
	alive := func() []int {
		var out []int
		for _, pid := range pids {
			if b, err := readStat(pid); err == nil && !bytes.Contains(b, []byte(") Z ")) {
				out = append(out, pid)
			}
		}
		return out
	}
	// They die with the replica, or at the latest when it starts again.
	if !waitFor(10*time.Second, func() bool { return len(alive()) == 0 }) {
		t.Logf("10s after kill -9 of gateway %d its run's processes live on, until it starts again: %s", n, describe(alive()))
	}
	rec, err := waitTerminal(t, r.Nginx, id, 90*time.Second)
	took := time.Since(killed)
	t.Logf("run %s ended %s %+v %s after the kill", id, rec.Status, rec.Error, took.Round(100*time.Millisecond))
	if err != nil {
		problems = append(problems, fmt.Sprintf("no other replica accounted for the dead replica's run: %v", err))
	} else if took > 3*ttl+10*time.Second {
		problems = append(problems, fmt.Sprintf("the dead replica's run was accounted for %s after the kill; REPLICA_TTL is %s", took, ttl))
	}

	// The dead gateway comes back on its data; nothing of its run is left,
	// and the run stays as it was accounted for.
	r.do("start-gateway", n)
	if !waitFor(15*time.Second, func() bool { return len(alive()) == 0 }) {
		problems = append(problems, fmt.Sprintf("kill -9 of gateway %d left its run's processes alive, even after it started again: %s", n, describe(alive())))
		proctree.New().Kill(t.Context(), id)
	}
	problems = append(problems, r.verify(t, id, want{Status: runs.Failed, Class: runs.Interrupted}, settleWithin)...)
	report(t, append(problems, checkListing(r.Nginx, []string{id})...))
}

// TestRollingRestartThroughNginx restarts the 3 gateways one after the
// other with SIGTERM, as a rolling deploy does, while a client keeps
// POSTing runs through nginx and follows long runs' streams: no POST
// fails, every run finishes within its SHUTDOWN_GRACE, and the streams
// open on the first gateway to drain end at once, cleanly, and resume
// through nginx by Last-Event-ID with nothing lost or repeated.
func TestRollingRestartThroughNginx(t *testing.T) {
	// What this checks is that a rolling restart loses nothing; the
	// grace and the queue are sized as an operator would for it: the
	// grace longer than a run (on a loaded 2-core machine a short run
	// took over 30 s, and a drain cut it off), the queue larger than the
	// POSTs of a restart (one every 700 ms, while three restarts took
	// 110 s at load 30 and the queue filled at its default 64). Refusing
	// a full queue has its test, TestFullReplicaBesideIdleOnes.
	r := newRig(t, startMock(t), rigOptions{Env: map[string]string{
		"AGENTGATE_SHUTDOWN_GRACE": "3m",
		"AGENTGATE_QUEUE_SIZE":     "1000",
	}})
	r.mustStart()

	// Long runs, running on any replica while gateway 1 drains. Each is
	// followed through nginx, and directly on gateway 1 and then, once
	// that stream ends, through nginx.
	var streamed []string
	for i := range 3 {
		s, err := post(r.Nginx, runBody(15, fmt.Sprintf("tool-rolling-stream-%d", i)), "")
		if err != nil || s.Status != http.StatusCreated {
			t.Fatalf("POST = %d %s %v", s.Status, s.Raw, err)
		}
		streamed = append(streamed, s.Run.ID)
		r.track(s.Run.ID)
	}
	var wg sync.WaitGroup
	viaNginx := make([]followed, len(streamed))
	onDrained := make([]followed, len(streamed))
	for i, id := range streamed {
		wg.Go(func() { viaNginx[i] = follow(r.Nginx, id, 3*time.Minute) })
		wg.Go(func() { onDrained[i] = followVia(r.Gateways[0], r.Nginx, id, 3*time.Minute) })
	}
	for _, id := range streamed {
		if !waitEvent(r.Nginx, id, runs.EventToolCallStarted, 90*time.Second) {
			t.Fatalf("run %s: its tool never started", id)
		}
	}

	// The steady client: one POST every 700 ms, each tried once, with
	// at most steadyWindow of its runs unfinished at a time, as a client
	// with a pool of workers has. Unbounded, it posted faster than a
	// loaded machine ran real CLIs: a restart that took two minutes left
	// a hundred runs queued, and what the test then measured was the
	// machine's throughput, not what the restart lost.
	stop := make(chan struct{})
	var mu sync.Mutex
	var steady []submitted
	var steadyErrs []string
	slots := make(chan struct{}, steadyWindow)
	wg.Go(func() {
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			case <-time.After(700 * time.Millisecond):
			}
			select {
			case <-stop:
				return
			case slots <- struct{}{}:
			}
			tag := fmt.Sprintf("rolling-steady-%d", k)
			s, err := post(r.Nginx, runBody(0, tag), "rolling-"+tag)
			mu.Lock()
			if err != nil {
				steadyErrs = append(steadyErrs, fmt.Sprintf("%s: %v", tag, err))
			} else {
				steady = append(steady, s)
			}
			mu.Unlock()
			if err != nil || s.Run.ID == "" {
				<-slots
				continue
			}
			wg.Go(func() {
				defer func() { <-slots }()
				_, _ = waitTerminal(t, r.Nginx, s.Run.ID, settleWithin) // verifyAll reports a run that never ends
			})
		}
	})
	var drained time.Time
	for n := 1; n <= 3; n++ {
		if n == 1 {
			drained = time.Now()
		}
		r.do("term-gateway", n)
		r.do("start-gateway", n)
	}
	close(stop)
	wg.Wait()

	problems := slices.Clone(steadyErrs)
	// The drain begins when gateway 1 takes the SIGTERM, not when the rig's
	// script that sends it starts: on a loaded machine the script alone
	// took seconds.
	if at, ok := r.logged("gateway1", "shutting down", drained.Add(-time.Second)); ok {
		drained = at
	} else {
		problems = append(problems, "gateway 1 logged no \"shutting down\" after its SIGTERM")
	}
	made := slices.Clone(streamed)
	codes := map[string]int{}
	for _, s := range steady {
		codes[fmt.Sprintf("%d %s", s.Status, s.Code)]++
		if s.Status == http.StatusCreated || s.Status == http.StatusOK {
			made = append(made, s.Run.ID)
		} else {
			problems = append(problems, fmt.Sprintf("POST through nginx during the rolling restart = %d %s", s.Status, s.Raw))
		}
	}
	t.Logf("%d POSTs during the rolling restart: %v", len(steady)+len(steadyErrs), codes)
	for i, id := range streamed {
		for _, f := range []followed{viaNginx[i], onDrained[i]} {
			for _, p := range f.Problems {
				problems = append(problems, fmt.Sprintf("run %s, followed live: %s", id, p))
			}
		}
		f := onDrained[i]
		t.Logf("stream of %s opened on gateway 1: %d connections: %s", id, len(f.Segments), f.endings())
		if len(f.Segments) == 0 {
			continue
		}
		first := f.Segments[0]
		var completed bool
		for _, e := range first.Events {
			completed = completed || e.Type == string(runs.EventRunCompleted)
		}
		switch {
		case completed:
			problems = append(problems, fmt.Sprintf("run %s: its stream on gateway 1 stayed open %s after the SIGTERM, to the run's end, instead of ending with a reconnect hint",
				id, first.End.Sub(drained).Round(100*time.Millisecond)))
		case first.Err != nil:
			problems = append(problems, fmt.Sprintf("run %s: its stream on gateway 1 was cut by the drain (%v), not ended", id, first.Err))
		case first.End.Sub(drained) > 5*time.Second:
			problems = append(problems, fmt.Sprintf("run %s: its stream on gateway 1 ended %s after the SIGTERM", id, first.End.Sub(drained).Round(100*time.Millisecond)))
		}
	}
	problems = append(problems, r.verifyAll(t, made, want{Status: runs.Succeeded}, settleWithin)...)
	report(t, append(problems, checkListing(r.Nginx, made)...))
}

// TestIdempotencyKeyRetry retries a submission with the same
// Idempotency-Key, one attempt after another through nginx (so through
// every replica) and all at once to every replica: each gets the one run
// the first made; the same key with another body is a 422
// idempotency_mismatch, and the listing has one run per key.
func TestIdempotencyKeyRetry(t *testing.T) {
	r := newRig(t, startMock(t), rigOptions{})
	r.mustStart()
	var problems []string
	ids := map[string]bool{}

	body := runBody(1, "tool-idem-sequential")
	var first string
	for i := range 4 {
		s, err := post(r.Nginx, body, "idem-sequential")
		if err != nil || (s.Status != http.StatusCreated && s.Status != http.StatusOK) {
			problems = append(problems, fmt.Sprintf("attempt %d = %d %s %v", i+1, s.Status, s.Raw, err))
			continue
		}
		ids[s.Run.ID] = true
		if first == "" {
			first = s.Run.ID
		} else if s.Run.ID != first {
			problems = append(problems, fmt.Sprintf("attempt %d with the same key and body made run %s; the first made %s", i+1, s.Run.ID, first))
		}
	}
	s, err := post(r.Nginx, runBody(1, "tool-idem-other-body"), "idem-sequential")
	if err != nil || s.Status != http.StatusUnprocessableEntity || s.Code != "idempotency_mismatch" {
		problems = append(problems, fmt.Sprintf("the same key with another body = %d %s %v, want 422 idempotency_mismatch", s.Status, s.Raw, err))
		if s.Status == http.StatusCreated || s.Status == http.StatusOK {
			ids[s.Run.ID] = true
		}
	}

	// All at once, two attempts on every replica.
	body = runBody(1, "tool-idem-concurrent")
	var mu sync.Mutex
	var wg sync.WaitGroup
	concurrent := map[string]int{}
	for i := range 6 {
		wg.Go(func() {
			s, err := post(r.Gateways[i%3], body, "idem-concurrent")
			mu.Lock()
			defer mu.Unlock()
			if err != nil || (s.Status != http.StatusCreated && s.Status != http.StatusOK) {
				problems = append(problems, fmt.Sprintf("concurrent attempt %d = %d %s %v", i+1, s.Status, s.Raw, err))
				return
			}
			concurrent[s.Run.ID]++
			ids[s.Run.ID] = true
		})
	}
	wg.Wait()
	if len(concurrent) != 1 {
		problems = append(problems, fmt.Sprintf("6 concurrent attempts with one key made %d runs: %v", len(concurrent), concurrent))
	}

	var made []string
	for id := range ids {
		made = append(made, id)
	}
	problems = append(problems, r.verifyAll(t, made, want{Status: runs.Succeeded}, settleWithin)...)
	if len(made) != 2 {
		problems = append(problems, fmt.Sprintf("2 keys made %d runs", len(made)))
	}
	report(t, append(problems, checkListing(r.Nginx, made)...))
}

// TestFullReplicaBesideIdleOnes gives every replica one slot and the
// cluster a shared queue of 2, and sends every run to gateway 1: the runs
// go to whichever replica has a free slot, the next two wait in the
// shared queue with their positions, and only the one after them is
// refused with 429 queue_full, by any replica.
func TestFullReplicaBesideIdleOnes(t *testing.T) {
	r := newRig(t, startMock(t), rigOptions{Env: map[string]string{
		"AGENTGATE_MAX_CONCURRENT_RUNS": "1",
		"AGENTGATE_QUEUE_SIZE":          "2",
	}})
	r.mustStart()
	var problems []string
	var made []string
	gw1 := r.Gateways[0]

	// Three long runs, all POSTed to gateway 1: one per replica.
	var long []string
	for i := range 3 {
		s, err := post(gw1, runBody(20, fmt.Sprintf("tool-full-long-%d", i)), "")
		if err != nil || s.Status != http.StatusCreated {
			problems = append(problems, fmt.Sprintf("long run %d: POST to gateway 1 = %d %s %v", i, s.Status, s.Raw, err))
			continue
		}
		long = append(long, s.Run.ID)
		made = append(made, s.Run.ID)
		r.track(s.Run.ID)
	}
	// They must run at the same time, one on each replica: a run that
	// waits behind another on gateway 1 while a replica idles is the
	// fault.
	owners := map[string]int{}
	most := map[string]int{}
	waitFor(90*time.Second, func() bool {
		now := map[string]int{}
		for _, id := range long {
			if n := r.owner(id); n != 0 && perlRuns(id) {
				now[id] = n
			}
		}
		if len(now) > len(most) {
			most = now
		}
		owners = now
		return len(now) == len(long)
	})
	if len(most) < len(long) {
		var states []string
		for _, id := range long {
			rec, _, _ := getRun(gw1, id)
			states = append(states, fmt.Sprintf("%s %s (queue_position %d)", id, rec.Status, rec.QueuePosition))
		}
		problems = append(problems, fmt.Sprintf("at most %d of 3 long runs ran at once, by gateway %v, with a slot free on each other replica; the runs: %v",
			len(most), most, states))
	}
	byGateway := map[int]int{}
	for _, n := range most {
		byGateway[n]++
		if byGateway[n] > 1 {
			problems = append(problems, fmt.Sprintf("gateway %d runs %d runs with one slot", n, byGateway[n]))
		}
	}
	owners = most
	t.Logf("long runs by gateway: %v", owners)

	// Two more wait in the shared queue, positions 1 and 2, whichever
	// replica is asked.
	var queued []string
	for i := range 2 {
		s, err := post(gw1, runBody(1, fmt.Sprintf("tool-full-queued-%d", i)), "")
		if err != nil || s.Status != http.StatusCreated {
			problems = append(problems, fmt.Sprintf("queued run %d: POST = %d %s %v, want 201 into the shared queue", i, s.Status, s.Raw, err))
			continue
		}
		queued = append(queued, s.Run.ID)
		made = append(made, s.Run.ID)
	}
	for i, id := range queued {
		rec, _, err := getRun(r.Gateways[(i+1)%3], id)
		if err != nil || rec.Status != runs.Queued || rec.QueuePosition != i+1 {
			problems = append(problems, fmt.Sprintf("queued run %d: %s queue_position %d (%v), want queued at %d", i, rec.Status, rec.QueuePosition, err, i+1))
		}
		if pos, ok := queuedPosition(r.Nginx, id); !ok || pos != i+1 {
			problems = append(problems, fmt.Sprintf("queued run %d: run.queued position %d (found %v), want %d", i, pos, ok, i+1))
		}
	}
	// The shared queue is full: any replica refuses the next.
	s, err := post(r.Gateways[1], runBody(1, "tool-full-refused"), "")
	if err != nil || s.Status != http.StatusTooManyRequests || s.Code != "queue_full" {
		problems = append(problems, fmt.Sprintf("a POST to gateway 2 with the shared queue full = %d %s %v, want 429 queue_full", s.Status, s.Raw, err))
		if s.Status == http.StatusCreated {
			made = append(made, s.Run.ID)
		}
	}
	problems = append(problems, r.verifyAll(t, made, want{Status: runs.Succeeded}, settleWithin)...)
	report(t, append(problems, checkListing(r.Nginx, made)...))
}

// perlRuns reports whether the run's tool process is up.
func perlRuns(id string) bool {
	pids, _ := proctree.New().Find(id)
	return bytes.Contains([]byte(describe(pids)), []byte("perl"))
}

// queuedPosition reads the position in the run's run.queued event.
func queuedPosition(base, id string) (int, bool) {
	seg := readSSEFirst(base, id)
	for _, e := range seg.Events {
		if e.Type == string(runs.EventRunQueued) {
			var env struct {
				Data struct {
					Position *int `json:"position"`
				}
			}
			if json.Unmarshal([]byte(e.Data), &env) != nil || env.Data.Position == nil {
				return 0, false
			}
			return *env.Data.Position, true
		}
	}
	return 0, false
}
