package supervisor

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"go.uber.org/zap"
)

func started(id string) runs.Event {
	return runs.NewEvent(runs.EventToolCallStarted, runs.ToolCallStartedData{ID: id, Name: "Bash"})
}
func completed(id string) runs.Event {
	return runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: id, Output: "ok"})
}
func said(text string) runs.Event {
	return runs.NewEvent(runs.EventMessageCompleted, runs.MessageData{MessageID: "m", Text: text})
}
func usageEv(in, out int64, cost *float64) runs.Event {
	return runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: runs.Usage{InputTokens: in, OutputTokens: out}, CostUSD: cost})
}

func TestBudgetCountsModelTurns(t *testing.T) {
	cases := []struct {
		name   string
		max    int
		evs    []runs.Event
		turns  int
		stopAt int // index of the event that reaches the limit; -1: none
	}{
		{"one answer", 1, []runs.Event{said("hi")}, 1, -1},
		{"text and a tool are one turn", 2, []runs.Event{said("let me"), started("a"), completed("a"), said("done")}, 2, -1},
		{"parallel tools are one turn", 2, []runs.Event{started("a"), started("b"), completed("a"), completed("b"), said("done")}, 2, -1},
		// As Claude's --max-turns 1: the tool runs, then the run stops
		// before the model is asked again.
		{"limit after the last turn's tools", 1, []runs.Event{started("a"), completed("a"), said("never")}, 1, 1},
		{"second parallel result reaches it", 1, []runs.Event{started("a"), started("b"), completed("a"), completed("b")}, 1, 3},
		{"loop", 3, []runs.Event{started("1"), completed("1"), started("2"), completed("2"), started("3"), completed("3"), started("4")}, 3, 5},
		{"helpers count for nothing", 1, []runs.Event{started("task"), withParent(said("x")), withParent(started("h")), withParent(completed("h")), said("y")}, 1, -1},
		{"deltas and reasoning are the same turn", 1, []runs.Event{
			runs.NewEvent(runs.EventReasoningDelta, runs.DeltaData{ID: "r", Text: "hm"}), runs.NewEvent(runs.EventMessageDelta, runs.MessageData{MessageID: "m", Text: "a"}), said("a")}, 1, -1},
		{"a turn of an interactive run begins anew", 2, []runs.Event{said("one"), runs.NewEvent(runs.EventTurnStarted, runs.TurnStartedData{}), said("two")}, 2, -1},
		{"beyond the limit", 1, []runs.Event{said("one"), runs.NewEvent(runs.EventTurnStarted, runs.TurnStartedData{}), said("two")}, 2, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBudget(runs.Spec{MaxTurns: c.max})
			stop := -1
			for i, ev := range c.evs {
				if err := b.observe([]runs.Event{ev}); err != nil && stop < 0 {
					stop = i
					re := budgetError(err)
					if re == nil || re.Class != runs.MaxTurns || re.Budget != runs.BudgetMaxTurns {
						t.Fatalf("stop %v = %+v", err, re)
					}
				}
			}
			if stop != c.stopAt {
				t.Errorf("stopped at %d, want %d", stop, c.stopAt)
			}
			if c.stopAt < 0 && b.turns != c.turns {
				t.Errorf("turns = %d, want %d", b.turns, c.turns)
			}
		})
	}
}

func withParent(ev runs.Event) runs.Event { ev.ParentToolCallID = "task"; return ev }

func TestBudgetTokensAndDollars(t *testing.T) {
	b := newBudget(runs.Spec{MaxTotalTokens: 100})
	if err := b.observe([]runs.Event{usageEv(40, 10, nil)}); err != nil {
		t.Fatalf("stopped at 50 tokens: %v", err)
	}
	err := b.observe([]runs.Event{usageEv(80, 20, nil)})
	re := budgetError(err)
	if re == nil || re.Class != runs.BudgetExceeded || re.Budget != runs.BudgetMaxTotalTokens {
		t.Fatalf("at 100 tokens: %v %+v", err, re)
	}
	if b.observe([]runs.Event{usageEv(200, 20, nil)}) != nil {
		t.Error("a budget stops a run once")
	}

	cost := func(v float64) *float64 { return &v }
	b = newBudget(runs.Spec{MaxBudgetUSD: 0.5})
	if err := b.observe([]runs.Event{usageEv(1, 1, cost(0.2)), usageEv(5, 5, nil)}); err != nil {
		t.Fatalf("stopped at $0.2: %v", err)
	}
	re = budgetError(b.observe([]runs.Event{usageEv(9, 9, cost(0.75))}))
	if re == nil || re.Class != runs.BudgetExceeded || re.Budget != runs.BudgetMaxBudgetUSD {
		t.Fatalf("at $0.75: %+v", re)
	}
	if newBudget(runs.Spec{}) != nil {
		t.Error("a spec without budgets has one")
	}
	var none *budget
	if none.observe([]runs.Event{usageEv(1, 1, nil)}) != nil {
		t.Error("no budget stopped a run")
	}
}

