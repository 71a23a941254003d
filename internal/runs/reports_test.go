package runs_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

func TestReportingFillsFirstClassDefaults(t *testing.T) {
	got := runs.Description{ReportsCost: true}.Reporting()
	want := runs.Reports{Usage: runs.UsageExact, Cost: runs.CostReported, ErrorClasses: runs.ErrorClassesHTTPStatus}
	if got != want {
		t.Errorf("Reporting() = %+v, want %+v", got, want)
	}
	got = runs.Description{Reports: runs.Reports{Usage: runs.UsageUnknown, ErrorClasses: runs.ErrorClassesGeneric}}.Reporting()
	want = runs.Reports{Usage: runs.UsageUnknown, Cost: runs.CostUnknown, ErrorClasses: runs.ErrorClassesGeneric}
	if got != want {
		t.Errorf("Reporting() = %+v, want %+v", got, want)
	}
}

// An agent that reports no usage cannot be held to a token budget: the
// field is refused by name rather than accepted and never enforced.
func TestTokenBudgetNeedsReportedUsage(t *testing.T) {
	blind := runs.Description{Name: "blind", Reports: runs.Reports{Usage: runs.UsageUnknown}}
	if slices.Contains(runs.Capabilities(blind), runs.FieldMaxTotalTokens) {
		t.Errorf("capabilities of an agent without usage list %s", runs.FieldMaxTotalTokens)
	}
	err := runs.CheckFields(blind, runs.Spec{Agent: "blind", Prompt: "hi", MaxTotalTokens: 10})
	var fe *runs.FieldError
	if !errors.As(err, &fe) || fe.Field != runs.FieldMaxTotalTokens {
		t.Errorf("runs.CheckFields = %v, want a refusal of %s", err, runs.FieldMaxTotalTokens)
	}
	if err := runs.CheckFields(runs.Description{Name: "seeing"}, runs.Spec{Agent: "seeing", Prompt: "hi", MaxTotalTokens: 10}); err != nil {
		t.Errorf("runs.CheckFields for an agent with usage = %v", err)
	}
}
