package schedules

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/autorun/autoruntest"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/seal"
)

// cluster is replicas of the Service over one store and one gateway's
// runs, as the gateway's replicas share them.
type cluster struct {
	mem  *autoruntest.Mem
	runs *autoruntest.Runs
	box  *seal.Box
}

func newCluster(t *testing.T) *cluster {
	box, err := seal.New([]byte(strings.Repeat("k", 32)), "schedule run")
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{mem: autoruntest.NewMem(), runs: autoruntest.NewRuns(), box: box}
}

// errFlaky is a refusal of the gateway's own that may pass, as the API
// classifies a 500.
var errFlaky = errors.New("the store did not answer")

func explain(err error) autorun.ErrorInfo {
	if errors.Is(err, errFlaky) {
		return autorun.ErrorInfo{Code: "internal", Message: "internal error"}
	}
	return autorun.ErrorInfo{Code: "refused", Message: err.Error()}
}

func (c *cluster) replica(cfg Config) *Service {
	starter := autorun.NewStarter(c.runs, c.mem, explain, nil)
	check := func(_ context.Context, spec runs.Spec) error {
		if spec.Agent != "fake" {
			return runs.Invalid("agent", "unknown agent")
		}
		return nil
	}
	return New(cfg, Deps{Records: c.mem, Claims: c.mem, Starter: starter, Check: check, Box: c.box})
}

var tenantCtx = runs.WithActor(context.Background(), runs.Actor{Tenant: "acme", KeyID: "k1"})

func every(d string) Request {
	return Request{Name: "every " + d, Every: d, Run: runs.Spec{Agent: "fake", Prompt: "tick"}}
}

// runAll starts the replicas' loops; stop ends one.
func runAll(ctx context.Context, replicas []*Service) (stops []context.CancelFunc, wait func()) {
	var wg sync.WaitGroup
	for _, r := range replicas {
		rctx, stop := context.WithCancel(ctx)
		stops = append(stops, stop)
		wg.Go(func() { r.Run(rctx) })
	}
	return stops, wg.Wait
}

// fireTimes are the fire times of the runs made, from their idempotency
// keys, which name the fire.
func fireTimes(t *testing.T, rs *autoruntest.Runs) []string {
	t.Helper()
	var keys []string
	for _, s := range rs.Submitted() {
		keys = append(keys, s.IdempotencyKey)
	}
	return keys
}

func TestEveryTenSecondsOnThreeReplicasWithOneStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		replicas := []*Service{c.replica(Config{}), c.replica(Config{}), c.replica(Config{})}
		v, err := replicas[0].Create(tenantCtx, every("10s"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stops, wait := runAll(ctx, replicas)
		for range 65 {
			c.runs.FinishAll() // each run ends within its second: none is busy
			time.Sleep(time.Second)
			synctest.Wait()
			if time.Since(v.CreatedAt) > 30*time.Second {
				stops[1]() // a replica dies in the middle
			}
		}
		cancel()
		wait()
		keys := fireTimes(t, c.runs)
		if len(keys) < 6 || len(keys) > 7 {
			t.Fatalf("%d runs in 65 s of every 10s: %v", len(keys), keys)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(keys)))) != len(keys) {
			t.Fatalf("two runs for one fire time: %v", keys)
		}
		fires, err := replicas[0].Fires(tenantCtx, v.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fires {
			if f.Outcome != autorun.Started || f.RunID == "" || f.FireTime.Sub(v.CreatedAt.Truncate(time.Second))%(10*time.Second) != 0 {
				t.Errorf("fire %+v: want started on the 10 s grid from %s", f, v.CreatedAt)
			}
		}
		if len(fires) != len(keys) {
			t.Errorf("%d fires listed for %d runs", len(fires), len(keys))
		}
	})
}

