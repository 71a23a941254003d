package api

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentgate/agentgate/internal/runs"
)

// runField is one field of a run request: its name as the API spells it,
// and how its value is checked and set in the spec.
type runField struct {
	name   string
	decode specDecoder
}

// specDecoder checks the value of the field name among f, the members of a
// run request, and sets it in spec. An absent or null field leaves the
// field's default.
type specDecoder func(f fields, name string, spec *runs.Spec) error

// runFields are the fields of a run request, in the order their values are
// checked: when several are wrong, the first is the one reported. Adding a
// field to the request is adding a row.
var runFields = []runField{
	{fieldAgent, decodeAgent},
	{fieldPrompt, decodePrompt},
	{runs.FieldSystemPrompt, decodeSystemPrompt},
	// A model and a session id end up as command-line arguments, so they
	// must look like names: no leading "-", no spaces, no control bytes.
	{runs.FieldModel, identField("-._:/@[]", func(s *runs.Spec) *string { return &s.Model })},
	{runs.FieldEffort, oneOf(efforts, "", func(s *runs.Spec) *string { return &s.Effort })},
	{runs.FieldMaxTurns, integerField(minTurns, maxTurns, func(s *runs.Spec) *int { return &s.MaxTurns })},
	{runs.FieldTimeoutSeconds, integerField(minTimeout, maxTimeout, func(s *runs.Spec) *int { return &s.TimeoutSeconds })},
	{runs.FieldMaxBudgetUSD, decodeBudget},
	{runs.FieldOutputSchema, decodeOutputSchema},
	{runs.FieldResumeSessionID, identField("-._:", func(s *runs.Spec) *string { return &s.ResumeSessionID })},
	{runs.FieldKeepSession, boolField(func(s *runs.Spec) *bool { return &s.KeepSession })},
	{fieldMetadata, decodeMetadata},
	{runs.FieldCwd, decodeCwd},
	{runs.FieldWorkspace, decodeWorkspace},
	{runs.FieldPush, decodePush},
	{runs.FieldPermission, oneOf(permissions, runs.WorkspaceWrite, func(s *runs.Spec) *runs.Permission { return &s.Permission })},
	{runs.FieldNetwork, oneOf(networkPolicies, "", func(s *runs.Spec) *runs.Network { return &s.Network })},
	{runs.FieldAllowHosts, decodeAllowHosts},
	{runs.FieldApprovals, oneOf(approvalModes, "", func(s *runs.Spec) *runs.Approvals { return &s.Approvals })},
	{runs.FieldApprovalTimeoutSeconds, integerField(1, int(runs.MaxApprovalTimeout.Seconds()),
		func(s *runs.Spec) *int { return &s.ApprovalTimeoutSeconds })},
	{runs.FieldInteractive, boolField(func(s *runs.Spec) *bool { return &s.Interactive })},
	{runs.FieldIdleTimeoutSeconds, integerField(1, int(runs.MaxIdleTimeout.Seconds()),
		func(s *runs.Spec) *int { return &s.IdleTimeoutSeconds })},
	{runs.FieldHibernateAfterSeconds, integerField(int(runs.MinHibernateAfter.Seconds()), int(runs.MaxHibernateAfter.Seconds()),
		func(s *runs.Spec) *int { return &s.HibernateAfterSeconds })},
	{runs.FieldMaxTotalTokens, integerField(1, maxTotalTokens, func(s *runs.Spec) *int64 { return &s.MaxTotalTokens })},
	{runs.FieldMCPServers, decodeMCPServersField},
	{runs.FieldAttachments, decodeAttachmentsField},
	{runs.FieldWebhookURL, decodeWebhookURL},
}

// requestFields are the names of a run request's fields, in the order
// their values are checked.
var requestFields = runFieldNames(runFields)

func runFieldNames(rows []runField) []string {
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.name
	}
	return names
}

// approvalModes are the values of the approvals field.
var approvalModes = []runs.Approvals{runs.ApprovalsNever, runs.ApprovalsAsk}

// efforts are the values of the effort field.
var efforts = []string{"low", "medium", "high"}

// permissions are the values of the permission field.
var permissions = []runs.Permission{runs.ReadOnly, runs.WorkspaceWrite, runs.Full}

func decodeAgent(f fields, name string, spec *runs.Spec) (err error) {
	var ok bool
	if spec.Agent, ok, err = f.str(name); err != nil {
		return err
	}
	if !ok || spec.Agent == "" {
		return invalidField(name, "is required")
	}
	if len(spec.Agent) > maxAgentBytes {
		return invalidField(name, fmt.Sprintf("must be at most %d bytes", maxAgentBytes))
	}
	return nil
}

