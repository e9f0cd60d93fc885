package webhooks

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/jobs"
	"github.com/chatmsg/gateway/internal/store"
)

// How a lane runs (see README, "How it runs").
const (
	// laneRunFor is how long one lane job keeps taking new deliveries; it
	// then hands over to a successor job, so the bound on a job's run
	// (and on River's rescue after a crash) stays short.
	laneRunFor = 20 * time.Second
	// laneLinger is the longest an idle lane keeps polling before it ends,
	// so a steady stream of events does not pay a job start per event. A
	// lane lingers a quarter of the time it has run (at least
	// laneLingerMin): one started for a single event gives its River worker
	// back almost at once, so many quiet subscriptions do not hold the
	// queue's workers.
	laneLinger    = time.Second
	laneLingerMin = 20 * time.Millisecond
	// lanePoll is how often a busy lane looks for new due deliveries; an
	// idle one backs off, doubling up to lanePollIdle.
	lanePoll     = 10 * time.Millisecond
	lanePollIdle = 100 * time.Millisecond
	// laneWindow × the per-subscription bound is how many deliveries a lane
	// holds (sending or waiting for a sender) at a time.
	laneWindow = 4
	// flushAfter bounds how long an outcome waits to be written with
	// others in one transaction.
	flushAfter = 10 * time.Millisecond
	// sweepEvery is how often the leader starts lanes for subscriptions
	// that have due deliveries but no lane (retries coming due, and the
	// rare event published while its lane was ending).
	sweepEvery = time.Second
)

// deliveryRow is a pending delivery: its body is built once, at publish
// time, and every attempt sends exactly these bytes.
type deliveryRow struct {
	bun.BaseModel  `bun:"table:webhook_deliveries"`
	ID             int64     `bun:"id,pk,autoincrement"`
	SubscriptionID int64     `bun:"subscription_id"`
	DeliveryID     string    `bun:"delivery_id"`
	Event          string    `bun:"event"`
	Body           string    `bun:"body"`
	Attempts       int       `bun:"attempts"`
	NextAttemptAt  time.Time `bun:"next_attempt_at"`
	CreatedAt      time.Time `bun:"created_at"`
}

func (r deliveryRow) delivery() Delivery {
	return Delivery{ID: r.DeliveryID, Event: r.Event, Body: []byte(r.Body)}
}

// LaneArgs is the job that delivers one subscription's due deliveries.
// River keeps at most one per subscription queued or running in the whole
// cluster (unique by args over available/pending/running/scheduled), which
// makes the per-subscription bound global.
type LaneArgs struct {
	SubscriptionID int64 `json:"subscription_id"`
}

// Kind implements river.JobArgs.
func (LaneArgs) Kind() string { return "webhook_lane" }

// InsertOpts: one attempt, since a lane that failed leaves its deliveries
// due and the sweep starts a fresh one; a retryable lane would run beside
// its successor.
func (LaneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueName, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByArgs: true,
		ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
			rivertype.JobStateRunning, rivertype.JobStateScheduled}}}
}

type laneWorker struct {
	river.WorkerDefaults[LaneArgs]
	s *Service
}

// Timeout covers the run, the attempts still in flight when it ends, and
// writing their outcomes; River's rescuer waits at least this long before
// it treats a lane as dead.
func (w *laneWorker) Timeout(*river.Job[LaneArgs]) time.Duration {
	return laneRunFor + AttemptTimeout + 20*time.Second
}

func (w *laneWorker) Work(ctx context.Context, job *river.Job[LaneArgs]) error {
	s, id := w.s, job.Args.SubscriptionID
	st := s.lanes.enter(id)
	if st == nil {
		return nil // this process already runs it
	}
	defer s.lanes.leave(id, st)
	s.runLane(ctx, id, laneRun{until: time.Now().Add(s.laneRunFor), linger: laneLinger, stop: s.stopping})
	s.lanes.closing(id, st)
	// Completing the job and checking for due work in one transaction: a
	// publisher that requested this lane before the completion waits on its
	// row and its deliveries are seen here; one after it inserts a new lane.
	err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if err := jobs.CompleteTx(ctx, tx, job); err != nil {
			return err
		}
		due, err := tx.NewSelect().Model((*deliveryRow)(nil)).Where("subscription_id = ?", id).
			Where("next_attempt_at <= ?", s.now().UTC()).Exists(ctx)
		if err != nil || !due {
			return err
		}
		return s.jobs.InsertMany(ctx, tx, []river.InsertManyParams{{Args: LaneArgs{SubscriptionID: id}}})
	})
	if err != nil && ctx.Err() == nil {
		// The sweep starts the next lane; River completes this one.
		s.log.WarnContext(ctx, "webhooks: hand over lane", "subscription_id", id, "err", err)
	}
	return nil
}

