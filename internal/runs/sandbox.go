package runs

// Sandbox confines an agent's processes to what its run's Permission
// allows, the same way for every CLI: the CLI's own permission flags are a
// second fence, not the only one. internal/sandbox implements it with
// bubblewrap. Without a Sandbox (Config.Sandbox nil) only the CLI enforces
// Permission.
type Sandbox interface {
	// Wrap returns the argv that runs argv inside the run's confinement.
	Wrap(c Confinement, argv []string) ([]string, error)
	// Enforcement names what enforces Permission besides the CLI, for
	// /v1/agents ("bubblewrap").
	Enforcement() string
}

// Confinement is what one run's agent may see and write.
type Confinement struct {
	RunID      string
	Permission Permission
	// Dir is the run's directory: writable under WorkspaceWrite and
	// Full, read-only under ReadOnly.
	Dir string
	// Home is the agent's home, where its login and sessions live:
	// writable.
	Home string
	// TempDir is the run's own temporary directory (its TMPDIR):
	// writable, and removed when the run ends.
	TempDir string
}
