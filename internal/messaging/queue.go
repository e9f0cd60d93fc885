package messaging

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/workqueue"
)

// The last stage of a send's file set (after accept, attempt and outcome):
// the send queue, which runs the attempts of queued sends and the safety
// nets of synchronous ones.
//
// The queue is the messages table itself. A queued send is stored with
// send_due_at = now (accept.go), and nothing else is written for it. Every
// replica runs one queue loop that claims due messages in batches, one
// UPDATE … RETURNING for up to queueBatch of them, and each is worked in a
// slot of its own; its hand-off is counted by its transport right before
// the request (attempt.go). A claim moves send_due_at a lease ahead, so
// a message whose replica died during the attempt comes due again by
// itself, and the next attempt finds its hand-off open if it was handed
// (attempt.go). The outcome clears send_due_at in the UPDATE that records
// it (outcome.go).
//
// The slots are shared fairly: one sender (a company's channel) holds at
// most its share of them (Options.SendShare), and a claim takes due
// messages one per sender in turn, skipping senders whose share is full.
// A sender whose provider stalls holds its share until the calls time out
// (attemptTimeout); the rest of its backlog waits in the table, due, and
// every other sender's messages are claimed past it.
//
// Every time the queue writes or compares is the service's clock
// (Deps.Now); only the loop's pauses are real timers.
const (
	// queueBatch bounds the messages one claim takes.
	queueBatch = 100
	// queueCooldown is the least time between two claims of a busy loop:
	// a queue whose slots free one by one claims them a few at a time, not
	// with one statement each. A send accepted here waits for it at most.
	queueCooldown = 10 * time.Millisecond
	// queuePoll is how often an idle loop looks for due messages (sends
	// accepted by another replica, retries coming due) and how often the
	// leases of attempts in flight are looked at. A send accepted by this
	// replica wakes its loop at once.
	queuePoll = 250 * time.Millisecond
	// defaultSendLease is how far a claim moves send_due_at
	// (Options.SendLease); an attempt still running has it moved on every
	// third of it (keepLeases), so only a replica that died leaves its
	// message to come due again, a minute later at most.
	defaultSendLease = time.Minute
	// defaultSendShare is Options.SendShare's default (config's
	// SEND_SLOTS_PER_SENDER explains it).
	defaultSendShare = 16
	// recoverAttempts bounds the attempts of a synchronous send's safety
	// net.
	recoverAttempts = 3
	// queueWriteTimeout bounds the write that schedules a retry, which
	// runs even when the attempt's own context has ended (a stop).
	queueWriteTimeout = 5 * time.Second
)

// sendQueue is the queue loop of this replica: its slots, who holds them,
// and what wakes it.
type sendQueue struct {
	workers int            // slots
	share   int            // slots one sender may hold
	wake    workqueue.Wake // a send was queued here
	freed   workqueue.Wake // an attempt gave its slot back

	mu       sync.Mutex
	busy     int                    // attempts in flight
	bySender map[int64]int          // attempts in flight per sender
	leases   map[int64]*attemptInfo // attempts in flight per message

	life      sync.Mutex
	stop      context.CancelFunc // ends the claim loop
	abort     context.CancelFunc // ends the attempts in flight
	loopDone  chan struct{}
	leaseDone chan struct{}
	running   sync.WaitGroup
}

// attemptInfo is an attempt in flight, as keepLeases sees it.
type attemptInfo struct {
	mu        sync.Mutex
	ended     bool
	renewedAt time.Time
}

func newSendQueue(workers, share int) *sendQueue {
	return &sendQueue{workers: workers, share: min(share, workers), wake: workqueue.NewWake(), freed: workqueue.NewWake(),
		bySender: map[int64]int{}, leases: map[int64]*attemptInfo{}}
}

// poke wakes the loop: a send was just queued here.
func (q *sendQueue) poke() { q.wake.Ring() }

// room is what the next claim may take: free slots, and the slots each
// sender with attempts in flight holds.
func (q *sendQueue) room() (free int, held map[int64]int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.workers - q.busy, maps.Clone(q.bySender)
}

// begin takes a slot for message id of sender.
func (q *sendQueue) begin(sender, id int64, now time.Time) *attemptInfo {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.busy++
	q.bySender[sender]++
	a := &attemptInfo{renewedAt: now}
	q.leases[id] = a
	return a
}

// end gives the slot back and wakes a loop waiting for one.
func (q *sendQueue) end(sender, id int64) {
	q.mu.Lock()
	q.busy--
	if q.bySender[sender]--; q.bySender[sender] <= 0 {
		delete(q.bySender, sender)
	}
	delete(q.leases, id)
	q.mu.Unlock()
	q.freed.Ring()
}

