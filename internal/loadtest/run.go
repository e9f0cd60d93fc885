package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Scenario names (each runs open or closed loop: "send-queued:closed").
const (
	ScenarioBaseline    = "baseline"     // the bare baseline server, same requests as send-queued
	ScenarioSendQueued  = "send-queued"  // POST /api/api-send-message, enqueue=true, official channel
	ScenarioSendSync    = "send-sync"    // the same, enqueue=false: answered after providersim accepted it
	ScenarioEvents1     = "events-1"     // POST /api/events fanned out to one endpoint
	ScenarioEvents4     = "events-4"     // … to four endpoints
	ScenarioListDefault = "list-default" // GET /api/contact-channels
	ScenarioListFilter  = "list-filter"  // GET /api/contact-channels?filter=joao (accent-folded search)

	// The baselines of the job itself (issue 31), each run open or closed
	// like the one-INSERT baseline and compared with the gateway's figure.
	ScenarioBaselineSend     = "baseline-send"     // INSERT, a worker's POST to providersim, UPDATE of the outcome
	ScenarioBaselineDelivery = "baseline-delivery" // an outbox row, a signed POST to the receiver, a log row with the delete

	// Scenarios with a load of their own (no mode).
	ScenarioNoisyWebhooks = "noisy-webhooks" // healthy publish→receipt beside 1,000 dead endpoints (issue 25)
	ScenarioNoisySends    = "noisy-sends"    // healthy sends beside companies whose provider stalls
	ScenarioNoisyInbound  = "noisy-inbound"  // healthy inbound→event beside a 1,000/s inbound flood
	ScenarioFanout        = "events-fanout"  // publish latency and CPU per delivery at 1–500 subscriptions per event
	ScenarioList1M        = "list-1m"        // listings of a company with 1M conversations seeded through SQL

	// Broker destinations and the live stream (issue 27). The broker
	// scenarios need the machine's NATS and RabbitMQ, so they are not in
	// DefaultScenarios: they run when named. The stream needs only the
	// gateway and runs by default.
	ScenarioEventsNATS   = "events-nats"   // a subscription to a JetStream subject, paced then closed loop
	ScenarioEventsAMQP   = "events-amqp"   // … to a RabbitMQ exchange
	ScenarioEventsStream = "events-stream" // readers of GET /api/events/stream while the company publishes

	// A 100 MB document through every media path of a replica (issue 26).
	ScenarioMediaLarge = "media-large"
)

// modeless are the scenarios with a load of their own.
var modeless = map[string]bool{ScenarioNoisyWebhooks: true, ScenarioNoisySends: true, ScenarioNoisyInbound: true,
	ScenarioFanout: true, ScenarioList1M: true, ScenarioEventsNATS: true, ScenarioEventsAMQP: true, ScenarioEventsStream: true,
	ScenarioMediaLarge: true}

// DefaultScenarios is what `make load` runs: the scenarios, the
// baseline in each loop mode it is compared with. Events come last so
// that a delivery backlog they leave cannot slow down the sends.
var DefaultScenarios = []string{
	"baseline:closed", "send-queued:closed", "baseline:open", "send-queued:open", "send-sync:closed",
	"list-default:closed", "list-filter:closed", "events-1:open", "events-4:open", "events-1:closed",
	"baseline-send:closed", "baseline-delivery:open", "baseline-delivery:closed",
	ScenarioFanout, ScenarioList1M, ScenarioNoisyWebhooks, ScenarioNoisySends, ScenarioNoisyInbound,
	ScenarioEventsStream, ScenarioMediaLarge,
}

// Options of a load run.
type Options struct {
	Engine       Engine
	AdminURL     string
	BinDir       string
	Self         string // this program, started again as the baseline server
	Scenarios    []string
	Runs         int
	Duration     time.Duration // per scenario
	Rate         float64       // open loop: requests per second
	EventRate    float64       // open loop for events: events per second
	Conns        int           // closed loop: connections
	Companies    int           // send companies (rate limit budget)
	Contacts     int           // open conversations per send company
	ListContacts int           // conversations of the listing company
	Drain        time.Duration // how long to wait for deliveries after an events scenario
	Replicas     int           // gateway processes on the one database, requests spread round-robin
	GatewayEnv   []string      // added to the gateway's environment
	// ProfileDir, when set, gets a CPU profile of every replica over each
	// scenario's load (through its DEBUG_LISTEN pprof listener).
	ProfileDir    string
	BaselineConns int32
	// JobWorkers are the worker goroutines of baseline-send and
	// baseline-delivery.
	JobWorkers int
	// Noise shapes the noisy-neighbour scenarios.
	Noise NoiseOptions
	// FanoutLevels are the subscriptions per event of events-fanout, and
	// FanoutDeliveries the deliveries per second offered at each.
	FanoutLevels     []int
	FanoutDeliveries float64
	// ListRows is the conversations seeded for list-1m.
	ListRows int
	// BrokerRate is the paced phase of events-nats and events-amqp
	// (events per second); NATSURL and AMQPURL the brokers they make
	// their stream, exchange and queue on.
	BrokerRate float64
	NATSURL    string
	AMQPURL    string
	// StreamReaders read the company's stream in events-stream while it
	// publishes StreamRate events per second.
	StreamReaders int
	StreamRate    float64
	Log           func(format string, args ...any)
}

