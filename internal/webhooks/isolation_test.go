package webhooks_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// blackHole accepts connections on 127.0.0.1 and never answers, as a dead
// receiver behind a live load balancer does.
type blackHole struct {
	ln       net.Listener
	accepted atomic.Int64
	mu       sync.Mutex
	conns    []net.Conn
}

func newBlackHole(t testing.TB) *blackHole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &blackHole{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.conns {
			_ = c.Close()
		}
	})
	return h
}

func (h *blackHole) URL() string { return "http://" + h.ln.Addr().String() + "/hook" }

// TestEndpointIsolation: one company's endpoints that never answer hold
// only their own lanes, each one attempt in flight (slow start); the
// other company's receiver gets every event while none of the dead
// attempts has even ended. On PostgreSQL two replicas share the work.
func TestEndpointIsolation(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("holds attempts for the 10 s attempt timeout")
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		const dead, noisyEvents, healthyEvents = 40, 5, 30
		opts := webhooks.Options{Now: time.Now}
		b := setup(t, db, setupOpts{work: true, webhooks: opts})
		if db.Dialect == store.Postgres {
			b.replica(t, opts)
		}
		hole := newBlackHole(t)
		for range dead {
			b.subscribe(t, b.other, webhooks.CreateInput{URL: hole.URL()})
		}
		rcv := newReceiver(t, "", time.Now)
		_, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL()})
		rcv.setSecret(secret)
		data := exampleData(t)[events.CrmBusinessWon]
		for range noisyEvents {
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.other.CompanyID, Data: data}); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, "every dead endpoint holds an attempt", func() bool { return hole.accepted.Load() >= dead })
		for range healthyEvents {
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: data}); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, "the healthy receiver got every event", func() bool { return len(rcv.received()) == healthyEvents })
		ended, err := db.Bun.NewSelect().Table("webhook_delivery_log").Where("subscription_id IN (SELECT id FROM webhook_subscriptions WHERE company_id = ?)", b.other.CompanyID).Count(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ended != 0 {
			t.Errorf("%d dead attempts ended before the healthy company got its events; it waited behind them", ended)
		}
		if n := hole.accepted.Load(); n > dead {
			t.Errorf("%d connections held by %d dead endpoints, want at most 1 each (slow start)", n, dead)
		}
	})
}

// TestBreakerOpensAndCloses: an endpoint that keeps failing gets one
// attempt at a time, and none for a cool-down after each failure; the
// other due deliveries are refused at once and logged, keeping their
// schedule, and the first success lets everything through again.
func TestBreakerOpensAndCloses(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		const total = 12
		delays := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}
		const cooldown = 7500 * time.Millisecond / 8 // an eighth of the shortened schedule
		b := setup(t, db, setupOpts{work: true, webhooks: webhooks.Options{Now: time.Now, RetryDelays: delays}})
		rcv := newReceiver(t, "", time.Now)
		var failing atomic.Bool
		failing.Store(true)
		rcv.setAnswer(func(int) int {
			if failing.Load() {
				return 503
			}
			return 200
		})
		sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL()})
		rcv.setSecret(secret)
		data := exampleData(t)[events.CrmBusinessWon]
		for range total {
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: data}); err != nil {
				t.Fatal(err)
			}
		}
		refused := func() int {
			n := 0
			for _, e := range b.log(t, sub.ID) {
				if e.Error != nil && *e.Error == webhooks.MsgCircuitOpen {
					n++
				}
			}
			return n
		}
		// Sent attempts that failed, in the order they were logged.
		sentFailures := func() []time.Time {
			var at []time.Time
			for _, e := range b.log(t, sub.ID) {
				if e.StatusCode == 503 {
					at = append(at, e.CreatedAt)
				}
			}
			slices.SortFunc(at, time.Time.Compare)
			return at
		}
		waitUntil(t, "the breaker refuses attempts", func() bool { return refused() > 0 })
		// One probe fails before the endpoint recovers: the events were
		// published together, so each probe goes out beside the others'
		// refusals, and waiting for a second would leave them no attempt.
		waitUntil(t, "a probe fails", func() bool { return len(sentFailures()) >= webhooks.BreakerThreshold+1 })
		sentWhileFailing := len(rcv.received())
		failing.Store(false)
		// The probe waited out the cool-down after the failure that opened
		// the breaker (less the batching of log writes, which can only
		// narrow the gap by a few milliseconds).
		fails := sentFailures()
		if gap := fails[webhooks.BreakerThreshold].Sub(fails[webhooks.BreakerThreshold-1]); gap < cooldown/2 {
			t.Errorf("the probe went out %v after the failure that opened the breaker, want the %v cool-down", gap, cooldown)
		}
		waitUntil(t, "every event delivered", func() bool { return countSucceeded(b.log(t, sub.ID)) == total })
		if sentWhileFailing >= total {
			t.Errorf("%d requests reached the failing endpoint for %d events: the breaker let everything through", sentWhileFailing, total)
		}
		attempts := map[string][]int{}
		for _, e := range b.log(t, sub.ID) {
			attempts[e.DeliveryID] = append(attempts[e.DeliveryID], e.Attempt)
		}
		for id, got := range attempts {
			slices.Sort(got)
			for i, n := range got {
				if n != i+1 {
					t.Errorf("delivery %s logged attempts %v, want 1, 2, … in order", id, got)
					break
				}
			}
		}
	})
}