// laneRun shapes one run of a lane.
type laneRun struct {
	// until stops taking new deliveries (zero: never).
	until time.Time
	// linger is how long to keep polling with nothing due (zero: return
	// as soon as nothing is due).
	linger time.Duration
	// stop ends the run early (process shutting down).
	stop <-chan struct{}
}

// result is one attempt's verdict, or skipped when the lane ended before
// the attempt started.
type result struct {
	row     deliveryRow
	attempt int
	o       outcome
	skipped bool
}

// runLane delivers subscription id's due deliveries, at most
// s.perSubscription attempts at a time, and writes their outcomes in
// batches. The subscription is re-read at every fetch, so rotation,
// deletion and disabling apply to deliveries already queued.
func (s *Service) runLane(ctx context.Context, id int64, run laneRun) {
	window := s.perSubscription * laneWindow
	sem := make(chan struct{}, s.perSubscription)
	// quit tells attempts still waiting for a slot not to start: once the
	// lane is ending, only those already sending are waited for.
	quit := make(chan struct{})
	endNow := sync.OnceFunc(func() { close(quit) })
	results := make(chan result, window)
	held := map[int64]bool{} // fetched, outcome not yet written
	var done []result
	var firstDone time.Time
	var target subscriptionRow
	started, idleSince := time.Now(), time.Now()
	idlePoll := lanePoll
	ending := false
	stopped := func() bool {
		select {
		case <-run.stop:
			return true
		default:
		}
		return ctx.Err() != nil || (!run.until.IsZero() && time.Now().After(run.until))
	}
	flush := func() {
		if len(done) > 0 {
			s.recordBatch(ctx, &target, done)
			for _, r := range done {
				delete(held, r.row.ID)
			}
			done = done[:0]
		}
	}
	end := func() {
		ending = true
		endNow()
	}
	stop, ctxDone := run.stop, ctx.Done()
	var deadline <-chan time.Time
	if !run.until.IsZero() {
		t := time.NewTimer(time.Until(run.until))
		defer t.Stop()
		deadline = t.C
	}
	defer func() {
		// Attempts not started are left due for the next lane; started ones
		// finish (bounded by the attempt timeout) and are written.
		endNow()
		for len(held) > len(done) {
			r := <-results
			if r.skipped {
				delete(held, r.row.ID)
				continue
			}
			done = append(done, r)
		}
		flush()
	}()
	for {
		if !ending && stopped() {
			end()
		}
		inFlight := len(held) - len(done)
		if !ending && inFlight <= window/2 {
			t, rows, gone, err := s.fetchDue(ctx, id, held, window-inFlight)
			switch {
			case err != nil:
				if ctx.Err() == nil {
					s.log.WarnContext(ctx, "webhooks: fetch due deliveries", "subscription_id", id, "err", err)
				}
				ending = true
			case gone:
				ending = true
			default:
				target = t
				for _, row := range rows {
					held[row.ID] = true
					go s.attempt(ctx, t, row, sem, quit, results)
				}
				if len(rows) > 0 {
					idleSince, idlePoll = time.Now(), lanePoll
				}
			}
			inFlight = len(held) - len(done)
		}
		if inFlight == 0 {
			flush()
			linger := min(run.linger, max(laneLingerMin, time.Since(started)/4))
			if ending || time.Since(idleSince) >= linger {
				return
			}
			sleep(ctx, run.stop, idlePoll)
			idlePoll = min(idlePoll*2, lanePollIdle)
			continue
		}
		var poll, due <-chan time.Time
		if !ending && inFlight <= window/2 {
			poll = time.After(lanePoll)
		}
		if len(done) > 0 {
			due = time.After(time.Until(firstDone.Add(flushAfter)))
		}
		select {
		case r := <-results:
			if r.skipped {
				delete(held, r.row.ID)
				break
			}
			if len(done) == 0 {
				firstDone = time.Now()
			}
			done = append(done, r)
			if len(done) >= window/2 || len(done) == len(held) {
				flush()
			}
		case <-poll:
		case <-due:
			flush()
		case <-deadline:
			deadline = nil
			end()
		case <-stop:
			stop = nil
			end()
		case <-ctxDone:
			ctxDone = nil
			end()
		}
	}
}

