package opencode

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentgate/agentgate/internal/runs"
)

// OpenCode sends an image to the model only when the model's entry in
// its configuration declares image input; otherwise it replaces the
// image, silently for the client, with the text `ERROR: Cannot read
// "image" (this model does not support image input). Inform the user.`
// (verified with 1.18.33 over ACP). What decides is the model's
// modalities.input: with "image" in it the image was sent as an image_url
// part; "attachment": true alone did not do (the image was replaced). So
// a run or a message with images is refused unless the configuration the
// adapter can see lists "image" in the model's modalities.input.

// modelEntry is the part of a model's configuration that says what input
// it takes.
type modelEntry struct {
	Modalities *struct {
		Input []string `json:"input"`
	} `json:"modalities"`
}

// providerEntry is the part of a provider's configuration that lists its
// models.
type providerEntry struct {
	Models map[string]json.RawMessage `json:"models"`
}

// imageSupport says whether the model a run uses takes images, from the
// configurations in srcs (OpenCode's order: a later one overrides an
// earlier one's keys). It returns nil when it does, and the reason
// otherwise.
func imageSupport(srcs []source, model string) error {
	if model == "" {
		for _, s := range srcs {
			if c, ok := parseConfig(s.text); ok && c.Model != "" {
				model = c.Model
			}
		}
	}
	provider := providerOf(model)
	if provider == "" {
		return fmt.Errorf("no model is named (the run's model or the configuration's \"model\", as provider/model), " +
			"so the gateway cannot check that it takes images")
	}
	id := model[len(provider)+1:]
	var input []string
	found := false
	for _, s := range srcs {
		c, ok := parseConfig(s.text)
		if !ok {
			continue
		}
		raw, ok := c.Provider[provider]
		if !ok {
			continue
		}
		var p providerEntry
		if json.Unmarshal(stripTrailingCommas(stripJSONC(raw)), &p) != nil {
			continue
		}
		mraw, ok := p.Models[id]
		if !ok {
			continue
		}
		var m modelEntry
		if json.Unmarshal(mraw, &m) != nil {
			continue
		}
		found = true
		if m.Modalities != nil {
			input = m.Modalities.Input
		}
	}
	switch {
	case !found:
		return fmt.Errorf("model %s has no entry under provider.%s.models in the configuration the gateway sees, "+
			"so nothing declares that it takes images", model, provider)
	case !slices.Contains(input, "image"):
		return fmt.Errorf("the configuration of model %s does not list \"image\" in its modalities.input", model)
	}
	return nil
}

// hintImages tells the operator how to let a model take images.
const hintImages = `declare image input in the model's entry of OpenCode's configuration: ` +
	`"modalities": {"input": ["text", "image"], "output": ["text"]}`

// refuseImages is the error for a run or message whose images the model
// would not get.
func refuseImages(reason error) error {
	return runs.Unsupported(Name, runs.FieldAttachments,
		"OpenCode would replace the images with an error text: "+reason.Error()+"; "+hintImages)
}
