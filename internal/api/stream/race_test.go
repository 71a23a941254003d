//go:build race

package stream

// raceEnabled: the race detector makes sync.Pool drop what it holds at
// random, so pooled buffers are allocated again, and allocation counts
// say nothing.
const raceEnabled = true