// Result is one scenario of one run.
type Result struct {
	Scenario   string         `json:"scenario"`
	Load       string         `json:"load"`
	Run        int            `json:"run"`
	Started    int            `json:"started"`
	OK         int            `json:"ok"`
	Errors     map[string]int `json:"errors"`
	Throughput float64        `json:"throughput_rps"`
	Ratio      float64        `json:"ratio_to_baseline"`
	Latency    Latency        `json:"latency"`
	Events     *EventResult   `json:"events,omitempty"`
	Sends      *SendResult    `json:"sends,omitempty"`
	Footprint  Footprint      `json:"footprint"`
	CPUPerReq  float64        `json:"cpu_ms_per_request"`
	// Ratios to the baselines of the job itself (JobRatios).
	Ratios  map[string]float64 `json:"ratios,omitempty"`
	Noisy   *NoisyResult       `json:"noisy,omitempty"`
	Fanout  []FanoutLevel      `json:"fanout,omitempty"`
	Listing []ListingCase      `json:"listing,omitempty"`
	Broker  *BrokerResult      `json:"broker,omitempty"`
	Stream  *StreamResult      `json:"stream,omitempty"`
	Media   *MediaResult       `json:"media,omitempty"`
}

// EventResult is the delivery side of an events scenario.
type EventResult struct {
	EventTally
	DeliveriesPerSec float64 `json:"deliveries_per_s"`
	EndToEnd         Latency `json:"publish_to_receipt"`
	DrainedIn        float64 `json:"drained_in_s"` // after the last publish; the drain bound when not drained
	Drained          bool    `json:"drained"`
}

// SendResult is the provider side of a queued-send scenario. Requests per
// second count sends accepted; the workers hand them to the provider at
// their own pace, and a closed loop that accepts faster than they send
// builds a backlog the request rate does not show.
type SendResult struct {
	// HandedPerSec is what the provider simulator received per second
	// while the load ran.
	HandedPerSec float64 `json:"handed_per_s"`
	// BacklogAtEnd is the sends accepted but not yet at the provider when
	// the load stopped.
	BacklogAtEnd int `json:"backlog_at_end"`
	// DrainedIn is how long after the load the backlog took to reach the
	// provider; the drain bound when Left > 0.
	DrainedIn float64 `json:"drained_in_s"`
	Left      int     `json:"left"`
	// CompletedPerSec is the sends that reached the provider over the
	// load and its drain: the job done per second, which the queued send
	// and baseline-send are compared by.
	CompletedPerSec float64 `json:"completed_per_s"`
}

// Report is the output of a load run.
type Report struct {
	Started    time.Time      `json:"started"`
	Engine     Engine         `json:"engine"`
	Options    map[string]any `json:"options"`
	Companies  int            `json:"send_companies"`
	StartRSSMB float64        `json:"gateway_start_rss_mb"` // just after /readyz answered
	IdleRSSMB  float64        `json:"gateway_idle_rss_mb"`  // after the set-up, before any load
	// StartAnonMB and IdleAnonMB are their RssAnon part (see AnonRSS).
	StartAnonMB float64                      `json:"gateway_start_anon_rss_mb"`
	IdleAnonMB  float64                      `json:"gateway_idle_anon_rss_mb"`
	Results     []Result                     `json:"results"`
	Summary     map[string]map[string]Spread `json:"summary"` // scenario → figure → median/min/max over runs
	// LaneRunsByReplica is gateway_webhook_lane_runs_total of each replica
	// after every run.
	LaneRunsByReplica []float64 `json:"lane_runs_by_replica"`
}

