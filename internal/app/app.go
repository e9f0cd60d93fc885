// Package app wires the capabilities into one running gateway. cmd/gateway
// and the tests start the service through it, so tests exercise the same
// wiring production runs.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/buildinfo"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/connections"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/eventstream"
	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/internal/httpapi"
	"github.com/chatmsg/gateway/internal/idempotency"
	"github.com/chatmsg/gateway/internal/jobs"
	"github.com/chatmsg/gateway/internal/logging"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/pactstates"
	"github.com/chatmsg/gateway/internal/ratelimit"
	"github.com/chatmsg/gateway/internal/secrets"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/templates"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// Migrations lists every capability's migrations in order of application,
// which is the order of their ids (store.CheckOrder): each capability keeps
// its own in its migrations.go, numbered from one sequence.
func Migrations() []store.Migration {
	all := slices.Concat(auth.Migrations, channels.Migrations, connections.Migrations, conversations.Migrations, webhooks.Migrations, eventstream.Migrations, messaging.Migrations, templates.Migrations, idempotency.Migrations, filestore.Migrations)
	slices.SortStableFunc(all, func(a, b store.Migration) int { return strings.Compare(a.ID, b.ID) })
	return all
}

// Options adjust how the app is built; zero values mean production defaults.
type Options struct {
	// DB is an already open database (tests); when nil the configured one is
	// opened and closed with the app.
	DB *store.DB
	// Now replaces the clock (tests).
	Now clock.Clock
	// Logger replaces the configured logger.
	Logger *slog.Logger
	// InsertOnlyJobs builds a River client that never works jobs (admin
	// commands, and tests that drive workers by hand).
	InsertOnlyJobs bool
	// Connector replaces the configured connector driver (tests share one
	// simulated chat app between in-process replicas).
	Connector connector.Driver
	// ConnectionOptions adjusts the connections service (replica id, lease
	// timing) in tests.
	ConnectionOptions func(*connections.Options)
	// Files replaces the configured media store (tests: a store that
	// cannot be reached).
	Files filestore.Store
	// MessagingOptions adjusts the messaging service (the send queue's
	// lease) in tests.
	MessagingOptions func(*messaging.Options)
}

// App is a wired gateway.
type App struct {
	Config   config.Config
	Logger   *slog.Logger
	DB       *store.DB
	Jobs     *jobs.Runner
	Auth     *auth.Service
	Channels *channels.Service
	// Connections owns unofficial chat-app connections and their sessions.
	Connections *connections.Service
	Webhooks    *webhooks.Service
	// Conversations owns conversations, contacts, sectors and tags.
	Conversations *conversations.Service
	// Messaging owns messages: send, edit, revoke, inbound and receipts.
	Messaging *messaging.Service
	// Templates owns official templates and uploaded header media.
	Templates *templates.Service
	// Official is the provider's inbound webhooks; ProviderClient speaks
	// the provider's HTTP interface.
	Official       *official.Service
	ProviderClient *official.Client
	// Limiter is the shared rate limiter (Redis when REDIS_URL is set).
	Limiter  ratelimit.Limiter
	Registry *prometheus.Registry
	// DebugRegistry holds tuning figures, served with pprof on DEBUG_LISTEN
	// (/debug/metrics), not on METRICS_LISTEN.
	DebugRegistry *prometheus.Registry
	Handler       http.Handler
	Clock         clock.Clock

	// Files is the media store (MEDIA_STORE) of uploads and message files,
	// shared by every replica unless it is the local directory.
	Files        filestore.Store
	missingFiles *filestore.MissingLog
	// spool keeps multipart uploads and fetched header media on this
	// replica's disk while a request checks and stores them.
	spool filestore.Spool

	// Idempotency keeps the answers of requests sent with Idempotency-Key.
	Idempotency *idempotency.Service
	// Secrets seals secrets at rest (nil: SECRETS_KEY unset, kept clear).
	Secrets *secrets.Keyring

	// MetricsHandler serves /metrics on the metrics listener
	// (METRICS_LISTEN), never on the API's.
	MetricsHandler http.Handler

	ownDB        bool
	closeLimiter func() error
	// simulated: the connector driver is the simulator, whose control
	// operations are served only then.
	simulated bool
}

// OpenDB opens the database the configuration names.
func OpenDB(ctx context.Context, cfg config.Config) (*store.DB, error) {
	if cfg.IsPostgres() {
		return store.OpenPostgres(ctx, cfg.DatabaseURL, store.Options{MaxConns: int32(cfg.DBMaxConns)})
	}
	return store.OpenSQLite(ctx, filepath.Join(cfg.DataDir, "gateway.db"))
}

// Migrate applies the service's and River's migrations.
func Migrate(ctx context.Context, db *store.DB) error {
	if err := db.Migrate(ctx, Migrations()); err != nil {
		return err
	}
	return jobs.Migrate(ctx, db)
}

