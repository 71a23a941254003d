package runs

import (
	"bytes"
	"encoding/json"
	"slices"
)

// The budgets a run may set, as RunError.Budget names them.
const (
	BudgetMaxTurns       = FieldMaxTurns
	BudgetMaxTotalTokens = FieldMaxTotalTokens
	BudgetMaxBudgetUSD   = FieldMaxBudgetUSD
)

// EnforcedByGateway reports whether the gateway enforces field for an
// agent described by d that does not honour it itself: the budgets it
// sees in every run's events, and structured output, which it asks for
// and checks. max_budget_usd needs a CLI that reports cost, and
// max_total_tokens one that reports usage: the gateway never prices or
// counts tokens itself.
func EnforcedByGateway(d Description, field string) bool {
	switch field {
	case FieldMaxTurns, FieldOutputSchema:
		return true
	case FieldMaxTotalTokens:
		return d.ReportsUsage()
	case FieldMaxBudgetUSD:
		return d.ReportsCost
	}
	return false
}

// Capabilities lists the optional fields a run of the agent described by d
// may set: those its CLI honours, and those the gateway enforces for it.
func Capabilities(d Description) []string {
	out := slices.Clone(d.Fields)
	// An agent that always keeps its sessions honours keep_session by
	// doing nothing, and takes it: it is listed so that a client can ask
	// for it without knowing which agents need it.
	if slices.Contains(out, FieldResumeSessionID) && !slices.Contains(out, FieldKeepSession) {
		out = append(out, FieldKeepSession)
	}
	for _, f := range []string{FieldMaxTurns, FieldMaxBudgetUSD, FieldOutputSchema, FieldMaxTotalTokens} {
		if !slices.Contains(out, f) && EnforcedByGateway(d, f) {
			out = append(out, f)
		}
	}
	return out
}

// AdapterSpec is the spec an adapter is given: s without the fields the
// gateway enforces and the adapter does not list. A schema the CLI cannot
// take becomes an instruction at the end of the prompt. The run's own spec
// keeps them all: the supervisor checks them against what the run does.
func AdapterSpec(d Description, s Spec) Spec {
	has := func(f string) bool { return slices.Contains(d.Fields, f) }
	if !has(FieldMaxTurns) {
		s.MaxTurns = 0
	}
	if !has(FieldMaxTotalTokens) {
		s.MaxTotalTokens = 0
	}
	if d.ReportsCost && !has(FieldMaxBudgetUSD) {
		s.MaxBudgetUSD = 0
	}
	if len(s.OutputSchema) > 0 && !has(FieldOutputSchema) {
		s.Prompt += schemaInstruction(s.OutputSchema)
		s.OutputSchema = nil
	}
	return s
}

// schemaInstruction is appended to the prompt of an agent whose CLI has
// no structured output of its own: the gateway asks for the JSON, then
// checks it.
func schemaInstruction(schema json.RawMessage) string {
	var compact bytes.Buffer
	if json.Compact(&compact, schema) != nil {
		compact.Reset()
		compact.Write(schema)
	}
	return "\n\nAnswer with only a JSON value that matches this JSON Schema, with no other text " +
		"before or after it (a ```json fence around it is accepted):\n" + compact.String()
}
