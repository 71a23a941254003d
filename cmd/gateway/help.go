package main

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/agentgate/agentgate/internal/api"
)

// command is something the gateway does instead of serving, named by its
// first argument.
type command struct {
	name  string
	usage []string // the command lines it takes, after the program's name
	run   func(args []string, stdout, stderr io.Writer) int
}

// commands are the gateway's commands; with no argument it serves.
func commands() []command {
	return []command{
		{name: "keys", usage: []string{"keys new --tenant TENANT --role admin|write|read [--id KEY_ID]", "keys check FILE"}, run: runKeysCommand},
		{name: "help", usage: []string{"help"}, run: func(args []string, stdout, stderr io.Writer) int {
			if len(args) > 0 && !(len(args) == 1 && isHelp(args[0])) {
				return exitCode(usageError{fmt.Sprintf("help takes no arguments, got %q", args)}, stderr)
			}
			writeHelp(stdout, agentNames())
			return 0
		}},
	}
}

// lookupCommand finds the command of a first argument; -h, -help and
// --help are help.
func lookupCommand(arg string) (command, bool) {
	if isHelp(arg) {
		arg = "help"
	}
	for _, c := range commands() {
		if c.name == arg {
			return c, true
		}
	}
	return command{}, false
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// agentNames are the names of the roster's agents, for their per-agent
// settings.
func agentNames() []string {
	var names []string
	for _, a := range adapters(func(string) string { return "" }) {
		names = append(names, a.Name())
	}
	return names
}

// usageError is a command line the gateway does not take: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitCode is the process's exit code for what run returned, which it
// reports on stderr.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "agentgate:", err)
	if errors.As(err, new(usageError)) {
		fmt.Fprintln(stderr, "Run 'gateway help' for its commands and settings.")
		return 2
	}
	return 1
}

// setting is one AGENTGATE_* variable the gateway reads.
type setting struct{ name, def, desc string }

// settings are the fields of config and api.Config that envconfig reads,
// in their order, each with its default and its desc tag.
func settings() []setting {
	var out []setting
	for _, t := range []reflect.Type{reflect.TypeFor[config](), reflect.TypeFor[api.Config]()} {
		for f := range t.Fields() {
			if tag := f.Tag.Get("envconfig"); tag != "" {
				out = append(out, setting{name: "AGENTGATE_" + tag, def: f.Tag.Get("default"), desc: f.Tag.Get("desc")})
			}
		}
	}
	return out
}

// writeHelp prints the gateway's commands and every setting with its
// default and what it does.
func writeHelp(w io.Writer, agents []string) {
	fmt.Fprintln(w, "usage: gateway                 serve the API, configured by the settings below")
	for _, c := range commands() {
		for _, u := range c.usage {
			fmt.Fprintln(w, "       gateway "+u)
		}
	}
	fmt.Fprintln(w, "\nSettings (environment variables; a list is comma-separated):")
	for _, s := range settings() {
		def := s.def
		if def == "" {
			def = "(none)"
		}
		fmt.Fprintf(w, "  %s  default %s\n      %s\n", s.name, def, s.desc)
	}
	up := make([]string, len(agents))
	for i, a := range agents {
		up[i] = strings.ToUpper(a)
	}
	fmt.Fprintf(w, "  AGENTGATE_<AGENT>_BIN, AGENTGATE_<AGENT>_HOME  default on PATH; DATA_DIR/agents/<agent>\n"+
		"      an agent's binary and home directory; <AGENT> is one of %s\n", strings.Join(up, ", "))
}