// attempt makes one attempt of row once a sender slot is free, unless the
// lane ends first.
func (s *Service) attempt(ctx context.Context, t subscriptionRow, row deliveryRow, sem chan struct{}, quit <-chan struct{}, out chan<- result) {
	select {
	case sem <- struct{}{}:
	case <-quit:
		out <- result{row: row, skipped: true}
		return
	}
	defer func() { <-sem }()
	n := row.Attempts + 1
	o := s.send(ctx, t, row.delivery(), n)
	out <- result{row: row, attempt: n, o: o, skipped: o.interrupted}
}

// fetchDue re-reads the subscription and takes up to limit of its due
// deliveries not already held. A deleted or disabled subscription's pending
// deliveries are dropped: it gets no further attempt.
func (s *Service) fetchDue(ctx context.Context, id int64, held map[int64]bool, limit int) (subscriptionRow, []deliveryRow, bool, error) {
	t, err := s.loadTarget(ctx, id)
	switch {
	case store.IsNoRows(err):
		return t, nil, true, s.dropPending(ctx, id)
	case err != nil:
		return t, nil, false, err
	case !t.Enabled:
		return t, nil, true, s.dropPendingKeeping(ctx, id)
	}
	q := s.db.Bun.NewSelect().Model((*deliveryRow)(nil)).
		Where("subscription_id = ?", id).Where("next_attempt_at <= ?", s.now().UTC()).
		Order("next_attempt_at", "id").Limit(int64(limit))
	if len(held) > 0 {
		ids := make([]int64, 0, len(held))
		for k := range held {
			ids = append(ids, k)
		}
		q = q.Where("id NOT IN (?)", bun.In(ids))
	}
	var rows []deliveryRow
	if err := q.Scan(ctx, &rows); err != nil {
		return t, nil, false, err
	}
	return t, rows, false, nil
}

func (s *Service) dropPending(ctx context.Context, id int64) error {
	_, err := s.db.Bun.NewDelete().Model((*deliveryRow)(nil)).Where("subscription_id = ?", id).Exec(ctx)
	return err
}