func TestBudgetSettleKeepsUsage(t *testing.T) {
	cost := 0.3
	b := newBudget(runs.Spec{MaxTotalTokens: 10})
	stop := b.observe([]runs.Event{usageEv(8, 4, &cost)})
	override := stopError(stop, "any")
	if override == nil || override.Budget != runs.BudgetMaxTotalTokens {
		t.Fatalf("stopError = %+v", override)
	}
	if stopReason(stop) != stopBudget {
		t.Errorf("stopReason = %q", stopReason(stop))
	}
	out := runs.Outcome{Status: runs.Failed, Error: runs.NewRunError(runs.ClassCancelled, "killed", "")}
	got := b.settle(&out, override)
	if got != override || out.Usage != (runs.Usage{InputTokens: 8, OutputTokens: 4}) || out.CostUSD == nil || *out.CostUSD != cost {
		t.Errorf("settled to %+v, usage %+v cost %v", got, out.Usage, out.CostUSD)
	}

	// The process ended by itself as its usage reached the budget: the
	// run fails by the budget all the same.
	b = newBudget(runs.Spec{MaxTotalTokens: 10})
	_ = b.observe([]runs.Event{usageEv(20, 1, nil)})
	out = runs.Outcome{Status: runs.Succeeded, Usage: runs.Usage{InputTokens: 20, OutputTokens: 1}}
	if got := b.settle(&out, nil); got == nil || got.Budget != runs.BudgetMaxTotalTokens {
		t.Errorf("settle of a finished run over budget = %+v", got)
	}

	// Claude's own --max-turns names no budget: the gateway does.
	b = newBudget(runs.Spec{MaxTurns: 2})
	out = runs.Outcome{Status: runs.Failed, Error: runs.NewRunError(runs.MaxTurns, "error_max_turns", "")}
	if got := b.settle(&out, nil); got != nil || out.Error.Budget != runs.BudgetMaxTurns {
		t.Errorf("native max turns: override %+v, error %+v", got, out.Error)
	}
}

func TestAdapterSpec(t *testing.T) {
	s := runs.Spec{Prompt: "p", MaxTurns: 3, MaxTotalTokens: 9, MaxBudgetUSD: 1, OutputSchema: []byte(`{"type": "object"}`)}
	native := runs.Description{Fields: []string{runs.FieldMaxTurns, runs.FieldMaxBudgetUSD, runs.FieldOutputSchema}, ReportsCost: true}
	got := runs.AdapterSpec(native, s)
	if got.MaxTurns != 3 || got.MaxBudgetUSD != 1 || got.MaxTotalTokens != 0 || got.Prompt != "p" || len(got.OutputSchema) == 0 {
		t.Errorf("native: %+v", got)
	}
	got = runs.AdapterSpec(runs.Description{}, s)
	if got.MaxTurns != 0 || got.MaxBudgetUSD != 1 || got.OutputSchema != nil {
		t.Errorf("none (max_budget_usd stays, to be refused): %+v", got)
	}
	if want := "p\n\nAnswer with only a JSON value"; len(got.Prompt) < len(want) || got.Prompt[:len(want)] != want {
		t.Errorf("prompt = %q", got.Prompt)
	}
	got = runs.AdapterSpec(runs.Description{ReportsCost: true}, s)
	if got.MaxBudgetUSD != 0 {
		t.Errorf("a CLI that reports cost: %+v", got)
	}
	caps := runs.Capabilities(runs.Description{Fields: []string{runs.FieldModel}})
	for _, f := range []string{runs.FieldModel, runs.FieldMaxTurns, runs.FieldOutputSchema, runs.FieldMaxTotalTokens} {
		found := false
		for _, c := range caps {
			found = found || c == f
		}
		if !found {
			t.Errorf("capabilities %v lack %s", caps, f)
		}
	}
	for _, c := range caps {
		if c == runs.FieldMaxBudgetUSD {
			t.Errorf("capabilities %v list max_budget_usd for a CLI without cost", caps)
		}
	}
}

// loopAdapter is an agent whose model calls a tool for ever: its script
// prints a tool call, its result and the run's usage so far, again and
// again, until it is stopped.
type loopAdapter struct{}

