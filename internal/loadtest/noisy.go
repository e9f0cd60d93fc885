package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// NoiseOptions shape the noisy-neighbour scenarios (issue 25). Zero
// values take the defaults of DefaultNoise.
type NoiseOptions struct {
	// Warmup is how long the noise runs before the healthy tenant's load
	// starts beside it (the stalls need the attempt timeout to pile up).
	Warmup time.Duration
	// Observe is how long noisy-webhooks keeps recording the failing
	// endpoints' retries after the noise stopped publishing: 10 s shows
	// attempt 2, 75 s attempt 3 as well (1 min after attempt 2).
	Observe time.Duration

	// noisy-webhooks
	WebhookCompanies int     // noisy companies; the endpoints are spread evenly over them
	BlackHoles       int     // endpoints that accept the connection and never answer
	Unavailable      int     // endpoints that answer 503 at once
	SlowEndpoints    int     // endpoints that answer after SlowAnswer
	EventRate        float64 // events per second of each noisy company
	HealthyEventRate float64 // events per second of the healthy company (4 receivers)

	// noisy-sends
	SendCompanies   int     // companies whose provider stalls
	SendRate        float64 // queued sends per second of each
	HealthySenders  int     // companies the healthy sends are spread over (the 600/min limit is per company)
	HealthySendRate float64 // queued sends per second, and as many synchronous ones

	// noisy-inbound
	InboundRate        float64 // inbound messages per second of the noisy company
	HealthyInboundRate float64 // … of the healthy one
}

// DefaultNoise are the figures. The noisy companies publish 0.5
// events/s each: each dead endpoint then gets fewer events than the
// 8-in-flight × 10 s bound lets the gateway attempt (0.8/s), so a gateway
// that isolates endpoints can keep up with all of them; that is "their
// share". The healthy sends are 20/s queued and 20/s synchronous over 8
// companies, each under the API document's 600/min.
var DefaultNoise = NoiseOptions{Warmup: 10 * time.Second, Observe: 75 * time.Second,
	WebhookCompanies: 10, BlackHoles: 1000, Unavailable: 200, SlowEndpoints: 100, EventRate: 0.5, HealthyEventRate: 100,
	SendCompanies: 5, SendRate: 9.5, HealthySenders: 8, HealthySendRate: 20,
	InboundRate: 1000, HealthyInboundRate: 20}

func (n NoiseOptions) withDefaults() NoiseOptions {
	d := DefaultNoise
	pick := func(v *float64, def float64) {
		if *v <= 0 {
			*v = def
		}
	}
	pickInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	pickDur := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	pickDur(&n.Warmup, d.Warmup)
	pickDur(&n.Observe, d.Observe)
	pickInt(&n.WebhookCompanies, d.WebhookCompanies)
	if n.BlackHoles < 0 || n.Unavailable < 0 || n.SlowEndpoints < 0 || n.BlackHoles+n.Unavailable+n.SlowEndpoints == 0 {
		n.BlackHoles, n.Unavailable, n.SlowEndpoints = d.BlackHoles, d.Unavailable, d.SlowEndpoints
	}
	pick(&n.EventRate, d.EventRate)
	pick(&n.HealthyEventRate, d.HealthyEventRate)
	pickInt(&n.SendCompanies, d.SendCompanies)
	pick(&n.SendRate, d.SendRate)
	pickInt(&n.HealthySenders, d.HealthySenders)
	pick(&n.HealthySendRate, d.HealthySendRate)
	pick(&n.InboundRate, d.InboundRate)
	pick(&n.HealthyInboundRate, d.HealthyInboundRate)
	return n
}

