// Command agentgate-reaper is a run's reaper: the process the gateway
// starts each agent under, as its child subreaper, so that nothing the
// agent starts outlives the run (see proctree.Reap). It takes the same
// arguments as the gateway's own binary does in that role
// (proctree.ReaperArgs), and the gateway uses it when it is installed
// beside the gateway's binary (proctree.ReaperBeside).
//
// It exists because one reaper runs per run: the gateway's binary, started
// again, initialises its store, API and metrics packages before main, and
// holds several MiB for each run. Built with cgo, as the Docker image
// builds it, it reaps in C before the Go runtime starts (see
// internal/proctree/lightreaper): one thread and about a megabyte resident
// per run, started in about a millisecond. Built without cgo, main runs
// proctree.Reap itself, and each reaper costs the Go runtime's start and
// memory. A gateway built with cgo carries the same C, so it needs this
// binary only where it is built without cgo, as the image's is.
//
// Given netns.ShimArg instead, it is a run's network shim (netns.RunShim),
// which hands the run's proxy listener to the gateway and execs the CLI:
// built with cgo, in C before the Go runtime starts (internal/netns/lightshim).
package main

import (
	"os"

	"github.com/agentgate/agentgate/internal/netns"
	_ "github.com/agentgate/agentgate/internal/netns/lightshim"
	"github.com/agentgate/agentgate/internal/proctree"
	_ "github.com/agentgate/agentgate/internal/proctree/lightreaper"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == netns.ShimArg {
		os.Exit(netns.RunShim(os.Args[2:]))
	}
	if len(os.Args) < 2 || os.Args[1] != proctree.ReaperArg {
		os.Stderr.WriteString("usage: agentgate-reaper " + proctree.ReaperArg + " [-gateway=PID] ARGV...\n" +
			"       agentgate-reaper " + netns.ShimArg + " -socket=PATH -- ARGV...\n" +
			"agentgate-reaper is started by the agentgate gateway, one per run; it is not run by hand.\n")
		os.Exit(125)
	}
	// Built with cgo, neither a reaper's arguments nor a shim's reach
	// these lines: lightreaper and lightshim have done the work in C.
	os.Exit(proctree.Reap(os.Args[2:]))
}
