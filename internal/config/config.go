// Package config is the service configuration: one struct, read from flags
// with environment variables as defaults, validated once at start so a bad
// setting fails loudly before anything listens or migrates.
package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chatmsg/gateway/internal/filestore"
)

// Config is everything the gateway can be told at start.
type Config struct {
	ListenAddr string
	// DatabaseURL selects the database: empty means the embedded SQLite file
	// under DataDir; postgres:// or postgresql:// selects PostgreSQL.
	DatabaseURL string
	DataDir     string
	// OutboundAllowCIDRs are ranges the SSRF guard lets through although they
	// are private or loopback (tests and local development).
	OutboundAllowCIDRs []netip.Prefix
	TimeZone           *time.Location
	LogLevel           slog.Level
	LogFormat          string
	// PublicBaseURL is how clients reach this service; temporary media URLs
	// are built from it.
	PublicBaseURL string
	RedisURL      string
	// ShutdownTimeout bounds graceful shutdown of HTTP and jobs.
	ShutdownTimeout time.Duration
	// Workers is the number of queued sends in flight per replica (the send
	// queue's slots) and of River workers of the default queue.
	// A queued send holds its slot for the provider call (hundreds of
	// milliseconds on the real Cloud API) and its outcome's write, but a
	// database connection only for its claim and its outcome, one short
	// statement each, so workers can outnumber DB_MAX_CONNS. Slots bound
	// what a replica sends: at most Workers per call's duration, 256 at
	// 250 ms. The default (256) also keeps up with what the API accepts on
	// this project's 2-core machine: once a queued send was stored by one
	// statement, make load's closed loop accepted 1,385 sends/s while 64
	// slots handed 1,177/s to the provider (the backlog grew without bound);
	// with 256, 1,361/s in and 1,360/s out.
	Workers int
	// SendSlotsPerSender is the most of a replica's Workers slots one
	// sender (a company's channel) holds at once (the send queue's fair
	// share). The default, 16, is 16 × the official provider's ~250 ms a
	// call = 64 sends/s, above the 600 per minute (10/s) a company may
	// send, so a healthy sender never waits for its share; and it is 1/16
	// of the 256 slots, so a sender whose provider stalls (each call held
	// until the send timeout) leaves 240 slots to everyone else.
	SendSlotsPerSender int
	// ConnectorDriver is the chat-app connector of unofficial connections:
	// "simulator" (default) or "whatsmeow".
	ConnectorDriver string
	// ConnectorChosen is true when CONNECTOR_DRIVER (or its flag) was set
	// rather than defaulted: CheckServe refuses the defaulted simulator on
	// PostgreSQL.
	ConnectorChosen bool
	// SecretsKey is the key ring secrets at rest are sealed with
	// ("id:base64key,…", the first seals; see internal/secrets); empty
	// keeps them in clear.
	SecretsKey string
	// HTTP bounds what one client can hold of the public listener.
	HTTP HTTPLimits
	// DBMaxConns bounds the PostgreSQL connection pool of this process.
	DBMaxConns int
	// DebugListen, when set, serves pprof on this address (never on the
	// public listener); empty = off.
	DebugListen string
	// MetricsListen is the address of the Prometheus listener (/metrics),
	// never the public one: the metrics show the whole platform's traffic.
	// Loopback by default; empty when METRICS_LISTEN=off.
	MetricsListen string
	// MemoryLimit is the Go runtime's soft memory limit in bytes
	// (debug.SetMemoryLimit); 0 = none. Near it the GC runs more often and
	// the scavenger hands freed pages back to the OS, so a replica returns
	// toward its idle size after a burst instead of keeping its peak.
	MemoryLimit int64
	// MediaStore is where stored files (uploads, message files) live:
	// "local" (DATA_DIR/media), "database" (the database, in chunks) or
	// "s3://bucket?endpoint=…&region=…" (credentials from
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY); empty follows the
	// database (MediaStoreFor).
	MediaStore string
	// SpoolDir is where a multipart upload waits while its request runs
	// (filestore.Spool): DATA_DIR/spool unless set, "" for the system's
	// temporary directory (no DATA_DIR). Set it to a disk of the replica's
	// own when DATA_DIR is a volume the replicas share.
	SpoolDir string
	// PublicBaseURLSet is whether PUBLIC_BASE_URL was given; without it the
	// URLs of stored files name this replica's own listener, which is wrong
	// as soon as more than one replica serves.
	PublicBaseURLSet bool
	// MediaURLLifetime is how long a URL of a message's file (the `media`
	// of events and API answers) stays valid; each event and each API
	// answer carries a URL valid that long from when it was made.
	MediaURLLifetime time.Duration
	// PactProviderStates mounts the test-only provider-states endpoint
	// (internal/pactstates) when PACT_PROVIDER_STATES=1; never in
	// production: the endpoint creates companies and tokens.
	PactProviderStates bool
}