func (loopAdapter) Name() string { return "loop" }
func (loopAdapter) Describe() runs.Description {
	return runs.Description{Name: "loop", DefaultBin: "/bin/sh", VerifiedVersion: "1.0.0", VersionArgs: []string{"-c", "echo 1.0.0"},
		ReportsCost: true}
}
func (loopAdapter) ParseVersion(b []byte) (string, error) { return strings.TrimSpace(string(b)), nil }
func (loopAdapter) Command(inv runs.Invocation) (runs.Command, error) {
	if inv.Spec.MaxTurns != 0 || inv.Spec.MaxTotalTokens != 0 || inv.Spec.MaxBudgetUSD != 0 {
		return runs.Command{}, runs.Unsupported("loop", runs.FieldMaxTurns, "the gateway's budgets must not reach this adapter")
	}
	script := `i=0
while :; do
  i=$((i+1))
  printf 'tool %d\n' $i
  printf 'done %d\n' $i
  printf 'usage %d\n' $i
  sleep 0.05
done`
	return runs.Command{Args: []string{"-c", script}}, nil
}
func (loopAdapter) NewDecoder(runs.Invocation) runs.Decoder { return &loopDecoder{} }

type loopDecoder struct{}

func (loopDecoder) Decode(line []byte) []runs.Event {
	var n int
	var kind string
	if _, err := fmt.Sscanf(string(line), "%s %d", &kind, &n); err != nil {
		return nil
	}
	id := fmt.Sprint(n)
	switch kind {
	case "tool":
		return []runs.Event{runs.NewEvent(runs.EventToolCallStarted, runs.ToolCallStartedData{ID: id, Name: "Bash"})}
	case "done":
		return []runs.Event{runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{ID: id, Output: "ok"})}
	}
	cost := 0.01 * float64(n)
	return []runs.Event{runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: runs.Usage{InputTokens: 10 * int64(n), OutputTokens: int64(n)}, CostUSD: &cost})}
}

// Finish reports no usage, as a CLI killed before its result would.
func (loopDecoder) Finish(runs.Exit, []byte) runs.Outcome {
	return runs.Outcome{Status: runs.Failed, Error: runs.NewRunError(runs.ProcessKilled, "killed", "")}
}

func TestBudgetStopsARun(t *testing.T) {
	for _, c := range []struct {
		name   string
		set    func(*runs.Spec)
		class  runs.Class
		budget string
		usage  int64 // at least: input tokens
	}{
		{"max_turns", func(s *runs.Spec) { s.MaxTurns = 3 }, runs.MaxTurns, runs.BudgetMaxTurns, 20},
		{"max_total_tokens", func(s *runs.Spec) { s.MaxTotalTokens = 50 }, runs.BudgetExceeded, runs.BudgetMaxTotalTokens, 50},
		{"max_budget_usd", func(s *runs.Spec) { s.MaxBudgetUSD = 0.035 }, runs.BudgetExceeded, runs.BudgetMaxBudgetUSD, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := newMemStore()
			cfg := Config{WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), KillGrace: 300 * time.Millisecond}
			sup := New(cfg, store, []*Agent{{Adapter: loopAdapter{}, Bin: "/bin/sh", Home: t.TempDir()}}, nopObserver{}, zap.NewNop())
			startSupervisor(t, sup)
			spec := runs.Spec{Agent: "loop", Prompt: "loop"}
			c.set(&spec)
			r, err := sup.Submit(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			h := &harness{sup: sup, store: store}
			r = h.wait(t, r.ID, 30*time.Second)
			if r.Status != runs.Failed || r.Error == nil || r.Error.Class != c.class || r.Error.Budget != c.budget {
				t.Fatalf("run %s %+v, want failed %s naming %s", r.Status, r.Error, c.class, c.budget)
			}
			if r.Usage.InputTokens < c.usage || r.CostUSD == nil || r.Exit == nil || r.Exit.Reason != stopBudget {
				t.Errorf("usage %+v cost %v exit %+v: the usage so far is kept, and the exit says why", r.Usage, r.CostUSD, r.Exit)
			}
			if c.budget == runs.BudgetMaxTurns && r.Usage.InputTokens > 60 {
				t.Errorf("usage %+v: the run went on long past its turns", r.Usage)
			}
		})
	}
}

func TestCapabilitiesListKeepSessionWhereSessionsResume(t *testing.T) {
	always := runs.Capabilities(runs.Description{Fields: []string{runs.FieldModel, runs.FieldResumeSessionID}})
	if !slices.Contains(always, runs.FieldKeepSession) {
		t.Errorf("an agent that resumes sessions: %v lacks %s", always, runs.FieldKeepSession)
	}
	asked := runs.Capabilities(runs.Description{Fields: []string{runs.FieldResumeSessionID, runs.FieldKeepSession}})
	if n := len(slices.DeleteFunc(slices.Clone(asked), func(f string) bool { return f != runs.FieldKeepSession })); n != 1 {
		t.Errorf("%v lists %s %d times", asked, runs.FieldKeepSession, n)
	}
	if none := runs.Capabilities(runs.Description{Fields: []string{runs.FieldModel}}); slices.Contains(none, runs.FieldKeepSession) {
		t.Errorf("an agent without sessions: %v lists %s", none, runs.FieldKeepSession)
	}
}
