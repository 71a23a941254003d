package api

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/api/stream"
	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/console"
	"github.com/agentgate/agentgate/internal/runs"
)

// Service is what the API needs from the rest of the gateway; the supervisor
// implements it. Errors wrap the runs sentinels (runs.ErrNotFound,
// runs.ErrInvalid, a *runs.FieldError, …) and the API maps each to one
// status and one code; any other error is a 500 whose text the client never
// sees.
type Service interface {
	// Submit validates spec against the agents, the workspace and the
	// queue, and creates the run. The run outlives ctx, which only bounds
	// the submission.
	Submit(ctx context.Context, spec runs.Spec) (runs.Run, error)
	// Get returns the run, or an error wrapping runs.ErrNotFound.
	Get(ctx context.Context, id string) (runs.Run, error)
	// Record returns the run as stored, without the queue position Get
	// adds to a queued run (two more reads of the queue): what the
	// tenant check of a run's routes needs.
	Record(ctx context.Context, id string) (runs.Run, error)
	// AddQueuePosition sets the QueuePosition of a queued run read with
	// Record, as Get would have; it leaves any other run as it is.
	AddQueuePosition(ctx context.Context, r *runs.Run)
	// List returns one page of runs matching f, newest first. A cursor it
	// does not recognise is an error wrapping runs.ErrInvalid.
	List(ctx context.Context, f runs.Filter) (runs.Page, error)
	// Cancel asks for the run to be cancelled and returns it as it is now:
	// still running for a moment, or already terminal. Cancelling a run
	// that has ended is not an error and changes nothing.
	Cancel(ctx context.Context, id string) (runs.Run, error)
	// Events opens a cursor on the run's stored log after seq `after`,
	// for a run the caller has looked up (it does not look again).
	// The API calls the cursor's Next from one goroutine, ends a waiting
	// Next by cancelling ctx, and closes the cursor after Next returned.
	Events(ctx context.Context, id string, after uint64) (runs.Cursor, error)
	// LastEventSeq is the seq of the run's last stored event (0 if none).
	LastEventSeq(ctx context.Context, id string) (uint64, error)
	// Input delivers input to a running interactive run (or one asking
	// for approvals) wherever it executes: an approval decision, a
	// message, an interrupt or a close. Errors wrap runs.ErrNotFound (no
	// such run or approval), runs.ErrConflict (a *runs.ConflictError: the
	// input does not fit the run's state), runs.ErrInvalid or
	// runs.ErrUnsupported (a *runs.FieldError), or runs.ErrOwnerUnavailable.
	Input(ctx context.Context, id string, in runs.Input) (runs.InputResult, error)
	// Delete removes a finished run: its record, its events and the
	// directory the gateway made for it. Errors wrap runs.ErrNotFound or
	// runs.ErrConflict (the run has not ended).
	Delete(ctx context.Context, id string) error
	// Agents describes every configured agent and what the startup probe
	// found.
	Agents() []runs.AgentInfo
	// Ready returns nil when the gateway can accept runs, and otherwise
	// why not.
	Ready(ctx context.Context) error
}

// Observer is told about requests, for metrics. internal/metrics implements
// it; every method must be cheap and must not block.
type Observer interface {
	// HTTPRequest records a finished request. route is the chi route
	// pattern ("/v1/runs/{id}"), or RouteUnmatched; method is one of the
	// standard methods or "OTHER". A stream is recorded when it ends.
	HTTPRequest(route, method string, status int, seconds float64)
	// SSEClientsAdd moves the number of open event streams (SSE and
	// NDJSON) by delta.
	SSEClientsAdd(delta int)
}

// RouteUnmatched is the route given to Observer.HTTPRequest for a request
// that matched no route, so that arbitrary paths never become labels.
const RouteUnmatched = "unmatched"

// Defaults of Config, used for its zero (or negative) fields.
const (
	DefaultPingInterval   = 15 * time.Second
	DefaultWriteTimeout   = 10 * time.Second
	DefaultBatchSize      = 256
	DefaultMaxBodyBytes   = 2 << 20
	DefaultRetryAfter     = 5 * time.Second
	DefaultReconnectDelay = 2 * time.Second
)

