package qwen

import (
	"strconv"
	"strings"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// Hints for a person, per failure.
const (
	hintAuth = "set OPENAI_API_KEY for the gateway (and OPENAI_BASE_URL for an OpenAI-compatible server other than OpenAI's): " +
		"they are passed to qwen, which then uses its \"openai\" auth type"
	hintRate      = "the model API's rate limit or quota was reached; retry later"
	hintTransient = "the model API failed, was overloaded or could not be reached; retry later"
	hintAPI       = "the model API refused the request; check the model name (OPENAI_MODEL or the run's model) and the request"
	hintContext   = "the conversation is longer than the model's context window; shorten the prompt or start a new session"
	hintCrash     = "qwen ended without a result; see the message and the gateway's log"
)

// classifyExit implements acp.Profile.ClassifyExit: a process that ended
// before its turn did. A signal is the core's (process_killed); a missing
// key the CLI reports on stderr is not_authenticated.
func classifyExit(exit runs.Exit, stderrTail []byte) *runs.RunError {
	if exit.Signal != "" {
		return nil
	}
	tail := strings.TrimSpace(string(stderrTail))
	lower := strings.ToLower(tail)
	msg := "qwen exited with code " + strconv.Itoa(exit.Code)
	if tail != "" {
		msg += ": " + clip.Text(lastLines(tail, 5), 1000)
	}
	if strings.Contains(lower, "no auth type is selected") || strings.Contains(lower, "authentication required") ||
		strings.Contains(lower, "openai_api_key") {
		return runs.NewRunError(runs.NotAuthenticated, msg, hintAuth)
	}
	if m := apiErrorStatus.FindStringSubmatch(tail); m != nil {
		status, _ := strconv.Atoi(m[1])
		return classifyStatus(status, msg)
	}
	return runs.NewRunError(runs.AgentCrashed, msg, hintCrash)
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
