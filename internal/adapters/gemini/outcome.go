package gemini

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// Hints for a person, per failure.
const (
	hintAuth = "set GEMINI_API_KEY for the gateway to a Gemini API key (https://aistudio.google.com/apikey); it is passed " +
		"to the CLI, whose settings.json in its home selects security.auth.selectedType \"gemini-api-key\" (the gateway " +
		"writes it at start). GOOGLE_API_KEY counts only where that file selects \"vertex-ai\""
	hintRate      = "the Gemini API's rate limit or quota was reached; retry later"
	hintTransient = "the Gemini API failed, was overloaded or could not be reached; retry later"
	hintAPI       = "the Gemini API refused the request; check the model name and the request"
	hintContext   = "the conversation is longer than the model's context window; shorten the prompt or start a new session"
	hintMaxTurns  = "the session reached model.maxSessionTurns in the home's settings.json"
	hintResume    = "resume_session_id must name a session this gateway ran, in the same directory (cwd): gemini keeps sessions per directory in its home"
	hintCrash     = "the agent ended without a result; see the message and the gateway's log"
	hintHome      = "the CLI's home was not prepared as the gateway expects; restart the gateway, which rewrites $HOME/.gemini/settings.json"
)

// The CLI's own exit codes (FatalError subclasses); an API failure exits
// with its HTTP status mod 256 instead.
const (
	exitAuth      = 41
	exitInput     = 42
	exitConfig    = 52
	exitTurnLimit = 53
	exitToolFatal = 54
	exitUntrusted = 55
	exitCancelled = 130
)

// Finish implements runs.Decoder.
func (d *decoder) Finish(exit runs.Exit, stderrTail []byte) runs.Outcome {
	out := runs.Outcome{SessionID: d.sessionID, Model: d.model}
	out.Events = append(out.Events, d.flush()...)
	for _, id := range d.open {
		out.Events = append(out.Events, runs.NewEvent(runs.EventToolCallCompleted, runs.ToolCallCompletedData{
			ID: id, Output: "no result: the agent ended before the tool call returned", IsError: true,
		}))
	}
	d.open = nil
	for i := range out.Events {
		out.Events[i].SessionID = d.sessionID
	}
	out.Result = d.last
	stderr := string(stderrTail)

	r := d.result
	if r == nil {
		out.Status, out.Error = runs.Failed, d.classifyNoResult(exit, stderr)
		// Killed, cancelled or stopped at a budget: what the recording
		// holds is what the run was billed so far.
		if u, ok := d.usageSoFar(); ok {
			out.Usage = u
			if u != d.reported {
				out.Events = append(out.Events, runs.NewEvent(runs.EventUsageUpdated, runs.UsageData{Usage: u}))
				out.Events[len(out.Events)-1].SessionID = d.sessionID
			}
		}
		return out
	}
	out.Usage = normalize(r.Stats)
	if out.Model == "" && r.Stats != nil {
		out.Model = adapterkit.FirstModel(r.Stats.Models)
	}
	switch r.Status {
	case "success":
		out.Status, out.StopReason = runs.Succeeded, "success"
	case "error":
		out.Status, out.StopReason, out.Error = runs.Failed, "error", d.classifyResult(r, exit, stderr)
	default:
		out.Status = runs.Failed
		out.Error = runs.NewRunError(runs.AgentCrashed, fmt.Sprintf("the result has status %q", r.Status), hintCrash)
	}
	return out
}

// classifyResult classifies a result of status "error". Its error type
// names the CLI's fatal errors; an API failure has type "unknown" and a
// message quoting the API's error body, and the process exits with the
// HTTP status mod 256.
func (d *decoder) classifyResult(r *wireLine, exit runs.Exit, stderr string) *runs.RunError {
	var typ, msg string
	if r.Error != nil {
		typ, msg = r.Error.Type, r.Error.Message
	}
	msg = cmp.Or(msg, d.lastError)
	switch {
	case typ == "FatalTurnLimitedError" || exit.Code == exitTurnLimit || strings.Contains(msg, "Maximum session turns exceeded"):
		return runs.NewRunError(runs.MaxTurns, cmp.Or(msg, "the session reached its maximum number of turns"), hintMaxTurns)
	case typ == "FatalCancellationError" || exit.Code == exitCancelled:
		return runs.NewRunError(runs.Interrupted, cmp.Or(msg, "the operation was cancelled"), "")
	case typ == "FatalToolExecutionError" || exit.Code == exitToolFatal:
		return runs.NewRunError(runs.AgentCrashed, cmp.Or(msg, "a tool failed fatally"), hintCrash)
	case typ == "FatalAuthenticationError" || exit.Code == exitAuth:
		return runs.NewRunError(runs.NotAuthenticated, cmp.Or(msg, "gemini is not authenticated"), hintAuth)
	}
	return classifyAPI(apiFailureOf(msg, exit, stderr), cmp.Or(msg, "the run failed without an error message"))
}