func TestSkipWhileBusyRecordsEachSkippedFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		replicas := []*Service{c.replica(Config{}), c.replica(Config{})}
		v, err := replicas[0].Create(tenantCtx, every("10s"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		_, wait := runAll(ctx, replicas)
		time.Sleep(45 * time.Second) // the first run never ends
		synctest.Wait()
		cancel()
		wait()
		if n := len(c.runs.Submitted()); n != 1 {
			t.Fatalf("%d runs while the first ran, want 1", n)
		}
		fires, _ := replicas[0].Fires(tenantCtx, v.ID, 100)
		var skipped int
		for _, f := range fires {
			if f.Outcome == autorun.SkippedBusy {
				skipped++
				if f.BusyRunID == "" || f.RunID != "" {
					t.Errorf("skipped fire %+v: want the busy run's id and no run", f)
				}
			}
		}
		if skipped != 3 || len(fires) != 4 {
			t.Fatalf("fires %+v: want 1 started and 3 skipped_busy", fires)
		}
	})
}

func TestQueueStartsOneFireWhenThePreviousEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		r := c.replica(Config{})
		req := every("10s")
		req.WhenBusy = autorun.Queue
		v, err := r.Create(tenantCtx, req)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		_, wait := runAll(ctx, []*Service{r})
		time.Sleep(35 * time.Second) // fires at 10, 20, 30: the 2nd waits, the 3rd is skipped
		synctest.Wait()
		if n := len(c.runs.Submitted()); n != 1 {
			t.Fatalf("%d runs while the first ran", n)
		}
		c.runs.FinishAll()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		cancel()
		wait()
		subs := c.runs.Submitted()
		if len(subs) != 2 || !strings.HasSuffix(subs[1].IdempotencyKey, "."+itoa(v.CreatedAt.Truncate(time.Second).Add(20*time.Second).Unix())) {
			t.Fatalf("runs %+v: want the waiting fire of +20 s started second", subs)
		}
		fires, _ := r.Fires(tenantCtx, v.ID, 100)
		outcomes := map[autorun.Outcome]int{}
		for _, f := range fires {
			outcomes[f.Outcome]++
		}
		if outcomes[autorun.Started] != 2 || outcomes[autorun.SkippedBusy] != 1 || outcomes[autorun.Queued] != 0 {
			t.Fatalf("fires %+v: want 2 started, 1 skipped, none still queued", fires)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestCancelPreviousCancelsAndStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		r := c.replica(Config{})
		req := every("10s")
		req.WhenBusy = autorun.CancelPrevious
		if _, err := r.Create(tenantCtx, req); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		_, wait := runAll(ctx, []*Service{r})
		time.Sleep(25 * time.Second)
		synctest.Wait()
		cancel()
		wait()
		subs := c.runs.Submitted()
		if len(subs) != 2 || len(c.runs.Canceled) != 1 {
			t.Fatalf("%d runs, %d cancelled: want 2 and the first cancelled", len(subs), len(c.runs.Canceled))
		}
	})
}

func TestMissedWhileNoReplicaRan(t *testing.T) {
	for _, catchUp := range []CatchUp{CatchUpNone, CatchUpOnce} {
		t.Run(string(catchUp), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t)
				r := c.replica(Config{})
				req := every("10m")
				req.CatchUp = catchUp
				v, err := r.Create(tenantCtx, req)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(55 * time.Minute) // no replica runs: the last fire is 5 min late
				r.Tick(context.Background())
				fires, _ := r.Fires(tenantCtx, v.ID, 100)
				if len(fires) != 5 {
					t.Fatalf("%d fires after 5 missed minutes: %+v", len(fires), fires)
				}
				for i, f := range fires {
					wantStarted := catchUp == CatchUpOnce && i == 0 // newest first
					if (f.Outcome == autorun.Started) != wantStarted || (!wantStarted && (f.Outcome != autorun.Missed || f.Error == nil)) {
						t.Errorf("fire %d %+v (catch_up %s)", i, f, catchUp)
					}
				}
				if want := map[CatchUp]int{CatchUpNone: 0, CatchUpOnce: 1}[catchUp]; len(c.runs.Submitted()) != want {
					t.Errorf("%d runs, want %d", len(c.runs.Submitted()), want)
				}
			})
		})
	}
}

func TestAFireClaimedByADeadReplicaIsTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		r := c.replica(Config{})
		v, err := r.Create(tenantCtx, every("1m"))
		if err != nil {
			t.Fatal(err)
		}
		first := v.NextFireAt
		time.Sleep(time.Until(*first) + time.Second)
		// A replica claimed the fire and died before it started its run.
		key := "fire." + v.ID + "." + itoa(first.Unix())
		if _, err := c.mem.Create(context.Background(), key, []byte(`{"at":"`+time.Now().Format(time.RFC3339Nano)+`"}`)); err != nil {
			t.Fatal(err)
		}
		r.Tick(context.Background())
		if n := len(c.runs.Submitted()); n != 0 {
			t.Fatalf("started a fire another replica holds within its lease (%d runs)", n)
		}
		time.Sleep(autorun.PendingLease)
		r.Tick(context.Background())
		r.Tick(context.Background())
		if subs := c.runs.Submitted(); len(subs) != 1 || subs[0].IdempotencyKey != key {
			t.Fatalf("runs %+v: want the fire taken over once, keyed %s", subs, key)
		}
	})
}

func TestRefusedFireKeepsTheError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		r := c.replica(Config{})
		v, err := r.Create(tenantCtx, every("10s"))
		if err != nil {
			t.Fatal(err)
		}
		c.runs.Refuse = errors.New("the tenant is at its daily budget")
		time.Sleep(11 * time.Second)
		r.Tick(context.Background())
		fires, _ := r.Fires(tenantCtx, v.ID, 10)
		if len(fires) != 1 || fires[0].Outcome != autorun.Refused || fires[0].Error == nil || !strings.Contains(fires[0].Error.Message, "daily budget") {
			t.Fatalf("fires %+v: want one refused with the submission's error", fires)
		}
	})
}

func TestPausedFiresNothingAndResumesWithoutMissing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		r := c.replica(Config{})
		req := every("10s")
		req.Paused = true
		v, err := r.Create(tenantCtx, req)
		if err != nil {
			t.Fatal(err)
		}
		if v.NextFireAt != nil {
			t.Errorf("a paused schedule shows next_fire_at %s", v.NextFireAt)
		}
		time.Sleep(5 * time.Minute)
		r.Tick(context.Background())
		resume := false
		v, err = r.Update(tenantCtx, v.ID, Patch{Paused: &resume})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(11 * time.Second)
		r.Tick(context.Background())
		fires, _ := r.Fires(tenantCtx, v.ID, 100)
		if len(fires) != 1 || fires[0].Outcome != autorun.Started {
			t.Fatalf("fires %+v: want the one fire after resuming, no missed ones", fires)
		}
	})
}

func TestFireNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		r := c.replica(Config{})
		req := every("1h")
		req.Paused = true
		v, err := r.Create(tenantCtx, req)
		if err != nil {
			t.Fatal(err)
		}
		f, err := r.FireNow(tenantCtx, v.ID, "")
		if err != nil || f.Outcome != autorun.Started || !f.Manual || f.RunID == "" {
			t.Fatalf("FireNow = %+v, %v", f, err)
		}
		f, err = r.FireNow(tenantCtx, v.ID, "")
		if err != nil || f.Outcome != autorun.SkippedBusy || f.BusyRunID == "" {
			t.Fatalf("FireNow while the first runs = %+v, %v: want skipped_busy", f, err)
		}
		c.runs.FinishAll()
		first, err := r.FireNow(tenantCtx, v.ID, "retry-1")
		again, err2 := r.FireNow(tenantCtx, v.ID, "retry-1")
		if err != nil || err2 != nil || first.Outcome != autorun.Started || again.RunID != first.RunID || len(c.runs.Submitted()) != 2 {
			t.Fatalf("a fire retried with its key = %+v then %+v (%v, %v); %d runs", first, again, err, err2, len(c.runs.Submitted()))
		}
		other := runs.WithActor(context.Background(), runs.Actor{Tenant: "other"})
		if _, err := r.FireNow(other, v.ID, ""); !errors.Is(err, runs.ErrNotFound) {
			t.Fatalf("another tenant fired the schedule: %v", err)
		}
	})
}

