package webhooks

import (
	"cmp"
	"context"
	"github.com/chatmsg/gateway/internal/channels"
	"log/slog"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/netguard"
	"github.com/chatmsg/gateway/internal/ratelimit"
	"github.com/chatmsg/gateway/internal/secrets"
	"github.com/chatmsg/gateway/internal/store"
)

// Numbers of the API document (Limits, States and transitions).
const (
	// MaxAttempts is the number of delivery attempts of one event to one
	// subscription.
	MaxAttempts = 5
	// DisableAfter consecutive failed events disable a subscription.
	DisableAfter = 20
	// AttemptTimeout is how long a receiver has to answer.
	AttemptTimeout = 10 * time.Second
	// SuccessRetention and FailureRetention keep delivery-log entries.
	SuccessRetention = 7 * 24 * time.Hour
	FailureRetention = 30 * 24 * time.Hour
	// UserAgent identifies the delivery agent.
	UserAgent = "Svc-Webhooks/1.0"

	// ManagementLimit requests per ManagementWindow per token on the
	// management endpoints (the document says "rate limited", the value is
	// ours).
	ManagementLimit  = 120
	ManagementWindow = time.Minute

	// DefaultPerSubscriptionConcurrency is the production bound on one
	// subscription's attempts in flight.
	DefaultPerSubscriptionConcurrency = 8

	// QueueName is the River queue of the webhooks' periodic jobs (log
	// retention) and of the converters of jobs queued by earlier releases;
	// deliveries themselves run on the dispatcher, not on River.
	QueueName = "webhooks"
)

// DefaultRetryDelays are the waits before attempts 2 to 5, counted from the
// previous failed attempt.
var DefaultRetryDelays = []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute}

// DisabledReason is written when the service disables a subscription.
var DisabledReason = "Disabled after 20 consecutive failed events"

// Options configure the service; zero values are production defaults.
type Options struct {
	Now    clock.Clock
	Times  clock.Formatter
	Logger *slog.Logger
	// Limiter enforces the management rate limit (in-process when nil).
	Limiter ratelimit.Limiter
	// AllowCIDRs are the SSRF guard's exceptions (OUTBOUND_ALLOW_CIDRS).
	AllowCIDRs []netip.Prefix
	// Registerer receives the delivery metrics (none when nil).
	Registerer prometheus.Registerer
	// RetryDelays replaces DefaultRetryDelays (tests and benchmarks); it
	// must have MaxAttempts-1 entries.
	RetryDelays []time.Duration
	// PerSubscriptionConcurrency bounds in-flight attempts per subscription
	// (default 8). A subscription's lane runs on one replica at a time (its
	// lease), so the bound holds across replicas.
	PerSubscriptionConcurrency int
	// LaneRunFor replaces how long a lane works before it releases its
	// lease (tests; default 20 s).
	LaneRunFor time.Duration
	// Client replaces the guarded HTTP client (tests only).
	Client *http.Client
	// Channels resolves company channel ids, so a subscription's channel
	// filter can only name channels of its own company (unchecked when nil).
	Channels ChannelLookup
	// Secrets seals subscription secrets at rest (clear when nil).
	Secrets *secrets.Keyring
}

// ChannelLookup is what webhooks needs of the channels capability
// (*channels.Service): Get answers fault.NotFound for a missing channel or
// one of another company.
type ChannelLookup interface {
	Get(ctx context.Context, companyID, id int64) (channels.Channel, error)
}

// Service is the webhooks capability: subscriptions, publishing, delivery.
type Service struct {
	db       *store.DB
	now      clock.Clock
	times    clock.Formatter
	log      *slog.Logger
	limiter  ratelimit.Limiter
	client   *http.Client
	delays   []time.Duration
	cooldown time.Duration // an open breaker's wait between probes
	metrics  *metrics
	channels ChannelLookup
	// perSubscription is the in-flight bound of one subscription's lane.
	perSubscription int
	laneRunFor      time.Duration
	subs            *subscriptionCache
	dispatch        *dispatcher
	// failing is the failing endpoints' share of the database (breaker.go).
	failing dbTurns
	keyring *secrets.Keyring
	// guard judges subscription URLs when they are given
	// (OUTBOUND_ALLOW_CIDRS); deliveries dial through client's own.
	guard *netguard.Guard
	// brokers are the NATS and AMQP transports' connection pools.
	brokers brokerTransports
	// logged wakes the live stream's tail; streamAudience says whether a
	// stream of a company is open here (eventlog.go).
	logged         loggedSignal
	streamAudience atomic.Pointer[func(int64) bool]
}

