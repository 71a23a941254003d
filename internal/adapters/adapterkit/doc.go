// Package adapterkit holds what the agent adapters (claude, codex,
// copilot, gemini, opencode) do the same way, so that it exists once:
// the default permission level, the shared part of Describe, parsing a
// CLI's version output, telling a native binary from a launcher script,
// and the error class of a model request's HTTP status.
//
// What differs between CLIs stays in their adapters and reaches this
// package as a parameter: a CLI's version pattern, whether only the first
// line of its version output counts, and how it refines a status's class
// (a 4xx that says the context is too long, a message that names a
// failure when no status does).
package adapterkit