// Pair is one of the healthy tenant's figures without and with the
// noise, in the same run.
type Pair struct {
	Quiet     Latency        `json:"quiet"`
	Noisy     Latency        `json:"noisy"`
	RatioP50  float64        `json:"ratio_p50"` // noisy / quiet
	RatioP99  float64        `json:"ratio_p99"`
	LostQuiet int            `json:"missing_quiet"` // accepted but not seen within the drain bound
	LostNoisy int            `json:"missing_noisy"`
	Errors    map[string]int `json:"errors,omitempty"` // failed requests of both phases
	// QuietBeyond and NoisyBeyond say that more than 1% (p99) or half
	// (p50) of the phase's accepted requests were still missing after the
	// drain bound: that percentile lies beyond the bound, and the figure
	// of those that arrived understates it. Their ratios are then left
	// out.
	QuietBeyond string `json:"quiet_beyond_drain,omitempty"` // "", "p99" or "p50 and p99"
	NoisyBeyond string `json:"noisy_beyond_drain,omitempty"`
}

// beyond says which percentiles lie beyond the drain bound when missing
// of arrived+missing never arrived.
func beyond(arrived, missing int) string {
	total := arrived + missing
	switch {
	case missing == 0:
		return ""
	case 2*missing >= total:
		return "p50 and p99"
	case 100*missing > total:
		return "p99"
	}
	return ""
}

func (p *Pair) finish() {
	p.QuietBeyond, p.NoisyBeyond = beyond(p.Quiet.N, p.LostQuiet), beyond(p.Noisy.N, p.LostNoisy)
	p.RatioP50, p.RatioP99 = ratioOf(p.Noisy.P50, p.Quiet.P50), ratioOf(p.Noisy.P99, p.Quiet.P99)
	if p.QuietBeyond != "" || p.NoisyBeyond != "" {
		p.RatioP99 = 0
	}
	if p.QuietBeyond == "p50 and p99" || p.NoisyBeyond == "p50 and p99" {
		p.RatioP50 = 0
	}
}

// NoiseFigures are the noisy tenants' own figures.
type NoiseFigures struct {
	Requests int            `json:"requests"` // publishes, sends or inbound messages made
	Accepted int            `json:"accepted"`
	Errors   map[string]int `json:"errors,omitempty"`
	// Endpoints (noisy-webhooks): what each kind of endpoint got of the
	// accepted events; the slow ones answer, so their undelivered pairs
	// are lost, while dead ones are attempted as their bound allows.
	Endpoints map[EndpointKind]ClassTally `json:"endpoints,omitempty"`
	Attempts  int                         `json:"attempts,omitempty"` // requests the failing endpoints got
	Schedule  *ScheduleCheck              `json:"schedule,omitempty"`
	// ScheduleSource says where the retries were read; Retries counts them.
	ScheduleSource string  `json:"schedule_source,omitempty"`
	Retries        int     `json:"retries,omitempty"`
	Observed       float64 `json:"observed_s,omitempty"` // seconds the retries were watched after the noise
	// StalledSends (noisy-sends) reached the stalled provider in this run;
	// Resent is the texts that reached it more than once (the rule:
	// never), over every run so far, since a late resend of an earlier
	// run's text counts too.
	StalledSends int `json:"stalled_sends,omitempty"`
	Resent       int `json:"resent"`
	// Undelivered is accepted noise that had not arrived, at the end,
	// where it can arrive: events the slow endpoints (which answer) did
	// not get answered, or the noisy inbound messages' events.
	Undelivered int `json:"undelivered"`
}

// NoisyResult is a noisy-neighbour scenario's run.
type NoisyResult struct {
	Healthy map[string]*Pair `json:"healthy"` // by series: "publish→receipt", "queued accepted→sent", …
	Noise   NoiseFigures     `json:"noise"`
	// The gateway's RSS during the healthy load alone and beside the noise
	// (peak, and at the end of the phase).
	QuietRSS Footprint `json:"quiet_footprint"`
	NoisyRSS Footprint `json:"noisy_footprint"`
}