var (
	_ Publisher = (*Service)(nil)
	_ Audience  = (*Service)(nil)
)

// NewService returns the service over db. Start runs its delivery.
func NewService(db *store.DB, opts Options) *Service {
	s := &Service{db: db, now: opts.Now, times: opts.Times, log: opts.Logger, limiter: opts.Limiter,
		client: opts.Client, delays: opts.RetryDelays, channels: opts.Channels, keyring: opts.Secrets,
		guard: netguard.New(opts.AllowCIDRs)}
	if s.now == nil {
		s.now = clock.System
	}
	if s.times.Location == nil {
		s.times = clock.NewFormatter(nil)
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.limiter == nil {
		s.limiter = ratelimit.NewMemory(s.now)
	}
	if s.client == nil {
		// Lean: a delivery waiting on a slow or silent receiver holds its
		// lane's goroutine and its socket only (about 6 KB, against 31 KB
		// with net/http's transport), which is what a thousand failing
		// endpoints cost a replica.
		s.client = s.guard.NewClient(netguard.ClientOptions{
			Timeout: AttemptTimeout, MaxIdleConnsPerHost: 64, Lean: true,
		})
	}
	if len(s.delays) != MaxAttempts-1 {
		s.delays = DefaultRetryDelays
	}
	s.cooldown = cooldownFor(s.delays)
	s.perSubscription = opts.PerSubscriptionConcurrency
	if s.perSubscription <= 0 {
		s.perSubscription = DefaultPerSubscriptionConcurrency
	}
	s.laneRunFor = cmp.Or(opts.LaneRunFor, laneRunFor)
	s.subs = newSubscriptionCache()
	s.dispatch = newDispatcher(s)
	s.failing = newDBTurns()
	s.brokers = newBrokerTransports(s)
	s.metrics = newMetrics(opts.Registerer)
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(newBacklog(s))
	}
	return s
}

// AddWorkers registers the log retention worker and the converters of jobs
// queued by earlier releases.
func (s *Service) AddWorkers(w *river.Workers) {
	river.AddWorker(w, &retentionWorker{s: s})
	addLegacyWorkers(w, s)
}

// PeriodicJobs are the jobs the River leader schedules: log retention
// (hourly, and once at start).
func (s *Service) PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
			func() (river.JobArgs, *river.InsertOpts) { return RetentionArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true, ID: "webhook_log_retention"}),
	}
}

// Queue is the River queue configuration of the webhooks' jobs: few and
// short, so a handful of workers.
func Queue() river.QueueConfig {
	return river.QueueConfig{MaxWorkers: 4}
}

// throttle applies the per-token rate limit of the management operations.
// Their permissions are checked before this, in the one place that checks
// every operation's (the HTTP pipeline, from the OpenAPI document's
// x-permission), so a forbidden call never spends anyone's budget.
func (s *Service) throttle(ctx context.Context, p auth.Principal) error {
	ok, wait, err := s.limiter.Allow(ctx, ratelimit.Key("webhooks:token", p.TokenID), ManagementLimit, ManagementWindow)
	if err != nil {
		// A limiter outage must not take the API down with it: fail open,
		// loudly.
		s.log.WarnContext(ctx, "webhooks: rate limiter unavailable; request let through", "err", err)
		return nil
	}
	if !ok {
		return &fault.Error{Kind: fault.RateLimited, Message: "Too Many Attempts.", RetryAfterSeconds: ratelimit.RetryAfterSeconds(wait)}
	}
	return nil
}

type metrics struct {
	laneRuns prometheus.Counter
	queued   prometheus.Counter
	attempts *prometheus.CounterVec
	duration prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		laneRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_webhook_lane_runs_total", Help: "Runs of subscriptions' delivery lanes on this replica (a lane moves between replicas from run to run).",
		}),
		queued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gateway_webhook_deliveries_queued_total", Help: "Webhook deliveries queued (one per event and subscription).",
		}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_webhook_attempts_total", Help: "Webhook delivery attempts by outcome (succeeded, retry, failed).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gateway_webhook_attempt_duration_seconds", Help: "Time receivers took to answer.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.laneRuns, m.queued, m.attempts, m.duration)
	}
	return m
}
