package codex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// Finish implements runs.Decoder. The root turn's completion decides the
// outcome; without one (the server refused a request, or the process
// died) the refusal or the exit does.
func (d *decoder) Finish(exit runs.Exit, stderrTail []byte) runs.Outcome {
	out := runs.Outcome{
		Usage: d.usage, SessionID: d.rootThread, Model: d.model, Result: d.result, Diff: d.diff,
	}
	// Tool calls still open were cut short by the end of the turn.
	out.Events = d.closeOpen("the turn ended before the tool call completed")
	if d.interactive {
		return d.finishSession(out, exit, stderrTail)
	}
	switch {
	case d.turnStatus == "completed":
		out.Status, out.StopReason = runs.Succeeded, "completed"
		if len(d.inv.Spec.OutputSchema) > 0 {
			if json.Valid([]byte(d.result)) && strings.HasPrefix(strings.TrimSpace(d.result), "{") {
				out.StructuredOutput = json.RawMessage(strings.TrimSpace(d.result))
			} else {
				out.Status = runs.Failed
				// Codex sends the schema as the response's json_schema
				// text format; a model that ignores it is not caught by
				// Codex.
				out.Error = runs.NewRunError(runs.SchemaMismatch, "the final message is not the JSON object output_schema asked for",
					"check the schema, or the model's support for structured output")
			}
		}
		return out
	case d.turnStatus == "failed":
		e := d.turnErr
		if e == nil && d.lastErr != nil {
			e = &d.lastErr.Error
		}
		if e == nil {
			e = &turnError{Message: "the turn failed without an error"}
		}
		out.Status, out.StopReason, out.Error = runs.Failed, "failed", classify(*e).runError(*e)
		return out
	case d.turnStatus == "interrupted":
		// Interrupted by the gateway, whose verdict (cancelled, timed out)
		// then replaces this one, or by something else.
		out.Status, out.StopReason = runs.Failed, "interrupted"
		out.Error = runs.NewRunError(runs.AgentCrashed, "the turn was interrupted", "")
		return out
	case d.turnStatus != "":
		out.Status = runs.Failed
		out.Error = runs.NewRunError(runs.AgentCrashed, fmt.Sprintf("the turn ended with status %q", d.turnStatus), "")
		return out
	case d.rpcErr != nil:
		out.Status, out.Error = runs.Failed, d.requestError(d.rpcErr)
		return out
	}
	out.Status, out.Error = runs.Failed, exitError(exit, stderrTail, d.inv.CLIVersion)
	return out
}

// finishSession is Finish for a session: the outcome of its last turn,
// with the usage of every turn and their number. A turn still running
// when the process ended completes here, failed.
func (d *decoder) finishSession(out runs.Outcome, exit runs.Exit, stderrTail []byte) runs.Outcome {
	d.mu.Lock()
	active := d.turnActive
	d.turnActive = false
	d.mu.Unlock()
	out.NumTurns = d.turns
	switch {
	case active || d.turns == 0:
		if d.rpcErr != nil {
			out.Error = d.requestError(d.rpcErr)
		} else {
			out.Error = exitError(exit, stderrTail, d.inv.CLIVersion)
		}
		out.Status = runs.Failed
		if active {
			out.NumTurns++
			out.Events = append(out.Events, d.withdraw()...)
			out.Events = append(out.Events, d.scope("", []runs.Event{runs.NewEvent(runs.EventTurnCompleted, runs.TurnCompletedData{
				Status: runs.Failed, StopReason: "failed", Result: d.result, Usage: d.turnUsage, Error: out.Error,
			})})...)
		}
		return out
	case d.last.Status == runs.Cancelled:
		out.Status, out.StopReason = runs.Cancelled, d.last.StopReason
		out.Error = runs.NewRunError(runs.ClassCancelled, "the last turn was interrupted", "")
		return out
	}
	out.Status, out.StopReason, out.Error = d.last.Status, d.last.StopReason, d.last.Error
	return out
}

// requestError classifies the server's refusal f of one of our requests.
func (d *decoder) requestError(f *rpcFailure) *runs.RunError {
	e := f.err
	msg := fmt.Sprintf("%s: %s", f.method, e.Message)
	switch {
	case f.method == methodThreadResume && strings.Contains(e.Message, "no rollout found"):
		return runs.NewRunError(runs.SessionNotFound, msg,
			"the session was not kept (runs are ephemeral unless keep_session is true) or lives in another Codex home")
	case e.Code == codeMethodNotFound || e.Code == codeInvalidParams || isRejection(e.Message):
		return flagRejected(msg, d.inv.CLIVersion)
	}
	return runs.NewRunError(runs.APIError, msg, "")
}

// isRejection reports whether a JSON-RPC error message says the CLI does
// not know a method or parameter (serde's words for an unknown variant or
// field).
func isRejection(msg string) bool {
	for _, s := range []string{"unknown variant", "unknown field", "unknown method", "method not found", "missing field"} {
		if strings.Contains(strings.ToLower(msg), s) {
			return true
		}
	}
	return false
}

