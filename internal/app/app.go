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
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/httpapi"
	"github.com/chatmsg/gateway/internal/jobs"
	"github.com/chatmsg/gateway/internal/store"
)

// Migrations lists every capability's migrations in application order.
func Migrations() []store.Migration {
	return slices.Concat(auth.Migrations, channels.Migrations)
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
}

// App is a wired gateway.
type App struct {
	Config   config.Config
	Logger   *slog.Logger
	DB       *store.DB
	Jobs     *jobs.Runner
	Auth     *auth.Service
	Channels *channels.Service
	Registry *prometheus.Registry
	Handler  http.Handler
	Clock    clock.Clock

	ownDB bool
}

// OpenDB opens the database the configuration names.
func OpenDB(ctx context.Context, cfg config.Config) (*store.DB, error) {
	if cfg.IsPostgres() {
		return store.OpenPostgres(ctx, cfg.DatabaseURL, store.Options{})
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
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.Auth = auth.NewService(a.DB, a.Clock)
	a.Channels = channels.NewService(a.DB, a.Clock)

	// Capabilities add their workers here as they land; until one does the
	// runner only inserts.
	var workers *river.Workers
	runner, err := jobs.New(a.DB, jobs.Options{
		Workers: workers, Logger: a.Logger, InsertOnly: opts.InsertOnlyJobs,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
	})
	if err != nil {
		a.Close()
		return nil, err
	}
	a.Jobs = runner

	h, err := httpapi.NewHandler(ctx, httpapi.Deps{
		Logger: a.Logger, Registry: a.Registry, Auth: a.Auth, Channels: a.Channels, DB: a.DB,
		Times: clock.NewFormatter(cfg.TimeZone),
	})
	if err != nil {
		a.Close()
		return nil, err
	}
	a.Handler = h
	return a, nil
}

// Close releases what the app opened.
func (a *App) Close() {
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
	if err := a.Jobs.Start(ctx); err != nil {
		_ = ln.Close()
		return fmt.Errorf("start jobs: %w", err)
	}
	srv := &http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.Logger.Info("gateway listening", "addr", ln.Addr().String(), "database", string(a.DB.Dialect))

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
	if err := a.Jobs.Stop(shutdownCtx); err != nil {
		serveErr = errors.Join(serveErr, fmt.Errorf("jobs shutdown: %w", err))
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}
