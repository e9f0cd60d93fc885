package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/workqueue"
)

// How a replica's dispatcher runs (see README, "How it runs").
const (
	// maxLanes bounds the lanes one replica runs at once. A lane is a
	// goroutine and its attempts in flight; a failing endpoint's lane holds
	// one attempt (its breaker), so thousands of dead endpoints cost
	// thousands of goroutines, not the shared pool every subscription needs.
	maxLanes = 4096
	// claimBatch bounds the lanes one claim takes, so replicas polling at
	// once share the lanes that come due.
	claimBatch = 64
	// laneLease is how long a claimed lane is this replica's. A lane works
	// for at most laneRunFor, then waits for its attempts (AttemptTimeout)
	// and writes their outcomes, all well within the lease; after a crash
	// another replica takes the lane when the lease ends.
	laneLease = laneRunFor + AttemptTimeout + 30*time.Second
	// dispatchPoll is how often an idle dispatcher looks for lanes that
	// came due (retries, and events fanned out by another replica); its own
	// fan-outs and redeliveries wake it at once.
	dispatchPoll = 100 * time.Millisecond
	// fanOutPoll is how often the fan-out looks for events published
	// through another replica or left by a crash; this replica's commits
	// wake it at once.
	fanOutPoll = 200 * time.Millisecond
)

// dispatcher claims the lanes that are due and runs each in a goroutine of
// its own: one per subscription in the whole cluster (the lease), at most
// maxLanes here.
type dispatcher struct {
	s       *Service
	wake    workqueue.Wake
	fanWake workqueue.Wake
	stop    chan struct{} // closed by Stop: lanes wind down, no new claims
	done    sync.WaitGroup

	mu sync.Mutex
	// running maps the subscriptions whose lane runs here to the lane's
	// wake-up, so new deliveries reach a lingering lane at once.
	running map[int64]workqueue.Wake
	runs    atomic.Int64 // lanes run here so far
}

func newDispatcher(s *Service) *dispatcher {
	return &dispatcher{s: s, wake: workqueue.NewWake(), fanWake: workqueue.NewWake(),
		stop: make(chan struct{}), running: map[int64]workqueue.Wake{}}
}

// Start runs this replica's fan-out and dispatcher until Stop.
func (s *Service) Start(ctx context.Context) {
	d := s.dispatch
	d.done.Add(2)
	go func() { defer d.done.Done(); d.fanOutLoop(ctx) }()
	go func() { defer d.done.Done(); d.claimLoop(ctx) }()
}

// Stop stops claiming and lets the running lanes finish their attempts and
// write the outcomes, until ctx ends. Lanes cut off then keep their
// deliveries due; another replica takes them when the lease ends.
func (s *Service) Stop(ctx context.Context) error {
	d := s.dispatch
	d.mu.Lock()
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	d.mu.Unlock()
	finished := make(chan struct{})
	go func() { d.done.Wait(); close(finished) }()
	select {
	case <-finished:
		// The lanes are done with their broker connections.
		s.brokers.close()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Service) wakeDispatcher() { s.dispatch.wake.Ring() }

// wakeLanes tells the lanes of ids running here that deliveries arrived,
// and the dispatcher, for the others.
func (s *Service) wakeLanes(ids []int64) {
	d := s.dispatch
	d.mu.Lock()
	for _, id := range ids {
		if wake, ok := d.running[id]; ok {
			wake.Ring()
		}
	}
	d.mu.Unlock()
	d.wake.Ring()
}
func (s *Service) wakeFanOut() { s.dispatch.fanWake.Ring() }

// fanOutLoop fans out stored events as they are committed.
func (d *dispatcher) fanOutLoop(ctx context.Context) {
	for {
		more, err := d.s.fanOut(ctx)
		if err != nil && ctx.Err() == nil {
			d.s.log.WarnContext(ctx, "webhooks: fan-out failed; trying again", "err", err)
		}
		if more && err == nil {
			continue
		}
		if !d.pause(ctx, d.fanWake, fanOutPoll) {
			return
		}
	}
}

// claimLoop claims due lanes while there is room, and starts them.
func (d *dispatcher) claimLoop(ctx context.Context) {
	for {
		room := maxLanes - d.count()
		if room > 0 {
			claimed, err := d.claim(ctx, min(room, claimBatch))
			if err != nil && ctx.Err() == nil {
				d.s.log.WarnContext(ctx, "webhooks: claim lanes failed; trying again", "err", err)
			}
			for _, c := range claimed {
				d.startLane(ctx, c)
			}
			if len(claimed) == claimBatch {
				continue
			}
		}
		if !d.pause(ctx, d.wake, dispatchPoll) {
			return
		}
	}
}

// pause waits for wake or d, and reports false when the dispatcher stops.
func (d *dispatcher) pause(ctx context.Context, wake workqueue.Wake, wait time.Duration) bool {
	if !workqueue.Pause(ctx, wait, wake, d.stop) {
		return false
	}
	select {
	case <-d.stop:
		return false
	default:
		return true
	}
}

func (d *dispatcher) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.running)
}

