package copilot

import (
	"cmp"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

// Hints for a person, per failure.
const (
	hintLogin = "give the gateway a GitHub token with Copilot access (COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN: " +
		"an OAuth token or a fine-grained personal access token), or log in once with `HOME=%s copilot login`, " +
		"or use a model provider of your own: COPILOT_PROVIDER_BASE_URL with COPILOT_PROVIDER_API_KEY or " +
		"COPILOT_PROVIDER_BEARER_TOKEN, and COPILOT_MODEL (COPILOT_OFFLINE=true keeps the CLI off GitHub)"
	hintProvider = "the model provider refused the credentials: check COPILOT_PROVIDER_API_KEY, " +
		"COPILOT_PROVIDER_API_KEY_COMMAND or COPILOT_PROVIDER_BEARER_TOKEN (or the GitHub token, without a provider of your own)"
	hintOffline   = "COPILOT_OFFLINE=true needs a model provider of your own: set COPILOT_PROVIDER_BASE_URL and COPILOT_MODEL"
	hintRate      = "the model API's rate limit was reached; retry later"
	hintTransient = "the model API failed or could not be reached; retry later"
	hintAPI       = "the model API refused the request; check the model name and the request"
	hintContext   = "the prompt is larger than the model's context window, even after the CLI compacted it"
	hintInterrupt = "the agent was interrupted before it finished"
	hintCrash     = "the agent ended without a result; see the message and the gateway's log"
)

// What the CLI prints to stderr, with nothing on stdout, when it cannot
// start the prompt. The first four are about credentials.
const (
	noAuth          = "No authentication information found"
	tokenNotValid   = "Authentication token found but could not be validated"
	classicPAT      = "Classic Personal Access Tokens"
	offlineProvider = "Offline mode requires a local model provider"
	noSession       = "No session, task, or name matched"
)

// flagRejectedRE matches the command-line parser's errors ("error:
// unexpected argument", "error: invalid value 'x' for '--flag'", "error:
// Invalid command format.", "error: the argument … cannot be used
// with …"); the CLI's own errors start with "Error:".
var flagRejectedRE = regexp.MustCompile(`(?m)^error: (.*)$`)

// Finish implements runs.Decoder. It reads the run's usage file, which
// the CLI wrote on its way out, and removes it, through the Invocation's
// Files (see doc.go), once the process has been reaped.
func (d *decoder) Finish(exit runs.Exit, stderrTail []byte) runs.Outcome {
	path := UsagePath(d.inv)
	raw, err := d.files.ReadFile(path)
	if err != nil {
		raw = nil // none: the CLI did not get that far, or was killed
	} else {
		_ = d.files.Remove(path) // one left over is harmless; the next run has its own
	}
	return d.finish(exit, stderrTail, raw)
}

// finish classifies the run from what was decoded, the exit, stderr and
// the usage file's contents (nil when the CLI wrote none).
func (d *decoder) finish(exit runs.Exit, stderrTail []byte, usageFile []byte) runs.Outcome {
	out := runs.Outcome{Model: d.model, NumTurns: d.turns, Result: d.text}
	if d.started || d.result {
		out.SessionID = d.sessionID
	}
	for _, id := range d.open {
		out.Events = append(out.Events, runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{
			ID: id, Output: "no result: the agent ended before the tool call returned", IsError: true,
		}))
	}
	d.open = nil
	if usageFile != nil {
		u, model, err := parseUsage(usageFile)
		switch {
		case err != nil:
			out.Events = append(out.Events, runs.Warning("usage_unreadable", "the CLI's usage file could not be read: "+err.Error()))
		case d.inv.Spec.ResumeSessionID != "":
			// A resumed session's file counts the whole session: the
			// supervisor subtracts what it recorded before, and
			// run.completed carries the run's own usage.
			out.SessionUsage = &u
			if model != "" {
				out.Model = model
			}
		default:
			// A new session's total is the run's own. It is reported as
			// the session's too, so that the supervisor records it and
			// a run that resumes the session subtracts it; without it
			// the resumed run would be billed the whole session.
			out.Usage = u
			total := u
			out.SessionUsage = &total
			if model != "" {
				out.Model = model
			}
			out.Events = append(out.Events, runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: u}))
		}
	} else if d.result {
		out.Events = append(out.Events, runs.Warning("usage_missing", "the CLI wrote no usage file; the run's usage is unknown"))
	}
	for i := range out.Events {
		out.Events[i].SessionID = out.SessionID
	}
	stderr := string(stderrTail)

	switch {
	case d.aborted:
		// The CLI may still end an aborted prompt with a result line
		// and exit code 0.
		out.Status, out.StopReason = runs.Failed, "aborted"
		out.Error = runs.NewRunError(runs.Interrupted, fmt.Sprintf("the run was interrupted (%s)", cmp.Or(d.abortReason, "abort")), hintInterrupt)
	case d.result && d.exitCode == 0 && exit.Code == 0 && exit.Signal == "":
		out.Status = runs.Succeeded
		if d.sessionErr != nil {
			out.Events = append(out.Events, runs.Warning("session_error", d.sessionErr.Message))
		}
		return out
	case d.sessionErr != nil:
		out.Status, out.Error = runs.Failed, d.classifySessionError()
	default:
		out.Status, out.Error = runs.Failed, d.classifyNoResult(exit, stderr)
	}
	return out
}

