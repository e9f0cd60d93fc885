package messaging

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// The send queue is the messages table itself. A queued send is stored
// with send_due_at = now in the request's transaction, and nothing else is
// written for it: no job row. Every replica runs one queue loop that
// claims due messages in batches, one UPDATE … RETURNING for up to
// queueBatch of them; a second counts their hand-offs right before the
// transport calls (handOffClaimed), and each is worked in a slot of its
// own. A claim moves send_due_at a lease ahead, so a message whose replica died
// during the attempt comes due again by itself, and the next attempt finds
// its hand-off open if it was handed (see handoff.go). The outcome clears
// send_due_at in the UPDATE that records it.
//
// Before this, each queued send was a River job: its insert in the
// request's transaction, River's fetch, a claim of its own, and River's
// completion were four writes to two tables on top of the message's own.
// See README, "The send queue", for what it measured.
const (
	// queueBatch bounds the messages one claim takes.
	queueBatch = 100
	// queueCooldown is the least time between two claims of a busy loop:
	// a queue whose slots free one by one claims them a few at a time, not
	// with one statement each. A send accepted here waits for it at most.
	queueCooldown = 10 * time.Millisecond
	// queuePoll is how often an idle loop looks for due messages: sends
	// accepted by another replica, and retries coming due. A send accepted
	// by this replica wakes its loop at once.
	queuePoll = 250 * time.Millisecond
	// attemptTimeout bounds one attempt: a provider call with its media
	// upload.
	attemptTimeout = 2 * time.Minute
	// defaultSendLease is how far a claim moves send_due_at
	// (Options.SendLease); an attempt still running moves it on every
	// third of it (keepLease), so only a replica that died leaves its
	// message to come due again, a minute later at most, as River rescued
	// a killed worker's job before.
	defaultSendLease = time.Minute
	// recoverAttempts bounds the attempts of a synchronous send's safety
	// net.
	recoverAttempts = 3
	// queueWriteTimeout bounds the write that schedules a retry, which
	// runs even when the attempt's own context has ended (a stop).
	queueWriteTimeout = 5 * time.Second
)

// sendQueue is the queue loop of this replica: its slots, and what wakes
// it.
type sendQueue struct {
	slots chan struct{} // one token per attempt in flight
	wake  chan struct{} // a send was accepted here
	freed chan struct{} // an attempt ended

	mu       sync.Mutex
	stop     context.CancelFunc // ends the claim loop
	abort    context.CancelFunc // ends the attempts in flight
	loopDone chan struct{}
	running  sync.WaitGroup
}

func newSendQueue(slots int) *sendQueue {
	return &sendQueue{slots: make(chan struct{}, slots), wake: make(chan struct{}, 1), freed: make(chan struct{}, 1)}
}

// poke wakes the loop: a send was just queued here.
func (q *sendQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// StartQueue starts this replica's queue loop. Queued sends are sent only
// by replicas that run it; they are stored either way.
func (s *Service) StartQueue(ctx context.Context) {
	q := s.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stop != nil {
		return
	}
	loopCtx, stop := context.WithCancel(ctx)
	// Attempts outlive the loop: a stop lets them finish (StopQueue).
	attemptCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	q.stop, q.abort, q.loopDone = stop, abort, make(chan struct{})
	go s.runQueue(loopCtx, attemptCtx)
}

// StopQueue stops claiming and waits for the attempts in flight until ctx
// ends; it then cancels them (their messages stay handed, and come due
// again after their lease or the retry each one schedules) and waits for
// them to return.
func (s *Service) StopQueue(ctx context.Context) error {
	q := s.queue
	q.mu.Lock()
	stop, abort, loopDone := q.stop, q.abort, q.loopDone
	q.stop = nil
	q.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	<-loopDone
	done := make(chan struct{})
	go func() { q.running.Wait(); close(done) }()
	select {
	case <-done:
		abort()
		return nil
	case <-ctx.Done():
		abort()
		<-done
		return fmt.Errorf("send queue: attempts cut short: %w", ctx.Err())
	}
}

func (s *Service) runQueue(ctx, attemptCtx context.Context) {
	q := s.queue
	defer close(q.loopDone)
	var last time.Time
	for {
		if !pause(ctx, nil, queueCooldown-time.Since(last)) {
			return
		}
		free := cap(q.slots) - len(q.slots)
		if free == 0 {
			if !pause(ctx, q.freed, 0) {
				return
			}
			continue
		}
		want := min(free, queueBatch)
		last = time.Now()
		// A claim cut off by a stop after its commit would leave its
		// messages leased for nothing; it runs to its end instead, and
		// what it hands off is attempted (StopQueue waits for attempts).
		claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queueWriteTimeout)
		rows, err := s.claimDue(claimCtx, want)
		var batch []ready
		if err == nil {
			batch = s.handOffClaimed(claimCtx, rows)
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.deps.Logger.WarnContext(ctx, "send queue: claim failed; trying again", "err", err)
			if !pause(ctx, nil, queuePoll) {
				return
			}
			continue
		}
		for _, r := range batch {
			q.slots <- struct{}{}
			q.running.Add(1)
			go s.runAttempt(attemptCtx, r)
		}
		if len(rows) == want {
			continue // more may be due
		}
		if !pause(ctx, q.wake, queuePoll) {
			return
		}
	}
}