// EnvPactProviderStates is test-only (contract verification of a running
// gateway), so it has no flag.
const EnvPactProviderStates = "PACT_PROVIDER_STATES"

// HTTPLimits are the public listener's timeouts and in-flight bounds.
type HTTPLimits struct {
	// ReadTimeout bounds reading a whole request, body included, and
	// WriteTimeout writing its answer; UploadTimeout replaces both for
	// multipart requests (file sends and uploads). A body dripped slowly is
	// cut off when its deadline passes.
	ReadTimeout, WriteTimeout, UploadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends nothing.
	IdleTimeout time.Duration
	// MaxPerIP and MaxPerToken bound the requests in progress per client
	// address and per bearer token; one more answers 429.
	MaxPerIP, MaxPerToken int
	// MaxPerProviderAccount bounds the provider webhooks in progress per
	// provider account (the path's phone number id). The provider posts
	// every company's webhooks from the same few addresses, so they are
	// bounded per account instead of per address: one account's flood
	// fills its own bound, not every company's.
	MaxPerProviderAccount int
	// ProviderWebhookRate is how many webhook deliveries per second one
	// provider account may make, counted after their signature is checked
	// (so nobody but the provider can spend an account's share); one more
	// answers 429 and the provider delivers it again later. In-flight
	// bounds alone let one account's flood of quick deliveries take the
	// machine: measured, 1,000 inbound messages a second of one company
	// made another's inbound→event p99 8× its quiet figure. 0: no limit.
	ProviderWebhookRate int
	// MaxStreamsPerCompany bounds the live event streams one company has
	// open on a replica; one more answers 429.
	MaxStreamsPerCompany int
	// TrustedProxies are the peers (load balancers) whose X-Forwarded-For
	// is believed: behind one of them the client address is the rightmost
	// address of X-Forwarded-For that is not itself a trusted proxy. Empty:
	// the peer address is the client.
	TrustedProxies []netip.Prefix
}

