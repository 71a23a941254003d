//go:build race

package api

// raceEnabled: the race detector makes sync.Pool drop what it holds at
// random, so pooled buffers are allocated again, and allocation counts
// say nothing.
const raceEnabled = true