// pause waits until d has passed or wake fires (d <= 0: wake alone; no
// wake either: no wait at all); false when ctx ended.
func pause(ctx context.Context, wake <-chan struct{}, d time.Duration) bool {
	var timeout <-chan time.Time
	switch {
	case d > 0:
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	case wake == nil:
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-timeout:
	}
	return true
}

// claimDue claims up to n due messages in one statement: a Pending message
// not marked outcome unknown gets an attempt and its lease; any other row
// found due (it left Pending by a path that did not clear its place, e.g.
// a receipt) leaves the queue. The claim does not count the hand-off;
// handOffClaimed does, after the channel lookups and right before the
// transport calls (see there for why not here).
func (s *Service) claimDue(ctx context.Context, n int) ([]messageRow, error) {
	now := time.Now()
	set := `send_attempts = send_attempts + 1,
		send_due_at = CASE WHEN status_id = ? AND outcome_unknown = ? THEN ? ELSE NULL END`
	setArgs := []any{StatusPending, false, now.Add(s.opts.SendLease).UnixMilli()}
	dueArgs := []any{now.UnixMilli(), n}
	db := s.deps.DB.Bun
	var query string
	var args []any
	if db.Dialect().Name() == dialect.PG {
		// SKIP LOCKED: replicas claiming at once take different messages.
		query = `WITH due AS (SELECT id FROM messages WHERE send_due_at IS NOT NULL AND send_due_at <= ?
			ORDER BY send_due_at LIMIT ? FOR UPDATE SKIP LOCKED)
			UPDATE messages SET ` + set + ` FROM due WHERE messages.id = due.id
			RETURNING messages.id, messages.company_id, messages.company_channel_id, messages.status_id,
				messages.outcome_unknown, messages.send_attempts, messages.send_recover`
		args = append(dueArgs, setArgs...)
	} else {
		// One writer at a time, and one loop per process.
		query = `UPDATE messages SET ` + set + ` WHERE id IN (SELECT id FROM messages
			WHERE send_due_at IS NOT NULL AND send_due_at <= ? ORDER BY send_due_at LIMIT ?)
			RETURNING id, company_id, company_channel_id, status_id, outcome_unknown, send_attempts, send_recover`
		args = append(setArgs, dueArgs...)
	}
	var rows []messageRow
	if err := db.NewRaw(query, args...).Scan(ctx, &rows); err != nil && !store.IsNoRows(err) {
		return nil, fault.Internalf(err, "claim due sends")
	}
	return rows, nil
}

// ready is a claimed message about to be attempted: handed off with its
// channel, or a synchronous send's safety net (row.SendRecover), which
// hands itself off.
type ready struct {
	row *messageRow
	ch  channels.Channel
}

// handOffClaimed prepares what a claim took. The channels come first (from
// their cache), then one UPDATE counts the hand-off of every message still
// Pending (handOffMany), right before the transport calls: a replica that
// dies between its claim and this leaves messages that read as never
// handed, which the next claim sends. Counting the hand-off in the claim
// itself, as a first version did, widened the window between the count
// and the call, and the fault suite lost an official send to it: such a
// message reads as possibly sent, and the official channel never sends it
// again. What cannot be prepared now is scheduled again.
func (s *Service) handOffClaimed(ctx context.Context, rows []messageRow) []ready {
	var out []ready
	var ids []int64
	chs := map[int64]channels.Channel{}
	var later []int64
	for i := range rows {
		r := &rows[i]
		switch {
		case r.StatusID != StatusPending || r.OutcomeUnknown:
			continue // taken out of the queue by the claim
		case r.SendRecover:
			out = append(out, ready{row: r})
			continue
		}
		ch, err := s.deps.Channels.Get(ctx, r.CompanyID, r.CompanyChannelID)
		if fault.KindOf(err) == fault.NotFound {
			continue // the channel is gone, and its messages with it
		}
		if err != nil {
			s.deps.Logger.WarnContext(ctx, "send queue: channel lookup failed; the send waits", "message_id", r.ID, "err", err)
			later = append(later, r.ID)
			continue
		}
		chs[r.ID] = ch
		ids = append(ids, r.ID)
	}
	if len(ids) > 0 {
		handed, err := s.handOffMany(ctx, ids)
		if err != nil {
			s.deps.Logger.WarnContext(ctx, "send queue: hand-off failed; the sends wait", "messages", len(ids), "err", err)
			later = append(later, ids...)
		}
		for i := range handed {
			out = append(out, ready{row: &handed[i], ch: chs[handed[i].ID]})
		}
	}
	if len(later) > 0 {
		s.scheduleAt(ctx, later, time.Now().Add(retryDelay(1)))
	}
	return out
}

