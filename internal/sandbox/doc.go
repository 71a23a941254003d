// Package sandbox confines an agent's processes with bubblewrap (bwrap),
// the same way for every CLI, so that a run's permission does not rest on
// the CLI's own flags alone. Bubblewrap implements runs.Sandbox.
package sandbox
