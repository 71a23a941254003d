package main

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

func setupVersion(fs *flag.FlagSet) func(a *app, args []string) int {
	return func(a *app, args []string) int {
		if len(args) != 0 {
			return a.usageFail("version", "unexpected argument %q", args[0])
		}
		fmt.Fprintln(a.stdout, versionLine())
		return exitOK
	}
}

// moduleVersion is the version the binary was built from: the module's
// version for `go install …@v1.2.3`, "(devel)" for a build in the tree.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// versionLine is the module version, the VCS revision when the build
// recorded one, and the Go version.
func versionLine() string {
	s := "agentgate " + moduleVersion()
	goVersion := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.modified":
				if kv.Value == "true" {
					modified = ", modified"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			s += " (" + rev + modified + ")"
		}
	}
	return s + " " + goVersion
}