// Config tunes the HTTP edge. A zero or negative field takes its default.
type Config struct {
	// PingInterval is how often an idle SSE stream gets a ": ping"
	// comment, so that proxies keep it open and a dead client is noticed.
	PingInterval time.Duration `envconfig:"SSE_PING_INTERVAL" default:"15s" desc:"how often an idle event stream gets a ping comment"`
	// WriteTimeout bounds writing one batch of events (or a ping) to a
	// client. A client that does not take it in time (this, and at most
	// half as long again) is dropped and reconnects with Last-Event-ID.
	WriteTimeout time.Duration `envconfig:"SSE_WRITE_TIMEOUT" default:"10s" desc:"a client that does not take a batch of events in time (this, at most half as long again) is dropped"`
	// BatchSize is the most events read from the log and written at once.
	BatchSize int `envconfig:"SSE_BATCH_SIZE" default:"256" desc:"most events read from the log and written at once"`
	// MaxBodyBytes bounds a request body; a larger one is a 413.
	MaxBodyBytes int64 `envconfig:"MAX_BODY_BYTES" default:"2097152" desc:"bound of a request body (413 beyond)"`
	// MaxFileBytes bounds an uploaded image (POST /v1/files), and
	// MaxArchiveBytes an uploaded archive; a larger one is a 413
	// file_too_large. MaxInlineAttachmentBytes bounds the decoded bytes of
	// the inline attachments of one run request or message, which may make
	// its body larger than MaxBodyBytes.
	MaxFileBytes             int64 `envconfig:"MAX_FILE_BYTES" default:"5242880" desc:"bound of an uploaded image (413 file_too_large beyond)"`
	MaxArchiveBytes          int64 `envconfig:"MAX_ARCHIVE_BYTES" default:"104857600" desc:"bound of an uploaded archive, tar, tar.gz or zip, for a run's workspace (413 file_too_large beyond)"`
	MaxInlineAttachmentBytes int64 `envconfig:"MAX_INLINE_ATTACHMENT_BYTES" default:"5242880" desc:"decoded bytes of inline images in one run request or message"`
	// RetryAfter is sent, rounded up to whole seconds, with 429
	// queue_full and 503 shutting_down.
	RetryAfter time.Duration `envconfig:"RETRY_AFTER" default:"5s" desc:"Retry-After of 429 queue_full and 503 shutting_down"`
	// ReconnectDelay is the SSE "retry:" a browser waits before it
	// reconnects.
	ReconnectDelay time.Duration `envconfig:"SSE_RECONNECT_DELAY" default:"2s" desc:"the event stream's retry: a browser waits before it reconnects"`

	// Keys, when set, authenticates every request but /healthz, /readyz
	// and /metrics by its bearer API key, and scopes it to the key's
	// tenant and role. Without Keys every caller is one anonymous admin
	// of the one tenant "" (the gateway then listens on loopback only,
	// unless its operator insists).
	Keys Keys `ignored:"true"`
	// Tokens issues and verifies stream tokens; without it POST
	// /v1/runs/{id}/stream-token answers 404.
	Tokens Tokens `ignored:"true"`
	// StreamTokenTTL is the life of a stream token.
	StreamTokenTTL time.Duration `envconfig:"STREAM_TOKEN_TTL" default:"5m" desc:"life of a stream token"`
	// CORSOrigins are the browser origins ("https://console.example.com")
	// that may call the API from their pages; none by default.
	CORSOrigins []string `envconfig:"CORS_ORIGINS" desc:"browser origins allowed to call the API, comma-separated"`
	// AllowedHosts, when set, are the only Host names the gateway
	// answers (but for /healthz, /readyz and /metrics).
	AllowedHosts []string `envconfig:"ALLOWED_HOSTS" desc:"the only Host names the gateway answers, against DNS rebinding; unset: any (loopback names only without keys)"`
	// LoopbackHostsOnly, without AllowedHosts, answers only loopback
	// names and addresses (localhost, 127.0.0.1, [::1]): a gateway
	// without keys, on loopback, must not be reachable from a page that
	// rebinds its own name to 127.0.0.1.
	LoopbackHostsOnly bool `ignored:"true"`
	// TenantRate and TenantBurst bound each tenant's requests per second
	// on this replica (0: no limit); TenantStreams its event streams open
	// at once on this replica (0: no limit).
	TenantRate    float64 `envconfig:"TENANT_RATE" default:"0" desc:"requests a second of one tenant on this replica (429 rate_limited); 0: no limit"`
	TenantBurst   int     `envconfig:"TENANT_BURST" default:"0" desc:"burst of TENANT_RATE; 0: twice the rate"`
	TenantStreams int     `envconfig:"TENANT_STREAMS" default:"200" desc:"event streams one tenant has open on this replica (429 too_many_streams); 0: no limit"`
	// PublicURL is the gateway's address as senders of deliveries reach
	// it, for triggers' URLs; unset, the request's own host.
	PublicURL string `envconfig:"PUBLIC_URL" desc:"the gateway's base URL as webhook senders reach it (https://agents.example.com), for triggers' URLs; unset: the request's host"`
	// TriggerMaxBodyBytes bounds a delivery's body (413 beyond);
	// TriggerRate and TriggerBurst bound each trigger's deliveries a
	// second on this replica (429 rate_limited).
	TriggerMaxBodyBytes int64   `envconfig:"TRIGGER_MAX_BODY_BYTES" default:"1048576" desc:"bound of a delivery's body to a trigger (413 body_too_large beyond)"`
	TriggerRate         float64 `envconfig:"TRIGGER_RATE" default:"1" desc:"deliveries a second one trigger takes on this replica (429 rate_limited beyond its burst)"`
	TriggerBurst        int     `envconfig:"TRIGGER_BURST" default:"10" desc:"burst of TRIGGER_RATE"`
	// BodyReadTimeout bounds reading a request body, however slowly it
	// trickles in.
	BodyReadTimeout time.Duration `envconfig:"BODY_READ_TIMEOUT" default:"30s" desc:"a request body must arrive in this time (408 body_timeout)"`
	// RequestTimeout bounds what a request other than an event stream
	// waits for the service.
	RequestTimeout time.Duration `envconfig:"REQUEST_TIMEOUT" default:"60s" desc:"what a request other than an event stream waits for the store"`

	// Draining, when set, is closed as the gateway begins to shut down:
	// open streams then end at once with a hint to reconnect, so that
	// their clients resume by Last-Event-ID on another replica, and new
	// streams are refused with 503 shutting_down (a load balancer sends
	// them elsewhere).
	Draining <-chan struct{} `ignored:"true"`
}

