package supervisor

import (
	"errors"
	"fmt"

	"github.com/agentgate/agentgate/internal/runs"
)

// stopBudget is the Exit.Reason of a run the gateway stopped at one of its
// budgets.
const stopBudget = "budget"

// budgetStop is the cause the supervisor cancels a run with when it
// reaches a budget; stopError maps it to its RunError.
type budgetStop struct{ err *runs.RunError }

func (b *budgetStop) Error() string { return "budget reached: " + b.err.Message }

// budgetError returns the RunError of a budget stop, or nil when cause is
// none.
func budgetError(cause error) *runs.RunError {
	var b *budgetStop
	if errors.As(cause, &b) {
		c := *b.err
		return &c
	}
	return nil
}

// budget follows one run's spending against its spec's limits, from the
// events the supervisor emits. It is guarded by the task's mu (emit holds
// it).
//
// A model turn is one answer of the model. The run's first begins with
// its first message, reasoning or tool call; the next begins when the
// model speaks again after tool results. Tool calls the model asks for in
// one answer (in parallel) are one turn as long as the CLI reports them
// all before their results. The events of a helper (under a tool call,
// ParentToolCallID) are the helper's and count for nothing here.
//
// At the limit the run stops as Claude's own --max-turns does: once the
// tools of the last allowed turn have run and the model would be asked
// again.
type budget struct {
	maxTurns  int
	maxTokens int64
	maxUSD    float64

	turns    int
	speaking bool            // in a model turn: it spoke, and no tool result came since
	open     map[string]bool // the tool calls of the turn without a result
	usage    runs.Usage      // the last usage.updated: the run's so far
	cost     *float64
	seen     bool           // a usage.updated came
	reached  *runs.RunError // the first budget reached
}

// newBudget returns the budget of a run with spec s, or nil when it sets
// none.
func newBudget(s runs.Spec) *budget {
	if s.MaxTurns <= 0 && s.MaxTotalTokens <= 0 && s.MaxBudgetUSD <= 0 {
		return nil
	}
	return &budget{maxTurns: s.MaxTurns, maxTokens: s.MaxTotalTokens, maxUSD: s.MaxBudgetUSD, open: map[string]bool{}}
}

// observe accounts for evs, in order, and returns the cause to stop the
// run with when they reach a budget for the first time; nil otherwise.
func (b *budget) observe(evs []runs.Event) error {
	if b == nil || b.reached != nil {
		return nil
	}
	for _, ev := range evs {
		b.event(ev)
		if b.reached != nil {
			return &budgetStop{err: b.reached}
		}
	}
	return nil
}

func (b *budget) event(ev runs.Event) {
	if d, ok := ev.Data.(runs.UsageData); ok {
		// The run's figures so far, helpers included.
		b.usage, b.seen = d.Usage, true
		if d.CostUSD != nil {
			c := *d.CostUSD
			b.cost = &c
		}
		b.checkSpend()
		return
	}
	if ev.ParentToolCallID != "" {
		return
	}
	switch ev.Type {
	case runs.EventTurnStarted:
		// A new message of an interactive run: the model answers it
		// in a new turn.
		b.speaking = false
		clear(b.open)
	case runs.EventMessageDelta, runs.EventMessageCompleted, runs.EventReasoningDelta, runs.EventReasoningCompleted:
		b.speak()
	case runs.EventToolCallStarted:
		b.speak()
		if d, ok := ev.Data.(runs.ToolCallStartedData); ok && d.ID != "" {
			b.open[d.ID] = true
		}
	case runs.EventToolCallCompleted:
		if d, ok := ev.Data.(runs.ToolCallCompletedData); ok {
			delete(b.open, d.ID)
		}
		if !b.speaking && len(b.open) == 0 {
			return // a result outside any turn of ours
		}
		if len(b.open) == 0 {
			b.speaking = false
			if b.maxTurns > 0 && b.turns >= b.maxTurns {
				// The model would be asked again, for a turn
				// beyond the limit.
				b.reached = maxTurnsError(b.maxTurns)
			}
		}
	}
}

// speak accounts for model output: the first after tool results (or of
// the run) begins a turn.
func (b *budget) speak() {
	if b.speaking {
		return
	}
	b.speaking = true
	clear(b.open)
	b.turns++
	if b.maxTurns > 0 && b.turns > b.maxTurns {
		b.reached = maxTurnsError(b.maxTurns)
	}
}

func (b *budget) checkSpend() {
	if total := b.usage.InputTokens + b.usage.OutputTokens; b.maxTokens > 0 && total >= b.maxTokens {
		e := runs.NewRunError(runs.BudgetExceeded, fmt.Sprintf("the run used %d tokens (%d input, %d output), reaching its max_total_tokens of %d",
			total, b.usage.InputTokens, b.usage.OutputTokens, b.maxTokens), "raise max_total_tokens")
		e.Budget = runs.BudgetMaxTotalTokens
		b.reached = e
		return
	}
	if b.maxUSD > 0 && b.cost != nil && *b.cost >= b.maxUSD {
		e := runs.NewRunError(runs.BudgetExceeded, fmt.Sprintf("the run cost $%.4f, reaching its max_budget_usd of $%g", *b.cost, b.maxUSD),
			"raise max_budget_usd")
		e.Budget = runs.BudgetMaxBudgetUSD
		b.reached = e
	}
}

func maxTurnsError(n int) *runs.RunError {
	e := runs.NewRunError(runs.MaxTurns, fmt.Sprintf("the run used its %d model turns (max_turns) and was stopped before the next", n),
		"raise max_turns")
	e.Budget = runs.BudgetMaxTurns
	return e
}

// settle completes the outcome of a run that a budget ended: the usage and
// cost seen so far are kept when the decoder's outcome has less (a process
// stopped before it reported them), and a budget error of the CLI's own
// (Claude's --max-turns, --max-budget-usd) names its budget as the
// gateway's do. A run that reached a budget fails with it even when its
// process ended by itself before the stop reached it (Claude reports its
// usage only as it exits): whether the stop came first must not decide
// the outcome. It returns the override finish is to apply. Called with
// the task's mu held, or once nothing else touches the budget.
func (b *budget) settle(out *runs.Outcome, override *runs.RunError) *runs.RunError {
	if b == nil {
		return override
	}
	if override == nil && b.reached != nil {
		c := *b.reached
		override = &c
	}
	for _, e := range []*runs.RunError{out.Error, override} {
		if e == nil || e.Budget != "" {
			continue
		}
		switch {
		case e.Class == runs.MaxTurns && b.maxTurns > 0:
			e.Budget = runs.BudgetMaxTurns
		case e.Class == runs.BudgetExceeded && b.maxUSD > 0:
			e.Budget = runs.BudgetMaxBudgetUSD
		case e.Class == runs.BudgetExceeded && b.maxTokens > 0:
			e.Budget = runs.BudgetMaxTotalTokens
		}
	}
	stopped := (override != nil && override.Budget != "") || (out.Error != nil && out.Error.Budget != "")
	if !stopped || !b.seen {
		return override
	}
	if out.SessionUsage == nil && total(out.Usage) < total(b.usage) {
		out.Usage = b.usage
	}
	if out.CostUSD == nil && out.SessionCostUSD == nil && b.cost != nil {
		c := *b.cost
		out.CostUSD = &c
	}
	return override
}

func total(u runs.Usage) int64 { return u.InputTokens + u.OutputTokens }