// Env names, documented in README.md.
const (
	EnvListenAddr    = "LISTEN_ADDR"
	EnvDatabaseURL   = "DATABASE_URL"
	EnvDataDir       = "DATA_DIR"
	EnvOutboundAllow = "OUTBOUND_ALLOW_CIDRS"
	EnvTimeZone      = "TIME_ZONE"
	EnvLogLevel      = "LOG_LEVEL"
	EnvLogFormat     = "LOG_FORMAT"
	EnvPublicBaseURL = "PUBLIC_BASE_URL"
	EnvRedisURL      = "REDIS_URL"
	EnvWorkers       = "WORKERS"
	EnvSendShare     = "SEND_SLOTS_PER_SENDER"
	EnvConnector     = "CONNECTOR_DRIVER"
	EnvSecretsKey    = "SECRETS_KEY"
	EnvReadTimeout   = "HTTP_READ_TIMEOUT"
	EnvWriteTimeout  = "HTTP_WRITE_TIMEOUT"
	EnvUploadTimeout = "HTTP_UPLOAD_TIMEOUT"
	EnvIdleTimeout   = "HTTP_IDLE_TIMEOUT"
	EnvMaxPerIP      = "HTTP_MAX_INFLIGHT_PER_IP"
	EnvMaxPerToken   = "HTTP_MAX_INFLIGHT_PER_TOKEN"
	EnvMaxPerAccount = "HTTP_MAX_INFLIGHT_PER_PROVIDER_ACCOUNT"
	EnvProviderRate  = "PROVIDER_WEBHOOK_RATE"
	EnvMaxStreams    = "HTTP_MAX_STREAMS_PER_COMPANY"
	EnvDBMaxConns    = "DB_MAX_CONNS"
	EnvDebugListen   = "DEBUG_LISTEN"
	EnvMetricsListen = "METRICS_LISTEN"
	EnvMemoryLimit   = "MEMORY_LIMIT"
	EnvMediaURLTTL   = "MEDIA_URL_TTL"
	EnvMediaStore    = "MEDIA_STORE"
	EnvSpoolDir      = "SPOOL_DIR"
	EnvTrustedProxy  = "TRUSTED_PROXIES"
)

// DefaultMemoryLimit is MEMORY_LIMIT's default, 256 MiB of Go memory (heap,
// stacks, runtime metadata; the binary's mapped code and data come on top),
// two thirds of the manifests' 384 MiB container limit. It was 96 MiB: above
// what the send and delivery loads need, but below what a replica holds
// while a thousand endpoints hang (a connection, two net/http goroutines and
// a lane each, ~130-180 MB). A soft limit below the live memory makes the GC
// run continuously (up to half the CPU) without freeing anything: measured
// in noisy-webhooks, the healthy company's p99 went from 49 to 216 ms and a
// tenth of the dead endpoints' retries left their schedule. Below the limit
// the GC works as GOGC says, so every other load is unchanged.
const DefaultMemoryLimit = "256MiB"

// minMemoryLimit is the lowest MEMORY_LIMIT accepted: below it the GC
// would run nearly all the time (an idle replica holds ~20 MiB).
const minMemoryLimit = 32 << 20

// DefaultMetricsListen is METRICS_LISTEN's default: loopback, so only the
// host (or a scraper beside it) reads the metrics unless the operator
// chooses an address.
const DefaultMetricsListen = "127.0.0.1:9464"

// Connector drivers (CONNECTOR_DRIVER).
const (
	ConnectorSimulator = "simulator"
	ConnectorWhatsmeow = "whatsmeow"
)