// figures flattens the result for the summary over runs.
func (n *NoisyResult) figures() map[string]float64 {
	out := map[string]float64{}
	for s, p := range n.Healthy {
		out[s+" quiet p50 ms"], out[s+" quiet p99 ms"] = p.Quiet.P50, p.Quiet.P99
		out[s+" noisy p50 ms"], out[s+" noisy p99 ms"] = p.Noisy.P50, p.Noisy.P99
		out[s+" ratio p99"] = p.RatioP99
		out[s+" missing after drain"] = float64(p.LostQuiet + p.LostNoisy)
	}
	out["noise undelivered"], out["noise resent"] = float64(n.Noise.Undelivered), float64(n.Noise.Resent)
	if n.Noise.Schedule != nil {
		out["noise retries seen"] = float64(len(n.Noise.Schedule.Seen))
		seen := 0
		for _, v := range n.Noise.Schedule.Seen {
			seen += v
		}
		out["noise retries seen"] = float64(seen)
		out["noise retries off schedule"] = float64(n.Noise.Schedule.OffSchedule())
	}
	out["RSS quiet peak MB"], out["RSS noisy peak MB"] = n.QuietRSS.PeakRSSMB, n.NoisyRSS.PeakRSSMB
	out["RSS quiet end MB"], out["RSS noisy end MB"] = n.QuietRSS.AfterRSSMB, n.NoisyRSS.AfterRSSMB
	return out
}

// noise is load a scenario starts beside the healthy tenant's.
type noise struct {
	stop chan struct{}
	wg   sync.WaitGroup
	rec  *Recorder
}

// startNoise drives each call at rate until stop.
func startNoise(ctx context.Context, rate float64, calls []Call) *noise {
	n := &noise{stop: make(chan struct{}), rec: NewRecorder()}
	for _, c := range calls {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			Drive(ctx, Shape{Mode: Open, Rate: rate, Stop: n.stop, MaxInFlight: 1024}, n.rec, c)
		}()
	}
	return n
}

// end stops the noise and waits for the requests in flight.
func (n *noise) end() {
	close(n.stop)
	n.wg.Wait()
}

