package gemini

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
)

// settingsPath is the CLI's user settings file in home.
func settingsPath(home string) string { return filepath.Join(home, ".gemini", "settings.json") }

// forced are the settings every run needs, whatever the file held: the
// CLI phones home for usage statistics and update checks unless told not
// to, and has no variable for either.
var forced = map[string]map[string]any{
	"privacy":   {"usageStatisticsEnabled": false},
	"telemetry": {"enabled": false},
	"general":   {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
}

// defaults are set only where the file has no value, so that an operator
// who configured the home keeps their choice.
//
//   - security.auth.selectedType: headless, the CLI does nothing without
//     an auth type (exit 41), and with GOOGLE_GEMINI_BASE_URL set it would
//     otherwise pick "gateway", which headless mode rejects.
//   - general.maxAttempts bounds the retries of each model call.
//   - model.name is the model when neither the run nor GEMINI_MODEL names
//     one.
//   - advanced.ignoreLocalEnv: otherwise the CLI loads the first .env
//     file it finds from the run's directory upwards into its own
//     environment (variables the gateway did not set: a project's
//     HTTPS_PROXY, or GOOGLE_GEMINI_BASE_URL where the operator left it
//     unset). It still reads a .gemini/.env there, which no setting stops.
var defaults = []struct {
	path  []string
	value any
}{
	{[]string{"security", "auth", "selectedType"}, "gemini-api-key"},
	{[]string{"general", "maxAttempts"}, MaxAttempts},
	{[]string{"model", "name"}, DefaultModel},
	{[]string{"advanced", "ignoreLocalEnv"}, true},
}

// workspaceWritePolicy lets run_shell_command run without asking in the
// auto_edit approval mode, which alone lets only the edit tools (confined
// to the workspace) and web_fetch run. allowRedirection keeps "cmd > file"
// allowed, which a rule without it downgrades to asking, that is, to a
// refusal headless. The CLI's --allowed-tools flag does the same but is
// deprecated.
const workspaceWritePolicy = `# Written by agentgate for runs with permission workspace_write, which
# pass it with --policy. Rewritten at every start of the gateway.
[[rule]]
toolName = "run_shell_command"
decision = "allow"
priority = 100
modes = ["autoEdit"]
allowRedirection = true
`

// PrepareHome implements runs.HomePreparer. Gemini CLI does nothing
// headless without an auth type in $HOME/.gemini/settings.json, and phones
// home unless the file says not to. PrepareHome writes the file, keeping
// whatever else an operator put there, and the policy file workspace_write
// runs pass to the CLI. It is idempotent; the CLI does not rewrite either
// file, so one call serves every run that follows.
func (*Adapter) PrepareHome(home string) error {
	if home == "" {
		return errors.New("no home directory")
	}
	if err := adapterkit.MergeJSONSettings(settingsPath(home), merge); err != nil {
		return err
	}
	return adapterkit.WriteFileAtomic(policyPath(home), []byte(workspaceWritePolicy))
}

// merge sets the forced settings and fills in the defaults. It fails when
// a section the gateway must write into is not an object.
func merge(settings map[string]any) error {
	for section, kv := range forced {
		obj, err := object(settings, section)
		if err != nil {
			return err
		}
		for k, v := range kv {
			obj[k] = v
		}
	}
	for _, d := range defaults {
		obj := settings
		for i, key := range d.path[:len(d.path)-1] {
			next, err := object(obj, key)
			if err != nil {
				return fmt.Errorf("%v: %w", d.path[:i+1], err)
			}
			obj = next
		}
		last := d.path[len(d.path)-1]
		if v, ok := obj[last]; !ok || v == nil || v == "" {
			// Absent, null or empty: the gateway's value.
			obj[last] = d.value
		}
	}
	return nil
}

// object returns m[key] as an object, creating it when absent.
func object(m map[string]any, key string) (map[string]any, error) {
	switch v := m[key].(type) {
	case map[string]any:
		return v, nil
	case nil:
		obj := map[string]any{}
		m[key] = obj
		return obj, nil
	default:
		return nil, fmt.Errorf("%q is %T, not an object", key, v)
	}
}