// runner holds what the scenarios share.
type runner struct {
	o        Options
	stack    *Stack
	baseline *Proc
	baseURL  string
	setup    *Setup
	api      *Client
	base     *Client
	recv     *Receiver
	senders  []*Company
	budget   *Budget
	lister   *Company
	ev       map[int]*eventTarget
	seq      atomic.Int64
	startRSS float64
	idleRSS  float64
	// …and their RssAnon part
	startAnon, idleAnon float64

	// Made on first use by the scenarios that need them.
	baseSend, baseDelivery *Proc
	sendClient             *Client
	deliveryClient         *Client
	deliveryTarget         *eventTarget
	nw                     *noisyWebhooks
	ns                     *noisySends
	ni                     *noisyInbound
	fanout                 map[int]*fanoutTarget
	l1m                    *list1M
	mediaTemplate          int64 // media-large's template with a DOCUMENT header
	scenarioCos            map[string]*Company
	closers                []func()
}

type eventTarget struct {
	company   *Company
	endpoints []string
	subs      []Subscription
}

// Load runs the scenarios o.Runs times against a fresh stack and returns
// every result with the median and spread of each figure.
func Load(ctx context.Context, o Options) (*Report, error) {
	stack, err := StartStack(ctx, StackOptions{Engine: o.Engine, AdminURL: o.AdminURL, BinDir: o.BinDir, Log: o.Log, Replicas: o.Replicas, Env: o.GatewayEnv,
		Debug: o.ProfileDir != ""})
	if err != nil {
		return nil, err
	}
	defer stack.Close()
	o.Noise = o.Noise.withDefaults()
	if len(o.FanoutLevels) == 0 {
		o.FanoutLevels = DefaultFanout
	}
	if o.FanoutDeliveries <= 0 {
		o.FanoutDeliveries = 1000
	}
	if o.ListRows <= 0 {
		o.ListRows = 1_000_000
	}
	if o.JobWorkers <= 0 {
		o.JobWorkers = 32
	}
	if o.BrokerRate <= 0 {
		o.BrokerRate = 500
	}
	if o.NATSURL == "" {
		o.NATSURL = DefaultNATSURL
	}
	if o.AMQPURL == "" {
		o.AMQPURL = DefaultAMQPURL
	}
	if o.StreamReaders <= 0 {
		o.StreamReaders = 100
	}
	if o.StreamRate <= 0 {
		o.StreamRate = 200
	}
	r := &runner{o: o, stack: stack, setup: NewSetup(stack), api: NewClient(stack.ReplicaURLs...), ev: map[int]*eventTarget{}}
	defer r.close()
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now().UTC(), Engine: o.Engine, Companies: len(r.senders), StartRSSMB: r.startRSS,
		IdleRSSMB: r.idleRSS, StartAnonMB: r.startAnon, IdleAnonMB: r.idleAnon, Options: map[string]any{
			"runs": o.Runs, "duration_s": o.Duration.Seconds(), "rate": o.Rate, "event_rate": o.EventRate,
			"conns": o.Conns, "replicas": max(1, o.Replicas), "gateway_env": o.GatewayEnv, "profile_dir": o.ProfileDir, "contacts": o.Contacts,
			"list_contacts": o.ListContacts, "baseline_conns": o.BaselineConns, "scenarios": o.Scenarios,
			"job_workers": o.JobWorkers, "noise": o.Noise, "fanout_levels": o.FanoutLevels,
			"fanout_deliveries_per_s": o.FanoutDeliveries, "list_rows": o.ListRows, "broker_rate": o.BrokerRate,
			"nats_url": redact(o.NATSURL), "amqp_url": redact(o.AMQPURL), "stream_readers": o.StreamReaders,
			"stream_rate": o.StreamRate}}
	for run := 1; run <= o.Runs; run++ {
		first := len(rep.Results)
		base := map[string]float64{} // baseline throughput by load shape
		for _, sc := range o.Scenarios {
			name, mode, err := ParseScenario(sc)
			if err != nil {
				return nil, err
			}
			o.Log("run %d/%d: %s", run, o.Runs, sc)
			res, err := r.scenario(ctx, run, name, mode)
			if err != nil {
				return nil, fmt.Errorf("run %d %s: %w", run, sc, err)
			}
			// A ratio compares the same load: the same connections, or the
			// same pace.
			if name == ScenarioBaseline {
				base[res.Load] = res.Throughput
			}
			if b := base[res.Load]; b > 0 {
				res.Ratio = res.Throughput / b
			}
			rep.Results = append(rep.Results, res)
		}
		JobRatios(rep.Results[first:])
	}
	rep.Summary = summarise(rep.Results)
	rep.LaneRunsByReplica = stack.laneRuns(ctx)
	return rep, nil
}