// withDefaults returns c with every unset field at its default.
func (c Config) withDefaults() Config {
	if c.PingInterval <= 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.ReconnectDelay <= 0 {
		c.ReconnectDelay = DefaultReconnectDelay
	}
	if c.StreamTokenTTL <= 0 {
		c.StreamTokenTTL = DefaultStreamTokenTTL
	}
	if c.TriggerMaxBodyBytes <= 0 {
		c.TriggerMaxBodyBytes = DefaultTriggerMaxBodyBytes
	}
	if c.TriggerRate <= 0 {
		c.TriggerRate, c.TriggerBurst = DefaultTriggerRate, DefaultTriggerBurst
	}
	if c.BodyReadTimeout <= 0 {
		c.BodyReadTimeout = 30 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 60 * time.Second
	}
	return c
}

// server holds the handlers' dependencies.
type server struct {
	cfg Config
	// streamCfg is what an event stream needs of cfg.
	streamCfg stream.Config
	svc       Service
	obs       Observer
	log       *zap.Logger
	router    *chi.Mux
	metrics   http.Handler
	// audit logs each use of a key.
	audit  *zap.Logger
	limits *tenantLimits
	// triggerLimits bounds each trigger's deliveries on this replica.
	triggerLimits *tenantLimits
}

// New returns the gateway's HTTP handler. svc is required; obs, metrics
// and log may be nil, for no metrics, a /metrics that answers 404, and no
// logs.
func New(cfg Config, svc Service, obs Observer, metrics http.Handler, log *zap.Logger) http.Handler {
	if svc == nil {
		panic("api.New: nil Service")
	}
	if obs == nil {
		obs = nopObserver{}
	}
	if log == nil {
		log = zap.NewNop()
	}
	s := &server{cfg: cfg.withDefaults(), svc: svc, obs: obs, log: log, metrics: metrics, audit: log.Named("audit")}
	s.streamCfg = stream.Config{BatchSize: s.cfg.BatchSize, PingInterval: s.cfg.PingInterval,
		ReconnectDelay: s.cfg.ReconnectDelay, WriteTimeout: s.cfg.WriteTimeout, Draining: s.cfg.Draining}
	s.limits = newTenantLimits(s.cfg.TenantRate, s.cfg.TenantBurst, s.cfg.TenantStreams)
	s.triggerLimits = newTenantLimits(s.cfg.TriggerRate, s.cfg.TriggerBurst, 0)
	r := chi.NewRouter()
	r.Use(s.instrument, s.checkHost, s.cors, s.checkQuery, s.bounded, middleware.GetHead, s.authenticate)
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed)

	// The web console's page and files, which answer without a key: the
	// API calls the page makes carry it (internal/console).
	consoleFiles := console.Handler().ServeHTTP
	r.Get(console.PagePath, consoleFiles)
	r.Get(console.Prefix+"*", consoleFiles)
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Get("/metrics", s.serveMetrics)
	for _, p := range specRoutes {
		r.Get(p, s.serveSpec)
	}
	read, write, admin := s.need(auth.RoleRead), s.need(auth.RoleWrite), s.need(auth.RoleAdmin)
	r.With(read).Get("/v1/agents", s.listAgents)
	r.With(write).Post("/v1/runs", s.createRun)
	r.With(read).Get("/v1/runs", s.listRuns)
	// Every route of one run answers 404 for another tenant's run.
	own := s.owned
	r.With(read, own).Get("/v1/runs/{id}", s.getRun)
	r.With(admin, own).Delete("/v1/runs/{id}", s.deleteRun)
	r.With(write, own).Post("/v1/runs/{id}/cancel", s.cancelRun)
	r.With(write, own).Post("/v1/runs/{id}/approvals/{approval_id}", s.answerApproval)
	r.With(write, own).Post("/v1/runs/{id}/messages", s.postMessage)
	r.With(write, own).Post("/v1/runs/{id}/interrupt", s.interruptTurn)
	r.With(write, own).Post("/v1/runs/{id}/close", s.closeSession)
	r.With(read, own).Post("/v1/runs/{id}/stream-token", s.streamToken)
	r.With(eventStreamRoute, read, own).Get("/v1/runs/{id}/events", s.streamGate(s.runEvents))
	// AG-UI clients run agents here (agui.go).
	r.With(write).Post("/v1/ag-ui", s.streamGate(s.runAGUI))
	// Uploaded images, the tenant's own (files.go).
	r.With(write).Post("/v1/files", s.uploadFile)
	r.With(read).Get("/v1/files/{id}", s.getFile)
	r.With(read).Get("/v1/files/{id}/content", s.getFileContent)
	r.With(write).Delete("/v1/files/{id}", s.deleteFile)
	// What the run changed (artifacts.go).
	r.With(read, own).Get("/v1/runs/{id}/diff", s.runDiff)
	r.With(read, own).Get("/v1/runs/{id}/patch", s.runPatch)
	r.With(read, own).Get("/v1/runs/{id}/files", s.runFiles)
	r.With(read, own).Get("/v1/runs/{id}/files/*", s.runFile)
	r.With(read, own).Get("/v1/runs/{id}/archive", s.runArchive)
	r.With(read, own).Get("/v1/runs/{id}/webhooks", s.runWebhooks) // webhooks.go
	// Runs that start themselves (schedules.go).
	r.With(write).Post("/v1/schedules", s.createSchedule)
	r.With(read).Get("/v1/schedules", s.listSchedules)
	r.With(read).Get("/v1/schedules/{id}", s.getSchedule)
	r.With(write).Patch("/v1/schedules/{id}", s.updateSchedule)
	r.With(write).Delete("/v1/schedules/{id}", s.deleteSchedule)
	r.With(write).Post("/v1/schedules/{id}/run", s.fireSchedule)
	r.With(read).Get("/v1/schedules/{id}/fires", s.scheduleFires)
	// Runs that start on inbound events (triggers.go); a delivery answers
	// without an API key, by the trigger's own proof.
	r.With(write).Post("/v1/triggers", s.createTrigger)
	r.With(read).Get("/v1/triggers", s.listTriggers)
	r.With(read).Get("/v1/triggers/{id}", s.getTrigger)
	r.With(write).Patch("/v1/triggers/{id}", s.updateTrigger)
	r.With(write).Delete("/v1/triggers/{id}", s.deleteTrigger)
	r.With(write).Post("/v1/triggers/{id}/rotate", s.rotateTrigger)
	r.With(read).Get("/v1/triggers/{id}/deliveries", s.triggerDeliveries)
	r.Post("/v1/triggers/{id}/deliveries", s.deliver)
	s.router = r
	return r
}

