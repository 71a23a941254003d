package opencode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/runs"
)

// builtinKeys are the key variables of the built-in providers whose keys
// the adapter passes through.
var builtinKeys = map[string]string{"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

// hintAuth tells a person how OpenCode gets a credential.
const hintAuth = "give the model provider its key: an apiKey of \"{env:NAME}\" in the provider's options in OpenCode's configuration " +
	"with NAME set for the gateway (NAME is passed to OpenCode when it is OPENAI_API_KEY or ANTHROPIC_API_KEY, " +
	"or when the configuration naming it is a file in the agent's home, ~/.config/opencode/opencode.json), " +
	"or run `opencode auth login` once with HOME set to the agent's home"

// sessionListTimeout bounds `opencode session list`: far above its usual
// second or two, since the CLI's start alone can take tens of seconds on a
// loaded machine, and a run must not fail for that.
const sessionListTimeout = time.Minute

// Preflight implements runs.Preflighter. It fails a run at once for what
// OpenCode would report only after starting, or not at all:
//
//   - the provider of the run's model reads its key from {env:NAME} and
//     NAME is not in the run's environment (OpenCode would send no key),
//     or it is OpenAI or Anthropic without a configuration, key variable
//     or login (OpenCode would say only "Unexpected server error");
//   - the run has images and the model's configuration does not declare
//     image input (OpenCode would replace them with an error text);
//   - resume_session_id names a session that does not exist, or belongs
//     to another directory: OpenCode continues a session only in the
//     directory it began in, and started anywhere else it waits for ever
//     without printing a line.
func (*Adapter) Preflight(ctx context.Context, inv runs.Invocation, env []string) *runs.RunError {
	if e := checkKey(inv, env); e != nil {
		return e
	}
	if len(inv.Spec.Attachments) > 0 || len(inv.Images) > 0 {
		// Command checked what it could see; the run's environment may
		// hold the operator's OPENCODE_CONFIG_CONTENT or OPENCODE_CONFIG.
		if err := imageSupport(configSources(runs.HostFiles{}, inv.Home, env), inv.Spec.Model); err != nil {
			return runs.NewRunError(runs.APIError, "OpenCode would replace the run's images with an error text: "+err.Error(), hintImages)
		}
	}
	if inv.Spec.ResumeSessionID != "" {
		return checkSession(ctx, inv, env)
	}
	return nil
}

// checkKey checks that the provider of the run's model gets the key its
// configuration asks for.
func checkKey(inv runs.Invocation, env []string) *runs.RunError {
	srcs := configSources(runs.HostFiles{}, inv.Home, env)
	model := inv.Spec.Model
	var sections []source // the provider's sections, by source
	if model == "" {
		for _, s := range srcs {
			if c, ok := parseConfig(s.text); ok && c.Model != "" {
				model = c.Model
			}
		}
	}
	provider := providerOf(model)
	if provider == "" {
		return nil // OpenCode's own default, or a model it will refuse itself
	}
	for _, s := range srcs {
		if c, ok := parseConfig(s.text); ok {
			if raw, ok := c.Provider[provider]; ok {
				sections = append(sections, source{s.name, raw})
			}
		}
	}
	for _, s := range sections {
		for _, name := range envRefs(s.text) {
			if lookupEnv(env, name) == "" {
				return runs.NewRunError(runs.NotAuthenticated,
					fmt.Sprintf("model provider %q in %s reads {env:%s}, which is not set for OpenCode", provider, s.name, name),
					fmt.Sprintf("set %s for the gateway; it reaches OpenCode when it is OPENAI_API_KEY or ANTHROPIC_API_KEY, "+
						"or when the configuration naming it is a file in the agent's home (%s); or put the key in the configuration itself",
						name, filepath.Join(configDir(inv.Home), "opencode.json")))
			}
		}
	}
	if len(sections) > 0 {
		return nil
	}
	key, builtin := builtinKeys[provider]
	if !builtin || lookupEnv(env, key) != "" || loggedIn(inv.Home, provider) {
		return nil
	}
	return runs.NewRunError(runs.NotAuthenticated,
		fmt.Sprintf("OpenCode has no credential for provider %q: %s is not set and `opencode auth login` was not run in the agent's home", provider, key),
		fmt.Sprintf("set %s for the gateway, or run `HOME=%s opencode auth login`", key, inv.Home))
}

// loggedIn reports whether `opencode auth login` stored a credential for
// provider in home.
func loggedIn(home, provider string) bool {
	b, err := os.ReadFile(authFile(home))
	if err != nil {
		return false
	}
	var creds map[string]json.RawMessage
	if json.Unmarshal(b, &creds) != nil {
		return false
	}
	_, ok := creds[provider]
	return ok
}

// listedSession is one entry of `opencode session list --format json`.
type listedSession struct {
	ID        string `json:"id"`
	Directory string `json:"directory"`
}

// hintResume tells a person where a session can be resumed.
const hintResume = "resume_session_id must name a session OpenCode ran in the agent's home; leave cwd empty, " +
	"and the gateway resumes it in the directory it began in"

// checkSession asks OpenCode for its sessions and checks that the one to
// resume exists and began in the run's directory.
func checkSession(ctx context.Context, inv runs.Invocation, env []string) *runs.RunError {
	ctx, cancel := context.WithTimeout(ctx, sessionListTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, inv.Bin, "session", "list", "--format=json", "--pure")
	cmd.Env, cmd.Dir = env, inv.Dir
	cmd.WaitDelay = time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return runs.NewRunError(runs.AgentCrashed,
				fmt.Sprintf("`opencode session list` failed (%v): %s", err, clip.Text(strings.TrimSpace(stripANSI(stderr.String())), 300)), "")
		}
		return runs.NewRunError(runs.AgentCrashed, "`opencode session list` could not run: "+err.Error(), "")
	}
	var list []listedSession
	if trimmed := strings.TrimSpace(string(out)); trimmed != "" {
		if err := json.Unmarshal([]byte(trimmed), &list); err != nil {
			return runs.NewRunError(runs.FlagRejected,
				"`opencode session list --format json` printed something else than a list: "+clip.Text(trimmed, 200), versionHint(inv.CLIVersion))
		}
	}
	for _, s := range list {
		if s.ID != inv.Spec.ResumeSessionID {
			continue
		}
		if filepath.Clean(s.Directory) != filepath.Clean(inv.Dir) {
			return runs.NewRunError(runs.APIError,
				fmt.Sprintf("session %s began in %s, not in the run's directory %s: OpenCode continues a session only where it began",
					s.ID, s.Directory, inv.Dir), hintResume)
		}
		return nil
	}
	return runs.NewRunError(runs.SessionNotFound, fmt.Sprintf("OpenCode has no session %s", inv.Spec.ResumeSessionID), hintResume)
}
