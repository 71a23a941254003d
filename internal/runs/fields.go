package runs

import "slices"

// optionalField is a Spec field that some agents take and others do not,
// with how a spec sets it.
type optionalField struct {
	name string
	set  func(Spec) bool
}

// optionalFields are the fields CheckFields checks. The others are
// refused with reasons of their own: interactive and approvals by
// checkSessionFields (from CheckFields), mcp_servers by the supervisor's
// checkMCPServers, attachments
// where they are resolved, and resume_session_id where the session is
// looked up (whether a resume is possible depends on the run's mode and
// on the session). Every agent takes cwd, permission and timeout_seconds,
// which the gateway applies itself; keep_session goes with
// resume_session_id (Capabilities).
func optionalFields() []optionalField {
	return []optionalField{
		{FieldSystemPrompt, func(s Spec) bool { return s.SystemPrompt != "" }},
		{FieldModel, func(s Spec) bool { return s.Model != "" }},
		{FieldEffort, func(s Spec) bool { return s.Effort != "" }},
		{FieldMaxTurns, func(s Spec) bool { return s.MaxTurns != 0 }},
		{FieldMaxBudgetUSD, func(s Spec) bool { return s.MaxBudgetUSD != 0 }},
		{FieldOutputSchema, func(s Spec) bool { return len(s.OutputSchema) > 0 }},
		{FieldMaxTotalTokens, func(s Spec) bool { return s.MaxTotalTokens != 0 }},
	}
}

// OptionalFields names the fields CheckFields refuses for an agent that
// does not take them: those an adapter declares in Description.Refused
// when it does not.
func OptionalFields() []string {
	var names []string
	for _, f := range optionalFields() {
		names = append(names, f.name)
	}
	return names
}

// CheckFields refuses an interactive run, or one that asks for approvals,
// of an agent that does not list the field; then the first optional field
// s sets that the agent described by d does not take (it is not in
// Capabilities(d)), naming it, with the reason d.Refused gives for it or a
// generic one.
func CheckFields(d Description, s Spec) error {
	if err := checkSessionFields(d, s); err != nil {
		return err
	}
	taken := Capabilities(d)
	for _, f := range optionalFields() {
		if !f.set(s) || slices.Contains(taken, f.name) {
			continue
		}
		reason := d.Refused[f.name]
		if reason == "" {
			reason = "this agent does not take " + f.name
		}
		return Unsupported(d.Name, f.name, reason)
	}
	return nil
}

// checkSessionFields refuses, naming the field, an interactive run or one
// that asks for approvals on an agent that does not list the field, so
// that no adapter has to know of fields it does not take.
func checkSessionFields(d Description, s Spec) error {
	if s.Interactive && !slices.Contains(d.Fields, FieldInteractive) {
		return Unsupported(d.Name, FieldInteractive, "this agent does not take interactive runs")
	}
	if s.Asks() && !slices.Contains(d.Fields, FieldApprovals) {
		return Unsupported(d.Name, FieldApprovals, "this agent does not ask for approvals")
	}
	return nil
}
