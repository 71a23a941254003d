// Package artifacts finds what a run changed in its directory, on its own,
// without git: a snapshot of the directory before the agent starts and
// another after it ended, compared file by file, and a unified diff of the
// changes. It also confines reads of a run's directory to it (one file, or
// the whole directory as a tar.gz), so that a symlink, a ".." or a device
// file never leads a download elsewhere.
//
// A snapshot's data (its manifest, the baseline copies of small text files
// and the whole diff) lives in a directory the caller gives, outside the
// run's directory and out of the agent's reach.
package artifacts
