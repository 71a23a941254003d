package conformance

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/mock/mocktest"
	"github.com/agentgate/agentgate/internal/runs"
)

// budgetBound is how long a run stopped by a budget may take from its
// first request: a model loop of a few requests, then the stop.
const budgetBound = 90 * time.Second

// budgetCases are the budgets the gateway enforces for every agent, each
// against a model that calls a tool for ever: max_turns everywhere,
// max_total_tokens where the CLI reports usage, max_budget_usd where it
// reports cost; where it does not, the budget is refused by name.
func (s *suite) budgetCases() []suiteCase {
	cases := []suiteCase{
		{"max_turns", s.budgetStops(runs.MaxTurns, runs.BudgetMaxTurns, func(sp *runs.Spec) { sp.MaxTurns = 2 })},
	}
	if s.adapter.Describe().ReportsUsage() {
		cases = append(cases, suiteCase{"max_total_tokens",
			s.budgetStops(runs.BudgetExceeded, runs.BudgetMaxTotalTokens, func(sp *runs.Spec) { sp.MaxTotalTokens = 1 })})
	} else {
		cases = append(cases, suiteCase{"max_total_tokens_refused", s.budgetTokensRefused})
	}
	if s.adapter.Describe().ReportsCost {
		cases = append(cases, suiteCase{"max_budget_usd",
			s.budgetStops(runs.BudgetExceeded, runs.BudgetMaxBudgetUSD, func(sp *runs.Spec) { sp.MaxBudgetUSD = 0.000001 })})
	} else {
		cases = append(cases, suiteCase{"max_budget_usd_refused", s.budgetUSDRefused})
	}
	return cases
}

// budgetStops runs the tool loop with the budget set, and checks that the
// run failed with class and budget, kept the usage it had, and left no
// process behind.
func (s *suite) budgetStops(class runs.Class, budget string, set func(*runs.Spec)) func(t *testing.T) {
	return func(t *testing.T) {
		marker := "budget-" + uuid.NewString()[:8]
		g := s.start(t, Scenario{Kind: ToolLoop, Command: "echo " + marker}, credentials)
		// No timeout of its own: one would race the CLI's start, which a
		// busy machine stretches; the bound counts from the model loop's
		// first request, and the wait catches a budget never enforced.
		spec := runs.Spec{Prompt: "Echo the marker until told to stop.", TimeoutSeconds: int(struckTimeout / time.Second)}
		set(&spec)
		first := mocktest.WatchFirstRequest(t, g.backend.Requests)
		r := g.submit(t, spec)
		r, evs := g.wait(t, r.ID, quick+budgetBound)
		if r.Status != runs.Failed || r.Error == nil || r.Error.Class != class || r.Error.Budget != budget {
			t.Fatalf("status %s, error %+v; want failed %s naming %s; events %s", r.Status, r.Error, class, budget, typesOf(evs))
		}
		if took := r.FinishedAt.Sub(first()); took > budgetBound {
			t.Errorf("stopped %s after the first request, want within %s", took, budgetBound)
		}
		if g.usageUnknown {
			g.wantUsage(t, r)
		} else if r.Usage.InputTokens == 0 || r.Usage.OutputTokens == 0 {
			t.Errorf("usage %+v: a run stopped by a budget keeps its usage so far (the mock billed %+v)", r.Usage, g.backend.Billed())
		}
		if billed := g.backend.Billed(); r.Usage.InputTokens > billed.InputTokens || r.Usage.OutputTokens > billed.OutputTokens {
			t.Errorf("usage %+v is more than the mock billed %+v", r.Usage, billed)
		}
		if budget == runs.BudgetMaxBudgetUSD && (r.CostUSD == nil || *r.CostUSD <= 0) {
			t.Errorf("cost %v: a run stopped by its dollar budget keeps its cost", r.CostUSD)
		}
		if budget == runs.BudgetMaxTurns {
			// The tools of the last allowed turn run; the model is
			// not asked again, or not for long.
			if n := len(of(evs, runs.EventToolCallStarted)); n < 1 || n > spec.MaxTurns+1 {
				t.Errorf("%d tool calls with max_turns %d: %s", n, spec.MaxTurns, typesOf(evs))
			}
		}
		last := evs[len(evs)-1]
		if last.Type != runs.EventRunCompleted {
			t.Errorf("last event %s", last.Type)
		}
		var done runs.RunCompletedData
		decode(t, last, &done)
		if done.Error == nil || done.Error.Budget != budget || !strings.Contains(done.Error.Message, budget) {
			t.Errorf("run.completed error %+v, want one naming %s", done.Error, budget)
		}
		wantNoProcesses(t, r.ID, marker)
	}
}

// budgetUSDRefused: an agent whose CLI reports no cost refuses
// max_budget_usd by name: cost is never guessed.
func (s *suite) budgetUSDRefused(t *testing.T) {
	g := s.start(t, Scenario{Kind: Text, Text: "hi"}, credentials)
	_, err := g.sup.Submit(t.Context(), runs.Spec{Agent: s.adapter.Name(), Prompt: "hi", MaxBudgetUSD: 1, Model: g.backend.Model})
	wantFieldError(t, err, runs.FieldMaxBudgetUSD, runs.ErrUnsupported)
}

// budgetTokensRefused: an agent whose CLI reports no usage refuses
// max_total_tokens by name: tokens are never counted by the gateway.
func (s *suite) budgetTokensRefused(t *testing.T) {
	g := s.start(t, Scenario{Kind: Text, Text: "hi"}, credentials)
	_, err := g.sup.Submit(t.Context(), runs.Spec{Agent: s.adapter.Name(), Prompt: "hi", MaxTotalTokens: 1000, Model: g.backend.Model})
	wantFieldError(t, err, runs.FieldMaxTotalTokens, runs.ErrUnsupported)
}
