// Command gateway is agentgate: an HTTP service that runs coding-agent CLIs
// headless, streams their normalized events over SSE and exports metrics.
//
// It is configured by AGENTGATE_* environment variables (see docs/operations.md).
// With no AGENTGATE_NATS_URL it stores runs and events in an embedded NATS
// JetStream server under AGENTGATE_DATA_DIR.
package main

import (
	// Schedules read IANA zones, which a container image may not hold.
	_ "time/tzdata"

	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/agentgate/agentgate/internal/adapters/claude"
	"github.com/agentgate/agentgate/internal/adapters/cline"
	"github.com/agentgate/agentgate/internal/adapters/codex"
	"github.com/agentgate/agentgate/internal/adapters/copilot"
	"github.com/agentgate/agentgate/internal/adapters/gemini"
	"github.com/agentgate/agentgate/internal/adapters/opencode"
	"github.com/agentgate/agentgate/internal/adapters/qwen"
	"github.com/agentgate/agentgate/internal/netns"
	_ "github.com/agentgate/agentgate/internal/netns/lightshim"
	"github.com/agentgate/agentgate/internal/probe"
	"github.com/agentgate/agentgate/internal/proctree"
	_ "github.com/agentgate/agentgate/internal/proctree/lightreaper"
	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/store"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == proctree.ReaperArg {
		// The supervisor runs each agent under this binary as its
		// subreaper; see proctree.Reap. Built with cgo, this binary's
		// reapers never get here: lightreaper reaps before the Go
		// runtime, and so before every package here, starts.
		os.Exit(proctree.Reap(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == netns.ShimArg {
		// A run's sandbox starts its CLI under this binary, inside the
		// run's network namespace; see netns.RunShim. Built with cgo,
		// this binary's shims never get here: lightshim does the same
		// before the Go runtime starts.
		os.Exit(netns.RunShim(os.Args[2:]))
	}
	if len(os.Args) > 1 {
		if c, ok := lookupCommand(os.Args[1]); ok {
			os.Exit(c.run(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// adapters is the roster of agents, in one place: adding an agent is one
// line here plus its package. getenv is the gateway's environment, where
// OpenCode's adapter reads the operator's configuration of the models.
func adapters(getenv func(string) string) []runs.Adapter {
	return []runs.Adapter{
		claude.New(),
		codex.New(),
		copilot.New(),
		gemini.New(),
		opencode.New(opencode.WithGetenv(getenv)),
		qwen.New(),
		cline.New(cline.WithGetenv(getenv)),
	}
}

// run starts the gateway and serves until ctx ends, then shuts down
// gracefully. It prints the address it listens on to stdout.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return runWith(ctx, seams{}, args, getenv, stdout)
}

// seams are what tests put in place of the gateway's own; a nil field
// keeps the gateway's.
type seams struct {
	// versionOutput runs an agent's version command at startup
	// (supervisor.Config.VersionOutput): the tests' gateways share one cache.
	versionOutput probe.VersionOutput
	// runDeadline arms runs' timeouts (supervisor.Config.RunDeadline).
	runDeadline func(runID string, timeout time.Duration) <-chan time.Time
}

// runWith is run with the seams sm.
func runWith(ctx context.Context, sm seams, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 0 {
		if len(args) == 1 && isHelp(args[0]) {
			writeHelp(stdout, agentNames())
			return nil
		}
		return usageError{fmt.Sprintf("unexpected arguments %q: the gateway is configured by AGENTGATE_* environment variables", args)}
	}
	g := &instance{sm: sm, getenv: getenv, stdout: stdout}
	defer g.close()
	if err := g.start(ctx); err != nil {
		return err
	}
	if err := g.serve(ctx); err != nil {
		return err
	}
	g.shutdown()
	return nil
}

// openCgroups gives runs a cgroup each as AGENTGATE_PROCESS_ISOLATION
// says: nil for "reaper", and for "auto" on a machine that does not allow
// it. Opening them kills what a dead gateway of this replica left.
func openCgroups(ctx context.Context, cfg config, log *zap.Logger) (*proctree.Cgroups, error) {
	if cfg.ProcessIsolation == "reaper" {
		return nil, nil
	}
	cgs, err := proctree.OpenCgroups(ctx, proctree.CgroupOptions{Root: cfg.CgroupRoot, Replica: cfg.ReplicaID})
	if errors.Is(err, proctree.ErrSweep) {
		// Stuck processes must not keep the replica from starting.
		log.Error("processes a dead gateway of this replica left survive", zap.Error(err))
		err = nil
	}
	switch {
	case err == nil:
		log.Info("each run gets a cgroup", zap.String("cgroup_dir", cgs.Dir()))
		return cgs, nil
	case cfg.ProcessIsolation == "auto" && errors.Is(err, proctree.ErrNoCgroups):
		log.Warn("runs are contained by their reaper alone", zap.Error(err))
		return nil, nil
	}
	return nil, fmt.Errorf("AGENTGATE_PROCESS_ISOLATION=%s: %w", cfg.ProcessIsolation, err)
}

// connectNATS dials AGENTGATE_NATS_URL, or starts the embedded server under
// the data directory when it is unset.
// The embedded server is returned too, for the disk guard; nil with
// NATS_URL.
func connectNATS(cfg config, log *zap.Logger) (*nats.Conn, *store.Embedded, func(), error) {
	if cfg.NATSURL != "" {
		// RetryOnFailedConnect: a replica started with the cluster, or
		// while one node is down, keeps trying instead of exiting.
		nc, err := nats.Connect(cfg.NATSURL, nats.Name("agentgate "+cfg.ReplicaID), nats.MaxReconnects(-1),
			nats.RetryOnFailedConnect(true), nats.ReconnectWait(250*time.Millisecond))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("connect to %s: %w", redactURL(cfg.NATSURL), err)
		}
		return nc, nil, func() { nc.Drain() }, nil
	}
	emb, err := store.StartEmbedded(filepath.Join(cfg.DataDir, "nats"), log)
	if err != nil {
		return nil, nil, nil, err
	}
	nc, err := emb.Connect()
	if err != nil {
		emb.Shutdown()
		return nil, nil, nil, err
	}
	return nc, emb, func() { nc.Close(); emb.Shutdown() }, nil
}

// newLogger returns a JSON logger at level, writing to w, that redacts
// what r finds.
func newLogger(level string, w io.Writer, r *redact.Redactor) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, errors.New("bad log level")
	}
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey, enc.EncodeTime = "time", zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(w), lvl)
	return zap.New(redact.Core(core, r)), nil
}

// swapHandler serves whichever handler was set last: the starting one,
// then the API.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// startingHandler answers while the gateway starts: /healthz 200 (the
// process is alive), everything else 503 not_ready with Retry-After, in the
// API's error shape.
func startingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"status":"ok"}`+"\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"code":"not_ready","message":"the gateway is starting; retry in a moment"}}`+"\n")
	})
}
