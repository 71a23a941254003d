package adapterkit

import (
	"maps"
	"slices"

	"github.com/agentgate/agentgate/internal/runs"
)

// Describe completes an adapter's description d with its permission docs
// and the credential variables it passes through, followed by notes on
// others (such as a variable named in the CLI's own configuration). Both
// are copies: a caller that changes what it was given does not change the
// adapter's tables.
func Describe(d runs.Description, permissionDocs map[runs.Permission]string, credentialEnv []string, notes ...string) runs.Description {
	d.Permissions = maps.Clone(permissionDocs)
	if d.Permissions == nil {
		d.Permissions = map[runs.Permission]string{}
	}
	d.CredentialEnv = append(slices.Clone(credentialEnv), notes...)
	return d
}
