// Command gateway is the chat messaging gateway: `serve` runs the HTTP API
// and its background workers, `migrate` applies database migrations, and
// `admin` manages what the API document leaves to the platform's settings
// (companies, users, access tokens, official channels). `version` prints the
// build and `healthcheck` probes a running gateway for container images
// that have no shell.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/config"
)

const usage = `usage: gateway <command> [flags]

commands:
  serve                      run the HTTP API and background workers
  migrate                    apply database migrations and exit
  admin bootstrap            create a company, a user and a token; prints {"company_id","user_id","token"}
  admin company create       create a company
  admin company set-quota    set a company's monthly message quota (-1 = unlimited)
  admin user create          add a user to a company
  admin token create|list|revoke
  admin channel register-official|webhook-info
  admin template sync        sync an official account's templates from the provider
  admin secrets rotate       re-encrypt every secret at rest under the first key of SECRETS_KEY
  version [-json]            print the build: module version, VCS revision and time, Go version
  healthcheck [-ready]       exit 0 when the local gateway's /healthz (or /readyz) answers 200
  admin media migrate        copy the files of a data directory (-from, default DATA_DIR) into MEDIA_STORE; safe to re-run
  events send-examples -url URL -secret S [-scheme svc|standard-webhooks] [-event NAME]
                             POST every AsyncAPI example to a receiver, signed as deliveries are; fails unless each gets a 2xx within 10 s

Every command accepts the configuration flags (see "gateway serve -h");
environment variables give their defaults (DATABASE_URL, LISTEN_ADDR, …).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Getenv); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "gateway:", err)
		}
		os.Exit(exitCode(err))
	}
}

func exitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) || errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

var errUsage = errors.New("see usage")

func run(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "serve":
		cfg, err := parseConfig("serve", args[1:], getenv, nil)
		if err != nil {
			return err
		}
		if err := cfg.CheckServe(); err != nil {
			return err
		}
		applyMemoryLimit(cfg, getenv)
		a, err := app.New(ctx, cfg, app.Options{})
		if err != nil {
			return err
		}
		defer a.Close()
		// Starting up allocates several times what the running service
		// keeps (the OpenAPI document is parsed through intermediate JSON
		// forms, migrations are read): hand that garbage back to the OS now
		// rather than when the scavenger gets to it, so an idle replica's
		// RSS is what it actually uses.
		debug.FreeOSMemory()
		return a.Serve(ctx)
	case "migrate":
		cfg, err := parseConfig("migrate", args[1:], getenv, nil)
		if err != nil {
			return err
		}
		db, err := app.OpenDB(ctx, cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := app.Migrate(ctx, db); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "migrations applied")
		return nil
	case "admin":
		return runAdmin(ctx, args[1:], stdout, getenv)
	case "events":
		return runEvents(ctx, args[1:], stdout)
	case "version":
		return runVersion(args[1:], stdout)
	case "healthcheck":
		return runHealthcheck(ctx, args[1:], stdout, getenv)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q: %w", args[0], errUsage)
}

// parseConfig parses a command's flags: the configuration flags every
// command accepts (defaults from the environment), plus the command's own
// when commandFlags is not nil.
func parseConfig(name string, args []string, getenv func(string) string, commandFlags func(*flag.FlagSet)) (config.Config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	finish := config.Bind(fs, getenv)
	if commandFlags != nil {
		commandFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return config.Config{}, err
	}
	return finish()
}

// applyMemoryLimit sets the runtime's soft memory limit of a serving
// process (MEMORY_LIMIT). It is process-wide, so it is set here rather than
// in app.New, which tests call many times in one process. An explicit
// GOMEMLIMIT in the environment is the runtime's own setting and wins.
func applyMemoryLimit(cfg config.Config, getenv func(string) string) {
	if getenv("GOMEMLIMIT") != "" {
		return
	}
	if cfg.MemoryLimit > 0 {
		debug.SetMemoryLimit(cfg.MemoryLimit)
	} else {
		debug.SetMemoryLimit(math.MaxInt64) // "off": the runtime's default
	}
}

func printJSON(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }
