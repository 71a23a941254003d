package autorun_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/autorun"
	"github.com/agentgate/agentgate/internal/autorun/autoruntest"
	"github.com/agentgate/agentgate/internal/runs"
)

// Replicas starting one owner at once, each for its own fire: under skip,
// one run starts and every other start is recorded skipped, whatever the
// interleaving of their compare-and-sets.
func TestStartsAtOnceMakeOneRun(t *testing.T) {
	for _, when := range []autorun.WhenBusy{autorun.Skip, autorun.Queue} {
		t.Run(string(when), func(t *testing.T) {
			mem, rs := autoruntest.NewMem(), autoruntest.NewRuns()
			owner := autorun.Owner{Kind: "schedule", ID: "s1", Tenant: "acme", WhenBusy: when}
			var wg sync.WaitGroup
			outcomes := make(chan autorun.Outcome, 12)
			for i := range 12 {
				wg.Go(func() {
					st := autorun.NewStarter(rs, mem, nil, nil) // one per replica
					rec := autorun.Record{Key: fmt.Sprintf("fire.s1.%d", i), Time: time.Unix(int64(i), 0)}
					got, err := st.Start(context.Background(), owner, rec, runs.Spec{Agent: "fake", Prompt: "p"})
					if err != nil {
						t.Error(err)
					}
					outcomes <- got.Outcome
				})
			}
			wg.Wait()
			close(outcomes)
			n := map[autorun.Outcome]int{}
			for o := range outcomes {
				n[o]++
			}
			want := map[autorun.Outcome]int{autorun.Started: 1, autorun.SkippedBusy: 11}
			if when == autorun.Queue {
				want = map[autorun.Outcome]int{autorun.Started: 1, autorun.Queued: 1, autorun.SkippedBusy: 10}
			}
			if fmt.Sprint(n) != fmt.Sprint(want) || len(rs.Submitted()) != 1 {
				t.Fatalf("outcomes %v and %d runs, want %v and 1", n, len(rs.Submitted()), want)
			}
			st, _, _ := autorun.NewStarter(rs, mem, nil, nil).State(context.Background(), owner)
			if len(st.Recent) != 12 || st.Pending != nil {
				t.Fatalf("state %+v: want 12 records and no start in progress", st)
			}
		})
	}
}

// A start retried with the same key (a takeover) finds the run the first
// made, and a record once final is returned as it is.
func TestAStartAgainFindsItsRun(t *testing.T) {
	mem, rs := autoruntest.NewMem(), autoruntest.NewRuns()
	owner := autorun.Owner{Kind: "trigger", ID: "t1", Tenant: "acme", WhenBusy: autorun.Skip}
	st := autorun.NewStarter(rs, mem, nil, nil)
	rec := autorun.Record{Key: "delivery.t1.abc", Time: time.Unix(1, 0), ID: "d1"}
	first, err := st.Start(context.Background(), owner, rec, runs.Spec{Agent: "fake", Prompt: "p"})
	if err != nil || first.Outcome != autorun.Started {
		t.Fatal(first, err)
	}
	again, err := st.Start(context.Background(), owner, rec, runs.Spec{Agent: "fake", Prompt: "p"})
	if err != nil || again.RunID != first.RunID || len(rs.Submitted()) != 1 {
		t.Fatalf("again = %+v, %v; %d runs", again, err, len(rs.Submitted()))
	}
}

func TestRecentIsBoundedNewestFirst(t *testing.T) {
	var st autorun.State
	for i := range autorun.MaxRecent + 20 {
		st.Put(autorun.Record{Key: fmt.Sprint(i), Outcome: autorun.Missed})
	}
	st.Put(autorun.Record{Key: fmt.Sprint(autorun.MaxRecent + 19), Outcome: autorun.Started})
	if len(st.Recent) != autorun.MaxRecent || st.Recent[0].Outcome != autorun.Started || st.Recent[1].Key != fmt.Sprint(autorun.MaxRecent+18) {
		t.Fatalf("%d records, first %+v, second %+v", len(st.Recent), st.Recent[0], st.Recent[1])
	}
}
