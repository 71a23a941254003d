package qwen

import (
	"errors"
	"path/filepath"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
)

// settingsPath is the CLI's user settings file in home.
func settingsPath(home string) string { return filepath.Join(home, ".qwen", "settings.json") }

// setting is one key of the settings file, by its path of sections.
type setting struct {
	path  []string
	value any
}

// forced are the settings every run needs, whatever the file held.
//
//   - privacy.usageStatisticsEnabled, telemetry.enabled: without them the
//     CLI sends usage statistics to Aliyun (DNS lookups of
//     gb4w8c3ygj-default-sea.rum.aliyuncs.com were seen).
//   - general.enableAutoUpdate: no update check.
//   - memory.enableManagedAutoMemory and enableManagedAutoDream: after
//     every turn the CLI would otherwise run a memory extraction, a model
//     request of its own that no ACP message reports.
//   - ui.enableFollowupSuggestions: after every ACP turn the CLI would
//     otherwise ask the model for a follow-up suggestion ("[SUGGESTION
//     MODE: …"), also billed and unreported.
var forced = []setting{
	{[]string{"privacy", "usageStatisticsEnabled"}, false},
	{[]string{"telemetry", "enabled"}, false},
	{[]string{"general", "enableAutoUpdate"}, false},
	{[]string{"memory", "enableManagedAutoMemory"}, false},
	{[]string{"memory", "enableManagedAutoDream"}, false},
	{[]string{"ui", "enableFollowupSuggestions"}, false},
}

// MaxRetries is model.generationConfig.maxRetries in the settings
// PrepareHome writes where the operator set none: the retries of a
// rate-limited model request, and of the OpenAI SDK's own retries of
// every failed request. The CLI's default (10, from 60 s growing to
// 5 min, each with 3 SDK retries) turns a persistent 429 into most of an
// hour; without retries it fails in seconds. A 5xx is retried 6 times
// more whatever the setting (about a minute of backoff; doc.go).
const MaxRetries = 0

// defaults are set only where the file has no value, so that an operator
// who configured the home keeps their choice.
var defaults = []setting{
	{[]string{"model", "generationConfig", "maxRetries"}, MaxRetries},
}

// PrepareHome implements runs.HomePreparer: it writes the forced settings
// and the defaults into $HOME/.qwen/settings.json, keeping whatever else
// an operator put there. It is idempotent.
func (*Adapter) PrepareHome(home string) error {
	if home == "" {
		return errors.New("no home directory")
	}
	return adapterkit.MergeJSONSettings(settingsPath(home), merge)
}

// merge sets the forced settings and fills in the defaults. It fails when
// a section the gateway must write into is not an object.
func merge(settings map[string]any) error {
	for _, f := range forced {
		obj, err := adapterkit.Section(settings, f.path)
		if err != nil {
			return err
		}
		obj[f.path[len(f.path)-1]] = f.value
	}
	for _, d := range defaults {
		obj, err := adapterkit.Section(settings, d.path)
		if err != nil {
			return err
		}
		last := d.path[len(d.path)-1]
		if v, ok := obj[last]; !ok || v == nil {
			obj[last] = d.value
		}
	}
	return nil
}