// Parse reads flags from args (environment variables give the defaults) and
// validates the result. getenv is os.Getenv outside tests.
func Parse(name string, args []string, getenv func(string) string) (Config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	finish := Bind(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return finish()
}

// Bind declares the configuration flags on fs (so a subcommand can add its
// own) and returns the function that validates them after fs.Parse.
func Bind(fs *flag.FlagSet, getenv func(string) string) func() (Config, error) {
	env := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	listen := fs.String("listen", env(EnvListenAddr, "127.0.0.1:8080"), "address to listen on ($"+EnvListenAddr+")")
	dbURL := fs.String("database-url", env(EnvDatabaseURL, ""), "postgres URL; empty = embedded SQLite under the data dir ($"+EnvDatabaseURL+")")
	dataDir := fs.String("data-dir", env(EnvDataDir, "data"), "directory of the SQLite file and stored media ($"+EnvDataDir+")")
	allow := fs.String("outbound-allow-cidrs", env(EnvOutboundAllow, ""), "comma-separated CIDRs outbound requests may reach despite the SSRF guard ($"+EnvOutboundAllow+")")
	tz := fs.String("time-zone", env(EnvTimeZone, "UTC"), "IANA time zone of formatted times ($"+EnvTimeZone+")")
	level := fs.String("log-level", env(EnvLogLevel, "info"), "debug, info, warn or error ($"+EnvLogLevel+")")
	format := fs.String("log-format", env(EnvLogFormat, "json"), "json or text ($"+EnvLogFormat+")")
	public := fs.String("public-base-url", env(EnvPublicBaseURL, ""), "external base URL of this service; default http://LISTEN_ADDR ($"+EnvPublicBaseURL+")")
	redis := fs.String("redis-url", env(EnvRedisURL, ""), "redis:// URL for limits shared across replicas; empty = in-process ($"+EnvRedisURL+")")
	workers := fs.Int("workers", intEnv(getenv(EnvWorkers), 256), "concurrent background workers ($"+EnvWorkers+")")
	sendShare := fs.Int("send-slots-per-sender", intEnv(getenv(EnvSendShare), 16), "send queue slots one sender (a company's channel) may hold at once ($"+EnvSendShare+")")
	shutdown := fs.Duration("shutdown-timeout", 15*time.Second, "graceful shutdown limit")
	connector := fs.String("connector-driver", env(EnvConnector, ConnectorSimulator), "chat-app connector of unofficial connections: simulator or whatsmeow ($"+EnvConnector+")")
	mediaTTL := fs.Duration("media-url-ttl", durationEnv(getenv(EnvMediaURLTTL), 7*24*time.Hour), "lifetime of a message file's URL in events and API answers ($"+EnvMediaURLTTL+")")
	spoolDir := fs.String("spool-dir", env(EnvSpoolDir, ""), "where a multipart upload waits on this replica's disk while its request runs; default DATA_DIR/spool ($"+EnvSpoolDir+")")
	mediaStore := fs.String("media-store", env(EnvMediaStore, ""), "where stored files live: local, database or s3://bucket?endpoint=host:port&region=name; default local with SQLite, database with PostgreSQL ($"+EnvMediaStore+")")
	trusted := fs.String("trusted-proxies", env(EnvTrustedProxy, ""), "comma-separated CIDRs of load balancers whose X-Forwarded-For names the client ($"+EnvTrustedProxy+")")
	secretsKey := fs.String("secrets-key", env(EnvSecretsKey, ""), "key ring id:base64key,… that encrypts secrets at rest; prefer the variable ($"+EnvSecretsKey+")")
	edge := edgeFields{
		read:          fs.Duration("http-read-timeout", durationEnv(getenv(EnvReadTimeout), 30*time.Second), "time to read a whole request, body included ($"+EnvReadTimeout+")"),
		write:         fs.Duration("http-write-timeout", durationEnv(getenv(EnvWriteTimeout), time.Minute), "time to answer a request ($"+EnvWriteTimeout+")"),
		upload:        fs.Duration("http-upload-timeout", durationEnv(getenv(EnvUploadTimeout), 10*time.Minute), "read and write time of a multipart request (file sends, uploads) ($"+EnvUploadTimeout+")"),
		idle:          fs.Duration("http-idle-timeout", durationEnv(getenv(EnvIdleTimeout), 2*time.Minute), "keep-alive connection idle limit ($"+EnvIdleTimeout+")"),
		perIP:         fs.Int("http-max-inflight-per-ip", intEnv(getenv(EnvMaxPerIP), 64), "requests in progress per client address; more answer 429 ($"+EnvMaxPerIP+")"),
		perToken:      fs.Int("http-max-inflight-per-token", intEnv(getenv(EnvMaxPerToken), 32), "requests in progress per bearer token; more answer 429 ($"+EnvMaxPerToken+")"),
		perAccount:    fs.Int("http-max-inflight-per-provider-account", intEnv(getenv(EnvMaxPerAccount), 16), "provider webhooks in progress per provider account, counted instead of per address; more answer 429 ($"+EnvMaxPerAccount+")"),
		maxStreams:    fs.Int("http-max-streams-per-company", intEnv(getenv(EnvMaxStreams), 128), "live event streams one company may have open on this replica; more answer 429 ($"+EnvMaxStreams+")"),
		accountRate:   fs.Int("provider-webhook-rate", intEnv(getenv(EnvProviderRate), 200), "provider webhook deliveries per second per provider account, after the signature check; more answer 429 and the provider retries them; 0 = no limit ($"+EnvProviderRate+")"),
		dbMaxConns:    fs.Int("db-max-conns", intEnv(getenv(EnvDBMaxConns), 20), "PostgreSQL connections of this process ($"+EnvDBMaxConns+")"),
		debugListen:   fs.String("debug-listen", env(EnvDebugListen, ""), "address of the pprof listener; empty = off ($"+EnvDebugListen+")"),
		metricsListen: fs.String("metrics-listen", env(EnvMetricsListen, DefaultMetricsListen), "address of the Prometheus /metrics listener, never the public one; off = none ($"+EnvMetricsListen+")"),
		memoryLimit:   fs.String("memory-limit", env(EnvMemoryLimit, DefaultMemoryLimit), "soft limit of the Go runtime's memory, e.g. 96MiB or 1GiB; off = none ($"+EnvMemoryLimit+")"),
	}
	return func() (Config, error) {
		publicSet := strings.TrimSpace(*public) != "" // validate fills in the default
		cfg, err := validate(fields{listen, dbURL, dataDir, allow, tz, level, format, public, redis, workers, sendShare, shutdown, connector})
		errs := edge.apply(&cfg)
		if cfg.MediaURLLifetime = *mediaTTL; cfg.MediaURLLifetime < time.Minute {
			errs = append(errs, fmt.Errorf("%s: must be a duration of at least 1m such as 168h", EnvMediaURLTTL))
		}
		errs = append(errs, applyMedia(&cfg, *mediaStore)...)
		errs = append(errs, applySpool(&cfg, *spoolDir)...)
		proxies, perr := parseCIDRs(EnvTrustedProxy, *trusted)
		cfg.HTTP.TrustedProxies = proxies
		errs = append(errs, perr...)
		cfg.PublicBaseURLSet = publicSet
		if len(errs) > 0 {
			err = errors.Join(append([]error{err}, errs...)...)
		}
		if err != nil {
			return Config{}, fmt.Errorf("invalid configuration: %w", err)
		}
		cfg.SecretsKey = *secretsKey
		cfg.PactProviderStates = getenv(EnvPactProviderStates) == "1"
		cfg.ConnectorChosen = getenv(EnvConnector) != ""
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "connector-driver" {
				cfg.ConnectorChosen = true
			}
		})
		return cfg, nil
	}
}