func decodePrompt(f fields, name string, spec *runs.Spec) (err error) {
	var ok bool
	if spec.Prompt, ok, err = f.str(name); err != nil {
		return err
	}
	if !ok || strings.TrimSpace(spec.Prompt) == "" {
		return invalidField(name, "is required and must not be blank")
	}
	if len(spec.Prompt) > maxPromptBytes {
		return invalidField(name, fmt.Sprintf("must be at most %d bytes", maxPromptBytes))
	}
	return nil
}

func decodeSystemPrompt(f fields, name string, spec *runs.Spec) (err error) {
	if spec.SystemPrompt, _, err = f.str(name); err != nil {
		return err
	}
	if len(spec.SystemPrompt) > maxSystemPromptBytes {
		return invalidField(name, fmt.Sprintf("must be at most %d bytes", maxSystemPromptBytes))
	}
	return nil
}

func decodeBudget(f fields, name string, spec *runs.Spec) (err error) {
	spec.MaxBudgetUSD, err = f.positive(name)
	return err
}

func decodeOutputSchema(f fields, name string, spec *runs.Spec) error {
	raw := f.get(name)
	if raw == nil {
		return nil
	}
	if raw[0] != '{' {
		return invalidField(name, "must be a JSON Schema object")
	}
	spec.OutputSchema = raw
	return nil
}

func decodeMetadata(f fields, name string, spec *runs.Spec) (err error) {
	spec.Metadata, err = f.metadata(name)
	return err
}

func decodeCwd(f fields, name string, spec *runs.Spec) (err error) {
	if spec.Cwd, _, err = f.str(name); err != nil {
		return err
	}
	if spec.Cwd != "" && (len(spec.Cwd) > maxCwdBytes || !filepath.IsLocal(spec.Cwd)) {
		return invalidField(name, "must be a relative path that stays inside the workspace")
	}
	return nil
}

func decodeMCPServersField(f fields, name string, spec *runs.Spec) (err error) {
	spec.MCPServers, err = decodeMCPServers(f.get(name))
	return err
}

func decodeAttachmentsField(f fields, name string, spec *runs.Spec) (err error) {
	spec.Attachments, err = decodeAttachments(name, f.get(name))
	return err
}

// decodeWebhookURL bounds webhook_url; its syntax and the gateway's policy
// are the service's to check (runs.Webhooks).
func decodeWebhookURL(f fields, name string, spec *runs.Spec) (err error) {
	var ok bool
	if spec.WebhookURL, ok, err = f.str(name); err != nil {
		return err
	}
	if ok && (spec.WebhookURL == "" || len(spec.WebhookURL) > runs.MaxWebhookURLBytes) {
		return invalidField(name, fmt.Sprintf("must be an https URL of at most %d bytes", runs.MaxWebhookURLBytes))
	}
	return nil
}

// identField is a field whose value is a name (fields.ident) made of
// letters, digits and the bytes of extra.
func identField(extra string, dst func(*runs.Spec) *string) specDecoder {
	return func(f fields, name string, spec *runs.Spec) (err error) {
		*dst(spec), err = f.ident(name, extra)
		return err
	}
}

// integerField is a field whose value is an integer in [lo, hi].
func integerField[T int | int64](lo, hi int, dst func(*runs.Spec) *T) specDecoder {
	return func(f fields, name string, spec *runs.Spec) error {
		n, err := f.integer(name, lo, hi)
		*dst(spec) = T(n)
		return err
	}
}

// boolField is a field whose value is true or false.
func boolField(dst func(*runs.Spec) *bool) specDecoder {
	return func(f fields, name string, spec *runs.Spec) (err error) {
		*dst(spec), err = f.boolean(name)
		return err
	}
}

// oneOf is a field whose value is one of values; absent when not given.
func oneOf[T ~string](values []T, absent T, dst func(*runs.Spec) *T) specDecoder {
	return func(f fields, name string, spec *runs.Spec) error {
		v, ok, err := f.str(name)
		switch {
		case err != nil:
			return err
		case !ok:
			*dst(spec) = absent
			return nil
		case !slices.Contains(values, T(v)):
			return invalidField(name, "must be one of "+joinValues(values))
		}
		*dst(spec) = T(v)
		return nil
	}
}

func joinValues[T ~string](values []T) string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}