// claimed is a lane this replica now holds, with its breaker as the last
// run left it.
type claimed struct {
	SubscriptionID int64      `bun:"subscription_id"`
	Failures       int        `bun:"failures"`
	InFlightLimit  int        `bun:"in_flight_limit"`
	ProbeAt        *time.Time `bun:"probe_at"`
	token          string     `bun:"-"`
}

func (c claimed) breaker(bound int) breaker {
	var probeAt time.Time
	if c.ProbeAt != nil {
		probeAt = *c.ProbeAt
	}
	return newBreaker(bound, c.Failures, c.InFlightLimit, probeAt)
}

// claim takes up to n due lanes whose lease is free, oldest due first, in
// one statement. SKIP LOCKED lets replicas claim at once without waiting
// for each other; a lane's row is never held by two replicas, which keeps
// the per-subscription bound global.
func (d *dispatcher) claim(ctx context.Context, n int) ([]claimed, error) {
	now := d.s.now().UTC()
	token := newLeaseToken()
	lock := ""
	if d.s.db.Dialect == store.Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	var out []claimed
	err := d.s.db.Bun.NewRaw(`UPDATE webhook_lanes SET lease_token = ?, lease_until = ?
WHERE subscription_id IN (SELECT subscription_id FROM webhook_lanes
	WHERE due_at <= ? AND (lease_until IS NULL OR lease_until < ?) ORDER BY due_at LIMIT ?`+lock+`)
RETURNING subscription_id, failures, in_flight_limit, probe_at`,
		token, now.Add(laneLease), now, now, n).Scan(ctx, &out)
	if err != nil && !store.IsNoRows(err) {
		return nil, err
	}
	for i := range out {
		out[i].token = token
	}
	return out, nil
}

func (d *dispatcher) startLane(ctx context.Context, c claimed) {
	d.mu.Lock()
	if _, busy := d.running[c.SubscriptionID]; busy {
		// Its previous run here is still writing its end: the lease was
		// released and taken again in between. Let that run see the new
		// deliveries; this claim's lease lapses or is released below.
		d.mu.Unlock()
		d.s.releaseLane(ctx, c.SubscriptionID, c.token, c.breaker(d.s.perSubscription))
		return
	}
	wake := workqueue.NewWake()
	d.running[c.SubscriptionID] = wake
	d.done.Add(1)
	d.mu.Unlock()
	d.runs.Add(1)
	d.s.metrics.laneRuns.Inc()
	go func() {
		defer func() {
			d.mu.Lock()
			delete(d.running, c.SubscriptionID)
			d.mu.Unlock()
			d.done.Done()
			// The lane's end may have left work due at once (deliveries
			// published while it was ending).
			d.s.wakeDispatcher()
		}()
		l := d.s.newLane(c.SubscriptionID, laneRun{until: time.Now().Add(d.s.laneRunFor), linger: laneLinger, stop: d.stop, wake: wake},
			c.breaker(d.s.perSubscription))
		l.work(ctx)
		d.s.failing.run(ctx, l.breaker, func() { d.s.releaseLane(ctx, c.SubscriptionID, c.token, l.breaker) })
	}()
}

