package adapterkit

import "github.com/agentgate/agentgate/internal/runs"

// Permission is the level a run gets: the one its spec names, or
// runs.WorkspaceWrite for a spec that names none.
func Permission(p runs.Permission) runs.Permission {
	if p == "" {
		return runs.WorkspaceWrite
	}
	return p
}
