// Package agenttest holds small helpers for tests that run the real agent
// CLIs: where to find the pinned binaries (ClaudeBin fails the test, never
// skips it, when the CLI is missing, and says to run
// scripts/install-agents.sh), the minimal environment a CLI starts from, and
// Start, which runs a CLI in its own process group with os/exec, delivers
// its stdout line by line and reaps it at the end of the test.
//
// It is imported only by _test.go files.
package agenttest