func flagRejected(msg, installed string) *runs.RunError {
	if installed == "" {
		installed = "unknown"
	}
	return runs.NewRunError(runs.FlagRejected, msg,
		fmt.Sprintf("codex %s rejected what the gateway sends; the adapter was verified with codex %s: install it with `%s`",
			installed, VerifiedVersion, InstallCommand))
}

// exitError classifies a process that ended without finishing its turn.
func exitError(exit runs.Exit, stderrTail []byte, version string) *runs.RunError {
	tail := lastLines(stderrTail, 3)
	low := strings.ToLower(tail)
	switch {
	case exit.Signal != "":
		return runs.NewRunError(runs.ProcessKilled, fmt.Sprintf("codex was killed by %s before its turn completed", exit.Signal), "")
	case strings.Contains(low, "unexpected argument") || strings.Contains(low, "unknown feature") ||
		strings.Contains(low, "unrecognized subcommand") || strings.Contains(low, "invalid value"):
		return flagRejected("codex refused its command line: "+tail, version)
	case strings.Contains(low, "config.toml") || strings.Contains(low, "error loading config"):
		return runs.NewRunError(runs.AgentCrashed, "codex could not load its configuration: "+tail, "fix config.toml in the Codex home")
	}
	msg := fmt.Sprintf("codex exited with code %d before its turn completed", exit.Code)
	if tail != "" {
		msg += ": " + tail
	}
	return runs.NewRunError(runs.AgentCrashed, msg, "")
}

// class is the verdict on one Codex error.
type class struct {
	class  runs.Class
	status int // the HTTP status, when Codex said
	hint   string
}

func (c class) runError(e turnError) *runs.RunError {
	msg := e.Message
	if c.class == runs.APIError {
		msg = bodyMessage(msg)
	}
	return runs.NewRunError(c.class, msg, c.hint)
}

// classify reads codexErrorInfo, Codex's own classification, first. Only
// what it leaves open ("other", no status) is read from the message: a
// missing key variable, a stream that went idle, and a 400 whose raw body
// is the message.
func classify(e turnError) class {
	info, status := errorInfo(e.Info)
	switch info {
	case "unauthorized":
		return class{class: runs.NotAuthenticated, status: 401, hint: authHint}
	case "usageLimitExceeded", "rateLimitExceeded":
		return class{class: runs.RateLimited, status: 429}
	case "serverOverloaded", "internalServerError", "flexUnavailable", "policyCapacityUnavailable":
		return class{class: runs.TransientAPIError, status: status}
	case "contextWindowExceeded":
		return class{class: runs.ContextExceeded, hint: "shorten the prompt, or start a new session instead of resuming"}
	case "sessionBudgetExceeded":
		return class{class: runs.BudgetExceeded}
	case "cyberPolicy", "bioPolicy", "misalignmentPolicyViolation", "inferenceHookDenied":
		return class{class: runs.Refused}
	case "badRequest", "modelNotFound":
		return class{class: runs.APIError, status: 400}
	case "responseStreamDisconnected", "responseStreamConnectionFailed", "httpConnectionFailed", "responseTooManyFailedAttempts":
		c, ok := adapterkit.StatusClass(status)
		if !ok {
			// A timeout, a dropped or idle stream: worth another try.
			c = runs.TransientAPIError
		}
		if c == runs.NotAuthenticated {
			return class{class: c, status: status, hint: authHint}
		}
		return class{class: c, status: status}
	}
	msg := strings.TrimSpace(e.Message)
	switch {
	case strings.HasPrefix(msg, "Missing environment variable"):
		return class{class: runs.NotAuthenticated, hint: "set the variable named for the gateway; it is passed to Codex"}
	case strings.HasPrefix(msg, "stream disconnected before completion"):
		// An idle stream comes as "other" in 0.171.0.
		return class{class: runs.TransientAPIError}
	case strings.HasPrefix(msg, "{") && json.Valid([]byte(msg)):
		return class{class: runs.APIError, status: 400}
	}
	return class{class: runs.APIError, status: status}
}

const authHint = "check the API key of the model provider configured in the Codex home (its env_key variable, or `codex login`)"

// errorInfo splits codexErrorInfo into its name and HTTP status: "other",
// or {"httpConnectionFailed":{"httpStatusCode":401}}.
func errorInfo(raw json.RawMessage) (string, int) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", 0
	}
	var name string
	if json.Unmarshal(raw, &name) == nil {
		return name, 0
	}
	var obj map[string]struct {
		Status *int `json:"httpStatusCode"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return "", 0
	}
	for k, v := range obj {
		if v.Status != nil {
			return k, *v.Status
		}
		return k, 0
	}
	return "", 0
}

// bodyMessage returns the message of an OpenAI error body, which Codex
// passes on raw for a 400, or msg itself.
func bodyMessage(msg string) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(msg), &body) == nil && body.Error.Message != "" {
		if body.Error.Code != "" {
			return body.Error.Message + " (" + body.Error.Code + ")"
		}
		return body.Error.Message
	}
	return msg
}

// lastLines returns the last n non-empty lines of b, joined by " | ".
func lastLines(b []byte, n int) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return clip.Text(strings.Join(lines, " | "), 1000)
}