// ParseScenario splits "name:mode"; a scenario with a load of its own
// (noisy-*, events-fanout, list-1m, events-nats, events-amqp,
// events-stream) has no mode.
func ParseScenario(s string) (string, Mode, error) {
	name, mode, _ := strings.Cut(s, ":")
	if modeless[name] {
		if mode != "" {
			return "", "", fmt.Errorf("scenario %q: %s has a load of its own, give it without a mode", s, name)
		}
		return name, "", nil
	}
	switch Mode(mode) {
	case Open, Closed:
	default:
		return "", "", fmt.Errorf("scenario %q: mode must be open or closed (e.g. send-queued:closed)", s)
	}
	switch name {
	case ScenarioBaseline, ScenarioSendQueued, ScenarioSendSync, ScenarioEvents1, ScenarioEvents4,
		ScenarioListDefault, ScenarioListFilter, ScenarioBaselineSend, ScenarioBaselineDelivery:
		return name, Mode(mode), nil
	}
	return "", "", fmt.Errorf("unknown scenario %q", name)
}

func (r *runner) prepare(ctx context.Context) error {
	o := r.o
	if rss, err := sumRSS(r.stack.PIDs()); err == nil {
		r.startRSS = mb(rss)
	}
	if anon, err := sumOver(r.stack.PIDs(), AnonRSS); err == nil {
		r.startAnon = mb(anon)
	}
	need := map[string]bool{}
	for _, sc := range o.Scenarios {
		name, _, _ := ParseScenario(sc)
		need[name] = true
	}
	var err error
	if r.recv, err = StartReceiver(); err != nil {
		return err
	}
	if need[ScenarioBaseline] || need[ScenarioSendQueued] || need[ScenarioSendSync] || need[ScenarioBaselineSend] {
		o.Log("setting up %d send companies with %d conversations each", o.Companies, o.Contacts)
		if r.senders, err = r.setup.Companies(ctx, "load-send", 1, o.Companies, o.Contacts); err != nil {
			return err
		}
		// Each company keeps 2% under the limit, so clock differences
		// between this client and the gateway never make a send answer 429.
		r.budget = NewBudget(len(r.senders), SendRatePerCompany*98/100, time.Minute)
	}
	if need[ScenarioListDefault] || need[ScenarioListFilter] {
		listers, err := r.setup.Companies(ctx, "load-list", 1000, 1, o.ListContacts)
		if err != nil {
			return err
		}
		r.lister = listers[0]
	}
	for i, n := range []int{1, 4} {
		if !need[map[int]string{1: ScenarioEvents1, 4: ScenarioEvents4}[n]] {
			continue
		}
		cs, err := r.setup.Companies(ctx, "load-events", 2000+i, 1, 0)
		if err != nil {
			return err
		}
		t := &eventTarget{company: cs[0]}
		for e := range n {
			name := fmt.Sprintf("ev%d-%d", n, e)
			sub, err := r.setup.Subscribe(ctx, t.company, name, r.recv.HookURL(name), []string{"contact.import.completed"})
			if err != nil {
				return err
			}
			r.recv.Register(name, sub.Secret)
			t.endpoints, t.subs = append(t.endpoints, name), append(t.subs, sub)
		}
		r.ev[n] = t
	}
	if need[ScenarioBaseline] {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		r.baseURL = "http://" + addr
		r.base = NewClient(r.baseURL)
		r.baseline = &Proc{Name: "baseline", Path: o.Self, LogPath: filepath.Join(r.stack.Dir, "baseline.log"),
			Args: []string{"baseline", "-listen", addr, "-database-url", r.stack.BaselineURL, "-conns", fmt.Sprint(o.BaselineConns)}}
		if err := r.baseline.Start(); err != nil {
			return err
		}
		if err := waitHTTP(ctx, r.baseURL+"/readyz", r.baseline); err != nil {
			return err
		}
	}
	if need[ScenarioBaselineSend] {
		co := r.senders[0]
		if r.baseSend, r.sendClient, err = r.startJobBaseline(ctx, "send", "-provider-url", r.stack.ProviderURL,
			"-phone-number-id", co.PhoneNumberID, "-access-token", co.AccessToken); err != nil {
			return err
		}
	}
	if need[ScenarioBaselineDelivery] {
		const name, secret = "baseline-delivery", "whsec_baseline-delivery-load"
		r.recv.Register(name, secret)
		r.deliveryTarget = &eventTarget{company: &Company{}, endpoints: []string{name}}
		if r.baseDelivery, r.deliveryClient, err = r.startJobBaseline(ctx, "delivery", "-deliver-url", r.recv.HookURL(name),
			"-deliver-secret", secret); err != nil {
			return err
		}
	}
	time.Sleep(3 * time.Second) // let the set-up's background work finish before "idle"
	rss, err := sumRSS(r.stack.PIDs())
	r.idleRSS = mb(rss)
	if anon, err := sumOver(r.stack.PIDs(), AnonRSS); err == nil {
		r.idleAnon = mb(anon)
	}
	return err
}

