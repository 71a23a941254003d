package adapterkit

import (
	"maps"
	"slices"
)

// FirstModel is the alphabetically first key of usage, a CLI's usage per
// model, or "" when it names none: the model a run reports when the CLI
// names no single one, the same from one run to the next.
func FirstModel[V any](usage map[string]V) string {
	if len(usage) == 0 {
		return ""
	}
	return slices.Min(slices.Collect(maps.Keys(usage)))
}
