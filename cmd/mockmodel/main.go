// Command mockmodel serves a mock model API on a loopback address, for
// trying agent CLIs by hand and for benchmarks: the Anthropic Messages API
// (the default, for Claude Code) or, with -api openai, the OpenAI Responses
// API (for Codex). It prints the base URL (ANTHROPIC_BASE_URL, or a Codex
// model provider's base_url, which ends in /v1) and serves until
// interrupted.
//
//	mockmodel -scenario tool -command 'touch made-by-tool'
//	mockmodel -addr 127.0.0.1:8089 -scenario error-429
//	mockmodel -api openai -scenario helper
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/agentgate/agentgate/internal/mock/anthropic"
	"github.com/agentgate/agentgate/internal/mock/openai"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mockmodel:", err)
		os.Exit(2)
	}
}

// ledgerLimit keeps a long benchmark from growing the ledger without bound.
const ledgerLimit = 1000

// run serves until ctx is done.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("mockmodel", flag.ContinueOnError)
	api := fs.String("api", "anthropic", "API to serve: anthropic or openai")
	addr := fs.String("addr", "127.0.0.1:0", "loopback address to listen on")
	name := fs.String("scenario", "text", "scenario; anthropic: "+strings.Join(anthropic.Names(), ", ")+
		"; openai: "+strings.Join(openai.Names(), ", "))
	command := fs.String("command", "", "shell command of the tool scenarios (default: theirs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var (
		url      string
		shutdown func()
	)
	switch *api {
	case "anthropic":
		sc, err := anthropic.Named(*name, *command)
		if err != nil {
			return err
		}
		srv, err := anthropic.Start(*addr, sc, anthropic.LedgerLimit(ledgerLimit))
		if err != nil {
			return err
		}
		url, shutdown = srv.URL, srv.Close
	case "openai":
		sc, err := openai.Named(*name, *command)
		if err != nil {
			return err
		}
		srv, err := openai.Start(*addr, sc, openai.LedgerLimit(ledgerLimit))
		if err != nil {
			return err
		}
		url, shutdown = srv.URL, srv.Close
	default:
		return fmt.Errorf("unknown -api %q (known: anthropic, openai)", *api)
	}
	defer shutdown()
	fmt.Fprintln(stdout, url)
	<-ctx.Done()
	return nil
}