// startJobBaseline starts `loadgen baseline -job job args…` on the
// baseline's database and returns it with a client of it.
func (r *runner) startJobBaseline(ctx context.Context, job string, args ...string) (*Proc, *Client, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	// A delivery worker holds its connection (the outbox row's lock)
	// through its POST: the pool has one per worker beside the requests'.
	conns := r.o.BaselineConns
	if job == "delivery" {
		conns += int32(r.o.JobWorkers)
	}
	p := &Proc{Name: "baseline-" + job, Path: r.o.Self, LogPath: filepath.Join(r.stack.Dir, "baseline-"+job+".log"),
		Args: append([]string{"baseline", "-job", job, "-listen", addr, "-database-url", r.stack.BaselineURL,
			"-conns", fmt.Sprint(conns), "-workers", fmt.Sprint(r.o.JobWorkers)}, args...)}
	if err := p.Start(); err != nil {
		return nil, nil, err
	}
	if err := waitHTTP(ctx, "http://"+addr+"/readyz", p); err != nil {
		return nil, nil, err
	}
	return p, NewClient("http://" + addr), nil
}

// close stops what prepare started, however far it got.
func (r *runner) close() {
	for _, p := range []*Proc{r.baseline, r.baseSend, r.baseDelivery} {
		if p != nil && p.cmd != nil {
			p.Stop(5 * time.Second)
		}
	}
	if r.nw != nil {
		r.nw.failing.Close()
	}
	for _, c := range r.closers {
		c()
	}
	if r.recv != nil {
		r.recv.Close()
	}
}

func (r *runner) shape(name string, mode Mode) Shape {
	rate := r.o.Rate
	if name == ScenarioEvents1 || name == ScenarioEvents4 || name == ScenarioBaselineDelivery {
		rate = r.o.EventRate
	}
	return Shape{Mode: mode, Rate: rate, Conns: r.o.Conns, Duration: r.o.Duration, MaxInFlight: 1024}
}

func (r *runner) scenario(ctx context.Context, run int, name string, mode Mode) (Result, error) {
	if modeless[name] {
		return r.special(ctx, run, name)
	}
	shape := r.shape(name, mode)
	res := Result{Scenario: name + ":" + string(mode), Load: shape.String(), Run: run}
	pids := r.stack.PIDs()
	switch name {
	case ScenarioBaseline:
		pids = []int{r.baseline.PID()}
	case ScenarioBaselineSend:
		pids = []int{r.baseSend.PID()}
	case ScenarioBaselineDelivery:
		pids = []int{r.baseDelivery.PID()}
	}
	var call Call
	var target *eventTarget
	var accepted []string
	var acceptedMu sync.Mutex
	switch name {
	case ScenarioBaseline:
		call = r.sendCall(r.base, nil, run, true)
	case ScenarioSendQueued:
		call = r.sendCall(r.api, r.budget, run, true)
	case ScenarioSendSync:
		call = r.sendCall(r.api, r.budget, run, false)
	case ScenarioListDefault:
		call = r.listCall("/api/contact-channels")
	case ScenarioListFilter:
		call = r.listCall("/api/contact-channels?filter=joao")
	case ScenarioBaselineSend:
		call = r.sendCall(r.sendClient, nil, run, true)
	case ScenarioBaselineDelivery:
		target = r.deliveryTarget
		call = r.publishCallVia(r.deliveryClient, target.company, run, func(id string) {
			acceptedMu.Lock()
			accepted = append(accepted, id)
			acceptedMu.Unlock()
		})
	case ScenarioEvents1, ScenarioEvents4:
		target = r.ev[map[string]int{ScenarioEvents1: 1, ScenarioEvents4: 4}[name]]
		if err := r.enable(ctx, target, true); err != nil {
			return res, err
		}
		call = r.publishCall(target.company, run, func(id string) {
			acceptedMu.Lock()
			accepted = append(accepted, id)
			acceptedMu.Unlock()
		})
	}
	r.recv.Reset()
	sampler := StartSampler(pids, 100*time.Millisecond)
	var profiled func() error
	if r.o.ProfileDir != "" && name != ScenarioBaseline {
		profiled = r.profile(ctx, fmt.Sprintf("run%d-%s-%s", run, name, mode), shape.Duration)
	}
	var sentBefore int
	queuedSend := name == ScenarioSendQueued || name == ScenarioBaselineSend
	if queuedSend {
		st, err := r.setup.Provider.Stats(ctx)
		if err != nil {
			return res, err
		}
		sentBefore = st.Messages
	}
	rec := NewRecorder()
	begin := time.Now()
	drove := Drive(ctx, shape, rec, call)
	if profiled != nil {
		if err := profiled(); err != nil {
			return res, err
		}
	}
	if queuedSend {
		// Also keeps a backlog from loading the next scenario.
		sr, err := r.drainSends(ctx, sentBefore, rec.Count(), drove.Elapsed)
		if err != nil {
			return res, err
		}
		res.Sends = sr
	}
	if target != nil {
		res.Events = r.drain(ctx, target, accepted, begin)
		// Left-over deliveries of a scenario that did not drain must not
		// load the next one.
		if len(target.subs) > 0 {
			if err := r.enable(ctx, target, false); err != nil {
				return res, err
			}
		}
	}
	fp, err := sampler.Stop(3 * time.Second)
	if err != nil {
		return res, err
	}
	res.Started, res.OK, res.Errors = drove.Started, rec.Count(), rec.Errors()
	res.Latency = rec.Latencies()
	res.Throughput = float64(res.OK) / drove.Elapsed.Seconds()
	res.Footprint = fp
	if res.OK > 0 {
		res.CPUPerReq = fp.CPUSeconds * 1000 / float64(res.OK)
	}
	return res, nil
}

