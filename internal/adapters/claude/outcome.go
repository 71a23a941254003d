package claude

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

// Hints for a person, per failure.
const (
	hintAuth      = "run `claude setup-token` or set ANTHROPIC_API_KEY"
	hintRate      = "the model API's rate limit was reached; retry later"
	hintTransient = "the model API failed, was overloaded or did not answer in time; retry later"
	hintAPI       = "the model API refused the request; check the model name and the request"
	hintMaxTurns  = "the run used all its turns; raise max_turns"
	hintBudget    = "the run spent its budget; raise max_budget_usd"
	hintInterrupt = "the agent was interrupted before it finished"
	hintResume    = "resume_session_id must name a session this gateway ran: sessions live in the CLI's HOME"
	hintCrash     = "the agent ended without a result; see the message and the gateway's log"
	hintSchema    = "the model's answer did not match output_schema; check the schema and the prompt"
)

// flagRejectedRE matches what the CLI prints to stderr when it refuses
// its arguments before starting: commander's own errors and the CLI's
// checks of flag values.
var flagRejectedRE = regexp.MustCompile(`(?m)^(error: (unknown|option '|too many arguments|missing required)|Error: (When using --print|Invalid session ID|--json-schema|Session ID .* is already in use))|cannot be used with root/sudo privileges`)

// Status codes in stderr, for a run that died without a result line.
var (
	authStatusRE      = regexp.MustCompile(`\b(401|403)\b`)
	rateStatusRE      = regexp.MustCompile(`\b429\b`)
	transientStatusRE = regexp.MustCompile(`(?i)\b(5\d\d)\b|overloaded|timed out`)
	apiStatusRE       = regexp.MustCompile(`\b(400|404|413)\b`)
)

// notLoggedIn is what the CLI says without any credential.
const notLoggedIn = "Not logged in"

// Finish implements runs.Decoder.
func (d *decoder) Finish(exit runs.Exit, stderrTail []byte) runs.Outcome {
	out := runs.Outcome{SessionID: d.sessionID, Model: d.model}
	for _, id := range d.open {
		out.Events = append(out.Events, runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{
			ID: id, Output: "no result: the agent ended before the tool call returned", IsError: true,
		}))
	}
	d.open = nil
	stderr := string(stderrTail)

	r := d.result
	if r == nil {
		out.Status, out.Error = runs.Failed, d.classifyNoResult(exit, stderr)
		// Without a result the usage is what the streams reported: the
		// model server billed it all the same.
		if u := d.streamedUsage(); !u.IsZero() {
			out.Usage = u
			out.Events = append(out.Events, runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: u}))
		}
		return out
	}
	out.Usage = normalize(r)
	// The session's cost so far; the supervisor subtracts what the
	// session had cost before this run.
	out.SessionCostUSD = r.TotalCostUSD
	out.NumTurns = r.NumTurns
	out.Result = r.Result
	if s := strings.TrimSpace(string(r.StructuredOutput)); s != "" && s != "null" {
		out.StructuredOutput = append([]byte(nil), r.StructuredOutput...)
	}
	if r.StopReason != nil && *r.StopReason != "" {
		out.StopReason = *r.StopReason
	} else {
		out.StopReason = r.TerminalReason
	}
	if out.Model == "" {
		out.Model = adapterkit.FirstModel(r.ModelUsage)
	}
	if e := d.classifyResult(r, stderr); e != nil {
		out.Status, out.Error = runs.Failed, e
	} else {
		out.Status = runs.Succeeded
	}
	if out.Status == runs.Succeeded && len(out.StructuredOutput) == 0 && d.schemaError != "" {
		// The model's last StructuredOutput call did not match the
		// schema and it gave up: the CLI's own validation says why,
		// which the answer's text (often "Done.") would not.
		out.Status = runs.Failed
		out.Error = runs.NewRunError(runs.SchemaMismatch, "the answer does not match output_schema: "+
			strings.TrimPrefix(d.schemaError, "Output does not match required schema: "), hintSchema)
	}
	return out
}

// classifyResult returns the failure a result line reports, nil for a
// success. Every API failure ends in subtype "success" with is_error set,
// so is_error, subtype, terminal_reason, api_error_status and the
// assistant line's error all count.
func (d *decoder) classifyResult(r *wireLine, stderr string) *runs.RunError {
	msg := r.Result
	if msg == "" {
		msg = strings.Join(readableErrors(r.Errors), "; ")
	}
	if d.notLoggedIn(stderr) || (r.IsError && strings.Contains(r.Result, notLoggedIn)) || strings.HasPrefix(r.Result, notLoggedIn) {
		return runs.NewRunError(runs.NotAuthenticated, cmp.Or(msg, notLoggedIn), hintAuth)
	}
	// A refusal is the model's, not an API failure: the CLI may report
	// it as a plain success.
	if r.StopReason != nil && *r.StopReason == "refusal" {
		return runs.NewRunError(runs.Refused, cmp.Or(msg, "the model refused the request"), "")
	}
	if !r.IsError && (r.Subtype == "success" || r.Subtype == "") {
		return nil
	}
	status := 0
	if r.APIErrorStatus != nil {
		status = *r.APIErrorStatus
	}
	switch {
	case r.Subtype == "error_max_turns" || r.TerminalReason == "max_turns":
		// The CLI's own --max-turns stopped it; the message names the
		// budget as the gateway's do.
		e := runs.NewRunError(runs.MaxTurns, runs.BudgetMaxTurns+" reached: "+cmp.Or(msg, "reached the maximum number of turns"), hintMaxTurns)
		e.Budget = runs.BudgetMaxTurns
		return e
	case r.Subtype == "error_max_budget_usd" || r.TerminalReason == "budget_exhausted":
		e := runs.NewRunError(runs.BudgetExceeded, runs.BudgetMaxBudgetUSD+" reached: "+cmp.Or(msg, "reached the maximum budget"), hintBudget)
		e.Budget = runs.BudgetMaxBudgetUSD
		return e
	case r.TerminalReason == "aborted_tools" || r.TerminalReason == "aborted_streaming":
		return runs.NewRunError(runs.Interrupted, cmp.Or(msg, "the run was interrupted ("+r.TerminalReason+")"), hintInterrupt)
	case strings.Contains(msg, "No conversation found with session ID"):
		return runs.NewRunError(runs.SessionNotFound, msg, hintResume)
	case status != 0 || d.apiError != "" || r.TerminalReason == "api_error" || r.TerminalReason == "image_error" ||
		r.TerminalReason == "model_error" || r.TerminalReason == "prompt_too_long":
		return classifyAPI(status, d.apiError, cmp.Or(msg, d.apiErrorText))
	}
	return runs.NewRunError(runs.AgentCrashed, cmp.Or(msg, fmt.Sprintf("%s (%s)", r.Subtype, r.TerminalReason)), hintCrash)
}

// classifyAPI classifies a failed API call from its HTTP status, when the
// CLI reports one, and otherwise from the assistant line's error kind.
func classifyAPI(status int, kind, msg string) *runs.RunError {
	msg = cmp.Or(msg, fmt.Sprintf("API error (%s)", orUnknown(kind)))
	class, ok := adapterkit.StatusClass(status)
	if !ok {
		class = kindClass(kind, msg)
	}
	return runs.NewRunError(class, msg, hintFor(class))
}

// kindClass classifies a failed API call the CLI gave no HTTP status
// for, from the assistant line's error kind and the message.
func kindClass(kind, msg string) runs.Class {
	switch kind {
	case "authentication_failed", "oauth_org_not_allowed", "cloud_credential_error", "verification_required":
		return runs.NotAuthenticated
	case "rate_limit":
		return runs.RateLimited
	case "overloaded", "server_error":
		// Also what a refused connection and an attempt that outlived
		// API_TIMEOUT_MS are reported as.
		return runs.TransientAPIError
	}
	if strings.Contains(strings.ToLower(msg), "timed out") {
		return runs.TransientAPIError
	}
	return runs.APIError
}

// classifyNoResult classifies a run that printed no result line: it was
// killed, crashed, or refused its arguments before starting.
func (d *decoder) classifyNoResult(exit runs.Exit, stderr string) *runs.RunError {
	last := lastLines(stderr, 3)
	switch {
	case d.notLoggedIn(stderr):
		return runs.NewRunError(runs.NotAuthenticated, cmp.Or(d.apiErrorText, notLoggedIn), hintAuth)
	case exit.Signal != "":
		return runs.NewRunError(runs.ProcessKilled, fmt.Sprintf("claude was killed by %s", exit.Signal), "")
	case d.apiError != "":
		return classifyAPI(0, d.apiError, d.apiErrorText)
	case exit.Code == 0 && (d.interrupted || exit.Reason != ""):
		// Stopped with SIGINT, the CLI stops the tool, prints the
		// interruption and its result; but on a busy machine it was
		// seen to exit 0 before the result line, at times before the
		// tool's result.
		return runs.NewRunError(runs.Interrupted, "claude was interrupted and exited before reporting its result", hintInterrupt)
	case flagRejectedRE.MatchString(stderr):
		return runs.NewRunError(runs.FlagRejected, last, d.flagHint())
	case strings.Contains(stderr, "No conversation found with session ID"):
		return runs.NewRunError(runs.SessionNotFound, last, hintResume)
	case authStatusRE.MatchString(stderr):
		return runs.NewRunError(runs.NotAuthenticated, last, hintAuth)
	case rateStatusRE.MatchString(stderr):
		return runs.NewRunError(runs.RateLimited, last, hintRate)
	case transientStatusRE.MatchString(stderr):
		return runs.NewRunError(runs.TransientAPIError, last, hintTransient)
	case apiStatusRE.MatchString(stderr):
		return runs.NewRunError(runs.APIError, last, hintAPI)
	}
	msg := fmt.Sprintf("claude exited with code %d without a result", exit.Code)
	if last != "" {
		msg += ": " + last
	}
	return runs.NewRunError(runs.AgentCrashed, msg, hintCrash)
}

// notLoggedIn reports whether the CLI said it has no credential, on
// stderr or in a synthetic error line. It can say so and still exit 0.
func (d *decoder) notLoggedIn(stderr string) bool {
	return strings.Contains(stderr, notLoggedIn) || strings.Contains(d.apiErrorText, notLoggedIn)
}

// flagHint names the installed and the verified version: a rejected flag
// usually means the CLI changed.
func (d *decoder) flagHint() string {
	return adapterkit.VersionHint(Name, d.inv.CLIVersion, VerifiedVersion, InstallCommand)
}

func hintFor(c runs.Class) string {
	switch c {
	case runs.NotAuthenticated:
		return hintAuth
	case runs.RateLimited:
		return hintRate
	case runs.TransientAPIError:
		return hintTransient
	}
	return hintAPI
}

// lastLines returns the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var out []string
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			out = append([]string{l}, out...)
		}
	}
	return strings.Join(out, " | ")
}

// readableErrors drops the CLI's internal diagnostics ("[ede_diagnostic]
// result_type=user …") from result.errors, keeping what a person can read.
func readableErrors(errs []string) []string {
	var out []string
	for _, e := range errs {
		if !strings.HasPrefix(e, "[ede_diagnostic]") {
			out = append(out, e)
		}
	}
	return out
}
