// Package workqueue holds what the service's three database work queues
// share: the send queue (messaging), the delivery lanes (webhooks) and the
// call mailbox of chat-app connections (connections). Each queue keeps its
// own table and its own claim statement, because what a claim takes and
// how it is fair differ; what is the same is how a loop waits, how a
// failed item backs off, and how a write that must not be lost is made
// when the database answers badly or the caller is stopping.
package workqueue

import (
	"context"
	"math/rand/v2"
	"time"
)

// Wake is a loop's doorbell: Ring never blocks, and rings that come while
// one is pending merge into it, so a loop woken by a burst claims once.
type Wake chan struct{}

// NewWake returns a doorbell with room for one pending ring.
func NewWake() Wake { return make(Wake, 1) }

// Ring wakes the loop waiting on w, or leaves a ring for its next wait.
func (w Wake) Ring() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// Pause waits until d has passed or one of wakes rings, and reports false
// when ctx ended first. A nil wake never rings.
func Pause(ctx context.Context, d time.Duration, wakes ...<-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	var w0, w1, w2 <-chan struct{}
	switch len(wakes) {
	default:
		w2 = wakes[2]
		fallthrough
	case 2:
		w1 = wakes[1]
		fallthrough
	case 1:
		w0 = wakes[0]
	case 0:
	}
	select {
	case <-ctx.Done():
		return false
	case <-w0:
	case <-w1:
	case <-w2:
	case <-t.C:
	}
	return true
}

// Jitter returns d lengthened by up to frac of itself, so items that failed
// together do not all come back together.
func Jitter(d time.Duration, frac float64) time.Duration {
	if d <= 0 || frac <= 0 {
		return d
	}
	return d + time.Duration(rand.Int64N(int64(float64(d)*frac)+1))
}

// Doubling is the delay after attempt n of a schedule that starts at
// first and doubles up to limit.
func Doubling(n int, first, limit time.Duration) time.Duration {
	d := first
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Persist runs write until it succeeds or bound has passed, whatever
// happens to ctx: the writes a queue makes after its work (an outcome, a
// retry's time, a lease given back) must land even when the caller is
// stopping, and one connection cut by a database restart must not lose
// them. Between tries it waits 50 ms, doubling to a second. It returns the
// last error when the bound passed first.
func Persist(ctx context.Context, bound time.Duration, write func(ctx context.Context) error) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	for n := 1; ; n++ {
		err := write(wctx)
		if err == nil {
			return nil
		}
		if !Pause(wctx, Doubling(n, 50*time.Millisecond, time.Second)) {
			return err
		}
	}
}
