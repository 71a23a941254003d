package main

import "flag"

const watchHelp = `Follows an existing run's events from the start (or after --after SEQ)
until it ends, rendered as by run; with --json one envelope a line. A
dropped connection is resumed with Last-Event-ID, so no event is shown
twice or skipped. The exit code is the run's final status.`

func setupWatch(fs *flag.FlagSet) func(a *app, args []string) int {
	var after uint64
	var cancelOnInterrupt, verbose bool
	fs.Uint64Var(&after, "after", 0, "show only the events after this `seq`")
	fs.BoolVar(&cancelOnInterrupt, "cancel-on-interrupt", false, "Ctrl-C cancels the run, instead of only stopping watching it")
	fs.BoolVar(&verbose, "verbose", false, "also show reasoning, tool results and unparsed agent output")
	fs.BoolVar(&verbose, "v", false, "short for --verbose")
	return func(a *app, args []string) int {
		if len(args) != 1 {
			return a.usageFail("watch", "want one run ID")
		}
		c, err := a.client()
		if err != nil {
			return errorExit(a.stderr, err)
		}
		defer c.close()
		return a.follow(c, args[0], after, followOptions{cancelOnInterrupt: cancelOnInterrupt, verbose: verbose})
	}
}
