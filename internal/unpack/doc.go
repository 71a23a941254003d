// Package unpack unpacks an uploaded tar, gzipped tar or zip into a run's
// directory without letting the archive reach anything outside it.
//
// Every file operation goes through an os.Root opened on the directory,
// and the package keeps its own account of what it created, so that an
// entry can neither name a path outside the directory nor reach one
// through a link made by an earlier entry. Everything an archive costs is
// bounded as it streams (entries, bytes, bytes of one file, bytes
// unpacked per byte read, depth), never on the word of its headers alone.
// An archive is unpacked whole or not at all: on any failure the
// directory is left empty.
package unpack