// recordBatch writes the outcomes of done in one transaction: their log
// entries, the end of finished deliveries, the schedule of retried ones and
// the subscription's counters. It retries until written (or the worker's
// time is up), so a delivery that reached its receiver is never left
// without its log entry; if it cannot be written the deliveries stay due
// and are sent again (at least once), their entries written then.
func (s *Service) recordBatch(ctx context.Context, t *subscriptionRow, done []result) {
	now := s.now().UTC()
	logs := make([]logRow, 0, len(done))
	var finished, gaveUp []int64 // gaveUp ⊂ finished: ended without success
	retries := map[int][]int64{} // attempt made → ids
	var succeeded, failed, finals, trailing int
	for _, r := range done {
		final := !r.o.ok() && (!r.o.retryable || r.attempt >= MaxAttempts)
		entry := logRow{SubscriptionID: r.row.SubscriptionID, DeliveryID: r.row.DeliveryID, Event: r.row.Event,
			Attempt: r.attempt, StatusCode: r.o.status, Succeeded: r.o.ok(), DurationMs: r.o.duration.Milliseconds(), CreatedAt: now}
		switch {
		case r.o.ok():
			entry.DeliveredAt = &now
			finished = append(finished, r.row.ID)
			succeeded++
			trailing = 0
		case final:
			entry.Error = &r.o.message
			finished = append(finished, r.row.ID)
			gaveUp = append(gaveUp, r.row.ID)
			finals++
			trailing++
		default:
			entry.Error = &r.o.message
			next := s.nextRetryAt(r.attempt).UTC()
			entry.NextRetryAt = &next
			retries[r.attempt] = append(retries[r.attempt], r.row.ID)
			failed++
		}
		logs = append(logs, entry)
	}
	counters := s.counterUpdate(t, now, succeeded > 0, finals, trailing, failed)

	backoff := 50 * time.Millisecond
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AttemptTimeout+10*time.Second)
	defer cancel()
	for {
		err := s.db.InTx(wctx, func(ctx context.Context, tx *store.Tx) error {
			if _, err := tx.NewInsert().Model(&logs).Returning("NULL").Exec(ctx); err != nil {
				return err
			}
			if len(finished) > 0 {
				// Keep the finished events for redeliver and recover.
				if err := archiveFinished(ctx, tx, delivered(finished, gaveUp), false, now); err != nil {
					return err
				}
				if err := archiveFinished(ctx, tx, gaveUp, true, now); err != nil {
					return err
				}
				if _, err := tx.NewDelete().Model((*deliveryRow)(nil)).Where("id IN (?)", bun.In(finished)).Exec(ctx); err != nil {
					return err
				}
			}
			for attempt, ids := range retries {
				if _, err := tx.NewUpdate().Model((*deliveryRow)(nil)).Set("attempts = ?", attempt).
					Set("next_attempt_at = ?", s.nextRetryAt(attempt).UTC()).Where("id IN (?)", bun.In(ids)).Exec(ctx); err != nil {
					return err
				}
			}
			if counters != nil {
				if _, err := counters(tx).Where("id = ?", t.ID).Exec(ctx); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			s.log.ErrorContext(ctx, "webhooks: delivery outcomes not written; the deliveries will be sent again",
				"subscription_id", t.ID, "deliveries", len(done), "err", err)
			return
		}
		s.log.WarnContext(ctx, "webhooks: write delivery outcomes; retrying", "subscription_id", t.ID, "err", err)
		sleep(wctx, nil, backoff)
		backoff = min(backoff*2, 2*time.Second)
	}
	s.metrics.attempts.WithLabelValues("succeeded").Add(float64(succeeded))
	s.metrics.attempts.WithLabelValues("failed").Add(float64(finals))
	s.metrics.attempts.WithLabelValues("retry").Add(float64(failed))
	// The lane's copy follows what was written, so the next batch in the
	// same second writes nothing.
	if succeeded > 0 {
		t.FailureCount, t.LastSuccessAt = trailing, &now
	} else {
		t.FailureCount += trailing
	}
	if finals+failed > 0 {
		t.LastFailureAt = &now
	}
	if t.FailureCount >= DisableAfter && t.Enabled {
		t.Enabled = false
		s.subs.invalidate()
		s.log.Warn("webhooks: subscription disabled after consecutive failed events",
			"subscription_id", t.ID, "failure_count", t.FailureCount)
	}
}

// counterUpdate returns the subscription update of a batch, or nil when
// nothing visible changes. failure_count counts consecutive failed events:
// a success in the batch restarts it at the failed events after the last
// success (trailing); the 20th disables. last_success_at/last_failure_at
// have one-second resolution in the API, so they are rewritten at most
// once a second. CASE reads the row's values before the update on both
// engines.
func (s *Service) counterUpdate(t *subscriptionRow, now time.Time, success bool, finals, trailing, failed int) func(bun.IDB) *bun.UpdateQuery {
	sameSecond := func(p *time.Time) bool { return p != nil && p.Unix() == now.Unix() }
	touchSuccess := success && !sameSecond(t.LastSuccessAt)
	touchFailure := finals > 0 || (failed > 0 && !sameSecond(t.LastFailureAt))
	setCount := trailing > 0 || (success && t.FailureCount != 0)
	if !touchSuccess && !touchFailure && !setCount {
		return nil
	}
	return func(db bun.IDB) *bun.UpdateQuery {
		q := db.NewUpdate().Table("webhook_subscriptions")
		if touchSuccess {
			q = q.Set("last_success_at = ?", now)
		}
		if touchFailure {
			q = q.Set("last_failure_at = ?", now)
		}
		if setCount {
			count := "failure_count + ?"
			if success {
				count = "?"
			}
			q = q.Set("failure_count = "+count, trailing).
				Set("disabled_reason = CASE WHEN enabled AND "+count+" >= ? THEN ? ELSE disabled_reason END", trailing, DisableAfter, DisabledReason).
				Set("updated_at = CASE WHEN enabled AND "+count+" >= ? THEN ? ELSE updated_at END", trailing, DisableAfter, now).
				Set("enabled = CASE WHEN "+count+" >= ? THEN ? ELSE enabled END", trailing, DisableAfter, false)
		}
		return q
	}
}

// sleep waits d, or less when ctx ends or stop closes.
func sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-stop:
	}
}