func TestCreateRefuses(t *testing.T) {
	c := newCluster(t)
	r := c.replica(Config{MaxPerTenant: 2})
	for _, tc := range []struct {
		edit  func(*Request)
		field string
	}{
		{func(r *Request) { r.Name = "" }, "name"},
		{func(r *Request) { r.Name = strings.Repeat("n", 101) }, "name"},
		{func(r *Request) { r.Every = "5s" }, "every"},
		{func(r *Request) { r.Cron = "* * * * *" }, "every"},
		{func(r *Request) { r.WhenBusy = "later" }, "when_busy"},
		{func(r *Request) { r.CatchUp = "all" }, "catch_up"},
		{func(r *Request) { r.Run.Agent = "nobody" }, "run.agent"},
		{func(r *Request) { r.Run.Attachments = []runs.Attachment{{MediaType: "image/png", Data: []byte("x")}} }, "run.attachments[0]"},
	} {
		req := every("1m")
		tc.edit(&req)
		_, err := r.Create(tenantCtx, req)
		var fe *runs.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("Create(%+v) = %v, want an error on %s", req, err, tc.field)
		}
	}
	for range 2 {
		if _, err := r.Create(tenantCtx, every("1m")); err != nil {
			t.Fatal(err)
		}
	}
	var le *autorun.LimitError
	if _, err := r.Create(tenantCtx, every("1m")); !errors.As(err, &le) || le.Code != "too_many_schedules" {
		t.Fatalf("a third schedule over a bound of 2: %v", err)
	}
	if list, err := r.List(tenantCtx); err != nil || len(list) != 2 {
		t.Fatalf("List = %d, %v", len(list), err)
	}
	other := runs.WithActor(context.Background(), runs.Actor{Tenant: "other"})
	if list, err := r.List(other); err != nil || len(list) != 0 {
		t.Fatalf("another tenant lists %d schedules, %v", len(list), err)
	}
}

func TestSecretsOfTheRunAreSealedAndHidden(t *testing.T) {
	c := newCluster(t)
	r := c.replica(Config{})
	req := every("1m")
	req.Run.MCPServers = map[string]runs.MCPServer{"db": {Command: "db-mcp", Env: map[string]string{"DB_PASSWORD": "hunter2-secret"}}}
	req.Run.WebhookURL = "https://hooks.example.com/done?token=hook-secret"
	v, err := r.Create(tenantCtx, req)
	if err != nil {
		t.Fatal(err)
	}
	if v.Run.WebhookURL != "https://hooks.example.com/done" {
		t.Errorf("the view shows webhook_url %q: want it without its query", v.Run.WebhookURL)
	}
	if m := v.Run.MCPServers["db"]; m.Env != nil || !slices.Equal(m.EnvNames, []string{"DB_PASSWORD"}) {
		t.Errorf("the view shows %+v: want the env's names only", m)
	}
	keys, _ := c.mem.Keys(context.Background(), "schedule")
	data, _, _ := c.mem.Get(context.Background(), keys[0])
	if strings.Contains(string(data), "hunter2") || strings.Contains(string(data), "hook-secret") {
		t.Fatal("the store holds the MCP secret in the clear")
	}
	f, err := r.FireNow(tenantCtx, v.ID, "")
	if err != nil || f.Outcome != autorun.Started {
		t.Fatal(f, err)
	}
	if got := c.runs.Submitted()[0]; got.MCPServers["db"].Env["DB_PASSWORD"] != "hunter2-secret" || got.WebhookURL != req.Run.WebhookURL {
		t.Fatalf("the fire's run got env %v and webhook_url %q", got.MCPServers["db"].Env, got.WebhookURL)
	}
}

// Between its fire times a schedule costs a replica one read a tick, of
// its record: not of its state.
func TestAQuietScheduleIsNotReadAgainUntilItsNextFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		r := c.replica(Config{})
		v, err := r.Create(tenantCtx, every("1h"))
		if err != nil {
			t.Fatal(err)
		}
		for range 120 {
			r.Tick(context.Background())
			time.Sleep(time.Second)
		}
		if n := c.mem.Reads("state"); n > 3 { // the view of Create, and the first tick
			t.Fatalf("%d reads of the state in 120 quiet ticks", n)
		}
		time.Sleep(time.Until(*v.NextFireAt) + time.Second)
		r.Tick(context.Background())
		if n := len(c.runs.Submitted()); n != 1 {
			t.Fatalf("%d runs at the hour", n)
		}
	})
}

