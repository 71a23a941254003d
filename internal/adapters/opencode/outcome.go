package opencode

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// Hints for a person, per failure.
const (
	hintRate      = "the model API's rate limit was reached; retry later"
	hintTransient = "the model API failed, was unreachable or did not answer; OpenCode retried it 5 times first (about a minute without Retry-After); retry later"
	hintAPI       = "the model API refused the request; check the model name and the provider's configuration"
	hintContext   = "the conversation no longer fits the model's context; start a new session"
	hintInterrupt = "the agent was interrupted before it finished"
	hintCrash     = "OpenCode ended without an answer; see the message, and run `opencode run --print-logs` with the agent's HOME to see why"
	hintUnknown   = "OpenCode failed before asking the model and says only \"Unexpected server error\"; most often the model is not one of " +
		"a configured provider's (model must be provider/model, e.g. openai/gpt-5, and a built-in provider needs its key); " +
		"run `opencode run --print-logs` with the agent's HOME to see the cause"
)

// usageRE matches what `opencode run` prints to stderr when it refuses
// its arguments: the command's usage, which yargs shows for an unknown
// flag or a bad value, with or without a message after it.
var usageRE = regexp.MustCompile(`(?m)^opencode run \[message\.\.\]|^(Unknown arguments?|Not enough arguments|Invalid values?):`)

// argErrorRE finds yargs' own message among the usage, when it prints one.
var argErrorRE = regexp.MustCompile(`(?m)^(Unknown arguments?|Not enough arguments|Invalid values?):.*$`)

// ansiRE matches the colour escapes OpenCode writes to stderr whatever
// the terminal.
var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

func stripANSI(s string) string { return ansiRE.ReplaceAllString(s, "") }

// Finish implements runs.Decoder.
func (d *decoder) Finish(exit runs.Exit, stderrTail []byte) runs.Outcome {
	out := runs.Outcome{
		SessionID: d.sessionID, Model: d.inv.Spec.Model, Usage: d.usage, CostUSD: d.costUSD(),
		NumTurns: d.steps, StopReason: d.reason, Result: strings.Join(d.result, "\n"),
	}
	stderr := stripANSI(string(stderrTail))
	switch {
	case len(d.errs) > 0:
		out.Status, out.Error = runs.Failed, d.classify(d.errs[len(d.errs)-1])
	case exit.Signal != "":
		out.Status, out.Error = runs.Failed, runs.NewRunError(runs.ProcessKilled, "opencode was killed by "+exit.Signal, "")
	case exit.Code != 0:
		out.Status, out.Error = runs.Failed, d.classifyExit(exit, stderr)
	case d.steps == 0:
		out.Status, out.Error = runs.Failed, runs.NewRunError(runs.AgentCrashed,
			"opencode exited without running a model request"+orEmpty(": ", lastLines(stderr, 3)), hintCrash)
	case d.reason == "content-filter":
		out.Status, out.Error = runs.Failed, runs.NewRunError(runs.Refused, "the provider's content filter stopped the answer", "")
	default:
		out.Status = runs.Succeeded
	}
	return out
}

// classify turns OpenCode's session error into a RunError: by its name,
// and for an APIError by the HTTP status and isRetryable it carries.
func (d *decoder) classify(e *wireError) *runs.RunError {
	var data wireErrorData
	if e.Data != nil {
		data = *e.Data
	}
	msg := data.Message
	if msg == "" {
		msg = e.Name
	}
	switch e.Name {
	case "APIError":
		return classifyAPI(data, msg)
	case "ProviderAuthError":
		return runs.NewRunError(runs.NotAuthenticated, cmp.Or(msg, "the provider refused OpenCode's credential"), hintAuth)
	case "ContextOverflowError":
		return runs.NewRunError(runs.ContextExceeded, msg, hintContext)
	case "ContentFilterError":
		return runs.NewRunError(runs.Refused, msg, "")
	case "MessageAbortedError":
		return runs.NewRunError(runs.Interrupted, msg, hintInterrupt)
	case "MessageOutputLengthError":
		return runs.NewRunError(runs.APIError, "the model's answer reached its output token limit", hintAPI)
	case "StructuredOutputError":
		return runs.NewRunError(runs.APIError, msg, hintAPI)
	case "UnknownError":
		if e := classifyBody(msg); e != nil {
			return e
		}
		return runs.NewRunError(runs.AgentCrashed, msg, hintUnknown)
	}
	return runs.NewRunError(runs.AgentCrashed, fmt.Sprintf("OpenCode reported %s: %s", cmp.Or(e.Name, "an error"), msg), hintCrash)
}