// CheckServe is the check `gateway serve` adds to validation: PostgreSQL
// is the production database, and a production deployment that forgot
// CONNECTOR_DRIVER must not run a simulated chat app (whose control calls
// would then be open under /api) without noticing. The simulator still
// runs on PostgreSQL when chosen explicitly (tests, demos).
func (c Config) CheckServe() error {
	if c.IsPostgres() && c.ConnectorDriver == ConnectorSimulator && !c.ConnectorChosen {
		return fmt.Errorf("invalid configuration: %s: with PostgreSQL the chat-app connector must be chosen: %s=%s for real phones, or %s=%s to run the simulator on purpose",
			EnvConnector, EnvConnector, ConnectorWhatsmeow, EnvConnector, ConnectorSimulator)
	}
	return nil
}

// applyMedia resolves MEDIA_STORE: its default follows the database, and
// the local store needs a data directory.
func applyMedia(cfg *Config, setting string) []error {
	cfg.MediaStore = strings.TrimSpace(setting)
	if cfg.MediaStore == "" {
		return nil // follows the database (MediaStoreFor)
	}
	if err := filestore.CheckSetting(setting); err != nil {
		return []error{fmt.Errorf("%s: %w", EnvMediaStore, err)}
	}
	if cfg.MediaStore == filestore.SettingLocal && cfg.DataDir == "" {
		return []error{fmt.Errorf("%s: local needs %s", EnvMediaStore, EnvDataDir)}
	}
	return nil
}

