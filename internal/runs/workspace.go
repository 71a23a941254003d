package runs

import (
	"context"
	"errors"
	"io"
	"time"
)

// WorkspaceSource is where a run's directory comes from: exactly one of
// its fields is set. A spec without one gets an empty directory.
type WorkspaceSource struct {
	// Git is a repository cloned for the run.
	Git *GitSource `json:"git,omitempty"`
	// Archive is an uploaded tar or zip file's id, unpacked for the run.
	Archive string `json:"archive,omitempty"`
	// FromRun is a run of the same tenant whose final workspace the run
	// starts from.
	FromRun string `json:"from_run,omitempty"`
}

// GitSource is a repository at a branch, tag or commit.
type GitSource struct {
	// URL is https, or http to a host the operator allows.
	URL string `json:"url"`
	// Ref is a branch, tag or commit; empty is the remote's default
	// branch.
	Ref string `json:"ref,omitempty"`
	// Credential names one of the tenant's git credentials, which the
	// operator keeps; empty clones without one.
	Credential string `json:"credential,omitempty"`
}

// PushSpec asks for what the agent changed to be committed on a new branch
// from the run's base commit and pushed to the repository it was cloned
// from, never with force.
type PushSpec struct {
	Branch  string `json:"branch"`
	Message string `json:"message,omitempty"`
}

// GitResult is what became of a run's git workspace: the commit it started
// from and, when it asked for a push, the commit made of its changes and
// whether the remote took it.
type GitResult struct {
	// URL is the repository, without credentials.
	URL string `json:"url,omitempty"`
	// Base is the commit the run started from.
	Base string `json:"base"`
	// Commit is the commit made of the run's changes, on Base, pushed or
	// not; empty when it changed nothing.
	Commit string `json:"commit,omitempty"`
	// Branch is the branch Commit was pushed to.
	Branch string `json:"branch,omitempty"`
	// Pushed says the remote took the branch.
	Pushed bool `json:"pushed"`
	// Error is why the push failed; the run's own outcome stands.
	Error *RunError `json:"error,omitempty"`
}

// WorkspaceInfo is how the run's directory was prepared, for run.started.
type WorkspaceInfo struct {
	// Source is "empty", "git", "archive" or "from_run".
	Source string `json:"source"`
	// PrepareMS is how long preparing the directory took.
	PrepareMS int64 `json:"prepare_ms"`
	// CacheHit says a replica's cache of the repository served the clone
	// (a fetch of what changed, not a whole clone).
	CacheHit bool `json:"cache_hit,omitempty"`
	// Base is the commit a git workspace starts from.
	Base string `json:"base,omitempty"`
	// Restored says the directory was restored from the cluster's copy
	// (a from_run workspace, or a resumed session's).
	Restored bool `json:"restored,omitempty"`
}

// Field names of the workspace's request fields.
const (
	FieldWorkspace = "workspace"
	FieldPush      = "push"
)

// Workspace sources, as WorkspaceInfo.Source names them.
const (
	SourceEmpty   = "empty"
	SourceGit     = "git"
	SourceArchive = "archive"
	SourceFromRun = "from_run"
)

// The error classes of workspaces and sessions kept in the cluster.
const (
	// GitAuthFailed: the git server refused the credential (or asked for
	// one the run did not name).
	GitAuthFailed Class = "git_auth_failed"
	// GitNotFound: no repository at the URL, or no such ref in it.
	GitNotFound Class = "git_not_found"
	// GitUnreachable: the git server could not be reached.
	GitUnreachable Class = "git_unreachable"
	// GitFailed: git failed otherwise.
	GitFailed Class = "git_failed"
	// PushRejected: the remote refused the branch (it exists, a hook or
	// a protection refused it).
	PushRejected Class = "push_rejected"
	// WorkspaceFailed: the run's directory could not be prepared from its
	// source (an archive that is not safe to unpack, a run whose
	// workspace is gone).
	WorkspaceFailed Class = "workspace_failed"
)

// ErrSnapshotTooLarge is returned by Snapshots.PutSnapshot when what is
// stored would pass its bound.
var ErrSnapshotTooLarge = errors.New("snapshot too large")

// ErrSessionBusy is returned by SessionLocks.LockSession when another run
// holds the session.
var ErrSessionBusy = errors.New("session busy")

// SnapshotKind says what a snapshot holds.
type SnapshotKind string

const (
	// SnapshotWorkspace is a run's directory, as a gzipped tar; its ID is
	// the run's.
	SnapshotWorkspace SnapshotKind = "workspace"
	// SnapshotSession is the state an agent's CLI keeps of one session
	// in its home, as a gzipped tar; its ID is "<agent>/<session id>".
	SnapshotSession SnapshotKind = "session"
	// SnapshotPatch is a git run's change as format-patch mail; its ID is
	// the run's.
	SnapshotPatch SnapshotKind = "patch"
	// SnapshotResult is a finished run's whole diff and list of changes,
	// kept when its record could hold them only cut; its ID is the
	// run's.
	SnapshotResult SnapshotKind = "result"
)

// SnapshotKey names one snapshot: a tenant's (empty on a gateway without
// keys) of one kind.
type SnapshotKey struct {
	Tenant string
	Kind   SnapshotKind
	ID     string
}

// SnapshotInfo describes a stored snapshot.
type SnapshotInfo struct {
	Size     int64
	Modified time.Time
	// Meta is what the writer stored with it (the git result of a
	// workspace, the session's directory).
	Meta map[string]string
}

// Snapshots keeps runs' workspaces and sessions' state in the cluster, so
// that any replica serves a finished run's files and continues its
// session.
type Snapshots interface {
	// PutSnapshot stores what r yields under key, replacing what was
	// there once it is whole. It fails with ErrSnapshotTooLarge, storing
	// nothing, when r yields more than max bytes or the tenant's
	// snapshots would pass the store's bound for a tenant.
	PutSnapshot(ctx context.Context, key SnapshotKey, r io.Reader, max int64, meta map[string]string) (SnapshotInfo, error)
	// OpenSnapshot returns the snapshot's bytes; ErrNotFound when none.
	OpenSnapshot(ctx context.Context, key SnapshotKey) (io.ReadCloser, SnapshotInfo, error)
	// DeleteSnapshot removes a snapshot; one that is not there is no
	// error.
	DeleteSnapshot(ctx context.Context, key SnapshotKey) error
}

// SessionLocks keeps a session to one run at a time across replicas.
type SessionLocks interface {
	// LockSession gives the session to runID for ttl (renewed by calling
	// it again); ErrSessionBusy when another run holds it.
	LockSession(ctx context.Context, tenant, agent, sessionID, runID string, ttl time.Duration) error
	// UnlockSession frees the session if runID holds it.
	UnlockSession(ctx context.Context, tenant, agent, sessionID, runID string) error
}
