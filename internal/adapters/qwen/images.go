package qwen

import (
	"encoding/json"

	"github.com/agentgate/agentgate/internal/runs"
)

// imageRefusal says why a run's images are refused: 0.24.4 sends an image
// only to a model whose input modalities include images, and drops it
// without a word for any other (seen: no request of the suite's image
// cases carried it). Those modalities come from
// model.generationConfig.modalities in the settings, else from the CLI's
// table of model names it knows. The gateway cannot see that table, so it
// takes the settings' word alone.
const imageRefusal = "qwen sends images only to a model it knows takes them, and drops them otherwise; " +
	`declare the model's image input in the settings of qwen's home (.qwen/settings.json: ` +
	`{"model":{"generationConfig":{"modalities":{"image":true}}}})`

// checkImages refuses images when the settings in the run's home do not
// declare the model's image input.
func checkImages(inv runs.Invocation, images int) error {
	if images == 0 {
		return nil
	}
	if !imageInput(inv.FilesOrNone(), inv.Home) {
		return runs.Unsupported(Name, runs.FieldAttachments, imageRefusal)
	}
	return nil
}

// imageInput reads model.generationConfig.modalities.image from the
// settings in home.
func imageInput(files runs.CLIFiles, home string) bool {
	if home == "" {
		return false
	}
	b, err := files.ReadFile(settingsPath(home))
	if err != nil {
		return false
	}
	var s struct {
		Model struct {
			GenerationConfig struct {
				Modalities struct {
					Image bool `json:"image"`
				} `json:"modalities"`
			} `json:"generationConfig"`
		} `json:"model"`
	}
	return json.Unmarshal(b, &s) == nil && s.Model.GenerationConfig.Modalities.Image
}