// parseCIDRs reads a comma-separated list of CIDRs (a bare address is a
// /32 or /128).
func parseCIDRs(env, list string) ([]netip.Prefix, []error) {
	var out []netip.Prefix
	var errs []error
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if a, err := netip.ParseAddr(part); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a CIDR", env, part))
			continue
		}
		out = append(out, p.Masked())
	}
	return out, errs
}

// MediaStoreFor is the MEDIA_STORE in force on a database of that engine:
// the setting, or by default the database on PostgreSQL (every replica
// serves every file) and the local directory on SQLite.
func (c Config) MediaStoreFor(postgres bool) string {
	switch {
	case c.MediaStore != "":
		return c.MediaStore
	case postgres:
		return filestore.SettingDatabase
	}
	return filestore.SettingLocal
}

// MultiReplicaWarnings are the start-up warnings of a configuration that
// can run as several replicas: with PostgreSQL and no PUBLIC_BASE_URL, the
// URLs of stored files name this replica's own listener address.
func (c Config) MultiReplicaWarnings() []string {
	var out []string
	if c.IsPostgres() && !c.PublicBaseURLSet {
		out = append(out, "PUBLIC_BASE_URL is not set: media URLs name this replica's own address ("+c.PublicBaseURL+
			"); set it to the load balancer's URL when more than one replica may serve")
	}
	if c.IsPostgres() && c.MediaStoreFor(true) == filestore.SettingLocal {
		out = append(out, "MEDIA_STORE=local with PostgreSQL: each replica keeps its own files, which other replicas cannot serve")
	}
	return out
}

// edgeFields are the flags of the HTTP edge, the pool size and the debug
// listener.
type edgeFields struct {
	read, write, upload, idle *time.Duration
	perIP, perToken           *int
	perAccount                *int
	accountRate               *int
	maxStreams                *int
	dbMaxConns                *int
	debugListen               *string
	metricsListen             *string
	memoryLimit               *string
}