type nopObserver struct{}

func (nopObserver) HTTPRequest(string, string, int, float64) {}
func (nopObserver) SSEClientsAdd(int)                        {}

func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, edgeErr(http.StatusNotFound, CodeNotFound, "", "no route for "+echoed(r.URL.Path)))
}

// methodNotAllowed answers 405 with an Allow header. chi computes the
// allowed methods but gives them only to its own default handler, so they
// are found again here by matching the path against each method.
func (s *server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if s.router.Match(chi.NewRouteContext(), m, r.URL.Path) {
			allowed = append(allowed, m)
		}
	}
	if slices.Contains(allowed, http.MethodGet) {
		allowed = append(allowed, http.MethodHead)
	}
	for _, m := range allowed {
		w.Header().Add("Allow", m)
	}
	s.fail(w, r, edgeErr(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "",
		"method "+echoed(r.Method)+" is not allowed on "+echoed(r.URL.Path)))
}

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 503 not_ready with the service's reason, whatever error
// it is: readiness is not a request that failed.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Ready(r.Context()); err != nil {
		s.fail(w, r, &edgeError{status: http.StatusServiceUnavailable, code: CodeNotReady,
			msg: "not ready: " + err.Error(), cause: err})
		return
	}
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if s.metrics == nil {
		s.fail(w, r, edgeErr(http.StatusNotFound, CodeNotFound, "", "metrics are not enabled"))
		return
	}
	s.metrics.ServeHTTP(w, r)
}
