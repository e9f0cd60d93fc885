package ratelimit_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/ratelimit"
)

// limiters returns every implementation available on this machine, both on
// clk; Redis runs when 127.0.0.1:6379 answers.
func limiters(t *testing.T, clk clock.Clock) map[string]ratelimit.Limiter {
	out := map[string]ratelimit.Limiter{"memory": ratelimit.NewMemory(clk)}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:6379", 200*time.Millisecond); err == nil {
		c.Close()
		r, err := ratelimit.OpenRedis(context.Background(), "redis://127.0.0.1:6379/0")
		if err != nil {
			t.Fatalf("redis: %v", err)
		}
		t.Cleanup(func() { _ = r.Close() })
		out["redis"] = r.WithClock(clk)
	} else {
		t.Log("redis not reachable at 127.0.0.1:6379; testing the in-process limiter only")
	}
	return out
}

func uniqueKey() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "test:" + hex.EncodeToString(b[:])
}

func TestSchedule(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	for name, l := range limiters(t, clk.Now) {
		t.Run(name, func(t *testing.T) {
			a, b := uniqueKey(), uniqueKey()
			type step struct {
				advance   time.Duration
				key       string
				wantOK    bool
				wantRetry time.Duration
			}
			// 3 per minute: the budget is 3 in any 60 s, never refilled
			// before the oldest event is a minute old.
			steps := []step{
				{0, a, true, 0},
				{10 * time.Second, a, true, 0},
				{10 * time.Second, a, true, 0},
				{0, a, false, 40 * time.Second},
				{0, b, true, 0}, // keys are independent
				{30 * time.Second, a, false, 10 * time.Second},
				{10 * time.Second, a, true, 0}, // the first left the window
				{0, a, false, 10 * time.Second},
				{2 * time.Minute, a, true, 0}, // idle time empties the window...
				{0, a, true, 0},
				{0, a, true, 0},
				{0, a, false, time.Minute}, // ...but never beyond the limit
			}
			for i, s := range steps {
				clk.Advance(s.advance)
				ok, retry, err := l.Allow(context.Background(), s.key, 3, time.Minute)
				if err != nil || ok != s.wantOK || retry != s.wantRetry {
					t.Fatalf("step %d: Allow = %v, %v, %v; want %v, %v", i, ok, retry, err, s.wantOK, s.wantRetry)
				}
			}
		})
	}
}

// TestBurstThenTrickle: the document's 600 per minute. A burst of 750 then
// a request every 250 ms for three minutes: no 60-second window admits more
// than 600; a refusal happens only when 600 are in the window, and its
// Retry-After is exactly when the oldest of them leaves it.
func TestBurstThenTrickle(t *testing.T) {
	t.Parallel()
	const limit, window = 600, time.Minute
	start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for name := range limiters(t, nil) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewManual(start)
			l := limiters(t, clk.Now)[name]
			key := uniqueKey()
			var admitted []time.Time
			inWindow := func(now time.Time) []time.Time {
				var in []time.Time
				for _, at := range admitted {
					if at.After(now.Add(-window)) {
						in = append(in, at)
					}
				}
				return in
			}
			try := func() {
				now := clk.Now()
				ok, retry, err := l.Allow(context.Background(), key, limit, window)
				if err != nil {
					t.Fatal(err)
				}
				in := inWindow(now)
				switch {
				case ok && len(in) >= limit:
					t.Fatalf("at %v: admitted with %d already in the window", now.Sub(start), len(in))
				case !ok && len(in) < limit:
					t.Fatalf("at %v: refused with only %d in the window", now.Sub(start), len(in))
				case !ok && retry != in[0].Add(window).Sub(now):
					t.Fatalf("at %v: Retry-After %v, the oldest leaves in %v", now.Sub(start), retry, in[0].Add(window).Sub(now))
				}
				if ok {
					admitted = append(admitted, now)
				}
			}
			for range 750 {
				try()
			}
			if len(admitted) != limit {
				t.Fatalf("burst admitted %d, want %d", len(admitted), limit)
			}
			for range 3 * 60 * 4 {
				clk.Advance(250 * time.Millisecond)
				try()
			}
			// Every window ending at an admission holds at most the limit.
			for i, at := range admitted {
				n := 0
				for _, other := range admitted[:i+1] {
					if other.After(at.Add(-window)) {
						n++
					}
				}
				if n > limit {
					t.Fatalf("the window ending at %v admitted %d", at.Sub(start), n)
				}
			}
			// The trickle passes from the moment the burst leaves the
			// window (60 s) to the end (180 s), both included.
			if want := limit + 2*60*4 + 1; len(admitted) != want {
				t.Fatalf("admitted %d in all, want %d", len(admitted), want)
			}
		})
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 20 * time.Second: 20} {
		if got := ratelimit.RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

// TestConcurrentBudget: however many callers race, exactly the budget
// passes, on the real clock as production runs it.
func TestConcurrentBudget(t *testing.T) {
	t.Parallel()
	for name, l := range limiters(t, nil) {
		t.Run(name, func(t *testing.T) {
			key := uniqueKey()
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for range 60 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok, retry, err := l.Allow(context.Background(), key, 20, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						allowed.Add(1)
					} else if retry <= 0 || retry > time.Minute {
						t.Errorf("retryAfter %v outside (0, 1m]", retry)
					}
				}()
			}
			wg.Wait()
			if n := allowed.Load(); n != 20 {
				t.Fatalf("allowed %d of 60, want 20", n)
			}
			// Keys are independent.
			if ok, _, err := l.Allow(context.Background(), uniqueKey(), 20, time.Minute); !ok || err != nil {
				t.Fatalf("fresh key refused: %v", err)
			}
		})
	}
}
