// Package ratelimit limits how often a key (a token, a company) may do
// something: at most `limit` times per `window`, with the whole budget
// usable as a burst. It is GCRA (the generic cell rate algorithm): one
// timestamp per key, no per-request bookkeeping, and an exact Retry-After.
// Memory serves a single node; Redis shares the limit between replicas
// (used when REDIS_URL is set).
package ratelimit

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/chatmsg/gateway/internal/clock"
)

// Limiter decides whether one more event for key fits in limit per window.
// When it does not, retryAfter says when the next one will (always > 0).
// err is set only when the limiter itself failed (Redis unreachable);
// callers decide whether to fail open or closed.
type Limiter interface {
	Allow(ctx context.Context, key string, limit int, window time.Duration) (ok bool, retryAfter time.Duration, err error)
}

// RetryAfterSeconds rounds a wait up to whole seconds (at least 1), as the
// Retry-After header carries it.
func RetryAfterSeconds(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}

// gcra is the decision on one key: tat is the key's theoretical arrival
// time (zero when unknown). It returns the new tat when allowed, or how long
// to wait.
func gcra(now, tat time.Time, limit int, window time.Duration) (allowed bool, newTAT time.Time, wait time.Duration) {
	if limit <= 0 {
		return false, tat, window
	}
	interval := window / time.Duration(limit)
	if tat.Before(now) {
		tat = now
	}
	newTAT = tat.Add(interval)
	// The budget is a full window: a key may be `window` ahead of now.
	allowAt := newTAT.Add(-window)
	if now.Before(allowAt) {
		return false, tat, allowAt.Sub(now)
	}
	return true, newTAT, 0
}

// Memory is an in-process limiter for a single node.
type Memory struct {
	now clock.Clock

	mu    sync.Mutex
	tats  map[string]time.Time
	sweep time.Time
}

// NewMemory returns an in-process limiter on the given clock (the system
// clock when nil).
func NewMemory(now clock.Clock) *Memory {
	if now == nil {
		now = clock.System
	}
	return &Memory{now: now, tats: map[string]time.Time{}}
}

// Allow implements Limiter; it never fails.
func (m *Memory) Allow(_ context.Context, key string, limit int, window time.Duration) (bool, time.Duration, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gc(now)
	ok, tat, wait := gcra(now, m.tats[key], limit, window)
	if ok {
		m.tats[key] = tat
	}
	return ok, wait, nil
}

// gc drops keys whose tat has passed (they are back to a full budget), at
// most once a minute, so the map stays the size of the active keys.
func (m *Memory) gc(now time.Time) {
	if now.Sub(m.sweep) < time.Minute {
		return
	}
	m.sweep = now
	for k, tat := range m.tats {
		if !tat.After(now) {
			delete(m.tats, k)
		}
	}
}

// Key builds a limiter key from a scope and an id, e.g. Key("webhooks:token", 7).
func Key(scope string, id any) string { return fmt.Sprintf("%s:%v", scope, id) }