// special runs a scenario with a load of its own.
func (r *runner) special(ctx context.Context, run int, name string) (Result, error) {
	no := r.o.Noise
	res := Result{Scenario: name, Run: run}
	switch name {
	case ScenarioNoisyWebhooks:
		res.Load = fmt.Sprintf("%.0f/s beside %d×%.1f/s", no.HealthyEventRate, no.WebhookCompanies, no.EventRate)
	case ScenarioNoisySends:
		res.Load = fmt.Sprintf("%.0f+%.0f/s beside %d×%.1f/s", no.HealthySendRate, no.HealthySendRate, no.SendCompanies, no.SendRate)
	case ScenarioNoisyInbound:
		res.Load = fmt.Sprintf("%.0f/s beside %.0f/s", no.HealthyInboundRate, no.InboundRate)
	case ScenarioFanout:
		res.Load = fmt.Sprintf("%.0f deliveries/s", r.o.FanoutDeliveries)
	case ScenarioList1M:
		res.Load = fmt.Sprintf("closed %d conns", r.o.Conns)
	case ScenarioEventsNATS, ScenarioEventsAMQP:
		res.Load = fmt.Sprintf("open %.0f/s, then closed %d conns", r.o.BrokerRate, r.o.Conns)
	case ScenarioEventsStream:
		res.Load = fmt.Sprintf("%d readers, %.0f/s", r.o.StreamReaders, r.o.StreamRate)
	case ScenarioMediaLarge:
		res.Load = "one request at a time"
	}
	sampler := StartSampler(r.stack.PIDs(), 100*time.Millisecond)
	var err error
	switch name {
	case ScenarioNoisyWebhooks:
		err = r.runNoisyWebhooks(ctx, run, &res)
	case ScenarioNoisySends:
		err = r.runNoisySends(ctx, run, &res)
	case ScenarioNoisyInbound:
		err = r.runNoisyInbound(ctx, run, &res)
	case ScenarioFanout:
		err = r.runFanout(ctx, run, &res)
	case ScenarioList1M:
		err = r.runList1M(ctx, &res)
	case ScenarioEventsNATS, ScenarioEventsAMQP:
		err = r.runBroker(ctx, run, name, &res)
	case ScenarioEventsStream:
		err = r.runStream(ctx, run, &res)
	case ScenarioMediaLarge:
		err = r.runMediaLarge(ctx, run, &res)
	}
	fp, ferr := sampler.Stop(0)
	res.Footprint = fp
	if err == nil {
		err = ferr
	}
	return res, err
}

// profile starts a CPU profile of every replica lasting d (whole seconds,
// at least one) and returns the function that waits for them and writes
// them to ProfileDir/<label>-gateway-<n>.pprof.
func (r *runner) profile(ctx context.Context, label string, d time.Duration) func() error {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	errs := make([]error, len(r.stack.DebugURLs))
	var wg sync.WaitGroup
	for i, u := range r.stack.DebugURLs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fetchTo(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", u, secs),
				filepath.Join(r.o.ProfileDir, fmt.Sprintf("%s-gateway-%d.pprof", label, i+1)))
		}()
	}
	return func() error {
		wg.Wait()
		return errors.Join(errs...)
	}
}

