package qwen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	path := settingsPath(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	settings := map[string]any{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case len(bytes.TrimSpace(b)) > 0:
		if err := json.Unmarshal(b, &settings); err != nil {
			// The CLI accepts comments in the file; rewriting it as plain
			// JSON would drop them, so a person decides.
			return fmt.Errorf("%s is not plain JSON (%v): fix it, or remove it and let the gateway write it", path, err)
		}
		if settings == nil {
			settings = map[string]any{}
		}
	}
	if err := merge(settings); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(out, '\n'))
}

// merge sets the forced settings and fills in the defaults. It fails when
// a section the gateway must write into is not an object.
func merge(settings map[string]any) error {
	for _, f := range forced {
		obj, err := section(settings, f.path)
		if err != nil {
			return err
		}
		obj[f.path[len(f.path)-1]] = f.value
	}
	for _, d := range defaults {
		obj, err := section(settings, d.path)
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

// section returns the object that holds the last key of path, creating
// the sections on the way.
func section(settings map[string]any, path []string) (map[string]any, error) {
	obj := settings
	for i, key := range path[:len(path)-1] {
		switch v := obj[key].(type) {
		case map[string]any:
			obj = v
		case nil:
			next := map[string]any{}
			obj[key] = next
			obj = next
		default:
			return nil, fmt.Errorf("%v is %T, not an object", path[:i+1], v)
		}
	}
	return obj, nil
}

// writeFile replaces path atomically, so that a CLI starting meanwhile
// never reads half a file.
func writeFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o600)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
