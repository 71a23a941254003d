package runs

// The codes of an ArtifactError.
const (
	// ArtifactInvalidPath: the path is not a file's place in the run's
	// directory (absolute, "..", a directory, a device, a symlink out).
	ArtifactInvalidPath = "invalid_path"
	// ArtifactFileNotFound: nothing is at the path.
	ArtifactFileNotFound = "file_not_found"
	// ArtifactWorkspaceExpired: the run's directory is gone (retention,
	// or removed); its diff and list of changes are still in the record.
	ArtifactWorkspaceExpired = "workspace_expired"
	// ArtifactWorkspaceElsewhere: the run's directory is on the replica
	// that ran it, not on this one.
	ArtifactWorkspaceElsewhere = "workspace_on_other_replica"
	// ArtifactArchiveTooLarge: the directory is larger than the archive's
	// bound.
	ArtifactArchiveTooLarge = "archive_too_large"
)

// ArtifactError is why a run's files cannot be served. Code is one of the
// Artifact* codes; Replica names the replica that has the directory, for
// ArtifactWorkspaceElsewhere.
type ArtifactError struct {
	Code    string
	Message string
	Replica string
}

func (e *ArtifactError) Error() string { return e.Message }