// fetchTo saves the body of a GET of u to path.
func fetchTo(ctx context.Context, u, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: status %d", u, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (r *runner) drain(ctx context.Context, t *eventTarget, accepted []string, begin time.Time) *EventResult {
	lastPublish := time.Now()
	drained := WaitFor(ctx, r.o.Drain, func() bool { return r.recv.Tally(t.endpoints, accepted).Lost == 0 })
	tally := r.recv.Tally(t.endpoints, accepted)
	lats := r.recv.Latencies()
	end := r.recv.LastReceipt()
	er := &EventResult{EventTally: tally, EndToEnd: Summarise(lats), Drained: drained,
		DrainedIn: time.Since(lastPublish).Seconds()}
	if span := end.Sub(begin); tally.Received > 0 && span > 0 {
		er.DeliveriesPerSec = float64(tally.Received) / span.Seconds()
	}
	return er
}

// drainSends measures what the provider received of accepted queued
// sends during the load (elapsed long, counted from before), then waits
// up to the drain bound for the rest.
func (r *runner) drainSends(ctx context.Context, before, accepted int, elapsed time.Duration) (*SendResult, error) {
	handed := func() (int, error) {
		st, err := r.setup.Provider.Stats(ctx)
		return st.Messages - before, err
	}
	n, err := handed()
	if err != nil {
		return nil, err
	}
	sr := &SendResult{HandedPerSec: float64(n) / elapsed.Seconds(), BacklogAtEnd: max(accepted-n, 0)}
	end := time.Now()
	var pollErr error
	if n < accepted {
		WaitFor(ctx, r.o.Drain, func() bool {
			n, pollErr = handed()
			return pollErr != nil || n >= accepted
		})
	}
	if pollErr != nil {
		return nil, pollErr
	}
	sr.DrainedIn, sr.Left = time.Since(end).Seconds(), max(accepted-n, 0)
	if span := elapsed.Seconds() + sr.DrainedIn; span > 0 {
		sr.CompletedPerSec = float64(min(n, accepted)) / span
	}
	return sr, nil
}

func (r *runner) enable(ctx context.Context, t *eventTarget, on bool) error {
	for _, s := range t.subs {
		if err := r.api.JSON(ctx, "PUT", fmt.Sprintf("/api/channel-webhooks/%d", s.ID), t.company.Token,
			map[string]any{"enabled": on}, nil); err != nil {
			return err
		}
	}
	return nil
}

// sendCall sends a text on an official channel, spread over the send
// companies and their open conversations; each text is unique. The
// baseline server has no limit to keep under (budget nil), and must not
// spend the gateway's.
func (r *runner) sendCall(c *Client, budget *Budget, run int, enqueue bool) Call {
	return func(ctx context.Context, seq int, _ time.Time) string {
		i := seq % len(r.senders)
		if budget != nil {
			if i = budget.Pick(); i < 0 {
				// Every company used its share of the limit: the run
				// needs more -companies. Not sent; the pause keeps a
				// closed loop from spinning.
				time.Sleep(5 * time.Millisecond)
				return "budget"
			}
		}
		co := r.senders[i]
		body, _ := json.Marshal(map[string]any{"platform": "ofc_chatapp", "sender_key": co.ChannelKey,
			"contact_key": co.Contacts[seq%len(co.Contacts)], "text": fmt.Sprintf("load %d-%d", run, r.seq.Add(1)),
			"enqueue": enqueue})
		status, _, err := c.Do(ctx, "POST", "/api/api-send-message", co.Token, body)
		return outcome(status, err)
	}
}

func (r *runner) listCall(path string) Call {
	return func(ctx context.Context, _ int, _ time.Time) string {
		status, _, err := r.api.Do(ctx, "GET", path, r.lister.Token, nil)
		return outcome(status, err)
	}
}

// publishCall publishes contact.import.completed with a unique import id,
// tells the receiver when it was due, and reports accepted ids.
func (r *runner) publishCall(co *Company, run int, accepted func(string)) Call {
	return r.publishCallVia(r.api, co, run, accepted)
}

// publishCallVia is publishCall to the server of c (a baseline). The
// publishes take the company's tokens in turn (one, unless it was given
// more).
func (r *runner) publishCallVia(c *Client, co *Company, run int, accepted func(string)) Call {
	return func(ctx context.Context, seq int, due time.Time) string {
		id := fmt.Sprintf("load-%d-%d", run, r.seq.Add(1))
		r.recv.Due(id, due)
		status, _, err := c.Do(ctx, "POST", "/api/events", co.token(seq), importEvent(id))
		out := outcome(status, err)
		if out == "" {
			accepted(id)
		}
		return out
	}
}

