// Package ratelimit limits how often a key (a token, a company) may do
// something: at most `limit` times in any `window` (a sliding window, not
// a bucket that refills: "600 per minute" admits no more than 600 in any 60
// seconds, whether they come as one burst or a trickle). Each key keeps the
// times of the events it admitted within the window; an event is admitted
// when fewer than limit of them are younger than window, and Retry-After is
// exactly when the oldest of them leaves it. Memory serves a single node;
// Redis shares the limit between replicas (used when REDIS_URL is set).
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

// log is the admitted events of one key still inside the window, oldest
// first, in a ring of at most limit entries (unix nanoseconds).
type log struct {
	at    []int64
	start int
	n     int
}

// allow decides one event at now: events at or before now-window have left
// the window (it is (now-window, now]).
func (l *log) allow(now int64, limit int, window time.Duration) (bool, time.Duration) {
	if len(l.at) != limit {
		l.resize(limit)
	}
	for l.n > 0 && l.at[l.start] <= now-int64(window) {
		l.start = (l.start + 1) % limit
		l.n--
	}
	if l.n < limit {
		l.at[(l.start+l.n)%limit] = now
		l.n++
		return true, 0
	}
	return false, time.Duration(l.at[l.start] + int64(window) - now)
}

// resize keeps the newest events when a key's limit changes.
func (l *log) resize(limit int) {
	keep := make([]int64, 0, limit)
	for i := max(0, l.n-limit); i < l.n; i++ {
		keep = append(keep, l.at[(l.start+i)%len(l.at)])
	}
	l.at, l.start, l.n = make([]int64, limit), 0, len(keep)
	copy(l.at, keep)
}

// newest is the time of the key's last admitted event (0 when none).
func (l *log) newest() int64 {
	if l.n == 0 {
		return 0
	}
	return l.at[(l.start+l.n-1)%len(l.at)]
}

// Memory is an in-process limiter for a single node.
type Memory struct {
	now clock.Clock

	mu    sync.Mutex
	logs  map[string]*log
	sweep time.Time
	// longest is the longest window asked for, so gc keeps every log
	// that may still count.
	longest time.Duration
}

// NewMemory returns an in-process limiter on the given clock (the system
// clock when nil).
func NewMemory(now clock.Clock) *Memory {
	if now == nil {
		now = clock.System
	}
	return &Memory{now: now, logs: map[string]*log{}}
}

// Allow implements Limiter; it never fails.
func (m *Memory) Allow(_ context.Context, key string, limit int, window time.Duration) (bool, time.Duration, error) {
	if limit <= 0 {
		return false, window, nil
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.longest = max(m.longest, window)
	m.gc(now)
	l := m.logs[key]
	if l == nil {
		l = &log{}
		m.logs[key] = l
	}
	ok, wait := l.allow(now.UnixNano(), limit, window)
	return ok, wait, nil
}

// gc drops keys whose every event has left the window (they are back to a
// full budget), at most once a minute, so the map stays the size of the
// active keys.
func (m *Memory) gc(now time.Time) {
	if now.Sub(m.sweep) < time.Minute {
		return
	}
	m.sweep = now
	for k, l := range m.logs {
		if l.newest() <= now.UnixNano()-int64(m.longest) {
			delete(m.logs, k)
		}
	}
}

// Key builds a limiter key from a scope and an id, e.g. Key("webhooks:token", 7).
func Key(scope string, id any) string { return fmt.Sprintf("%s:%v", scope, id) }