// StartQueue starts this replica's queue loop. Queued sends are sent only
// by replicas that run it; they are stored either way.
func (s *Service) StartQueue(ctx context.Context) {
	q := s.queue
	q.life.Lock()
	defer q.life.Unlock()
	if q.stop != nil {
		return
	}
	loopCtx, stop := context.WithCancel(ctx)
	// Attempts outlive the loop: a stop lets them finish (StopQueue).
	attemptCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	q.stop, q.abort, q.loopDone, q.leaseDone = stop, abort, make(chan struct{}), make(chan struct{})
	go s.runQueue(loopCtx, attemptCtx)
	go s.keepLeases(attemptCtx)
}

// StopQueue stops claiming and waits for the attempts in flight until ctx
// ends; it then cancels them (their messages stay handed, and come due
// again after their lease or the retry each one schedules) and waits for
// them to return.
func (s *Service) StopQueue(ctx context.Context) error {
	q := s.queue
	q.life.Lock()
	stop, abort, loopDone, leaseDone := q.stop, q.abort, q.loopDone, q.leaseDone
	q.stop = nil
	q.life.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	<-loopDone
	done := make(chan struct{})
	go func() { q.running.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("send queue: attempts cut short: %w", ctx.Err())
	}
	abort()
	<-done
	<-leaseDone
	return err
}

func (s *Service) runQueue(ctx, attemptCtx context.Context) {
	q := s.queue
	defer close(q.loopDone)
	if n, err := s.adoptLegacySends(ctx); err != nil {
		s.deps.Logger.WarnContext(ctx, "send queue: River's queued sends of the earlier design not moved; tried again at the next start", "err", err)
	} else if n > 0 {
		s.deps.Logger.InfoContext(ctx, "send queue: moved River's queued sends of the earlier design into the send queue", "sends", n)
	}
	// cooldown fires queueCooldown after the last claim: the next one
	// waits for it.
	var cooldown <-chan time.Time
	for {
		if cooldown != nil {
			select {
			case <-ctx.Done():
				return
			case <-cooldown:
			}
			cooldown = nil
		}
		free, held := q.room()
		if free == 0 {
			if !workqueue.Pause(ctx, queuePoll, q.freed) {
				return
			}
			continue
		}
		want := min(free, queueBatch)
		// A claim cut off by a stop after its commit would leave its
		// messages leased for nothing; it runs to its end instead, and
		// what it hands off is attempted (StopQueue waits for attempts).
		claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queueWriteTimeout)
		rows, shareBound, err := s.claimDue(claimCtx, want, held)
		var batch []ready
		if err == nil {
			batch = s.prepareClaimed(claimCtx, rows)
		}
		cancel()
		cooldown = time.After(queueCooldown)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.deps.Logger.WarnContext(ctx, "send queue: claim failed; trying again", "err", err)
			if !workqueue.Pause(ctx, queuePoll) {
				return
			}
			continue
		}
		now := s.deps.Now()
		for _, r := range batch {
			info := q.begin(r.row.CompanyChannelID, r.row.ID, now)
			q.running.Add(1)
			go func() { _ = s.runAttempt(attemptCtx, r, info) }()
		}
		if len(rows) == want {
			continue // more may be due
		}
		// A sender at its share may have more due: a slot it frees is
		// worth a claim.
		var freed workqueue.Wake
		if shareBound {
			freed = q.freed
		}
		if !workqueue.Pause(ctx, queuePoll, q.wake, freed) {
			return
		}
	}
}