// A start that waits (queue) is started by the replica that queued it as
// soon as the run it waits for ends, not at the next fire time.
func TestAWaitingStartIsNotLeftUntilTheNextFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		r := c.replica(Config{})
		req := every("1h")
		req.WhenBusy = autorun.Queue
		v, err := r.Create(tenantCtx, req)
		if err != nil {
			t.Fatal(err)
		}
		if f, err := r.FireNow(tenantCtx, v.ID, ""); err != nil || f.Outcome != autorun.Started {
			t.Fatal(f, err)
		}
		time.Sleep(time.Until(*v.NextFireAt) + time.Second)
		r.Tick(context.Background()) // the hour's fire waits for the manual run
		c.runs.FinishAll()
		for range 3 {
			time.Sleep(time.Second)
			r.Tick(context.Background())
		}
		if n := len(c.runs.Submitted()); n != 2 {
			t.Fatalf("%d runs: the waiting fire did not start once the first run ended", n)
		}
	})
}

// A fire taken over late from a replica that made its run and died
// before recording it is started, and finds that run: it is not missed,
// and no second run is made.
func TestALateTakeoverFindsTheDeadReplicasRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		r := c.replica(Config{})
		v, err := r.Create(tenantCtx, every("10m"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(*v.NextFireAt) + 40*time.Second)
		key := "fire." + v.ID + "." + itoa(v.NextFireAt.Unix())
		// The dead replica: it claimed the fire, submitted its run, and
		// died before it recorded either.
		if _, err := c.mem.Create(context.Background(), key, []byte(`{"at":"`+time.Now().Format(time.RFC3339Nano)+`","nonce":"dead"}`)); err != nil {
			t.Fatal(err)
		}
		orphan, _ := c.runs.Submit(runs.WithActor(context.Background(), runs.Actor{Tenant: "acme"}), runs.Spec{Agent: "fake", Prompt: "tick", IdempotencyKey: key})
		time.Sleep(autorun.PendingLease + time.Second) // 71 s late: past MissAfter
		r.Tick(context.Background())
		fires, _ := r.Fires(tenantCtx, v.ID, 10)
		if len(fires) != 1 || fires[0].Outcome != autorun.Started || fires[0].RunID != orphan.ID || len(c.runs.Submitted()) != 1 {
			t.Fatalf("fires %+v, %d runs: want the dead replica's run %s recorded", fires, len(c.runs.Submitted()), orphan.ID)
		}
	})
}

// A waiting start whose submission fails for a passing reason stays
// waiting, and starts once the gateway takes runs again.
func TestAWaitingStartSurvivesAFailedSubmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		r := c.replica(Config{})
		req := every("1h")
		req.WhenBusy = autorun.Queue
		v, err := r.Create(tenantCtx, req)
		if err != nil {
			t.Fatal(err)
		}
		if f, err := r.FireNow(tenantCtx, v.ID, ""); err != nil || f.Outcome != autorun.Started {
			t.Fatal(f, err)
		}
		if f, err := r.FireNow(tenantCtx, v.ID, ""); err != nil || f.Outcome != autorun.Queued {
			t.Fatal(f, err)
		}
		c.runs.FinishAll()
		c.runs.Refuse = errFlaky
		r.Tick(context.Background())
		if n := len(c.runs.Submitted()); n != 1 {
			t.Fatalf("%d runs while the gateway refused", n)
		}
		c.runs.Refuse = nil
		time.Sleep(time.Second)
		r.Tick(context.Background())
		fires, _ := r.Fires(tenantCtx, v.ID, 10)
		if len(c.runs.Submitted()) != 2 || fires[0].Outcome != autorun.Started {
			t.Fatalf("fires %+v, %d runs: want the waiting start started once the refusal passed", fires, len(c.runs.Submitted()))
		}
	})
}

// A start that was under way when its schedule was deleted leaves no
// state behind it.
func TestAStartOfADeletedScheduleLeavesNoState(t *testing.T) {
	c := newCluster(t)
	r := c.replica(Config{})
	v, err := r.Create(tenantCtx, every("1h"))
	if err != nil {
		t.Fatal(err)
	}
	sc, _, err := r.load(tenantCtx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(tenantCtx, v.ID); err != nil {
		t.Fatal(err)
	}
	// The start read the schedule before the delete and goes on after it.
	if _, err := r.start(context.Background(), sc, autorun.Record{Key: "fire." + sc.ID + ".1", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if keys, _ := c.mem.Keys(context.Background(), "state"); len(keys) != 0 {
		t.Fatalf("state left behind: %v", keys)
	}
}
