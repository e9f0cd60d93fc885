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

func TestMemorySchedule(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	l := ratelimit.NewMemory(clk.Now)
	ctx := context.Background()
	type step struct {
		advance   time.Duration
		key       string
		wantOK    bool
		wantRetry time.Duration
	}
	// 3 per minute: a burst of 3, then one every 20 s.
	steps := []step{
		{0, "a", true, 0},
		{0, "a", true, 0},
		{0, "a", true, 0},
		{0, "a", false, 20 * time.Second},
		{0, "b", true, 0}, // keys are independent
		{5 * time.Second, "a", false, 15 * time.Second},
		{15 * time.Second, "a", true, 0},
		{0, "a", false, 20 * time.Second},
		{2 * time.Minute, "a", true, 0}, // idle time refills the budget...
		{0, "a", true, 0},
		{0, "a", true, 0},
		{0, "a", false, 20 * time.Second}, // ...but never beyond it
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		ok, retry, err := l.Allow(ctx, s.key, 3, time.Minute)
		if err != nil || ok != s.wantOK || retry != s.wantRetry {
			t.Fatalf("step %d: Allow = %v, %v, %v; want %v, %v", i, ok, retry, err, s.wantOK, s.wantRetry)
		}
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

// limiters returns every implementation available on this machine; Redis
// runs when 127.0.0.1:6379 answers.
func limiters(t *testing.T) map[string]ratelimit.Limiter {
	out := map[string]ratelimit.Limiter{"memory": ratelimit.NewMemory(nil)}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:6379", 200*time.Millisecond); err == nil {
		c.Close()
		r, err := ratelimit.OpenRedis(context.Background(), "redis://127.0.0.1:6379/0")
		if err != nil {
			t.Fatalf("redis: %v", err)
		}
		t.Cleanup(func() { _ = r.Close() })
		out["redis"] = r
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

// TestConcurrentBudget: however many callers race, exactly the budget passes.
func TestConcurrentBudget(t *testing.T) {
	t.Parallel()
	for name, l := range limiters(t) {
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
					} else if retry <= 0 || retry > 3*time.Second+50*time.Millisecond {
						t.Errorf("retryAfter %v outside (0, 3s]", retry)
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

func TestRefill(t *testing.T) {
	t.Parallel()
	for name, l := range limiters(t) {
		t.Run(name, func(t *testing.T) {
			key := uniqueKey()
			ctx := context.Background()
			// 2 per 400 ms: one more every 200 ms after the burst.
			for i := range 2 {
				if ok, _, _ := l.Allow(ctx, key, 2, 400*time.Millisecond); !ok {
					t.Fatalf("request %d refused", i)
				}
			}
			ok, retry, _ := l.Allow(ctx, key, 2, 400*time.Millisecond)
			if ok {
				t.Fatal("third request allowed")
			}
			time.Sleep(retry + 20*time.Millisecond)
			if ok, _, _ := l.Allow(ctx, key, 2, 400*time.Millisecond); !ok {
				t.Fatalf("refused after waiting retryAfter %v", retry)
			}
		})
	}
}