// markDue makes the lanes of ids due at `at` (or earlier, if they already
// were; a lane whose breaker is open, openPoll later), creating them as
// needed, in tx. The rows are upserted in id order
// so concurrent callers lock them in one order.
func markDue(ctx context.Context, tx bun.IDB, ids []int64, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	ids = decodeIDs(encodeIDs(ids)) // sorted, unique
	type laneRow struct {
		bun.BaseModel  `bun:"table:webhook_lanes,alias:l"`
		SubscriptionID int64     `bun:"subscription_id,pk"`
		DueAt          time.Time `bun:"due_at"`
	}
	// A lane whose breaker is open takes its new deliveries on its own
	// schedule (lane.pollAfter), refusing them in one batch: waking it
	// per event would cost a claim, a fetch and a write per event of a
	// dead endpoint.
	openAt := at.Add(openPoll).UTC()
	rows := make([]laneRow, len(ids))
	for i, id := range ids {
		rows[i] = laneRow{SubscriptionID: id, DueAt: at}
	}
	for chunk := range slices.Chunk(rows, insertChunk) {
		_, err := tx.NewInsert().Model(&chunk).
			On("CONFLICT (subscription_id) DO UPDATE").
			Set("due_at = CASE WHEN l.failures >= ? THEN (CASE WHEN l.due_at IS NULL OR l.due_at > ? THEN ? ELSE l.due_at END) "+
				"WHEN l.due_at IS NULL OR l.due_at > EXCLUDED.due_at THEN EXCLUDED.due_at ELSE l.due_at END",
				breakerThreshold, openAt, openAt).
			Returning("NULL").Exec(ctx)
		if err != nil {
			return err
		}
	}
	return nil
}

// releaseLane ends this replica's hold on subscription id's lane: its due
// time becomes its earliest pending delivery, and its breaker is kept for
// the next run, wherever that runs. The lane's row is locked before the
// deliveries are read, so a fan-out committing meanwhile is either seen
// here or makes the lane due after this write; no delivery is left without
// a due lane. A lease that has passed to another replica is left alone.
func (s *Service) releaseLane(ctx context.Context, id int64, token string, b breaker) {
	if token == "" {
		return // a lane run by hand (tests) holds no lease
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := s.db.InTx(wctx, func(ctx context.Context, tx *store.Tx) error {
		lock := ""
		if s.db.Dialect == store.Postgres {
			lock = " FOR UPDATE"
		}
		var held []int64
		if err := tx.NewRaw("SELECT subscription_id FROM webhook_lanes WHERE subscription_id = ? AND lease_token = ?"+lock,
			id, token).Scan(ctx, &held); err != nil && !store.IsNoRows(err) {
			return err
		}
		if len(held) == 0 {
			return nil
		}
		var due []time.Time
		if err := tx.NewSelect().Model((*deliveryRow)(nil)).Column("next_attempt_at").Where("subscription_id = ?", id).
			Order("next_attempt_at").Limit(1).Scan(ctx, &due); err != nil && !store.IsNoRows(err) {
			return err
		}
		q := tx.NewUpdate().Table("webhook_lanes").Set("lease_token = NULL").Set("lease_until = NULL").
			Set("failures = ?", b.failures).Set("in_flight_limit = ?", b.limit).Where("subscription_id = ?", id)
		if b.probeAt.IsZero() {
			q = q.Set("probe_at = NULL")
		} else {
			q = q.Set("probe_at = ?", b.probeAt.UTC())
		}
		if len(due) == 0 {
			q = q.Set("due_at = NULL")
		} else {
			q = q.Set("due_at = ?", due[0].UTC())
		}
		_, err := q.Exec(ctx)
		return err
	})
	if err != nil {
		// The lease runs out and another replica takes the lane then.
		s.log.WarnContext(ctx, "webhooks: release lane", "subscription_id", id, "err", err)
	}
}

// clockUntil is how long until t on the service's clock.
func (s *Service) clockUntil(t time.Time) time.Duration { return t.Sub(s.now()) }

func newLeaseToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
