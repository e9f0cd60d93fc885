package subscriber

import (
	"context"
	"sync"
	"time"
)

// Claim is the answer of Seen.Claim.
type Claim int

const (
	// Claimed: the delivery id is new (or its earlier processing failed and
	// was released); the caller now owns it and must Complete or Release it.
	Claimed Claim = iota
	// AlreadyDone: the delivery was processed before; acknowledge it without
	// processing it again (a retry whose 2xx answer was lost).
	AlreadyDone
	// InProgress: another request is processing the same delivery right now;
	// the handler answers 503 so the service retries later, and the retry
	// finds it done (or released, and processes it).
	InProgress
)

// Seen remembers which deliveries were processed, keyed by X-Svc-Delivery.
// Delivery is at least once: a retry can repeat an event that was already
// handled, so the Handler claims each delivery id before dispatching it.
//
// An implementation over a database needs one row per delivery id with a
// state (in progress, done), e.g. INSERT … ON CONFLICT DO NOTHING for Claim.
// It must keep done ids at least as long as the service may still retry
// them (the five attempts span about 21 minutes; keep a day to be safe).
type Seen interface {
	// Claim records deliveryID as in progress unless it is already known.
	Claim(ctx context.Context, deliveryID string) (Claim, error)
	// Complete marks a claimed delivery as processed.
	Complete(ctx context.Context, deliveryID string) error
	// Release forgets a claimed delivery whose processing failed, so the
	// service's retry is processed again.
	Release(ctx context.Context, deliveryID string) error
}

// MemorySeen is the in-memory Seen the Handler uses by default. It suits a
// single receiver process; it forgets everything on restart, and replicas
// behind a load balancer do not share it (use a shared store then).
type MemorySeen struct {
	ttl   time.Duration
	stale time.Duration
	now   func() time.Time

	mu        sync.Mutex
	ids       map[string]seenEntry
	lastPrune time.Time
}

type seenEntry struct {
	done bool
	at   time.Time
}

// DefaultSeenTTL is how long MemorySeen remembers a processed delivery:
// far longer than the service's retries of it (about 21 minutes).
const DefaultSeenTTL = 24 * time.Hour

// staleClaim is how long an in-progress claim blocks duplicates. The
// service gives up on an attempt after 10 seconds, so a claim older than
// this belongs to a handler that hung; letting a retry take it over is
// better than refusing that delivery until the TTL.
const staleClaim = time.Minute

// NewMemorySeen returns an empty in-memory store that remembers processed
// delivery ids for ttl (DefaultSeenTTL when ttl <= 0). now is its clock
// (time.Now when nil).
func NewMemorySeen(ttl time.Duration, now func() time.Time) *MemorySeen {
	if ttl <= 0 {
		ttl = DefaultSeenTTL
	}
	if now == nil {
		now = time.Now
	}
	return &MemorySeen{ttl: ttl, stale: staleClaim, now: now, ids: map[string]seenEntry{}}
}

// Claim implements Seen.
func (s *MemorySeen) Claim(_ context.Context, id string) (Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.prune(now)
	if e, ok := s.ids[id]; ok {
		switch {
		case e.done:
			return AlreadyDone, nil
		case now.Sub(e.at) < s.stale:
			return InProgress, nil
		}
	}
	s.ids[id] = seenEntry{at: now}
	return Claimed, nil
}

// Complete implements Seen.
func (s *MemorySeen) Complete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[id] = seenEntry{done: true, at: s.now()}
	return nil
}

// Release implements Seen.
func (s *MemorySeen) Release(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ids, id)
	return nil
}

// Len reports how many delivery ids are remembered (done or in progress).
func (s *MemorySeen) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

// prune drops expired entries, at most once per minute so that Claim stays
// O(1) amortised however many ids are kept.
func (s *MemorySeen) prune(now time.Time) {
	if now.Sub(s.lastPrune) < time.Minute {
		return
	}
	s.lastPrune = now
	for id, e := range s.ids {
		if now.Sub(e.at) >= s.ttl {
			delete(s.ids, id)
		}
	}
}
