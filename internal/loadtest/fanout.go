package loadtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultFanout are the subscriptions per event of events-fanout.
var DefaultFanout = []int{1, 10, 100, 500}

// FanoutLevel is events-fanout at one number of subscriptions per event.
type FanoutLevel struct {
	Subscriptions int     `json:"subscriptions"`
	Rate          float64 `json:"publish_per_s"` // open loop: deliveries per second offered / subscriptions
	// Publish is the latency of POST /api/events, from when it was due.
	Publish    Latency        `json:"publish"`
	Accepted   int            `json:"accepted"`
	Errors     map[string]int `json:"errors,omitempty"`
	Deliveries int            `json:"deliveries"` // distinct (endpoint, event) pairs received
	Lost       int            `json:"lost"`
	Drained    bool           `json:"drained"`
	// Seconds is the window the CPU is counted over: from the first
	// publish until every delivery arrived (or the drain bound).
	Seconds float64 `json:"window_s"`
	// GatewayCPU is the gateway processes' user+system CPU seconds
	// (/proc/PID/stat); PostgresCPU that of the PostgreSQL backends
	// connected to the gateway's database (pg_stat_activity, then
	// /proc/PID/stat of each: those present at the start and the end of
	// the window, plus the whole CPU of backends that appeared during it;
	// BackendsGone ended during it and are not counted).
	GatewayCPU   float64 `json:"gateway_cpu_s"`
	PostgresCPU  float64 `json:"postgres_cpu_s"`
	Backends     int     `json:"postgres_backends"`
	BackendsGone int     `json:"postgres_backends_gone"`
	// CPU per delivery, milliseconds.
	GatewayMs  float64 `json:"gateway_cpu_ms_per_delivery"`
	PostgresMs float64 `json:"postgres_cpu_ms_per_delivery"`
	TotalMs    float64 `json:"total_cpu_ms_per_delivery"`
}

type fanoutTarget struct {
	company   *Company
	endpoints []string
}

func (r *runner) prepareFanout(ctx context.Context) error {
	if r.fanout != nil {
		return nil
	}
	r.fanout = map[int]*fanoutTarget{}
	for li, n := range r.o.FanoutLevels {
		cs, err := r.setup.Companies(ctx, "fanout", 6000+li, 1, 0)
		if err != nil {
			return err
		}
		t := &fanoutTarget{company: cs[0]}
		// The publishes rotate over 8 tokens: the gateway allows 32
		// requests in flight per token, and one token at 1,000 publishes
		// a second would measure that limit rather than the fan-out.
		if err := r.setup.MoreTokens(ctx, t.company, max(7, n/100)); err != nil {
			return err
		}
		urls := make([]string, n)
		for i := range n {
			t.endpoints = append(t.endpoints, fmt.Sprintf("fanout-%d-%d", n, i))
			urls[i] = r.recv.HookURL(t.endpoints[i])
		}
		r.o.Log("events-fanout: %d subscriptions of one company", n)
		subs, err := r.setup.SubscribeMany(ctx, t.company, fmt.Sprintf("fanout-%d", n), urls, []string{"contact.import.completed"})
		if err != nil {
			return err
		}
		for i, s := range subs {
			r.recv.Register(t.endpoints[i], s.Secret)
		}
		r.fanout[n] = t
	}
	return nil
}

// runFanout publishes, at each level, deliveries/N events per second for
// the scenario's duration to a company with N subscriptions, and waits
// for every delivery.
func (r *runner) runFanout(ctx context.Context, run int, res *Result) error {
	if err := r.prepareFanout(ctx); err != nil {
		return err
	}
	for _, n := range r.o.FanoutLevels {
		t := r.fanout[n]
		lv := FanoutLevel{Subscriptions: n, Rate: r.o.FanoutDeliveries / float64(n)}
		r.recv.Reset()
		var mu sync.Mutex
		var accepted []string
		rec := NewRecorder()
		pg0, err := r.backendCPU(ctx)
		if err != nil {
			return err
		}
		gw0 := eachCPU(r.stack.PIDs())
		begin := time.Now()
		Drive(ctx, Shape{Mode: Open, Rate: lv.Rate, Duration: r.o.Duration, MaxInFlight: 1024}, rec,
			r.publishCall(t.company, run, func(id string) {
				mu.Lock()
				accepted = append(accepted, id)
				mu.Unlock()
			}))
		lv.Drained = WaitFor(ctx, r.o.Drain, func() bool { return r.recv.Tally(t.endpoints, accepted).Lost == 0 })
		lv.Seconds = time.Since(begin).Seconds()
		gw1 := eachCPU(r.stack.PIDs())
		pg1, err := r.backendCPU(ctx)
		if err != nil {
			return err
		}
		tally := r.recv.Tally(t.endpoints, accepted)
		lv.Publish, lv.Accepted, lv.Errors = rec.Latencies(), rec.Count(), rec.Errors()
		lv.Deliveries, lv.Lost = tally.Received, tally.Lost
		for i := range gw0 {
			if gw0[i] >= 0 && gw1[i] >= 0 {
				lv.GatewayCPU += (gw1[i] - gw0[i]).Seconds()
			}
		}
		lv.PostgresCPU, lv.Backends, lv.BackendsGone = cpuBetween(pg0, pg1)
		if lv.Deliveries > 0 {
			d := float64(lv.Deliveries)
			lv.GatewayMs, lv.PostgresMs = lv.GatewayCPU*1000/d, lv.PostgresCPU*1000/d
			lv.TotalMs = lv.GatewayMs + lv.PostgresMs
		}
		r.o.Log("events-fanout N=%d: publish p50 %.1f p99 %.1f ms, %d deliveries, %.2f+%.2f ms CPU per delivery", n,
			lv.Publish.P50, lv.Publish.P99, lv.Deliveries, lv.GatewayMs, lv.PostgresMs)
		res.Fanout = append(res.Fanout, lv)
	}
	return nil
}

// backendCPU reads the CPU time so far of every PostgreSQL backend
// connected to the gateway's database, by pid (PostgreSQL only; none on
// SQLite).
func (r *runner) backendCPU(ctx context.Context) (map[int]time.Duration, error) {
	out := map[int]time.Duration{}
	if r.stack.Engine() != Postgres {
		return out, nil
	}
	conn, err := pgx.Connect(ctx, r.stack.opts.AdminURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, r.stack.DBName)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	for _, p := range pids {
		if v, err := CPUTime(int(p)); err == nil {
			out[int(p)] = v
		}
	}
	return out, nil
}

// cpuBetween is the CPU seconds the backends used between two readings:
// the difference for a backend in both, the whole time for one that
// appeared; those that ended in between are counted as gone.
func cpuBetween(before, after map[int]time.Duration) (secs float64, backends, gone int) {
	for pid, a := range after {
		backends++
		if b, ok := before[pid]; ok {
			secs += (a - b).Seconds()
		} else {
			secs += a.Seconds()
		}
	}
	for pid := range before {
		if _, ok := after[pid]; !ok {
			gone++
		}
	}
	return secs, backends, gone
}