// apiFailure is what is known of a failed API call.
type apiFailure struct {
	// status is the HTTP status: from the error body the message quotes,
	// else from the exit code, else from stderr; 0 when none says.
	status int
	// code and reason are the body's canonical status
	// (RESOURCE_EXHAUSTED, ...) and its ErrorInfo reason.
	code, reason string
	// message is the body's message, when the CLI quoted a body.
	message string
}

// apiFailureOf reads a failure from the result's message, the exit code
// and stderr, in that order of trust.
func apiFailureOf(msg string, exit runs.Exit, stderr string) apiFailure {
	var f apiFailure
	if g, ok := quotedError(msg); ok {
		f.status, f.code, f.message = g.Error.Code, g.Error.Status, g.Error.Message
		for _, det := range g.Error.Details {
			if det.Reason != "" {
				f.reason = det.Reason
			}
		}
	}
	if f.status == 0 {
		f.status = statusFromExit(exit)
	}
	if f.status == 0 {
		f.status = statusFromStderr(stderr)
	}
	return f
}

// quotedError finds the Google error body the CLI quotes in a message
// ("[API Error: {"error":{…}}]") and decodes it.
func quotedError(msg string) (googleError, bool) {
	var g googleError
	i := strings.Index(msg, `{"error"`)
	if i < 0 {
		return g, false
	}
	// Decode one value and ignore what follows it (the closing bracket).
	if err := json.NewDecoder(strings.NewReader(msg[i:])).Decode(&g); err != nil || g.Error.Code == 0 && g.Error.Message == "" {
		return googleError{}, false
	}
	return g, true
}

// statusFromExit reads the HTTP status from an exit code: the CLI exits
// with the status mod 256, so 144…255 are 400…511.
func statusFromExit(exit runs.Exit) int {
	if exit.Signal == "" && exit.Code >= 144 && exit.Code <= 255 {
		return exit.Code + 256
	}
	return 0
}

// stderrStatusRE matches the status the CLI prints with an API error on
// stderr: "Attempt 1 failed with status 503", or a dumped error's
// "status: 429" / "code: 404".
var stderrStatusRE = regexp.MustCompile(`(?m)(?:failed with status |^\s*(?:status|code): )([1-5]\d\d)\b`)

// statusFromStderr returns the last HTTP status stderr names, or 0.
func statusFromStderr(stderr string) int {
	m := stderrStatusRE.FindAllStringSubmatch(stderr, -1)
	if len(m) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}

// classifyAPI classifies a failed API call, from its status first and its
// message where no status says.
func classifyAPI(f apiFailure, msg string) *runs.RunError {
	text := msg
	if f.message != "" {
		text = f.message
		if f.code != "" {
			text += " (" + strconv.Itoa(f.status) + " " + f.code + ")"
		}
	}
	low := strings.ToLower(msg)
	class, byStatus := adapterkit.StatusClass(f.status)
	switch {
	case f.reason == "API_KEY_INVALID" || strings.Contains(low, "api key not valid") || strings.Contains(low, "api key expired"):
		// The Gemini API answers an unknown key with 400, not 401.
		class = runs.NotAuthenticated
	case byStatus && class != runs.APIError:
		// 401, 403, 429, 408 and 5xx say what happened whatever the text.
	case strings.Contains(low, "exceeds the maximum number of tokens") || strings.Contains(low, "input token count"):
		// A 4xx, or no status, whose message says the context is full.
		class = runs.ContextExceeded
	case byStatus:
		// Any other 4xx is the status's APIError.
	case strings.Contains(low, "quota") || strings.Contains(low, "resource has been exhausted"):
		class = runs.RateLimited
	case strings.Contains(low, "fetch failed") || strings.Contains(low, "econnrefused") || strings.Contains(low, "econnreset") ||
		strings.Contains(low, "etimedout") || strings.Contains(low, "socket hang up") || strings.Contains(low, "overloaded") ||
		strings.Contains(low, "timed out") || strings.Contains(low, "timeout"):
		class = runs.TransientAPIError
	case strings.HasPrefix(msg, "[API Error"):
		class = runs.APIError
	default:
		return runs.NewRunError(runs.AgentCrashed, text, hintCrash)
	}
	return runs.NewRunError(class, text, hintFor(class))
}