// claimDue claims up to n due messages in one statement, fairly: senders
// are taken one message each in turn (the oldest due first within a
// turn), a sender holding its share of the slots (held) is skipped, and
// one holding part of it gets only the rest. A Pending message not marked
// outcome unknown gets an attempt and its lease; any other row found due
// (it left Pending by a path that did not clear its place, e.g. a receipt)
// leaves the queue. The claim does not count the hand-off; the transport
// does, right before its request (attempt.go).
//
// shareBound reports that some sender was held back by its share (skipped,
// or given all the room it had left): it may have more due.
//
// The senders with queued messages are found by a skip scan of the
// (company_channel_id, send_due_at) index, one probe per sender, and each
// sender's due messages by a range of it, at most a share each: the cost
// follows the senders, not the backlog a stalled one leaves.
func (s *Service) claimDue(ctx context.Context, n int, held map[int64]int) (rows []messageRow, shareBound bool, err error) {
	q := s.queue
	now := s.deps.Now()
	var full []int64
	room := map[int64]int{}
	for sender, h := range held {
		if h >= q.share {
			full = append(full, sender)
		} else {
			room[sender] = q.share - h
		}
	}
	slices.Sort(full)
	// Each sender's due messages, at most a share: on PostgreSQL a LATERAL
	// subquery, locked so that replicas claiming at once take different
	// messages; SQLite (one writer) plans the correlated list as well.
	offered := `SELECT o.id, o.company_channel_id, o.send_due_at FROM senders JOIN messages AS o ON o.id IN (
				SELECT d.id FROM messages AS d WHERE d.company_channel_id = senders.ch AND d.send_due_at IS NOT NULL AND d.send_due_at <= ?
				ORDER BY d.send_due_at LIMIT ?)
			WHERE senders.ch NOT IN (?)`
	if s.deps.DB.Bun.Dialect().Name() == dialect.PG {
		offered = `SELECT o.id, o.company_channel_id, o.send_due_at FROM senders CROSS JOIN LATERAL (
				SELECT d.id, d.company_channel_id, d.send_due_at FROM messages AS d
				WHERE d.company_channel_id = senders.ch AND d.send_due_at IS NOT NULL AND d.send_due_at <= ?
				ORDER BY d.send_due_at LIMIT ? FOR UPDATE SKIP LOCKED) AS o
			WHERE senders.ch NOT IN (?)`
	}
	// The arguments in the order of the statement's placeholders: the
	// offer, the claim's SET, the turn limit, the batch.
	args := []any{now.UnixMilli(), q.share, bun.In(append(full, 0)), StatusPending, false, now.Add(s.opts.SendLease).UnixMilli()}
	turnLimit := "?"
	if len(room) > 0 {
		var b strings.Builder
		b.WriteString("CASE company_channel_id")
		for _, sender := range slices.Sorted(maps.Keys(room)) {
			b.WriteString(" WHEN ? THEN ?")
			args = append(args, sender, room[sender])
		}
		b.WriteString(" ELSE ? END")
		turnLimit = b.String()
	}
	args = append(args, q.share, n)
	query := `WITH RECURSIVE senders (ch) AS (
			SELECT min(company_channel_id) FROM messages WHERE send_due_at IS NOT NULL
			UNION ALL
			SELECT (SELECT min(m.company_channel_id) FROM messages AS m WHERE m.send_due_at IS NOT NULL AND m.company_channel_id > senders.ch)
			FROM senders WHERE senders.ch IS NOT NULL
		), offered AS (` + offered + `
		), turns AS (
			SELECT id, company_channel_id, send_due_at,
				row_number() OVER (PARTITION BY company_channel_id ORDER BY send_due_at, id) AS turn
			FROM offered
		)
		UPDATE messages SET send_attempts = send_attempts + 1,
			send_due_at = CASE WHEN status_id = ? AND outcome_unknown = ? THEN ? ELSE NULL END
		WHERE id IN (SELECT id FROM turns WHERE turn <= ` + turnLimit + ` ORDER BY turn, send_due_at, id LIMIT ?)
		RETURNING *`
	if err := s.deps.DB.Bun.NewRaw(query, args...).Scan(ctx, &rows); err != nil && !store.IsNoRows(err) {
		return nil, false, fault.Internalf(err, "claim due sends")
	}
	got := map[int64]int{}
	for _, r := range rows {
		got[r.CompanyChannelID]++
	}
	shareBound = len(full) > 0
	for sender, c := range got {
		limit := q.share
		if r, ok := room[sender]; ok {
			limit = r
		}
		if c >= limit {
			shareBound = true
		}
	}
	return rows, shareBound, nil
}

// ready is a claimed message about to be attempted with its channel, or
// a synchronous send's safety net (row.SendRecover), which finds its own.
type ready struct {
	row *messageRow
	ch  channels.Channel
}

// prepareClaimed finds the channels of what a claim took (from their
// cache). A message whose channel cannot be read now is scheduled again.
func (s *Service) prepareClaimed(ctx context.Context, rows []messageRow) []ready {
	var out []ready
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
		out = append(out, ready{row: r, ch: ch})
	}
	if len(later) > 0 {
		s.scheduleAt(ctx, later, s.deps.Now().Add(retryDelay(1)))
	}
	return out
}

// scheduleAt puts Pending messages back in the queue, due at (zero: out of
// it), retrying the write for queueWriteTimeout. Should it fail, their
// claims' leases bring them back.
func (s *Service) scheduleAt(ctx context.Context, ids []int64, at time.Time) {
	var due *int64
	if !at.IsZero() {
		due = new(at.UnixMilli())
	}
	err := workqueue.Persist(ctx, queueWriteTimeout, func(ctx context.Context) error {
		_, err := s.deps.DB.Bun.NewUpdate().Model((*messageRow)(nil)).Set("send_due_at = ?", due).
			Where("id IN (?)", bun.In(ids)).Where("status_id = ?", StatusPending).Where("outcome_unknown = ?", false).Exec(ctx)
		return err
	})
	if err != nil {
		s.deps.Logger.WarnContext(ctx, "send queue: could not schedule the next attempt; the lease will", "messages", len(ids), "err", err)
	}
}

