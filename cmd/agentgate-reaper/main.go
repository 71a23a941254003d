// Command agentgate-reaper is a run's reaper: the process the gateway
// starts each agent under, as its child subreaper, so that nothing the
// agent starts outlives the run (see proctree.Reap). It takes the same
// arguments as the gateway's own binary does in that role
// (proctree.ReaperArgs), and the gateway uses it when it is installed
// beside the gateway's binary (proctree.ReaperBeside).
//
// It exists because one reaper runs per run: the gateway's binary, started
// again, initialises its store, API and metrics packages before main, and
// holds several MiB for each run. This one imports proctree and the
// standard library only, so it starts in about a millisecond and holds
// little more than the Go runtime's own memory.
package main

import (
	"os"

	"github.com/agentgate/agentgate/internal/proctree"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != proctree.ReaperArg {
		os.Stderr.WriteString("usage: agentgate-reaper " + proctree.ReaperArg + " [-gateway=PID] ARGV...\n" +
			"agentgate-reaper is started by the agentgate gateway, one per run; it is not run by hand.\n")
		os.Exit(125)
	}
	os.Exit(proctree.Reap(os.Args[2:]))
}