// New opens (when needed) and migrates the database and wires every
// capability and the HTTP handler.
func New(ctx context.Context, cfg config.Config, opts Options) (*App, error) {
	a := &App{Config: cfg, Logger: opts.Logger, DB: opts.DB, Clock: opts.Now}
	if a.Logger == nil {
		a.Logger = cfg.Logger()
	}
	// No line may quote a media token, whatever writes it.
	a.Logger = slog.New(logging.RedactMediaTokens(a.Logger.Handler()))
	if a.Clock == nil {
		a.Clock = clock.System
	}
	if a.DB == nil {
		db, err := OpenDB(ctx, cfg)
		if err != nil {
			return nil, err
		}
		a.DB, a.ownDB = db, true
	}
	if err := Migrate(ctx, a.DB); err != nil {
		a.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}

	a.Registry = prometheus.NewRegistry()
	a.DebugRegistry = prometheus.NewRegistry()
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildinfo.Read().Collector())
	a.Auth = auth.NewService(a.DB, a.Clock)
	keyring, err := secrets.Parse(cfg.SecretsKey)
	if err != nil {
		a.Close()
		return nil, err
	}
	a.Secrets = keyring
	a.Channels = channels.NewService(a.DB, a.Clock)
	a.Channels.UseSecrets(a.Secrets)

	if cfg.RedisURL != "" {
		r, err := ratelimit.OpenRedis(ctx, cfg.RedisURL)
		if err != nil {
			a.Close()
			return nil, err
		}
		a.Limiter, a.closeLimiter = r, r.Close
	} else {
		a.Limiter = ratelimit.NewMemory(a.Clock)
	}
	a.Webhooks = webhooks.NewService(a.DB, webhooks.Options{
		Now: a.Clock, Times: clock.NewFormatter(cfg.TimeZone), Logger: a.Logger, Limiter: a.Limiter,
		AllowCIDRs: cfg.OutboundAllowCIDRs, Registerer: a.Registry, Channels: a.Channels, Secrets: a.Secrets,
	})
	conns, err := a.newConnections(ctx, opts)
	if err != nil {
		a.Close()
		return nil, err
	}
	a.Connections = conns
	a.Files = opts.Files
	if a.Files == nil {
		files, err := filestore.Open(cfg.MediaStoreFor(a.DB.Dialect == store.Postgres), cfg.DataDir, a.DB)
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("media store: %w", err)
		}
		a.Files = files
	}
	a.missingFiles = filestore.NewMissingLog(a.Logger.With("component", "media"))
	if a.spool, err = openSpool(cfg.SpoolDir, a.Logger); err != nil {
		a.Close()
		return nil, err
	}
	a.Conversations = conversations.NewService(a.DB, a.Clock, clock.NewFormatter(cfg.TimeZone), a.Auth, a.Channels, a.Webhooks)
	a.newMessaging(opts)
	a.wireConnections()

	// Capabilities add their workers, periodic jobs and queues here.
	workers := river.NewWorkers()
	a.Webhooks.AddWorkers(workers)
	a.Idempotency = idempotency.NewService(a.DB, idempotency.Options{Now: a.Clock, Logger: a.Logger, Secrets: a.Secrets})
	a.Idempotency.AddWorkers(workers)
	a.addMessagingWorkers(workers)
	runner, err := jobs.New(a.DB, jobs.Options{
		Workers: workers, Logger: a.Logger, InsertOnly: opts.InsertOnlyJobs,
		Periodic: slices.Concat(a.Webhooks.PeriodicJobs(), a.messagingPeriodicJobs(), a.Idempotency.PeriodicJobs()),
		Queues: map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: cfg.Workers},
			webhooks.QueueName: webhooks.Queue(),
		},
		// After a crash, jobs left running are retried after a minute
		// instead of River's hour (each worker's own Timeout still applies).
		RescueStuckJobsAfter: time.Minute,
	})
	if err != nil {
		a.Close()
		return nil, err
	}
	a.Jobs = runner
	a.Messaging.UseJobs(runner)

	h, err := httpapi.NewHandler(ctx, httpapi.Deps{
		Logger: a.Logger, Registry: a.Registry, Auth: a.Auth, Channels: a.Channels, DB: a.DB,
		Times: clock.NewFormatter(cfg.TimeZone), Webhooks: a.Webhooks,
		Conversations:   a.Conversations,
		HTTP:            cfg.HTTP,
		Connections:     a.Connections,
		Messaging:       a.Messaging,
		Templates:       a.Templates,
		Official:        a.Official,
		Redis:           redisOf(a.Limiter),
		Idempotency:     a.Idempotency,
		SimulatorRoutes: a.simulated,
		Spool:           a.spool,
	})
	if err != nil {
		a.Close()
		return nil, err
	}
	a.Handler = h
	if cfg.PactProviderStates { // test-only: contract verification of this gateway (internal/pactstates)
		a.Handler = pactstates.Mount(h, pactstates.Deps{Auth: a.Auth, Channels: a.Channels, Templates: a.Templates, Messaging: a.Messaging, Webhooks: a.Webhooks, Logger: a.Logger})
	}
	a.MetricsHandler = httpapi.MetricsHandler(a.Registry)
	return a, nil
}