func (f edgeFields) apply(cfg *Config) []error {
	var errs []error
	cfg.HTTP = HTTPLimits{
		ReadTimeout: *f.read, WriteTimeout: *f.write, UploadTimeout: *f.upload, IdleTimeout: *f.idle,
		MaxPerIP: *f.perIP, MaxPerToken: *f.perToken, MaxPerProviderAccount: *f.perAccount, ProviderWebhookRate: *f.accountRate,
		MaxStreamsPerCompany: *f.maxStreams,
	}
	for _, d := range []struct {
		env string
		v   time.Duration
	}{{EnvReadTimeout, cfg.HTTP.ReadTimeout}, {EnvWriteTimeout, cfg.HTTP.WriteTimeout}, {EnvUploadTimeout, cfg.HTTP.UploadTimeout}, {EnvIdleTimeout, cfg.HTTP.IdleTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be a positive duration such as 30s", d.env))
		}
	}
	if cfg.HTTP.UploadTimeout < cfg.HTTP.ReadTimeout {
		errs = append(errs, fmt.Errorf("%s: may not be shorter than %s", EnvUploadTimeout, EnvReadTimeout))
	}
	if cfg.HTTP.MaxPerIP < 1 || cfg.HTTP.MaxPerIP > 100000 {
		errs = append(errs, fmt.Errorf("%s: must be between 1 and 100000", EnvMaxPerIP))
	}
	if cfg.HTTP.MaxPerToken < 1 || cfg.HTTP.MaxPerToken > 100000 {
		errs = append(errs, fmt.Errorf("%s: must be between 1 and 100000", EnvMaxPerToken))
	}
	if cfg.HTTP.MaxPerProviderAccount < 1 || cfg.HTTP.MaxPerProviderAccount > 100000 {
		errs = append(errs, fmt.Errorf("%s: must be between 1 and 100000", EnvMaxPerAccount))
	}
	if cfg.HTTP.MaxStreamsPerCompany < 1 || cfg.HTTP.MaxStreamsPerCompany > 100000 {
		errs = append(errs, fmt.Errorf("%s: must be between 1 and 100000", EnvMaxStreams))
	}
	if cfg.HTTP.ProviderWebhookRate < 0 || cfg.HTTP.ProviderWebhookRate > 100000 {
		errs = append(errs, fmt.Errorf("%s: must be between 0 (no limit) and 100000", EnvProviderRate))
	}
	cfg.DBMaxConns = *f.dbMaxConns
	if cfg.DBMaxConns < 1 || cfg.DBMaxConns > 1000 {
		errs = append(errs, fmt.Errorf("%s: must be between 1 and 1000", EnvDBMaxConns))
	}
	cfg.DebugListen = strings.TrimSpace(*f.debugListen)
	if cfg.DebugListen != "" {
		if _, _, err := splitHostPort(cfg.DebugListen); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvDebugListen, err))
		} else if cfg.DebugListen == cfg.ListenAddr {
			errs = append(errs, fmt.Errorf("%s: must differ from %s: pprof is never served on the public listener", EnvDebugListen, EnvListenAddr))
		}
	}
	cfg.MetricsListen = strings.TrimSpace(*f.metricsListen)
	if cfg.MetricsListen == "off" {
		cfg.MetricsListen = ""
	}
	if cfg.MetricsListen != "" {
		if _, _, err := splitHostPort(cfg.MetricsListen); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvMetricsListen, err))
		} else if cfg.MetricsListen == cfg.ListenAddr {
			errs = append(errs, fmt.Errorf("%s: must differ from %s: the metrics are never served on the public listener", EnvMetricsListen, EnvListenAddr))
		} else if cfg.MetricsListen == cfg.DebugListen {
			errs = append(errs, fmt.Errorf("%s: must differ from %s", EnvMetricsListen, EnvDebugListen))
		}
	}
	limit, err := ParseMemoryLimit(*f.memoryLimit)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvMemoryLimit, err))
	}
	cfg.MemoryLimit = limit
	return errs
}

// ParseMemoryLimit reads a MEMORY_LIMIT value: a number of bytes with an
// optional unit (B, KiB, MiB, GiB, TiB, as GOMEMLIMIT takes them), or
// "off" (or 0) for no limit.
func ParseMemoryLimit(v string) (int64, error) {
	v = strings.TrimSpace(v)
	if v == "off" || v == "0" {
		return 0, nil
	}
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	num, shift := v, uint(0)
	for _, u := range units {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			num, shift = n, u.shift
			break
		}
	}
	var n int64
	if _, err := fmt.Sscanf(num, "%d", &n); err != nil || fmt.Sprint(n) != num || n < 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("%q is not a size such as 96MiB, 1GiB or off", v)
	}
	n <<= shift
	if n < minMemoryLimit {
		return 0, fmt.Errorf("%q is below %d MiB: the GC would run nearly all the time (off disables the limit)", v, minMemoryLimit>>20)
	}
	return n, nil
}

// durationEnv reads a duration variable; a malformed one becomes -1, which
// validation rejects with the variable's name.
func durationEnv(v string, def time.Duration) time.Duration {
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return -1
	}
	return d
}

type fields struct {
	listen, dbURL, dataDir, allow, tz, level, format, public, redis *string
	workers, sendShare                                              *int
	shutdown                                                        *time.Duration
	connector                                                       *string
}