// importEvent is the POST /api/events body of a contact.import.completed
// whose import_id is id.
func importEvent(id string) []byte {
	b, _ := json.Marshal(map[string]any{"event": "contact.import.completed", "data": importData(id)})
	return b
}

func importData(id string) map[string]any {
	return map[string]any{"import_id": id, "total_contacts": 3, "imported_contacts": 2, "skipped_contacts": 1,
		"failed_contacts": 0, "started_by_user_id": 1, "completed_at": time.Now().Format(time.RFC3339)}
}

// summarise computes each scenario's figures over the runs.
func summarise(results []Result) map[string]map[string]Spread {
	figures := map[string]map[string][]float64{}
	add := func(sc, fig string, v float64) {
		if figures[sc] == nil {
			figures[sc] = map[string][]float64{}
		}
		figures[sc][fig] = append(figures[sc][fig], v)
	}
	for _, r := range results {
		add(r.Scenario, "rps", r.Throughput)
		if r.Ratio > 0 { // no baseline ran under the same load
			add(r.Scenario, "ratio", r.Ratio)
		}
		add(r.Scenario, "p50_ms", r.Latency.P50)
		add(r.Scenario, "p99_ms", r.Latency.P99)
		add(r.Scenario, "p999_ms", r.Latency.P999)
		add(r.Scenario, "peak_rss_mb", r.Footprint.PeakRSSMB)
		add(r.Scenario, "cpu_ms_per_req", r.CPUPerReq)
		add(r.Scenario, "machine_cpu_busy", r.Footprint.MachineBusy)
		if sr := r.Sends; sr != nil {
			add(r.Scenario, "handed_per_s", sr.HandedPerSec)
			add(r.Scenario, "backlog_at_end", float64(sr.BacklogAtEnd))
			add(r.Scenario, "drained_in_s", sr.DrainedIn)
			add(r.Scenario, "lost", float64(sr.Left))
		}
		if sr := r.Sends; sr != nil {
			add(r.Scenario, "completed_per_s", sr.CompletedPerSec)
		}
		for k, v := range r.Ratios {
			add(r.Scenario, "ratio "+k, v)
		}
		if n := r.Noisy; n != nil {
			for k, v := range n.figures() {
				add(r.Scenario, k, v)
			}
		}
		for _, lv := range r.Fanout {
			p := fmt.Sprintf("N=%d ", lv.Subscriptions)
			add(r.Scenario, p+"publish p50 ms", lv.Publish.P50)
			add(r.Scenario, p+"publish p99 ms", lv.Publish.P99)
			add(r.Scenario, p+"gateway CPU ms/delivery", lv.GatewayMs)
			add(r.Scenario, p+"postgres CPU ms/delivery", lv.PostgresMs)
			add(r.Scenario, p+"total CPU ms/delivery", lv.TotalMs)
			add(r.Scenario, p+"deliveries", float64(lv.Deliveries))
			add(r.Scenario, p+"lost", float64(lv.Lost))
		}
		for _, lc := range r.Listing {
			add(r.Scenario, lc.Name+" p50 ms", lc.Latency.P50)
			add(r.Scenario, lc.Name+" p99 ms", lc.Latency.P99)
			add(r.Scenario, lc.Name+" req/s", lc.Throughput)
		}
		if b := r.Broker; b != nil {
			for k, v := range b.figures() {
				add(r.Scenario, k, v)
			}
		}
		if st := r.Stream; st != nil {
			for k, v := range st.figures() {
				add(r.Scenario, k, v)
			}
		}
		if m := r.Media; m != nil {
			for _, s := range m.Steps {
				add(r.Scenario, s.Name+" peak RSS growth MB", s.PeakGrowthMB)
				add(r.Scenario, s.Name+" s", s.Seconds)
			}
		}
		if e := r.Events; e != nil {
			add(r.Scenario, "deliveries_per_s", e.DeliveriesPerSec)
			add(r.Scenario, "e2e_p50_ms", e.EndToEnd.P50)
			add(r.Scenario, "e2e_p99_ms", e.EndToEnd.P99)
			add(r.Scenario, "lost", float64(e.Lost))
			add(r.Scenario, "duplicates", float64(e.Duplicates))
		}
	}
	out := map[string]map[string]Spread{}
	for sc, figs := range figures {
		out[sc] = map[string]Spread{}
		for f, vs := range figs {
			out[sc][f] = SpreadOf(vs)
		}
	}
	return out
}

// WriteJSON writes the report to dir/load-<time>-<engine>.json.
func (rep *Report) WriteJSON(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, fmt.Sprintf("load-%s-%s.json", rep.Started.Format("20060102T150405Z"), rep.Engine))
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return "", err
	}
	return p, os.WriteFile(p, b, 0o644)
}