// Close releases what the app opened.
func (a *App) Close() {
	if a.closeLimiter != nil {
		if err := a.closeLimiter(); err != nil {
			a.Logger.Error("close rate limiter", "err", err)
		}
	}
	if a.ownDB && a.DB != nil {
		if err := a.DB.Close(); err != nil {
			a.Logger.Error("close database", "err", err)
		}
	}
}

// Serve listens on the configured address and works background jobs until
// ctx ends, then shuts both down gracefully within the configured limit.
func (a *App) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.Config.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", a.Config.ListenAddr, err)
	}
	return a.ServeListener(ctx, ln)
}

// ServeListener is Serve on an existing listener (tests use port 0).
func (a *App) ServeListener(ctx context.Context, ln net.Listener) error {
	if a.Config.DebugListen != "" {
		stopDebug, err := a.serveDebug()
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer stopDebug()
	}
	if a.Config.MetricsListen != "" {
		stopMetrics, err := a.serveMetrics()
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer stopMetrics()
	}
	if err := a.StartWork(ctx); err != nil {
		_ = ln.Close()
		return err
	}
	// This replica holds chat-app sessions while it serves; on the way out
	// it releases them so another replica takes over at once.
	connCtx, stopConns := context.WithCancel(ctx)
	connsDone := make(chan struct{})
	go func() { a.Connections.Run(connCtx); close(connsDone) }()
	srv := httpapi.NewHTTPServer(a.Handler, a.Config.HTTP)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.Logger.Info("gateway listening", "addr", ln.Addr().String(), "database", string(a.DB.Dialect), "media_store", a.Files.Kind())
	if a.Secrets == nil {
		a.Logger.Warn("SECRETS_KEY is not set: webhook secrets and provider credentials are stored in clear")
	}
	for _, w := range a.Config.MultiReplicaWarnings() {
		a.Logger.Warn(w)
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.Config.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		serveErr = errors.Join(serveErr, fmt.Errorf("http shutdown: %w", err))
	}
	stopConns()
	select {
	case <-connsDone:
	case <-shutdownCtx.Done():
	}
	if err := a.StopWork(shutdownCtx); err != nil {
		serveErr = errors.Join(serveErr, err)
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// StartWork starts the background work of this replica: River's jobs, the
// send queue, and webhook delivery.
func (a *App) StartWork(ctx context.Context) error {
	if err := a.Jobs.Start(ctx); err != nil {
		return fmt.Errorf("start jobs: %w", err)
	}
	a.Messaging.StartQueue(ctx)
	a.Webhooks.Start(ctx)
	return nil
}

// StopWork stops what StartWork started, letting work in flight finish
// until ctx ends.
func (a *App) StopWork(ctx context.Context) error {
	var errs []error
	if err := a.Messaging.StopQueue(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := a.Webhooks.Stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("webhook delivery shutdown: %w", err))
	}
	if err := a.Jobs.Stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("jobs shutdown: %w", err))
	}
	return errors.Join(errs...)
}

// serveDebug starts the pprof listener on its own address (DEBUG_LISTEN).
// It has no write timeout: a CPU profile or trace streams for as long as
// asked.
func (a *App) serveDebug() (stop func(), err error) {
	ln, err := net.Listen("tcp", a.Config.DebugListen)
	if err != nil {
		return nil, fmt.Errorf("debug listen %s: %w", a.Config.DebugListen, err)
	}
	srv := &http.Server{Handler: httpapi.DebugHandler(a.DebugRegistry), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	a.Logger.Info("pprof listening", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// serveMetrics starts the Prometheus listener on its own address
// (METRICS_LISTEN, loopback by default): the metrics show every company's
// traffic, so they are never on the public listener.
func (a *App) serveMetrics() (stop func(), err error) {
	ln, err := net.Listen("tcp", a.Config.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", a.Config.MetricsListen, err)
	}
	srv := &http.Server{Handler: a.MetricsHandler, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	a.Logger.Info("metrics listening", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// redisOf returns the Redis limiter for readiness checks, nil in-process.
func redisOf(l ratelimit.Limiter) interface{ Ping(context.Context) error } {
	if r, ok := l.(*ratelimit.Redis); ok {
		return r
	}
	return nil
}

// spoolAge is how old a spooled file must be for a start to remove it as
// left by a killed process: far beyond any request's deadlines.
const spoolAge = time.Hour

// openSpool prepares SPOOL_DIR (DATA_DIR/spool by default): created, and
// cleared of what a killed process left. Without one, files in transit go
// to the system's temporary directory.
func openSpool(dir string, logger *slog.Logger) (filestore.Spool, error) {
	if dir == "" {
		return filestore.Spool{}, nil
	}
	sp := filestore.Spool{Dir: dir}
	if err := os.MkdirAll(sp.Dir, 0o700); err != nil {
		return sp, fmt.Errorf("spool directory: %w", err)
	}
	if err := sp.Clear(spoolAge); err != nil {
		logger.Warn("clear the spool; old files stay", "dir", sp.Dir, "err", err)
	}
	return sp, nil
}