func validate(f fields) (Config, error) {
	listen, dbURL, dataDir, allow, tz, level, format, public, redis, workers, shutdown :=
		f.listen, f.dbURL, f.dataDir, f.allow, f.tz, f.level, f.format, f.public, f.redis, f.workers, f.shutdown
	var errs []error
	cfg := Config{
		ListenAddr: *listen, DatabaseURL: *dbURL, DataDir: *dataDir, LogFormat: *format,
		RedisURL: *redis, ShutdownTimeout: *shutdown, Workers: *workers, SendSlotsPerSender: *f.sendShare,
	}
	if _, _, err := splitHostPort(cfg.ListenAddr); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvListenAddr, err))
	}
	if cfg.DatabaseURL != "" {
		u, err := url.Parse(cfg.DatabaseURL)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			errs = append(errs, fmt.Errorf("%s: must be a postgres:// URL or empty for SQLite", EnvDatabaseURL))
		}
	} else if cfg.DataDir == "" {
		errs = append(errs, fmt.Errorf("%s: required when %s is empty", EnvDataDir, EnvDatabaseURL))
	}
	if cfg.DataDir != "" {
		abs, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvDataDir, err))
		}
		cfg.DataDir = abs
	}
	for _, part := range strings.Split(*allow, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a CIDR", EnvOutboundAllow, part))
			continue
		}
		cfg.OutboundAllowCIDRs = append(cfg.OutboundAllowCIDRs, p.Masked())
	}
	loc, err := time.LoadLocation(*tz)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: unknown time zone %q", EnvTimeZone, *tz))
	}
	cfg.TimeZone = loc
	if err := cfg.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %q is not one of debug, info, warn, error", EnvLogLevel, *level))
	}
	if cfg.LogFormat != "json" && cfg.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("%s: %q is not json or text", EnvLogFormat, cfg.LogFormat))
	}
	if *public == "" {
		*public = "http://" + cfg.ListenAddr
	}
	if u, err := url.Parse(*public); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("%s: %q is not an http(s) URL", EnvPublicBaseURL, *public))
	}
	cfg.PublicBaseURL = strings.TrimRight(*public, "/")
	if cfg.RedisURL != "" {
		if u, err := url.Parse(cfg.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			errs = append(errs, fmt.Errorf("%s: must be a redis:// URL", EnvRedisURL))
		}
	}
	if cfg.Workers < 1 || cfg.Workers > 10000 {
		errs = append(errs, fmt.Errorf("%s: must be between 1 and 10000", EnvWorkers))
	}
	if cfg.SendSlotsPerSender < 1 || cfg.SendSlotsPerSender > cfg.Workers {
		errs = append(errs, fmt.Errorf("%s: must be between 1 and %s (%d)", EnvSendShare, EnvWorkers, cfg.Workers))
	}
	cfg.ConnectorDriver = strings.TrimSpace(*f.connector)
	if cfg.ConnectorDriver != ConnectorSimulator && cfg.ConnectorDriver != ConnectorWhatsmeow {
		errs = append(errs, fmt.Errorf("%s: %q is not %s or %s", EnvConnector, cfg.ConnectorDriver, ConnectorSimulator, ConnectorWhatsmeow))
	}
	if cfg.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("shutdown-timeout: must be positive"))
	}
	return cfg, errors.Join(errs...)
}

// IsPostgres reports whether the configuration selects PostgreSQL.
func (c Config) IsPostgres() bool { return c.DatabaseURL != "" }

// Logger builds the structured logger the configuration asks for.
func (c Config) Logger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

func intEnv(v string, def int) int {
	var n int
	if v == "" {
		return def
	}
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil {
		return -1 // rejected by validation with the variable's name
	}
	return n
}

func splitHostPort(addr string) (string, string, error) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return "", "", fmt.Errorf("%q has no port", addr)
	}
	return addr[:i], addr[i+1:], nil
}

// applySpool resolves SPOOL_DIR: its own absolute path, else DATA_DIR/spool.
func applySpool(cfg *Config, setting string) []error {
	setting = strings.TrimSpace(setting)
	if setting == "" {
		if cfg.DataDir != "" {
			cfg.SpoolDir = filepath.Join(cfg.DataDir, "spool")
		}
		return nil
	}
	abs, err := filepath.Abs(setting)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", EnvSpoolDir, err)}
	}
	cfg.SpoolDir = abs
	return nil
}
