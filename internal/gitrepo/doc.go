// Package gitrepo is what the gateway does with git: it clones a run's
// repository through a per-replica cache of bare mirrors, commits what the
// run changed on a new branch and pushes it, and makes the change a patch.
//
// Every git process it starts sees no system or user configuration, a
// private empty home, no terminal, only the https and http protocols, no
// redirects, hooks or submodules, and gets a credential only through an
// askpass helper reading the process's own environment, so a token is
// never in a URL, an argument or the agent's environment. The workspace a
// run's agent changed is only ever read as a work tree of a git directory
// the gateway owns: its own .git (config, hooks, filters) is never used.
package gitrepo