// handOffMany counts the hand-off of each message of ids still Pending and
// not marked outcome unknown, and returns them: handOff for a batch. Its
// IN list changes length with the batch, so bun's inlined form costs
// nothing that binding would save; handOff, bound, stays for the one
// message of a synchronous send.
func (s *Service) handOffMany(ctx context.Context, ids []int64) ([]messageRow, error) {
	var rows []messageRow
	err := s.deps.DB.Bun.NewRaw(`UPDATE messages SET handoffs = handoffs + 1
		WHERE id IN (?) AND status_id = ? AND outcome_unknown = ? RETURNING *`, bun.In(ids), StatusPending, false).Scan(ctx, &rows)
	if err != nil && !store.IsNoRows(err) {
		return nil, fault.Internalf(err, "hand off %d messages", len(ids))
	}
	return rows, nil
}

// scheduleAt puts Pending messages back in the queue, due at (nil: out of
// it). Should it fail, their claims' leases bring them back.
func (s *Service) scheduleAt(ctx context.Context, ids []int64, at time.Time) {
	var due *int64
	if !at.IsZero() {
		due = new(at.UnixMilli())
	}
	wctx, done := context.WithTimeout(context.WithoutCancel(ctx), queueWriteTimeout)
	defer done()
	if _, err := s.deps.DB.Bun.NewUpdate().Model((*messageRow)(nil)).Set("send_due_at = ?", due).
		Where("id IN (?)", bun.In(ids)).Where("status_id = ?", StatusPending).Where("outcome_unknown = ?", false).Exec(wctx); err != nil {
		s.deps.Logger.WarnContext(ctx, "send queue: could not schedule the next attempt; the lease will", "messages", len(ids), "err", err)
	}
}

// runAttempt works one prepared message and schedules what follows: a
// retry after a backoff while attempts remain, else nothing more (the
// message was marked, or only a receipt can settle it).
func (s *Service) runAttempt(ctx context.Context, r ready) {
	row := r.row
	q := s.queue
	defer func() {
		<-q.slots
		q.running.Done()
		select {
		case q.freed <- struct{}{}:
		default:
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	id, n, max := row.ID, row.SendAttempts, s.opts.MaxAttempts
	if row.SendRecover {
		max = recoverAttempts
	}
	release := s.keepLease(ctx, id)
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fault.Internalf(fmt.Errorf("panic: %v", p), "send message %d", id)
			}
		}()
		if row.SendRecover {
			return s.recoverSync(ctx, id)
		}
		return s.attempt(ctx, r.ch, row, n, n >= max)
	}()
	release()
	if err == nil {
		return
	}
	at := time.Time{}
	if n < max {
		at = time.Now().Add(retryDelay(n))
	} else {
		s.deps.Logger.ErrorContext(ctx, "queued send: last attempt failed; the message is no longer queued", "message_id", id, "attempt", n, "err", err)
	}
	s.scheduleAt(ctx, []int64{id}, at)
}

// keepLease moves the lease of a claimed message on every third of it while
// its attempt runs, so a slow call (up to attemptTimeout) is not taken for
// a dead replica's. The returned function ends it, and returns only once
// no renewal is being written: the retry scheduled next is not overwritten.
func (s *Service) keepLease(ctx context.Context, id int64) (release func()) {
	var mu sync.Mutex
	released := false
	lease := s.opts.SendLease
	var t *time.Timer
	t = time.AfterFunc(lease/3, func() {
		mu.Lock()
		defer mu.Unlock()
		if released {
			return
		}
		if _, err := s.deps.DB.Bun.NewUpdate().Model((*messageRow)(nil)).
			Set("send_due_at = ?", time.Now().Add(lease).UnixMilli()).
			Where("id = ?", id).Where("send_due_at IS NOT NULL").Exec(ctx); err != nil && ctx.Err() == nil {
			s.deps.Logger.WarnContext(ctx, "queued send: could not renew its lease", "message_id", id, "err", err)
		}
		t.Reset(lease / 3)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		released = true
		t.Stop()
	}
}

// retryDelay is the wait after attempt n failed: n⁴ seconds (1 s, 16 s,
// 81 s, … as River's default policy, which queued sends followed before),
// up to 10% longer so that messages failed together do not all come back
// together.
func retryDelay(n int) time.Duration {
	d := time.Duration(math.Pow(float64(max(n, 1)), 4)) * time.Second
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}