func hintFor(c runs.Class) string {
	switch c {
	case runs.NotAuthenticated:
		return hintAuth
	case runs.RateLimited:
		return hintRate
	case runs.TransientAPIError:
		return hintTransient
	case runs.ContextExceeded:
		return hintContext
	}
	return hintAPI
}

// flagRejectedRE matches yargs' refusals of a command line.
var flagRejectedRE = regexp.MustCompile(`(?m)^(Unknown arguments?: |Invalid values?:|Not enough arguments|Missing required argument|Arguments .* are mutually exclusive|Invalid approval mode)`)

// classifyNoResult classifies a run that printed no result line: it was
// killed, or the CLI refused to start.
func (d *decoder) classifyNoResult(exit runs.Exit, stderr string) *runs.RunError {
	last := lastLines(stderr, 3)
	switch {
	case exit.Signal != "":
		return runs.NewRunError(runs.ProcessKilled, fmt.Sprintf("gemini was killed by %s", exit.Signal), "")
	case exit.Code == exitAuth:
		return runs.NewRunError(runs.NotAuthenticated, cmp.Or(last, "gemini is not authenticated"), hintAuth)
	case exit.Code == exitInput && strings.Contains(stderr, "Error resuming session"):
		return runs.NewRunError(runs.SessionNotFound, last, hintResume)
	case exit.Code == exitInput || flagRejectedRE.MatchString(stderr):
		return runs.NewRunError(runs.FlagRejected, cmp.Or(firstMatch(flagRejectedRE, stderr), last), d.flagHint())
	case exit.Code == exitUntrusted:
		return runs.NewRunError(runs.AgentCrashed, cmp.Or(last, "gemini refused to run in an untrusted directory"),
			"GEMINI_CLI_TRUST_WORKSPACE=true no longer trusts the directory; "+d.flagHint())
	case exit.Code == exitConfig:
		return runs.NewRunError(runs.AgentCrashed, cmp.Or(last, "gemini refused its configuration"), hintHome)
	case exit.Code == exitTurnLimit:
		return runs.NewRunError(runs.MaxTurns, cmp.Or(last, "the session reached its maximum number of turns"), hintMaxTurns)
	}
	if f := apiFailureOf("", exit, stderr); f.status != 0 {
		return classifyAPI(f, fmt.Sprintf("gemini exited with code %d (HTTP %d) without a result: %s", exit.Code, f.status, last))
	}
	msg := fmt.Sprintf("gemini exited with code %d without a result", exit.Code)
	if exit.Code == 0 {
		// What SIGTERM and SIGINT do to a single-process CLI.
		msg += " (it does so when sent SIGTERM or SIGINT)"
	}
	if last != "" {
		msg += ": " + last
	}
	return runs.NewRunError(runs.AgentCrashed, msg, hintCrash)
}

// flagHint names the installed and the verified version: a rejected flag
// usually means the CLI changed.
func (d *decoder) flagHint() string {
	return adapterkit.VersionHint(Name, d.inv.CLIVersion, VerifiedVersion, InstallCommand)
}

// firstMatch returns the line of s where re first matches, or "".
func firstMatch(re *regexp.Regexp, s string) string {
	loc := re.FindStringIndex(s)
	if loc == nil {
		return ""
	}
	start := strings.LastIndexByte(s[:loc[0]], '\n') + 1
	end := strings.IndexByte(s[loc[0]:], '\n')
	if end < 0 {
		return strings.TrimSpace(s[start:])
	}
	return strings.TrimSpace(s[start : loc[0]+end])
}

// lastLines returns the last n non-empty lines of s that are not part of
// a stack trace or the CLI's terminal warnings, joined by " | ".
func lastLines(s string, n int) string {
	var out []string
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "at ") || strings.HasPrefix(l, "Warning: ") {
			continue
		}
		out = append([]string{l}, out...)
	}
	return clip.Text(strings.Join(out, " | "), 1000)
}
