// Package conformance is one test suite run over every agent adapter with
// the same scenarios, each against the agent's real CLI and a mock model
// server in the agent's own API, through a real Supervisor and store.
//
// An adapter's tests describe their agent with a Kit (its adapter, its
// CLI, and how to serve a Scenario from its mock) and call Run:
//
//	func TestConformance(t *testing.T) { conformance.Run(t, kit{}) }
//
// A new agent then gets the whole suite: a text answer, a shell tool call
// that writes a file, the failures every model API has (401, 429, 500,
// no credentials) with the class and retryable the gateway promises,
// cancel and timeout in the middle of a tool with no process left, a
// server that never answers, the fields the agent does not support
// refused by name, a home of each run's own, where what one tenant's run
// leaves (a file, a hook or MCP server the kit's HomeTrap plants) reaches
// no later run, and the installed CLI's version against the verified
// one. The usage of every finished run must equal what the mock billed,
// or, for an agent that reports no usage (Reports.Usage "unknown"), stay
// zero with usage_unknown set, max_total_tokens being refused by name.
//
// An agent whose runs hibernate (a HomeKeeper that resumes sessions)
// has an interactive run put to sleep after its first turn with its real
// CLI: no process of it and nothing of it in the supervisor is left, a
// steer or an interrupt is refused run_hibernated, and a message wakes
// it into a second turn whose request to the mock carries the first
// turn's answer, in the directory the first turn left. Any other agent
// refuses hibernate_after_seconds by name.
//
// RunInteractive runs the interactive and approval cases alone, with the
// refusals, for an agent whose kit serves only those scenarios.
package conformance
