package cline

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentgate/agentgate/internal/adapters/adapterkit"
	"github.com/agentgate/agentgate/internal/runs"
)

// settingsDir is where Cline 3.0.65 keeps its settings in its home.
func settingsDir(home string) string { return filepath.Join(home, ".cline", "data", "settings") }

// providersPath is Cline's provider configuration: what `cline auth`
// writes, and where a run finds its endpoint, model and key.
func providersPath(home string) string { return filepath.Join(settingsDir(home), "providers.json") }

// globalSettingsPath is Cline's global settings file.
func globalSettingsPath(home string) string {
	return filepath.Join(settingsDir(home), "global-settings.json")
}

// sessionPath is the record Cline keeps of a session, whose
// metadata.usage holds the session's usage so far.
func sessionPath(home, sessionID string) string {
	return filepath.Join(home, ".cline", "data", "sessions", sessionID, sessionID+".json")
}

// openAICompatible is the provider id of an OpenAI-compatible endpoint.
const openAICompatible = "openai-compatible"

// providersFile is providers.json as Cline 3.0.65 reads it. Unknown keys
// are kept when the file is rewritten.
type providersFile struct {
	Version          int                          `json:"version"`
	LastUsedProvider string                       `json:"lastUsedProvider"`
	Modes            json.RawMessage              `json:"modes,omitempty"`
	Providers        map[string]*providerSettings `json:"providers"`
}

// providerSettings is one provider's entry. Cline ignores the whole file,
// and overwrites it with its own default (provider "cline"), when an
// entry lacks updatedAt.
type providerSettings struct {
	Settings struct {
		Provider string `json:"provider"`
		APIKey   string `json:"apiKey,omitempty"`
		Model    string `json:"model,omitempty"`
		BaseURL  string `json:"baseUrl,omitempty"`
	} `json:"settings"`
	UpdatedAt   string `json:"updatedAt"`
	TokenSource string `json:"tokenSource,omitempty"`
}

// ProvidersJSON returns a providers.json whose one provider is the
// OpenAI-compatible endpoint at baseURL, serving model; key may be empty
// when CLINE_API_KEY gives it.
func ProvidersJSON(baseURL, model, key string) []byte {
	p := &providerSettings{UpdatedAt: "2026-01-01T00:00:00.000Z", TokenSource: "manual"}
	p.Settings.Provider, p.Settings.BaseURL, p.Settings.Model, p.Settings.APIKey = openAICompatible, baseURL, model, key
	b, _ := json.Marshal(providersFile{Version: 1, LastUsedProvider: openAICompatible, Modes: json.RawMessage(`{}`),
		Providers: map[string]*providerSettings{openAICompatible: p}})
	return append(b, '\n')
}

// activeProvider is what a run uses of providers.json: the last used
// provider's entry.
type activeProvider struct {
	ID                       string
	Key, Model, BaseURL      string
	HasUpdatedAt, Configured bool
}

// readProviders reads the active provider of the home's providers.json;
// ok is false when there is none that Cline would take.
func readProviders(files runs.CLIFiles, home string) (activeProvider, bool) {
	if home == "" {
		return activeProvider{}, false
	}
	b, err := files.ReadFile(providersPath(home))
	if err != nil {
		return activeProvider{}, false
	}
	var f providersFile
	if json.Unmarshal(b, &f) != nil {
		return activeProvider{}, false
	}
	p := f.Providers[f.LastUsedProvider]
	if p == nil {
		return activeProvider{}, false
	}
	return activeProvider{
		ID: f.LastUsedProvider, Key: p.Settings.APIKey, Model: p.Settings.Model, BaseURL: p.Settings.BaseURL,
		HasUpdatedAt: p.UpdatedAt != "", Configured: true,
	}, p.UpdatedAt != ""
}

// globalSettings are the keys the gateway sets in global-settings.json:
// no telemetry (OpenTelemetry to otel.cline.bot) and no update. The
// feature-flag lookups of data.cline.bot have no switch (doc.go).
var globalSettings = map[string]any{"telemetryOptOut": true, "autoUpdateEnabled": false}

// PrepareHome implements runs.HomePreparer. It sets globalSettings in
// global-settings.json, keeping the operator's other keys, and, when the
// gateway's environment names an endpoint (BaseURLEnv), writes
// providers.json for it, with KeyEnv as its key; without an endpoint it
// writes KeyEnv into the operator's providers.json, if any.
func (a *Adapter) PrepareHome(home string) error {
	if home == "" {
		return errors.New("no home directory")
	}
	if err := os.MkdirAll(settingsDir(home), 0o700); err != nil {
		return err
	}
	settings := map[string]any{}
	if b, err := os.ReadFile(globalSettingsPath(home)); err == nil {
		if json.Unmarshal(b, &settings) != nil {
			return fmt.Errorf("%s is not a JSON object", globalSettingsPath(home))
		}
	}
	for k, v := range globalSettings {
		settings[k] = v
	}
	b, _ := json.Marshal(settings)
	if err := adapterkit.WriteFileAtomic(globalSettingsPath(home), append(b, '\n')); err != nil {
		return err
	}
	if a.getenv == nil {
		return nil
	}
	key := a.getenv(KeyEnv)
	if url := a.getenv(BaseURLEnv); url != "" {
		return adapterkit.WriteFileAtomic(providersPath(home), ProvidersJSON(url, a.getenv(ModelEnv), key))
	}
	if _, err := os.Stat(providersPath(home)); key == "" || err != nil {
		return nil
	}
	// A session run's command takes the file's key (see sessionCommand):
	// it must be the gateway's from the start.
	return syncKey(home, key)
}

// syncKey writes key into the active provider of the home's
// providers.json when it differs: `cline --json` reads its key only
// there, never from CLINE_API_KEY. The file is replaced whole, by a
// rename, so that a run starting meanwhile reads the old or the new one.
func syncKey(home, key string) error {
	path := providersPath(home)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	var f providersFile
	if json.Unmarshal(b, &raw) != nil || json.Unmarshal(b, &f) != nil {
		return fmt.Errorf("%s is not Cline's provider configuration", path)
	}
	p := f.Providers[f.LastUsedProvider]
	if p == nil || p.Settings.APIKey == key {
		return nil
	}
	var providers map[string]map[string]json.RawMessage
	if json.Unmarshal(raw["providers"], &providers) != nil {
		return fmt.Errorf("%s: providers is not an object", path)
	}
	entry := providers[f.LastUsedProvider]
	var settings map[string]any
	if json.Unmarshal(entry["settings"], &settings) != nil {
		return fmt.Errorf("%s: the settings of %s are not an object", path, f.LastUsedProvider)
	}
	settings["apiKey"] = key
	entry["settings"], _ = json.Marshal(settings)
	raw["providers"], _ = json.Marshal(providers)
	out, _ := json.Marshal(raw)
	return adapterkit.WriteFileAtomic(path, append(out, '\n'))
}