// classifySessionError classifies session.error from its errorType and
// status first, then from the last failed model request: its status,
// error code and failure kind.
func (d *decoder) classifySessionError() *runs.RunError {
	se := d.sessionErr
	f := d.failure
	if f == nil {
		f = &wireData{}
	}
	status := se.StatusCode
	if status == 0 {
		status = f.StatusCode
	}
	msg := cmp.Or(se.Message, fmt.Sprintf("the model request failed (%s)", cmp.Or(se.ErrorType, "unknown")))
	byStatus, _ := adapterkit.StatusClass(status)
	switch {
	case se.ErrorType == "authentication" || byStatus == runs.NotAuthenticated:
		return runs.NewRunError(runs.NotAuthenticated, msg, hintProvider)
	case se.ErrorType == "rate_limit" || byStatus == runs.RateLimited:
		return runs.NewRunError(runs.RateLimited, msg, hintRate)
	case d.compaction || f.ErrorCode == "context_length_exceeded":
		return runs.NewRunError(runs.ContextExceeded, msg, hintContext)
	case byStatus == runs.TransientAPIError || (status == 0 && f.FailureKind == "transport"):
		return runs.NewRunError(runs.TransientAPIError, msg, hintTransient)
	}
	return runs.NewRunError(runs.APIError, msg, hintAPI)
}

// classifyNoResult classifies a run that did not finish its prompt: the
// CLI refused to start (credentials, arguments), was killed, or crashed.
func (d *decoder) classifyNoResult(exit runs.Exit, stderr string) *runs.RunError {
	first := firstError(stderr)
	switch {
	case strings.Contains(stderr, noAuth), strings.Contains(stderr, tokenNotValid), strings.Contains(stderr, classicPAT):
		return runs.NewRunError(runs.NotAuthenticated, first, fmt.Sprintf(hintLogin, cmp.Or(d.inv.Home, "<home>")))
	case strings.Contains(stderr, offlineProvider):
		return runs.NewRunError(runs.NotAuthenticated, first, hintOffline)
	case exit.Signal != "":
		return runs.NewRunError(runs.ProcessKilled, fmt.Sprintf("copilot was killed by %s", exit.Signal), "")
	case strings.Contains(stderr, noSession):
		return runs.NewRunError(runs.SessionNotFound, first, "resume_session_id must name a session kept in the CLI's home (AGENTGATE_COPILOT_HOME) on this replica")
	case flagRejectedRE.MatchString(stderr):
		return runs.NewRunError(runs.FlagRejected, strings.TrimSpace(flagRejectedRE.FindStringSubmatch(stderr)[1]), d.flagHint())
	}
	msg := fmt.Sprintf("copilot exited with code %d without a result", exit.Code)
	if d.result {
		msg = fmt.Sprintf("copilot ended its prompt with exit code %d", d.exitCode)
	}
	if last := lastLines(stderr, 3); last != "" {
		msg += ": " + last
	}
	return runs.NewRunError(runs.AgentCrashed, msg, hintCrash)
}

// flagHint names the installed and the verified version: a rejected flag
// usually means the CLI changed.
func (d *decoder) flagHint() string {
	return adapterkit.VersionHint(Name, d.inv.CLIVersion, VerifiedVersion, InstallCommand)
}

// parseUsage reads the usage file: the token counts of every model,
// summed, in the gateway's convention, which is the CLI's (input includes
// the cache, output includes reasoning), and the model in use.
func parseUsage(b []byte) (runs.Usage, string, error) {
	var f wireUsageFile
	if err := lenient(b, &f); err != nil {
		return runs.Usage{}, "", err
	}
	names := make([]string, 0, len(f.ModelMetrics))
	for name := range f.ModelMetrics {
		names = append(names, name)
	}
	sort.Strings(names)
	var u runs.Usage
	for _, name := range names {
		t := f.ModelMetrics[name].Usage
		u = u.Add(runs.Usage{
			InputTokens: t.InputTokens, CacheReadTokens: t.CacheReadTokens, CacheWriteTokens: t.CacheWriteTokens,
			OutputTokens: t.OutputTokens, ReasoningTokens: t.ReasoningTokens,
		})
	}
	model := f.CurrentModel
	if model == "" && len(names) > 0 {
		model = names[0]
	}
	return u, model, nil
}

// firstError returns the first non-empty line of stderr without its
// "Error: " prefix: the CLI's verdict, before its advice.
func firstError(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return strings.TrimPrefix(l, "Error: ")
		}
	}
	return "copilot failed without a message"
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