// runAttempt works one prepared message in its slot and schedules what
// follows: a retry after a backoff while attempts remain, else nothing
// more (the message was marked, or only a receipt can settle it). It
// returns the attempt's error (nil: nothing follows).
func (s *Service) runAttempt(ctx context.Context, r ready, info *attemptInfo) error {
	row := r.row
	q := s.queue
	defer func() {
		q.end(row.CompanyChannelID, row.ID)
		q.running.Done()
	}()
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	id, n, last := row.ID, row.SendAttempts, s.opts.MaxAttempts
	if row.SendRecover {
		last = recoverAttempts
	}
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fault.Internalf(fmt.Errorf("panic: %v", p), "send message %d", id)
			}
		}()
		if row.SendRecover {
			return s.recoverSync(ctx, id)
		}
		return s.attempt(ctx, r.ch, row, n >= last)
	}()
	// From here no lease renewal is written: the retry scheduled next is
	// not overwritten.
	info.mu.Lock()
	info.ended = true
	info.mu.Unlock()
	if err == nil {
		return nil
	}
	at := time.Time{}
	if n < last {
		at = s.deps.Now().Add(retryDelay(n))
	} else {
		s.deps.Logger.ErrorContext(ctx, "queued send: last attempt failed; the message is no longer queued", "message_id", id, "attempt", n, "err", err)
	}
	s.scheduleAt(ctx, []int64{id}, at)
	return err
}

// WorkDue is one turn of the queue loop run by hand, for a replica whose
// loop is not running (tests, and tools that drain a queue): it claims what
// is due now, as the loop would, works it in this replica's slots, and
// returns once those attempts ended, with each attempt's error by message
// (nil: nothing follows; an error: retried later while attempts remain).
func (s *Service) WorkDue(ctx context.Context) (map[int64]error, error) {
	q := s.queue
	free, held := q.room()
	rows, _, err := s.claimDue(ctx, min(free, queueBatch), held)
	if err != nil {
		return nil, err
	}
	batch := s.prepareClaimed(ctx, rows)
	out := make(map[int64]error, len(batch))
	var mu sync.Mutex
	var wg sync.WaitGroup
	now := s.deps.Now()
	for _, r := range batch {
		info := q.begin(r.row.CompanyChannelID, r.row.ID, now)
		q.running.Add(1)
		wg.Go(func() {
			err := s.runAttempt(ctx, r, info)
			mu.Lock()
			out[r.row.ID] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return out, nil
}

// keepLeases moves on the lease of every attempt in flight whose lease was
// last moved a third of it ago, so a slow call (up to attemptTimeout) is
// not taken for a dead replica's; it looks every queuePoll, and runs until
// the queue stopped and its attempts ended.
func (s *Service) keepLeases(ctx context.Context) {
	q := s.queue
	defer close(q.leaseDone)
	for workqueue.Pause(ctx, queuePoll) {
		s.renewLeases(ctx)
	}
}

// renewLeases writes the renewals due now, in one statement. Each attempt
// renewed is held (its info locked) while the statement runs, so one that
// ends meanwhile schedules its retry after it.
func (s *Service) renewLeases(ctx context.Context) {
	q := s.queue
	now := s.deps.Now()
	lease := s.opts.SendLease
	q.mu.Lock()
	var ids []int64
	var held []*attemptInfo
	for id, info := range q.leases {
		if now.Sub(info.renewedAt) >= lease/3 {
			ids = append(ids, id)
			held = append(held, info)
		}
	}
	q.mu.Unlock()
	var live []int64
	var locked []*attemptInfo
	for i, info := range held {
		info.mu.Lock()
		if info.ended {
			info.mu.Unlock()
			continue
		}
		live = append(live, ids[i])
		locked = append(locked, info)
	}
	defer func() {
		for _, info := range locked {
			info.mu.Unlock()
		}
	}()
	if len(live) == 0 {
		return
	}
	_, err := s.deps.DB.Bun.NewUpdate().Model((*messageRow)(nil)).Set("send_due_at = ?", now.Add(lease).UnixMilli()).
		Where("id IN (?)", bun.In(live)).Where("send_due_at IS NOT NULL").Exec(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.deps.Logger.WarnContext(ctx, "send queue: could not renew leases", "messages", len(live), "err", err)
		}
		return
	}
	for _, info := range locked {
		info.renewedAt = now
	}
}

// retryDelay is the wait after attempt n failed: n⁴ seconds (1 s, 16 s,
// 81 s, …), up to 10% longer so that messages failed together do not all
// come back together.
func retryDelay(n int) time.Duration {
	return workqueue.Jitter(time.Duration(math.Pow(float64(max(n, 1)), 4))*time.Second, 0.1)
}
