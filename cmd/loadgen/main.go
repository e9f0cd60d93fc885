// Command loadgen drives the real gateway binary through its public API:
// `loadgen run` measures it (make load), `loadgen chaos` kills it and its
// database connections under load and checks that nothing accepted was
// lost or sent twice (make chaos), and `loadgen baseline` is the bare
// baseline server the measurements are compared with. See the README,
// "Load and benchmarks" and "Fault suite".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chatmsg/gateway/internal/loadtest"
)

const usage = `usage: loadgen <command> [flags]

commands:
  run        start the gateway, providersim and the baseline server, run the load scenarios, print a table
             and write a JSON report (make load)
  chaos      the fault suite: SIGKILL the gateway and terminate its PostgreSQL backends under load, then
             check that no accepted send or event was lost, none sent twice, no delivery without its log row
             (make chaos)
  baseline   the bare baseline servers (net/http + pgx): -job insert (one INSERT per request), send (INSERT, a
             worker's POST to the provider, UPDATE), delivery (an outbox row, a signed POST, a log row with the
             delete); run by "run" itself
  seed-conversations
             write -n conversations of one company through SQL (COPY) with the values the service writes (list-1m)

"loadgen <command> -h" lists the command's flags; environment variables give their defaults.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "run":
		return runLoad(ctx, args[1:], stdout)
	case "chaos":
		return runChaos(ctx, args[1:], stdout)
	case "baseline":
		fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
		job := fs.String("job", "insert", "insert, send or delivery")
		listen := fs.String("listen", "127.0.0.1:8090", "listen address")
		dbURL := fs.String("database-url", pgURL(), "PostgreSQL URL")
		conns := fs.Int("conns", 8, "pgx pool size")
		workers := fs.Int("workers", 32, "send, delivery: worker goroutines")
		providerURL := fs.String("provider-url", "", "send: the provider simulator's URL")
		pnid := fs.String("phone-number-id", "", "send: the provider account's phone number id")
		token := fs.String("access-token", "", "send: the provider account's access token")
		deliverURL := fs.String("deliver-url", "", "delivery: the endpoint to post to")
		secret := fs.String("deliver-secret", "", "delivery: the signing secret")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		o := loadtest.JobBaselineOptions{Listen: *listen, DatabaseURL: *dbURL, Conns: int32(*conns), Workers: *workers,
			ProviderURL: *providerURL, PhoneNumberID: *pnid, AccessToken: *token, DeliverURL: *deliverURL, Secret: *secret}
		switch *job {
		case "insert":
			return loadtest.ServeBaseline(ctx, *listen, *dbURL, int32(*conns))
		case "send":
			return loadtest.ServeBaselineSend(ctx, o)
		case "delivery":
			return loadtest.ServeBaselineDelivery(ctx, o)
		}
		return fmt.Errorf("-job %q: want insert, send or delivery", *job)
	case "seed-conversations":
		return runSeed(ctx, args[1:], stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// common are the flags run and chaos share.
type common struct {
	engines  *string
	adminURL *string
	binDir   *string
	out      *string
	env      *envList
}

// envList is a repeatable -env KEY=VALUE flag.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	*e = append(*e, v)
	return nil
}

func commonFlags(fs *flag.FlagSet) common {
	return common{
		engines:  fs.String("db", env("LOADGEN_DB", "postgres"), "database engine of the gateway: postgres, sqlite, or both ($LOADGEN_DB)"),
		adminURL: fs.String("database-url", pgURL(), "PostgreSQL server where a fresh database is created and dropped ($LOADGEN_DATABASE_URL, else $TEST_DATABASE_URL)"),
		binDir:   fs.String("bin-dir", env("LOADGEN_BIN_DIR", ""), "prebuilt gateway and providersim binaries; empty = go build them ($LOADGEN_BIN_DIR)"),
		out:      fs.String("out", env("LOADGEN_OUT", "load-results"), "folder of the JSON reports (git-ignored) ($LOADGEN_OUT)"),
		env:      envFlag(fs),
	}
}

func envFlag(fs *flag.FlagSet) *envList {
	e := &envList{}
	fs.Var(e, "env", "KEY=VALUE added to the gateway's environment, e.g. -env WORKERS=100 (repeatable; production defaults otherwise)")
	return e
}

func (c common) engineList() ([]loadtest.Engine, error) {
	switch *c.engines {
	case "postgres":
		return []loadtest.Engine{loadtest.Postgres}, nil
	case "sqlite":
		return []loadtest.Engine{loadtest.SQLite}, nil
	case "both":
		return []loadtest.Engine{loadtest.Postgres, loadtest.SQLite}, nil
	}
	return nil, fmt.Errorf("-db %q: want postgres, sqlite or both", *c.engines)
}

func runLoad(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c := commonFlags(fs)
	scenarios := fs.String("scenarios", env("LOADGEN_SCENARIOS", strings.Join(loadtest.DefaultScenarios, ",")),
		"comma-separated name:mode; names: baseline, send-queued, send-sync, events-1, events-4, list-default, list-filter, baseline-send, baseline-delivery; modes: open, closed; and without a mode: noisy-webhooks, noisy-sends, noisy-inbound, events-fanout, list-1m, events-stream, media-large, and, only when named (not in the default list: they need NATS with JetStream and RabbitMQ, -nats-url, -amqp-url), events-nats and events-amqp ($LOADGEN_SCENARIOS)")
	runs := fs.Int("runs", envInt("LOADGEN_RUNS", 3), "repetitions; the table gives the median and the spread ($LOADGEN_RUNS)")
	duration := fs.Duration("duration", envDuration("LOADGEN_DURATION", 6*time.Second), "load time per scenario ($LOADGEN_DURATION)")
	rate := fs.Float64("rate", envFloat("LOADGEN_RATE", 200), "open loop: requests per second ($LOADGEN_RATE)")
	eventRate := fs.Float64("event-rate", envFloat("LOADGEN_EVENT_RATE", 500), "open loop for events: events per second ($LOADGEN_EVENT_RATE)")
	conns := fs.Int("conns", envInt("LOADGEN_CONNS", 16), "closed loop: connections ($LOADGEN_CONNS)")
	companies := fs.Int("companies", envInt("LOADGEN_COMPANIES", 80), "send companies; each sends at most 588 per minute so the 600/min limit never applies ($LOADGEN_COMPANIES)")
	contacts := fs.Int("contacts", 4, "open conversations per send company")
	listContacts := fs.Int("list-contacts", 200, "conversations of the listing company")
	drain := fs.Duration("drain", envDuration("LOADGEN_DRAIN", 20*time.Second), "events: how long to wait for the last deliveries ($LOADGEN_DRAIN)")
	baselineConns := fs.Int("baseline-conns", 8, "pgx pool size of the baseline server")
	replicas := fs.Int("replicas", envInt("LOADGEN_REPLICAS", 1), "gateway processes on the one PostgreSQL database; requests go round-robin, RSS and CPU are summed ($LOADGEN_REPLICAS)")
	profile := fs.String("profile", env("LOADGEN_PROFILE", ""), "folder for a CPU profile of every gateway replica over each scenario's load (pprof on a DEBUG_LISTEN of its own); empty = none ($LOADGEN_PROFILE)")
	jobWorkers := fs.Int("job-workers", envInt("LOADGEN_JOB_WORKERS", 32), "worker goroutines of baseline-send and baseline-delivery ($LOADGEN_JOB_WORKERS)")
	d := loadtest.DefaultNoise
	noise := loadtest.NoiseOptions{}
	fs.DurationVar(&noise.Warmup, "noise-warmup", envDuration("LOADGEN_NOISE_WARMUP", d.Warmup), "noisy-*: how long the noise runs before the healthy load joins it ($LOADGEN_NOISE_WARMUP)")
	fs.DurationVar(&noise.Observe, "noise-observe", envDuration("LOADGEN_NOISE_OBSERVE", d.Observe), "noisy-webhooks: how long the failing endpoints' retries are watched after the noise ($LOADGEN_NOISE_OBSERVE)")
	fs.IntVar(&noise.WebhookCompanies, "noisy-webhook-companies", d.WebhookCompanies, "noisy-webhooks: noisy companies")
	fs.IntVar(&noise.BlackHoles, "black-holes", envInt("LOADGEN_BLACK_HOLES", d.BlackHoles), "noisy-webhooks: endpoints that accept the connection and never answer ($LOADGEN_BLACK_HOLES)")
	fs.IntVar(&noise.Unavailable, "unavailable-endpoints", d.Unavailable, "noisy-webhooks: endpoints that answer 503 at once")
	fs.IntVar(&noise.SlowEndpoints, "slow-endpoints", d.SlowEndpoints, "noisy-webhooks: endpoints that answer after 8 s")
	fs.Float64Var(&noise.EventRate, "noisy-event-rate", d.EventRate, "noisy-webhooks: events per second of each noisy company")
	fs.Float64Var(&noise.HealthyEventRate, "healthy-event-rate", d.HealthyEventRate, "noisy-webhooks: events per second of the healthy company")
	fs.IntVar(&noise.SendCompanies, "noisy-send-companies", d.SendCompanies, "noisy-sends: companies whose provider stalls")
	fs.Float64Var(&noise.SendRate, "noisy-send-rate", d.SendRate, "noisy-sends: queued sends per second of each")
	fs.IntVar(&noise.HealthySenders, "healthy-senders", d.HealthySenders, "noisy-sends: companies the healthy sends are spread over")
	fs.Float64Var(&noise.HealthySendRate, "healthy-send-rate", d.HealthySendRate, "noisy-sends: healthy queued sends per second, and as many synchronous")
	fs.Float64Var(&noise.InboundRate, "noisy-inbound-rate", d.InboundRate, "noisy-inbound: inbound messages per second of the noisy company")
	fs.Float64Var(&noise.HealthyInboundRate, "healthy-inbound-rate", d.HealthyInboundRate, "noisy-inbound: … of the healthy company")
	fanout := fs.String("fanout", env("LOADGEN_FANOUT", "1,10,100,500"), "events-fanout: subscriptions per event ($LOADGEN_FANOUT)")
	fanoutDeliveries := fs.Float64("fanout-deliveries", envFloat("LOADGEN_FANOUT_DELIVERIES", 1000), "events-fanout: deliveries per second offered at each level ($LOADGEN_FANOUT_DELIVERIES)")
	listRows := fs.Int("list-rows", envInt("LOADGEN_LIST_ROWS", 1_000_000), "list-1m: conversations seeded ($LOADGEN_LIST_ROWS)")
	brokerRate := fs.Float64("broker-rate", envFloat("LOADGEN_BROKER_RATE", 500), "events-nats, events-amqp: events per second of the paced phase ($LOADGEN_BROKER_RATE)")
	natsURL := fs.String("nats-url", env("LOADGEN_NATS_URL", loadtest.DefaultNATSURL), "events-nats: NATS server with JetStream; the scenario makes and deletes a stream of its own ($LOADGEN_NATS_URL)")
	amqpURL := fs.String("amqp-url", env("LOADGEN_AMQP_URL", loadtest.DefaultAMQPURL), "events-amqp: RabbitMQ URL with credentials and virtual host; the scenario makes and deletes an exchange and a queue of its own ($LOADGEN_AMQP_URL)")
	streamReaders := fs.Int("stream-readers", envInt("LOADGEN_STREAM_READERS", 100), "events-stream: concurrent readers of the company's stream ($LOADGEN_STREAM_READERS)")
	streamRate := fs.Float64("stream-rate", envFloat("LOADGEN_STREAM_RATE", 200), "events-stream: events per second the company publishes ($LOADGEN_STREAM_RATE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	levels, err := intList(*fanout)
	if err != nil {
		return fmt.Errorf("-fanout: %w", err)
	}
	engines, err := c.engineList()
	if err != nil {
		return err
	}
	raiseFileLimit()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	list := strings.Split(*scenarios, ",")
	for _, sc := range list {
		if _, _, err := loadtest.ParseScenario(sc); err != nil {
			return err
		}
	}
	for _, engine := range engines {
		rep, err := loadtest.Load(ctx, loadtest.Options{Engine: engine, AdminURL: *c.adminURL, BinDir: *c.binDir, Self: self,
			Scenarios: list, Runs: *runs, Duration: *duration, Rate: *rate, EventRate: *eventRate, Conns: *conns,
			Companies: *companies, Contacts: *contacts, ListContacts: *listContacts, Drain: *drain,
			BaselineConns: int32(*baselineConns), Replicas: *replicas, GatewayEnv: *c.env, ProfileDir: *profile, Log: logf,
			JobWorkers: *jobWorkers, Noise: noise, FanoutLevels: levels, FanoutDeliveries: *fanoutDeliveries, ListRows: *listRows,
			BrokerRate: *brokerRate, NATSURL: *natsURL, AMQPURL: *amqpURL, StreamReaders: *streamReaders, StreamRate: *streamRate})
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout)
		rep.WriteTable(stdout)
		p, err := rep.WriteJSON(*c.out)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nJSON report: %s\n", p)
	}
	return nil
}

// runSeed is `loadgen seed-conversations`.
func runSeed(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("seed-conversations", flag.ContinueOnError)
	dbURL := fs.String("database-url", env("DATABASE_URL", ""), "the gateway's PostgreSQL database ($DATABASE_URL)")
	company := fs.Int64("company-id", 0, "the company (required)")
	channel := fs.Int64("company-channel-id", 0, "the channel of the conversations; 0 = the company's first")
	n := fs.Int("n", 1_000_000, "conversations to write")
	every := fs.Int("match-every", 50, "one in this many is named \"Cliente João …\" (50: ?filter=joao matches 2%)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dbURL == "" || *company <= 0 {
		return errors.New("seed-conversations needs -database-url and -company-id")
	}
	rep, err := loadtest.SeedConversations(ctx, loadtest.SeedOptions{DatabaseURL: *dbURL, CompanyID: *company,
		CompanyChannelID: *channel, N: *n, MatchEvery: *every, Log: logf})
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(rep)
}

// raiseFileLimit lifts the soft limit of open files to the hard one:
// noisy-webhooks holds a listener per failing endpoint and the
// connections the gateway keeps open to them. The gateway, started by
// this process, inherits the raised limit.
func raiseFileLimit() {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur >= lim.Max {
		return
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		logf("raise the open-file limit: %v", err)
	}
}

// intList parses "1,10,100".
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s loadgen: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// pgURL is the PostgreSQL server to use. Not DATABASE_URL: that may be a
// real deployment's, and the tools create and drop databases.
func pgURL() string {
	return env("LOADGEN_DATABASE_URL", env("TEST_DATABASE_URL", loadtest.DefaultPostgresURL))
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func envFloat(k string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(k), 64); err == nil {
		return v
	}
	return def
}

func envDuration(k string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(k)); err == nil {
		return v
	}
	return def
}
