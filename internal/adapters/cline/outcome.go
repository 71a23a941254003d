package cline

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// Hints for a person, per failure.
const (
	hintAuth = "give Cline its provider: set CLINE_BASE_URL (an OpenAI-compatible endpoint), CLINE_MODEL and CLINE_API_KEY " +
		"for the gateway, or run `cline auth` with the agent's HOME and set CLINE_API_KEY to the provider's key"
	hintRate      = "the model API's rate limit was reached (Cline retried it 5 times first); retry later"
	hintTransient = "the model API failed or could not be reached; Cline retried it 5 times first (about a minute); retry later"
	hintAPI       = "the model API refused the request; check the model name and the provider's configuration"
	hintContext   = "the conversation no longer fits the model's context; start a new session"
	hintInterrupt = "the agent was interrupted before it finished"
	hintMaxTurns  = "Cline stopped after its maximum number of iterations"
	hintCrash     = "Cline ended without an answer; see the message, and $HOME/.cline/data/logs/cline.log in the agent's home"
)

// Phrases of the model APIs' error messages, by class: Cline 3.0.65
// reports a failed model request by the API's message alone (and an
// errorClass that is "auth" for a 401 and "unknown" for the rest), never
// by its HTTP status.
var (
	authPhrases      = []string{"api key", "api_key", "unauthorized", "authentication", "not authenticated", "permission denied", "forbidden", "401"}
	ratePhrases      = []string{"rate limit", "rate_limit", "too many requests", "quota", "429"}
	transientPhrases = []string{"server had an error", "overloaded", "internal server error", "bad gateway", "service unavailable",
		"gateway timeout", "timed out", "timeout", "econnrefused", "connection refused", "unable to connect", "cannot connect",
		"failedtoopensocket", "socket", "500", "502", "503", "504"}
	contextPhrases = []string{"context length", "context_length", "maximum context", "too many tokens", "context window"}
)

// classifyMessage classifies a model API failure from Cline's message
// and errorClass.
func classifyMessage(msg, errorClass string) *runs.RunError {
	lower := strings.ToLower(msg)
	class := runs.APIError
	switch {
	case errorClass == "auth":
		class = runs.NotAuthenticated
	case hasAny(lower, contextPhrases):
		class = runs.ContextExceeded
	case hasAny(lower, ratePhrases):
		class = runs.RateLimited
	case hasAny(lower, authPhrases):
		class = runs.NotAuthenticated
	case hasAny(lower, transientPhrases):
		class = runs.TransientAPIError
	}
	return runs.NewRunError(class, cmp.Or(msg, "the model API failed"), apiHints[class])
}

// apiHints are the hints of a failed model request, per class.
var apiHints = map[runs.Class]string{
	runs.NotAuthenticated:  hintAuth,
	runs.RateLimited:       hintRate,
	runs.TransientAPIError: hintTransient,
	runs.ContextExceeded:   hintContext,
	runs.APIError:          hintAPI,
}

func hasAny(s string, phrases []string) bool {
	for _, p := range phrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// Finish implements runs.Decoder, and removes the run's MCP settings
// file, which holds the servers' secrets.
func (d *decoder) Finish(exit runs.Exit, stderrTail []byte) runs.Outcome {
	out := runs.Outcome{
		SessionID: d.sessionID, Model: d.inv.Spec.Model, Usage: d.usage,
		NumTurns: d.iterations, StopReason: d.finish, Result: d.result,
		Events: removeMCPSettings(d.inv),
	}
	for id := range d.open {
		out.Events = append(out.Events, runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{
			ID: id, Output: "the run ended before the tool finished", IsError: true,
		}))
	}
	stderr := string(stderrTail)
	switch {
	case len(d.errs) > 0:
		e := d.errs[len(d.errs)-1]
		out.Status, out.Error = runs.Failed, classifyMessage(e.message, e.class)
	case exit.Signal != "":
		out.Status, out.Error = runs.Failed, runs.NewRunError(runs.ProcessKilled, "cline was killed by "+exit.Signal, "")
	case d.refused != "":
		out.Status, out.Error = runs.Failed, runs.NewRunError(runs.FlagRejected, "cline refused the invocation: "+clip.Text(d.refused, 300),
			adapterkit.VersionHint(Name, d.inv.CLIVersion, VerifiedVersion, InstallCommand))
	case d.finish == "aborted" || d.finish == "cancelled":
		out.Status, out.Error = runs.Failed, runs.NewRunError(runs.Interrupted, "cline's run was aborted", hintInterrupt)
	case d.finish == "max_iterations":
		out.Status, out.Error = runs.Failed, runs.NewRunError(runs.MaxTurns, "cline reached its maximum number of iterations", hintMaxTurns)
	case d.finish == "error" || exit.Code != 0:
		msg := fmt.Sprintf("cline exited with code %d without an answer", exit.Code)
		out.Status, out.Error = runs.Failed, runs.NewRunError(runs.AgentCrashed, msg+orEmpty(": ", lastLines(stderr, 3)), hintCrash)
	case d.finish == "":
		out.Status, out.Error = runs.Failed, runs.NewRunError(runs.AgentCrashed,
			"cline exited without a result"+orEmpty(": ", lastLines(stderr, 3)), hintCrash)
	default:
		out.Status = runs.Succeeded
	}
	return out
}

// noise are the stderr lines Cline 3.0.65 prints in every run: the AI
// SDK's warnings, and the stack of an error it also reports on stdout.
var noise = []string{"AI SDK Warning", "DeprecationWarning", "at "}

// lastLines returns the last n non-empty lines of s that are not noise,
// joined by " | ".
func lastLines(s string, n int) string {
	var out []string
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || hasPrefixAny(l, noise) {
			continue
		}
		out = append([]string{clip.Text(l, 300)}, out...)
	}
	return strings.Join(out, " | ")
}

func hasPrefixAny(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) || strings.HasPrefix(s, "Warning: "+p) {
			return true
		}
	}
	return false
}

// orEmpty returns prefix+s, or "" when s is empty.
func orEmpty(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
