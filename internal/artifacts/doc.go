// Package artifacts finds what a run changed in its directory, on its own,
// without git: a snapshot of the directory before the agent starts and
// another after it ended, compared file by file, and a unified diff of the
// changes. It also confines reads of a run's directory to it (one file, or
// the whole directory as a tar.gz), so that a symlink, a ".." or a device
// file never leads a download elsewhere.
//
// A snapshot's data lives in a directory the caller gives, outside the
// run's directory and out of the agent's reach: the baseline copies of
// small text files, and the manifest when it is too large to keep in
// memory. Compare removes them; Keep stores a result there, for Load, when
// the caller has nowhere else to keep all of it. A run in an empty or
// small directory whose result its record holds makes no file at all.
//
// A Keeper does that for the runs of one replica: Watch at a run's start
// and Record at its end give the run's record its bounded diff and list
// of changes; Diff, Changes, OpenFile and WriteArchive serve them and the
// run's files, with an *Error (its Code the API's) when they cannot be;
// Remove and Sweep let them go with the run and its directory.
package artifacts
