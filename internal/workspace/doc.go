// Package workspace makes a run's directory and its CLI's home, and keeps
// both in the cluster so that the run's files and its conversation follow
// it to any replica.
//
// A run's directory comes from a source (runs.WorkspaceSource): a git
// repository, cloned through this replica's cache of it (internal/gitrepo);
// an uploaded archive, unpacked safely (internal/unpack); another run's
// final directory, restored from the cluster; or nothing, an empty
// directory. When a run ends its directory is stored, as a gzipped tar, in
// the cluster's snapshots (runs.Snapshots), from which any replica serves
// it and restores it.
//
// A run's CLI home is its own: made fresh from the operator's base home,
// of what the adapter says it needs there (runs.HomeKeeper.BaseFiles), and,
// for a run that resumes a session, of that session's files as the run
// before left them. Nothing else a run writes into its home outlives it:
// a hook or a setting planted there reaches no other run. A session's
// files are stored per tenant, so no tenant's run restores another's.
package workspace
