package runs_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/agentgate/agentgate/internal/adapters/claude"
	"github.com/agentgate/agentgate/internal/adapters/codex"
	"github.com/agentgate/agentgate/internal/adapters/copilot"
	"github.com/agentgate/agentgate/internal/adapters/gemini"
	"github.com/agentgate/agentgate/internal/adapters/opencode"
	"github.com/agentgate/agentgate/internal/runs"
)

// setOptional sets each field runs.OptionalFields names to a valid value.
var setOptional = map[string]func(*runs.Spec){
	runs.FieldSystemPrompt:   func(s *runs.Spec) { s.SystemPrompt = "Be brief." },
	runs.FieldModel:          func(s *runs.Spec) { s.Model = "some-model" },
	runs.FieldEffort:         func(s *runs.Spec) { s.Effort = "high" },
	runs.FieldMaxTurns:       func(s *runs.Spec) { s.MaxTurns = 3 },
	runs.FieldMaxBudgetUSD:   func(s *runs.Spec) { s.MaxBudgetUSD = 1 },
	runs.FieldOutputSchema:   func(s *runs.Spec) { s.OutputSchema = json.RawMessage(`{"type":"object"}`) },
	runs.FieldMaxTotalTokens: func(s *runs.Spec) { s.MaxTotalTokens = 1000 },
}

func specWith(field string) runs.Spec {
	s := runs.Spec{Agent: "x", Prompt: "hi"}
	setOptional[field](&s)
	return s
}

func TestCheckFieldsRefusesWithTheDeclaredReason(t *testing.T) {
	d := runs.Description{Name: "x", Fields: []string{runs.FieldModel}, Refused: map[string]string{
		runs.FieldSystemPrompt: "x reads its instructions from a file",
		runs.FieldEffort:       "x has no effort flag",
		runs.FieldMaxBudgetUSD: "x reports no cost",
	}}
	for field, reason := range d.Refused {
		err := runs.CheckFields(d, specWith(field))
		var fe *runs.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, runs.ErrUnsupported) || fe.Field != field || fe.Agent != "x" || fe.Reason != reason {
			t.Errorf("%s: %#v, want unsupported for agent x naming it with %q", field, err, reason)
		}
	}
	if err := runs.CheckFields(d, specWith(runs.FieldModel)); err != nil {
		t.Errorf("model, which x takes: %v", err)
	}
}

func TestCheckFieldsGivesAGenericReasonWhenNoneIsDeclared(t *testing.T) {
	d := runs.Description{Name: "x"}
	err := runs.CheckFields(d, specWith(runs.FieldEffort))
	var fe *runs.FieldError
	if !errors.As(err, &fe) || fe.Field != runs.FieldEffort || fe.Reason != "this agent does not take effort" {
		t.Errorf("effort with no reason declared: %#v", err)
	}
}

func TestCheckFieldsTakesWhatTheGatewayEnforces(t *testing.T) {
	reportsCost := runs.Description{Name: "x", ReportsCost: true}
	for _, field := range []string{runs.FieldMaxTurns, runs.FieldOutputSchema, runs.FieldMaxTotalTokens, runs.FieldMaxBudgetUSD} {
		if err := runs.CheckFields(reportsCost, specWith(field)); err != nil {
			t.Errorf("%s, which the gateway enforces: %v", field, err)
		}
	}
	noCost := runs.Description{Name: "x"}
	if err := runs.CheckFields(noCost, specWith(runs.FieldMaxBudgetUSD)); !errors.Is(err, runs.ErrUnsupported) {
		t.Errorf("max_budget_usd for an agent that reports no cost: %v, want unsupported", err)
	}
}

func TestCheckFieldsTakesASpecWithNoOptionalField(t *testing.T) {
	if err := runs.CheckFields(runs.Description{Name: "x"}, runs.Spec{Agent: "x", Prompt: "hi"}); err != nil {
		t.Errorf("a bare spec: %v", err)
	}
}

// TestEveryAdapterDeclaresExactlyWhatItRefuses holds each adapter's
// Refused to the optional fields it does not take, so that a field added
// to Fields, or one the gateway starts to enforce, cannot leave a stale
// or missing reason behind.
func TestEveryAdapterDeclaresExactlyWhatItRefuses(t *testing.T) {
	if got := runs.OptionalFields(); len(got) != len(setOptional) {
		t.Fatalf("OptionalFields() = %q; this test sets %d of them", got, len(setOptional))
	}
	for _, a := range []runs.Adapter{claude.New(), codex.New(), copilot.New(), gemini.New(), opencode.New()} {
		d := a.Describe()
		taken := runs.Capabilities(d)
		for _, field := range runs.OptionalFields() {
			reason, declared := d.Refused[field]
			switch takes := slices.Contains(taken, field); {
			case takes && declared:
				t.Errorf("%s takes %s but declares it refused (%q)", d.Name, field, reason)
			case !takes && reason == "":
				t.Errorf("%s does not take %s but declares no reason", d.Name, field)
			}
		}
		for field := range d.Refused {
			if !slices.Contains(runs.OptionalFields(), field) {
				t.Errorf("%s declares %s refused, which CheckFields never checks", d.Name, field)
			}
		}
	}
}
