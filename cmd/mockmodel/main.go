// Command mockmodel serves the mock Anthropic Messages API on a loopback
// address, for trying agent CLIs by hand and for benchmarks. It prints the
// base URL (for ANTHROPIC_BASE_URL) and serves until interrupted.
//
//	mockmodel -scenario tool -command 'touch made-by-tool'
//	mockmodel -addr 127.0.0.1:8089 -scenario error-429
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
	addr := fs.String("addr", "127.0.0.1:0", "loopback address to listen on")
	name := fs.String("scenario", "text", "scenario: "+strings.Join(anthropic.Names(), ", "))
	command := fs.String("command", "", "Bash command of the tool scenarios (default: theirs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sc, err := anthropic.Named(*name, *command)
	if err != nil {
		return err
	}
	srv, err := anthropic.Start(*addr, sc, anthropic.LedgerLimit(ledgerLimit))
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintln(stdout, srv.URL)
	<-ctx.Done()
	return nil
}