// lanes tracks the lanes of this process, so publishing skips asking River
// for a lane that is already running here, and a lane never runs twice in
// one process.
type lanes struct {
	mu sync.Mutex
	// running maps a subscription to its lane here; a closing lane has
	// finished its attempts and is handing over, so a successor may start.
	running map[int64]*laneState
	// requested: a lane was asked for (by this process) at that time.
	requested map[int64]time.Time
}

type laneState struct{ closing bool }

// requestHint is how long after asking for a lane this process assumes it
// exists; the sweep covers the rare lane that ended meanwhile.
const requestHint = 200 * time.Millisecond

func newLanes() *lanes {
	return &lanes{running: map[int64]*laneState{}, requested: map[int64]time.Time{}}
}

// enter registers a lane of id; nil when one is already running here.
func (l *lanes) enter(id int64) *laneState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, ok := l.running[id]; ok && !st.closing {
		return nil
	}
	st := &laneState{}
	l.running[id] = st
	delete(l.requested, id) // the lane asked for is this one
	return st
}

// closing marks the lane as handing over: from now on publishing asks for
// a lane again, even if one was asked for a moment ago (it may have been
// this one).
func (l *lanes) closing(id int64, st *laneState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st.closing = true
	delete(l.requested, id)
}

func (l *lanes) leave(id int64, st *laneState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[id] == st {
		delete(l.running, id)
	}
}

// need returns the ids among ids that need a lane requested, and notes the
// request.
func (l *lanes) need(ids []int64) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	var out []int64
	for _, id := range ids {
		if st, ok := l.running[id]; ok && !st.closing {
			continue
		}
		if at, ok := l.requested[id]; ok && now.Sub(at) < requestHint {
			continue
		}
		l.requested[id] = now
		out = append(out, id)
	}
	if len(l.requested) > 4096 {
		for id, at := range l.requested {
			if now.Sub(at) >= requestHint {
				delete(l.requested, id)
			}
		}
	}
	return out
}

// requestLanes asks River, inside tx, for a lane for each subscription
// that has no lane known to this process.
func (s *Service) requestLanes(ctx context.Context, tx *store.Tx, ids []int64) error {
	ids = s.lanes.need(ids)
	if len(ids) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: LaneArgs{SubscriptionID: id}}
	}
	return s.jobs.InsertMany(ctx, tx, params)
}

// SweepArgs is the periodic job that starts the lanes of subscriptions
// with due deliveries: retries coming due, and deliveries whose lane ended
// (or died) before taking them.
type SweepArgs struct{}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return "webhook_lane_sweep" }

// InsertOpts: on the webhooks queue, not retried (the next sweep comes
// within a second).
func (SweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueName, MaxAttempts: 1}
}

type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	s *Service
}

func (w *sweepWorker) Timeout(*river.Job[SweepArgs]) time.Duration { return 30 * time.Second }

func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	s := w.s
	var ids []int64
	if err := s.db.Bun.NewSelect().Model((*deliveryRow)(nil)).ColumnExpr("DISTINCT subscription_id").
		Where("next_attempt_at <= ?", s.now().UTC()).Scan(ctx, &ids); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error { return s.requestLanes(ctx, tx, ids) })
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