// classifyAPI classifies a failed model request from its HTTP status; a
// request that got no answer (no status) by whether OpenCode found it
// worth retrying: a refused connection or a timeout is.
func classifyAPI(data wireErrorData, msg string) *runs.RunError {
	status := 0
	if data.StatusCode != nil {
		status = *data.StatusCode
	}
	if status != 0 {
		msg = fmt.Sprintf("%s (HTTP %d)", msg, status)
	}
	class, byStatus := adapterkit.StatusClass(status)
	switch {
	case byStatus && class == runs.APIError && contextExceeded(data.ResponseBody):
		class = runs.ContextExceeded
	case !byStatus && data.IsRetryable != nil && *data.IsRetryable:
		class = runs.TransientAPIError
	case !byStatus:
		class = runs.APIError
	}
	return runs.NewRunError(class, msg, apiHints[class])
}

// apiHints are the hints of a failed model request, per class.
var apiHints = map[runs.Class]string{
	runs.NotAuthenticated:  hintAuth,
	runs.RateLimited:       hintRate,
	runs.TransientAPIError: hintTransient,
	runs.ContextExceeded:   hintContext,
	runs.APIError:          hintAPI,
}

// classifyBody classifies the error object an OpenAI-compatible server
// sent inside a stream ({"message","type","code"}), which OpenCode passes
// on, after its retries, as an UnknownError whose message is that JSON;
// nil when msg is no such object.
func classifyBody(msg string) *runs.RunError {
	var b struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal([]byte(msg), &b) != nil || b.Type == "" {
		return nil
	}
	var code string
	_ = json.Unmarshal(b.Code, &code)
	text := cmp.Or(b.Message, msg)
	switch {
	case code == "context_length_exceeded":
		return runs.NewRunError(runs.ContextExceeded, text, hintContext)
	case b.Type == "server_error" || code == "server_is_overloaded":
		return runs.NewRunError(runs.TransientAPIError, text, hintTransient)
	case code == "rate_limit_exceeded" || b.Type == "requests" || b.Type == "tokens":
		return runs.NewRunError(runs.RateLimited, text, hintRate)
	case code == "invalid_api_key" || b.Type == "authentication_error":
		return runs.NewRunError(runs.NotAuthenticated, text, hintAuth)
	}
	return runs.NewRunError(runs.APIError, text, hintAPI)
}

// contextExceeded reports whether an error body is the OpenAI-shaped
// error of a prompt longer than the model's context.
func contextExceeded(body string) bool {
	var b wireBody
	if json.Unmarshal([]byte(body), &b) != nil || b.Error == nil {
		return false
	}
	var code string
	_ = json.Unmarshal(b.Error.Code, &code)
	return code == "context_length_exceeded"
}

// classifyExit classifies a run that failed without printing an error
// line: OpenCode refused its arguments or the session, or crashed.
func (d *decoder) classifyExit(exit runs.Exit, stderr string) *runs.RunError {
	last := lastLines(stderr, 3)
	switch {
	case strings.Contains(stderr, "Session not found"):
		return runs.NewRunError(runs.SessionNotFound, fmt.Sprintf("OpenCode has no session %s", d.inv.Spec.ResumeSessionID), hintResume)
	case usageRE.MatchString(stderr):
		msg := "opencode run refused its arguments and printed its usage"
		if m := argErrorRE.FindString(stderr); m != "" {
			msg += ": " + m
		}
		return runs.NewRunError(runs.FlagRejected, msg, versionHint(d.inv.CLIVersion))
	}
	msg := fmt.Sprintf("opencode exited with code %d without an answer", exit.Code)
	return runs.NewRunError(runs.AgentCrashed, msg+orEmpty(": ", last), hintCrash)
}

// versionHint names the installed and the verified version: a rejected
// flag usually means the CLI changed.
func versionHint(installed string) string {
	return adapterkit.VersionHint(Name, installed, VerifiedVersion, InstallCommand)
}

// lastLines returns the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var out []string
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			out = append([]string{clip.Text(l, 300)}, out...)
		}
	}
	return strings.Join(out, " | ")
}

// orEmpty returns prefix+s, or "" when s is empty.
func orEmpty(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
