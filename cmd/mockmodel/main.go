package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mockmodel:", err)
		os.Exit(2)
	}
}

// run serves until ctx is done. The first line it writes to stdout is the
// base URL, written once the server listens and, with -agent, once the
// environment file and Codex's config.toml are in place, so that a reader
// of that line may use them at once.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	apis, agents := apis(), agents()
	fs := flag.NewFlagSet("mockmodel", flag.ContinueOnError)
	apiName := fs.String("api", "anthropic", "API to serve: "+strings.Join(sortedKeys(apis), ", "))
	agentName := fs.String("agent", "", "serve the API of this agent and write its environment: "+strings.Join(sortedKeys(agents), ", "))
	addr := fs.String("addr", "127.0.0.1:0", "loopback address to listen on")
	name := fs.String("scenario", "text", "scenario; "+scenarioHelp(apis))
	command := fs.String("command", "", "shell command of the tool scenarios (default: theirs)")
	envFile := fs.String("env-file", "", "with -agent: write the gateway's environment for the agent here, as export lines")
	codexHome := fs.String("codex-home", "", "with -agent codex: write config.toml, whose model provider is the mock, into this Codex home")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var ag *agent
	scenario := *name
	switch {
	case *agentName != "":
		a, ok := agents[*agentName]
		if !ok {
			return fmt.Errorf("unknown -agent %q (known: %s)", *agentName, strings.Join(sortedKeys(agents), ", "))
		}
		if set["api"] && *apiName != a.api {
			return fmt.Errorf("-agent %s is served the %s API, not -api %s", *agentName, a.api, *apiName)
		}
		if set["codex-home"] && !a.codexConfig {
			return fmt.Errorf("-codex-home is for -agent codex, not %s", *agentName)
		}
		ag, *apiName, scenario = &a, a.api, a.scenario(scenario)
	case set["env-file"] || set["codex-home"]:
		return errors.New("-env-file and -codex-home need -agent")
	}
	ap, ok := apis[*apiName]
	if !ok {
		return fmt.Errorf("unknown -api %q (known: %s)", *apiName, strings.Join(sortedKeys(apis), ", "))
	}
	url, shutdown, err := ap.start(*addr, scenario, *command)
	if err != nil {
		return err
	}
	defer shutdown()
	if ag != nil {
		if *envFile != "" {
			if err := writeEnvFile(*envFile, ag.env(url)); err != nil {
				return err
			}
		}
		if *codexHome != "" {
			if err := writeCodexConfig(*codexHome, url); err != nil {
				return err
			}
		}
	}
	fmt.Fprintln(stdout, url)
	<-ctx.Done()
	return nil
}

// scenarioHelp lists each API's scenarios, for -scenario's usage line.
func scenarioHelp(apis map[string]api) string {
	var parts []string
	for _, name := range sortedKeys(apis) {
		parts = append(parts, name+": "+strings.Join(apis[name].names(), ", "))
	}
	return strings.Join(parts, "; ")
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