// phases runs healthy twice, alone ("quiet") and beside noise started by
// begin ("noisy": the noise starts, runs Warmup, then healthy runs beside
// it and the noise stops), sampling the gateway's footprint in each.
func (r *runner) phases(ctx context.Context, healthy func(ctx context.Context, phase string) error,
	begin func(ctx context.Context) (*noise, error)) (quiet, noisy Footprint, n *noise, err error) {
	sampler := StartSampler(r.stack.PIDs(), 100*time.Millisecond)
	err = healthy(ctx, "quiet")
	quiet, _ = sampler.Stop(0)
	if err != nil {
		return quiet, noisy, nil, err
	}
	sampler = StartSampler(r.stack.PIDs(), 100*time.Millisecond)
	if n, err = begin(ctx); err != nil {
		return quiet, noisy, nil, err
	}
	sleepCtx(ctx, r.o.Noise.Warmup)
	err = healthy(ctx, "noisy")
	noisy, _ = sampler.Stop(0)
	n.end()
	return quiet, noisy, n, err
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// noisyWebhooks is the set-up of noisy-webhooks, made on first use.
type noisyWebhooks struct {
	api       *Client   // the healthy company's
	noisyAPI  []*Client // each noisy company's
	healthy   *Company
	endpoints []string // the healthy company's receiver endpoints
	noisy     []*Company
	failing   *FailingEndpoints
	owner     []int // company of each failing endpoint
}

func (r *runner) prepareNoisyWebhooks(ctx context.Context) error {
	if r.nw != nil {
		return nil
	}
	no := r.o.Noise
	nw := &noisyWebhooks{}
	cs, err := r.setup.Companies(ctx, "noisy-webhooks-healthy", 3000, 1, 0)
	if err != nil {
		return err
	}
	nw.healthy = cs[0]
	nw.api = TenantClient(0, r.stack.ReplicaURLs...)
	// Its publishes rotate over 4 tokens (32 requests in flight each), so
	// that a slower gateway shows as latency rather than as 429 answers.
	if err := r.setup.MoreTokens(ctx, nw.healthy, 3); err != nil {
		return err
	}
	for i := range 4 {
		name := fmt.Sprintf("nw-healthy-%d", i)
		sub, err := r.setup.Subscribe(ctx, nw.healthy, name, r.recv.HookURL(name), []string{"contact.import.completed"})
		if err != nil {
			return err
		}
		r.recv.Register(name, sub.Secret)
		nw.endpoints = append(nw.endpoints, name)
	}
	r.o.Log("noisy-webhooks: %d companies, %d black holes, %d answering 503, %d answering after %s", no.WebhookCompanies,
		no.BlackHoles, no.Unavailable, no.SlowEndpoints, SlowAnswer)
	if nw.noisy, err = r.setup.Companies(ctx, "noisy-webhooks", 3100, no.WebhookCompanies, 0); err != nil {
		return err
	}
	for c := range nw.noisy {
		nw.noisyAPI = append(nw.noisyAPI, TenantClient(10+c, r.stack.ReplicaURLs...))
	}
	var kinds []EndpointKind
	share := func(total, c int) int { return total/no.WebhookCompanies + btoi(c < total%no.WebhookCompanies) }
	for c := range no.WebhookCompanies {
		for _, k := range []struct {
			kind EndpointKind
			n    int
		}{{BlackHole, share(no.BlackHoles, c)}, {Unavailable, share(no.Unavailable, c)}, {Slow, share(no.SlowEndpoints, c)}} {
			for range k.n {
				kinds = append(kinds, k.kind)
				nw.owner = append(nw.owner, c)
			}
		}
	}
	// The management endpoints allow 120 requests a minute per token; a
	// run creates and deletes every subscription.
	perCompany := len(kinds)/no.WebhookCompanies + 1
	if err := parallel(ctx, len(nw.noisy), 2, func(ctx context.Context, i int) error {
		return r.setup.MoreTokens(ctx, nw.noisy[i], (3*perCompany)/100+1)
	}); err != nil {
		return err
	}
	if nw.failing, err = StartFailingEndpoints(kinds); err != nil {
		return err
	}
	r.nw = nw
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// runNoisyWebhooks: the healthy company publishes to its 4 receivers,
// alone and then beside the noisy companies publishing to their failing
// endpoints; the noisy subscriptions exist only for the noisy phase (and
// the retries watched after it), so the quiet phase's RSS is the
// gateway's without them.
func (r *runner) runNoisyWebhooks(ctx context.Context, run int, res *Result) error {
	if err := r.prepareNoisyWebhooks(ctx); err != nil {
		return err
	}
	nw, no := r.nw, r.o.Noise
	nr := &NoisyResult{Healthy: map[string]*Pair{"publish→receipt": {}}}
	pair := nr.Healthy["publish→receipt"]
	pair.Errors = map[string]int{}
	nw.failing.Reset()
	subs := make([][]Subscription, len(nw.noisy))
	var mu sync.Mutex
	accepted := map[int][]string{}
	healthy := func(ctx context.Context, phase string) error {
		r.recv.Reset()
		var ids []string
		var idsMu sync.Mutex
		rec := NewRecorder()
		Drive(ctx, Shape{Mode: Open, Rate: no.HealthyEventRate, Duration: r.o.Duration, MaxInFlight: 1024}, rec,
			r.publishCallVia(nw.api, nw.healthy, run, func(id string) {
				idsMu.Lock()
				ids = append(ids, id)
				idsMu.Unlock()
			}))
		WaitFor(ctx, r.o.Drain, func() bool { return r.recv.Tally(nw.endpoints, ids).Lost == 0 })
		lost := r.recv.Tally(nw.endpoints, ids).Lost
		lat := Summarise(r.recv.EndpointLatencies(nw.endpoints))
		if phase == "quiet" {
			pair.Quiet, pair.LostQuiet = lat, lost
		} else {
			pair.Noisy, pair.LostNoisy = lat, lost
		}
		for k, v := range rec.Errors() {
			pair.Errors[phase+" "+k] += v
		}
		return nil
	}
	begin := func(ctx context.Context) (*noise, error) {
		r.o.Log("noisy-webhooks: subscribing %d failing endpoints", nw.failing.Len())
		byCompany := make([][]string, len(nw.noisy))
		for i := range nw.failing.Len() {
			byCompany[nw.owner[i]] = append(byCompany[nw.owner[i]], nw.failing.URL(i))
		}
		if err := parallel(ctx, len(nw.noisy), 4, func(ctx context.Context, c int) error {
			var err error
			subs[c], err = r.setup.SubscribeMany(ctx, nw.noisy[c], fmt.Sprintf("noise-%d", run), byCompany[c],
				[]string{"contact.import.completed"})
			return err
		}); err != nil {
			return nil, err
		}
		var calls []Call
		for c, co := range nw.noisy {
			calls = append(calls, func(ctx context.Context, _ int, _ time.Time) string {
				id := fmt.Sprintf("noise-%d-%d", run, r.seq.Add(1))
				status, _, err := nw.noisyAPI[c].Do(ctx, "POST", "/api/events", co.Token, importEvent(id))
				out := outcome(status, err)
				if out == "" {
					mu.Lock()
					accepted[c] = append(accepted[c], id)
					mu.Unlock()
				}
				return out
			})
		}
		return startNoise(ctx, no.EventRate, calls), nil
	}
	quiet, noisy, n, err := r.phases(ctx, healthy, begin)
	defer func() {
		for c, s := range subs {
			if len(s) > 0 {
				if left, err := r.setup.Unsubscribe(context.WithoutCancel(ctx), nw.noisy[c], s); left > 0 {
					r.o.Log("noisy-webhooks: %d subscriptions of a noisy company could not be deleted (they keep retrying): %v", left, err)
				}
			}
		}
	}()
	if err != nil {
		return err
	}
	nr.QuietRSS, nr.NoisyRSS = quiet, noisy
	pair.finish()
	// The retries are watched for Observe after the noise stopped.
	r.o.Log("noisy-webhooks: watching the failing endpoints' retries for %s", no.Observe)
	start := time.Now()
	sleepCtx(ctx, no.Observe)
	nf := &nr.Noise
	nf.Observed = time.Since(start).Seconds()
	nf.Accepted, nf.Errors = n.rec.Count(), n.rec.Errors()
	nf.Requests = nf.Accepted
	for _, v := range nf.Errors {
		nf.Requests += v
	}
	mu.Lock()
	nf.Endpoints = nw.failing.Tally(nw.owner, accepted)
	mu.Unlock()
	nf.Attempts = nw.failing.Attempts()
	gaps, source := nw.failing.Gaps(), "as the receivers saw them"
	if r.stack.Engine() == Postgres {
		ids := make([]int64, len(nw.noisy))
		for i, co := range nw.noisy {
			ids[i] = co.ID
		}
		logged, err := LoggedGaps(ctx, r.stack.DatabaseURL, ids)
		if err != nil {
			return fmt.Errorf("noisy-webhooks: read the delivery log: %w", err)
		}
		gaps, source = logged, "in the delivery log (sent and refused)"
	}
	sc := CheckSchedule(gaps, DocumentedRetryDelays, ScheduleTolerance)
	nf.Schedule, nf.ScheduleSource, nf.Retries = &sc, source, len(gaps)
	if t, ok := nf.Endpoints[Slow]; ok {
		nf.Undelivered = t.Expected - t.Answered
	}
	res.Noisy = nr
	res.Latency = pair.Noisy
	return nil
}

// noisySends is the set-up of noisy-sends.
type noisySends struct {
	api       []*Client // each healthy company's
	noisyAPI  []*Client // each noisy company's
	stalled   *StalledProvider
	noisy     []*Company
	healthy   []*Company
	endpoints []string
	budget    *Budget
}

func (r *runner) prepareNoisySends(ctx context.Context) error {
	if r.ns != nil {
		return nil
	}
	no := r.o.Noise
	ns := &noisySends{}
	var err error
	if ns.stalled, err = StartStalledProvider(); err != nil {
		return err
	}
	r.closers = append(r.closers, ns.stalled.Close)
	if ns.noisy, err = r.setup.CompaniesAt(ctx, "noisy-sends", 4000, no.SendCompanies, 4, ns.stalled.URL); err != nil {
		return err
	}
	if ns.healthy, err = r.setup.Companies(ctx, "noisy-sends-healthy", 4100, no.HealthySenders, 4); err != nil {
		return err
	}
	for i, co := range ns.healthy {
		name := fmt.Sprintf("ns-healthy-%d", i)
		sub, err := r.setup.Subscribe(ctx, co, name, r.recv.HookURL(name), []string{"omnichat.message.sent"})
		if err != nil {
			return err
		}
		r.recv.Register(name, sub.Secret)
		ns.endpoints = append(ns.endpoints, name)
	}
	ns.budget = NewBudget(len(ns.healthy), SendRatePerCompany*98/100, time.Minute)
	for c := range ns.healthy {
		ns.api = append(ns.api, TenantClient(100+c, r.stack.ReplicaURLs...))
	}
	for c := range ns.noisy {
		ns.noisyAPI = append(ns.noisyAPI, TenantClient(30+c, r.stack.ReplicaURLs...))
	}
	r.ns = ns
	return nil
}

// runNoisySends: the healthy companies send queued and synchronous texts,
// alone and beside companies whose provider stalls.
func (r *runner) runNoisySends(ctx context.Context, run int, res *Result) error {
	if err := r.prepareNoisySends(ctx); err != nil {
		return err
	}
	ns, no := r.ns, r.o.Noise
	nr := &NoisyResult{Healthy: map[string]*Pair{"queued accepted→sent": {Errors: map[string]int{}},
		"sync request": {Errors: map[string]int{}}}}
	queued, syncReq := nr.Healthy["queued accepted→sent"], nr.Healthy["sync request"]
	healthy := func(ctx context.Context, phase string) error {
		var mu sync.Mutex
		acceptedAt := map[string]time.Time{}
		send := func(enqueue bool, rec *Recorder) Call {
			return func(ctx context.Context, seq int, _ time.Time) string {
				i := ns.budget.Pick()
				if i < 0 {
					return "budget"
				}
				co := ns.healthy[i]
				text := fmt.Sprintf("ns-%d-%s-%d", run, phase, r.seq.Add(1))
				body, _ := json.Marshal(map[string]any{"platform": "ofc_chatapp", "sender_key": co.ChannelKey,
					"contact_key": co.Contacts[seq%len(co.Contacts)], "text": text, "enqueue": enqueue})
				status, _, err := ns.api[i].Do(ctx, "POST", "/api/api-send-message", co.Token, body)
				out := outcome(status, err)
				if out == "" && enqueue {
					mu.Lock()
					acceptedAt[text] = time.Now()
					mu.Unlock()
				}
				return out
			}
		}
		qrec, srec := NewRecorder(), NewRecorder()
		var wg sync.WaitGroup
		for _, l := range []struct {
			rec     *Recorder
			enqueue bool
		}{{qrec, true}, {srec, false}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				Drive(ctx, Shape{Mode: Open, Rate: no.HealthySendRate, Duration: r.o.Duration, MaxInFlight: 1024}, l.rec, send(l.enqueue, l.rec))
			}()
		}
		wg.Wait()
		// accepted → the first omnichat.message.sent carrying the
		// provider's id.
		var lats []time.Duration
		lost := 0
		WaitFor(ctx, r.o.Drain, func() bool {
			lats, lost = sentLatencies(r.recv, acceptedAt)
			return lost == 0
		})
		lat := Summarise(lats)
		if phase == "quiet" {
			queued.Quiet, queued.LostQuiet, syncReq.Quiet = lat, lost, srec.Latencies()
		} else {
			queued.Noisy, queued.LostNoisy, syncReq.Noisy = lat, lost, srec.Latencies()
		}
		for k, v := range qrec.Errors() {
			queued.Errors[phase+" "+k] += v
		}
		for k, v := range srec.Errors() {
			syncReq.Errors[phase+" "+k] += v
		}
		return nil
	}
	begin := func(ctx context.Context) (*noise, error) {
		ns.stalled.Stall()
		var calls []Call
		for c, co := range ns.noisy {
			calls = append(calls, func(ctx context.Context, seq int, _ time.Time) string {
				body, _ := json.Marshal(map[string]any{"platform": "ofc_chatapp", "sender_key": co.ChannelKey,
					"contact_key": co.Contacts[seq%len(co.Contacts)], "text": fmt.Sprintf("ns-noise-%d-%d", run, r.seq.Add(1)), "enqueue": true})
				status, _, err := ns.noisyAPI[c].Do(ctx, "POST", "/api/api-send-message", co.Token, body)
				return outcome(status, err)
			})
		}
		return startNoise(ctx, no.SendRate, calls), nil
	}
	sentBefore, _ := ns.stalled.Received()
	quiet, noisy, n, err := r.phases(ctx, healthy, begin)
	if err != nil {
		return err
	}
	// The stalled sends' backlog is refused from now on, so it drains
	// without loading the next scenario; what was written to the
	// provider stays unknown and must not come again.
	ns.stalled.Refuse()
	settleQuiet(ctx, r.o.Drain, func() int { s, _ := ns.stalled.Received(); return s })
	nr.QuietRSS, nr.NoisyRSS = quiet, noisy
	queued.finish()
	syncReq.finish()
	nf := &nr.Noise
	nf.Accepted, nf.Errors = n.rec.Count(), n.rec.Errors()
	nf.Requests = nf.Accepted
	for _, v := range nf.Errors {
		nf.Requests += v
	}
	sent, resent := ns.stalled.Received()
	nf.StalledSends, nf.Resent = sent-sentBefore, resent
	res.Noisy = nr
	res.Latency = queued.Noisy
	return nil
}

// sentLatencies is, for each accepted text, the time from its acceptance
// to the first omnichat.message.sent with the provider's id, and how many
// have none yet.
func sentLatencies(recv *Receiver, acceptedAt map[string]time.Time) ([]time.Duration, int) {
	var out []time.Duration
	lost := 0
	for text, at := range acceptedAt {
		var first time.Time
		for _, e := range recv.Sent(text) {
			if e.ExternalID != "" && (first.IsZero() || e.At.Before(first)) {
				first = e.At
			}
		}
		if first.IsZero() {
			lost++
			continue
		}
		out = append(out, first.Sub(at))
	}
	return out, lost
}

// settleQuiet waits, up to bound, until count stops changing for 3 s.
func settleQuiet(ctx context.Context, bound time.Duration, count func() int) {
	last, since := count(), time.Now()
	WaitFor(ctx, bound, func() bool {
		if n := count(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= 3*time.Second
	})
}

// noisyInbound is the set-up of noisy-inbound.
type noisyInbound struct {
	healthy, noisy       *Company
	healthyAPI, noisyAPI *Client
}

func (r *runner) prepareNoisyInbound(ctx context.Context) error {
	if r.ni != nil {
		return nil
	}
	cs, err := r.setup.Companies(ctx, "noisy-inbound", 5000, 2, 0)
	if err != nil {
		return err
	}
	ni := &noisyInbound{healthy: cs[0], noisy: cs[1], healthyAPI: TenantClient(2, r.stack.ReplicaURLs...),
		noisyAPI: TenantClient(3, r.stack.ReplicaURLs...)}
	for _, c := range []struct {
		co   *Company
		name string
	}{{ni.healthy, "ni-healthy"}, {ni.noisy, "ni-noisy"}} {
		sub, err := r.setup.Subscribe(ctx, c.co, c.name, r.recv.HookURL(c.name), []string{"omnichat.message.received"})
		if err != nil {
			return err
		}
		r.recv.Register(c.name, sub.Secret)
	}
	r.ni = ni
	return nil
}

// runNoisyInbound: the healthy company's contacts write through its
// provider webhook, alone and beside another company's flood.
func (r *runner) runNoisyInbound(ctx context.Context, run int, res *Result) error {
	if err := r.prepareNoisyInbound(ctx); err != nil {
		return err
	}
	ni, no := r.ni, r.o.Noise
	nr := &NoisyResult{Healthy: map[string]*Pair{"inbound→event": {Errors: map[string]int{}}}}
	pair := nr.Healthy["inbound→event"]
	var noisyMu sync.Mutex
	var noisyAccepted []string
	healthy := func(ctx context.Context, phase string) error {
		r.recv.Reset()
		var mu sync.Mutex
		var texts []string
		rec := NewRecorder()
		Drive(ctx, Shape{Mode: Open, Rate: no.HealthyInboundRate, Duration: r.o.Duration, MaxInFlight: 1024}, rec,
			r.inboundCall(ni.healthyAPI, ni.healthy, fmt.Sprintf("ni-%d-%s", run, phase), 20, r.recv.Due, func(t string) {
				mu.Lock()
				texts = append(texts, t)
				mu.Unlock()
			}))
		ends := []string{"ni-healthy"}
		WaitFor(ctx, r.o.Drain, func() bool { return r.recv.Tally(ends, texts).Lost == 0 })
		lost := r.recv.Tally(ends, texts).Lost
		lat := Summarise(r.recv.EndpointLatencies(ends))
		if phase == "quiet" {
			pair.Quiet, pair.LostQuiet = lat, lost
		} else {
			pair.Noisy, pair.LostNoisy = lat, lost
		}
		for k, v := range rec.Errors() {
			pair.Errors[phase+" "+k] += v
		}
		return nil
	}
	begin := func(ctx context.Context) (*noise, error) {
		return startNoise(ctx, no.InboundRate, []Call{r.inboundCall(ni.noisyAPI, ni.noisy, fmt.Sprintf("ni-noise-%d", run), 200,
			func(string, time.Time) {}, func(t string) {
				noisyMu.Lock()
				noisyAccepted = append(noisyAccepted, t)
				noisyMu.Unlock()
			})}), nil
	}
	quiet, noisy, n, err := r.phases(ctx, healthy, begin)
	if err != nil {
		return err
	}
	nr.QuietRSS, nr.NoisyRSS = quiet, noisy
	pair.finish()
	nf := &nr.Noise
	nf.Accepted, nf.Errors = n.rec.Count(), n.rec.Errors()
	nf.Requests = nf.Accepted
	for _, v := range nf.Errors {
		nf.Requests += v
	}
	ends := []string{"ni-noisy"}
	noisyMu.Lock()
	acc := append([]string(nil), noisyAccepted...)
	noisyMu.Unlock()
	WaitFor(ctx, r.o.Drain, func() bool { return r.recv.Tally(ends, acc).Lost == 0 })
	nf.Undelivered = r.recv.Tally(ends, acc).Lost
	res.Noisy = nr
	res.Latency = pair.Noisy
	return nil
}
