package webhooks

import (
	"context"
	"time"
)

// The breaker of a lane bounds what an endpoint that does not answer can
// hold: memory, connections and timers per endpoint, never a pool other
// subscriptions share.
//
//   - A lane starts at slowStart attempt in flight (a new endpoint has not
//     shown it answers) and doubles the limit on each success, up to the
//     subscription's bound (8); each failure halves it.
//   - After breakerThreshold consecutive failures the breaker is open: one
//     attempt (the probe) is in flight at a time, and none for a cool-down
//     after each failure; the other deliveries that come due are refused
//     at once, logged as not sent and counted as attempts, so they keep
//     the documented retry schedule and disabling still follows the
//     document. The first answer closes it again.
//
// The state is kept in the lane's row between runs (failures,
// in_flight_limit, probe_at), so it follows the lane to whichever replica
// runs it.
const (
	breakerThreshold = 5
	slowStart        = 1
)

// msgCircuitOpen is the delivery-log text of an attempt refused by an open
// breaker.
const msgCircuitOpen = "not sent: the endpoint failed 5 attempts in a row; one attempt at a time is sent, at most one every 30 seconds, until it answers"

// probeCooldown is how long an open breaker waits after a failed attempt
// before its next probe. A probe to an endpoint that never answers holds a
// connection, its buffers and three goroutines for the 10 s timeout; sent
// back to back, a thousand such endpoints held them all the time (about
// 180 MB of the gateway's memory in noisy-webhooks), and with the
// cool-down they hold them a quarter of it. Beside the retry schedule
// (10 s, then 1, 5 and 15 minutes) an endpoint that comes back is found at
// most this much later. Service.cooldown shortens it for shortened
// schedules.
const probeCooldown = 30 * time.Second

type breaker struct {
	bound    int       // the subscription's in-flight bound
	limit    int       // attempts allowed in flight while closed
	failures int       // consecutive failed attempts
	probeAt  time.Time // while open: no probe before this
}

func newBreaker(bound, failures, limit int, probeAt time.Time) breaker {
	if limit <= 0 {
		limit = slowStart
	}
	return breaker{bound: bound, limit: min(limit, bound), failures: max(failures, 0), probeAt: probeAt}
}

func (b breaker) open() bool { return b.failures >= breakerThreshold }

// allowed is how many attempts may be in flight at now: an open breaker's
// probe, once its cool-down has passed.
func (b breaker) allowed(now time.Time) int {
	switch {
	case !b.open():
		return b.limit
	case now.Before(b.probeAt):
		return 0
	default:
		return 1
	}
}

// record takes the verdict of an attempt that was sent at or before now.
// An answer other than a server error shows the endpoint is up, whatever
// its status; a failure that leaves the breaker open starts a cool-down.
func (b *breaker) record(o outcome, now time.Time, cooldown time.Duration) {
	switch {
	case o.interrupted:
	case o.success, o.answered, o.status != 0 && o.status < 500 && o.status != 408 && o.status != 429:
		b.failures = 0
		b.limit = min(b.bound, b.limit*2)
		b.probeAt = time.Time{}
	default:
		b.failures++
		b.limit = max(1, b.limit/2)
		if b.open() {
			b.probeAt = now.Add(cooldown)
		}
	}
}

// cooldownFor is the probe cool-down of a retry schedule: probeCooldown,
// or an eighth of a shorter schedule (tests and benchmarks shorten it), so
// an endpoint that comes back still finds most of a delivery's attempts
// ahead.
func cooldownFor(delays []time.Duration) time.Duration {
	var total time.Duration
	for _, d := range delays {
		total += d
	}
	return min(probeCooldown, total/8)
}

// failingShare bounds the database connections the lanes of failing
// endpoints use at once, all of them together: a thousand dead endpoints
// fetch, refuse and log their deliveries through at most this many of the
// pool's connections, and every other subscription, publish and request
// keeps the rest. A lane holds a turn for one step (a fill, a batch of
// outcomes, its release), one connection at a time.
const failingShare = 4

// dbTurns is the queue for that share.
type dbTurns chan struct{}

func newDBTurns() dbTurns { return make(dbTurns, failingShare) }

// run does one database step of a lane (a fill, a batch of outcomes, its
// release): inline for a healthy endpoint; for a failing one in a turn of
// the share, on a goroutine of its own that ends with the step. A step's
// stack (bun, pgx) is deep, and on the lane's goroutine it would stay grown
// while the lane waits out its probe, with a thousand failing lanes
// waiting at once. The lane waits for the step, so nothing of its state
// is touched by two goroutines at a time.
func (t dbTurns) run(ctx context.Context, b breaker, step func()) {
	if b.failures == 0 {
		step()
		return
	}
	give := t.take(ctx, b)
	defer give()
	done := make(chan struct{})
	go func() {
		defer close(done)
		step()
	}()
	<-done
}

// take waits for a turn when the lane's endpoint is failing and returns
// what gives it back; a healthy lane goes straight on. A caller that is
// stopping goes on without a turn: its writes must still land.
func (t dbTurns) take(ctx context.Context, b breaker) func() {
	if b.failures == 0 {
		return func() {}
	}
	select {
	case t <- struct{}{}:
		return func() { <-t }
	case <-ctx.Done():
		return func() {}
	}
}
