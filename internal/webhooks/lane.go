package webhooks

import (
	"context"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/store"
)

// How a lane runs (see README, "How it runs").
const (
	// laneRunFor is how long one run of a lane keeps taking new deliveries;
	// it then releases the lane, which any replica may claim next, so lanes
	// move between replicas and a run stays well within its lease.
	laneRunFor = 20 * time.Second
	// laneLinger is the longest an idle lane keeps polling before it ends,
	// so a steady stream of events does not pay a claim per event. A lane
	// lingers a quarter of the time it has run (at least laneLingerMin).
	laneLinger    = time.Second
	laneLingerMin = 20 * time.Millisecond
	// lanePoll is how often a busy lane looks for new due deliveries; an
	// idle one backs off, doubling up to lanePollIdle.
	lanePoll     = 10 * time.Millisecond
	lanePollIdle = 100 * time.Millisecond
	openPoll     = 5 * time.Second
	// laneWindow × the attempts allowed in flight is how many deliveries a
	// lane holds (sending or waiting to be sent) at a time (lane.ahead).
	laneWindow = 4
	// flushAfter bounds how long an outcome waits to be written with
	// others in one transaction.
	flushAfter = 10 * time.Millisecond
)

// deliveryRow is a pending delivery: its body is built once, at fan-out,
// and every attempt sends exactly these bytes.
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

// laneRun shapes one run of a lane.
type laneRun struct {
	// until stops taking new deliveries (zero: never).
	until time.Time
	// linger is how long to keep polling with nothing due (zero: return
	// as soon as nothing is due).
	linger time.Duration
	// stop ends the run early (the dispatcher is stopping).
	stop <-chan struct{}
	// wake says new deliveries were queued: an idle lane looks at once.
	wake <-chan struct{}
}

// result is one attempt's verdict, or skipped when the attempt was cut off
// (shutdown) and its delivery stays due as it was.
type result struct {
	row     deliveryRow
	attempt int
	o       outcome
	skipped bool
}

// lane delivers one subscription's due deliveries: at most its breaker's
// limit in flight, outcomes written in batches. Its loop reads as steps:
// fill (fetch due deliveries), start (attempts up to the limit, or refused
// at once while the breaker is open), wait (for an outcome, a poll or a
// flush), and drain (finish what was started and write it). The
// subscription is re-read at every fill, so rotation, deletion and
// disabling apply to deliveries already queued.
type lane struct {
	s       *Service
	id      int64
	run     laneRun
	breaker breaker
	target  subscriptionRow
	nextDue time.Time // an open lane's next scheduled delivery

	queued    []deliveryRow  // fetched, not started
	held      map[int64]bool // fetched, outcome not yet written
	sending   int
	results   chan result
	done      []result // outcomes not yet written
	firstDone time.Time

	ending    bool
	started   time.Time
	idleSince time.Time
	idlePoll  time.Duration
}

func (s *Service) newLane(id int64, run laneRun, b breaker) *lane {
	now := time.Now()
	return &lane{s: s, id: id, run: run, breaker: b, held: map[int64]bool{},
		results: make(chan result, s.perSubscription), started: now, idleSince: now, idlePoll: lanePoll}
}

// work runs the lane until its run ends or nothing is left due.
func (l *lane) work(ctx context.Context) {
	defer l.drain(ctx)
	var deadline <-chan time.Time
	if !l.run.until.IsZero() {
		t := time.NewTimer(time.Until(l.run.until))
		defer t.Stop()
		deadline = t.C
	}
	for {
		if !l.ending && l.stopped(ctx) {
			l.ending = true
		}
		if !l.ending && l.wantsMore() {
			l.fill(ctx)
		}
		l.start(ctx)
		if l.sending == 0 && len(l.queued) == 0 {
			l.flush(ctx)
			if l.ending || time.Since(l.idleSince) >= l.linger() {
				return
			}
			l.idle(ctx)
			continue
		}
		if !l.wait(ctx, deadline) {
			deadline = nil
		}
	}
}

func (l *lane) stopped(ctx context.Context) bool {
	select {
	case <-l.run.stop:
		return true
	default:
	}
	return ctx.Err() != nil || (!l.run.until.IsZero() && time.Now().After(l.run.until))
}

// linger is how long an idle lane waits for more: a quarter of its run so
// far, so a lane started for one event ends almost at once.
func (l *lane) linger() time.Duration {
	return min(l.run.linger, max(laneLingerMin, time.Since(l.started)/4))
}

// idle waits for a poll, backing off while nothing comes, or for a wake-up.
func (l *lane) idle(ctx context.Context) {
	t := time.NewTimer(l.idlePoll)
	defer t.Stop()
	select {
	case <-t.C:
		l.idlePoll = min(l.idlePoll*2, lanePollIdle)
	case <-l.wake():
		l.idlePoll = lanePoll
	case <-l.run.stop:
	case <-ctx.Done():
	}
}

// wake is the doorbell of new deliveries, which a lane whose breaker is
// open does not answer: it looks on its own schedule (pollAfter), so a dead
// endpoint's events are refused in batches, not one fetch and one write
// each.
func (l *lane) wake() <-chan struct{} {
	if l.breaker.open() {
		return nil
	}
	return l.run.wake
}

// pollAfter is how long the lane waits before it looks for due
// deliveries again (new ones also wake it at once); 0 while every slot is
// taken, since an outcome frees one and the lane looks then. A lane whose
// breaker is open looks when its next delivery comes due (its retries
// keep their schedule) and otherwise every openPoll: cheap for a thousand
// of them.
func (l *lane) pollAfter() time.Duration {
	switch {
	case l.breaker.open():
		if l.nextDue.IsZero() {
			return openPoll
		}
		return min(openPoll, max(time.Millisecond, l.s.clockUntil(l.nextDue)))
	case l.sending >= l.allowed():
		return 0
	default:
		return l.idlePoll
	}
}

// window is the most deliveries the lane may hold: laneWindow for each
// attempt its bound allows in flight.
func (l *lane) window() int { return l.breaker.bound * laneWindow }

// allowed is how many attempts the breaker lets out now.
func (l *lane) allowed() int { return l.breaker.allowed(l.s.now()) }

// wantsMore: fetch again once half of what the lane may hold is free.
func (l *lane) wantsMore() bool { return len(l.queued)+l.sending <= l.ahead()/2 }

// ahead is how many deliveries the lane holds at once (sending or waiting
// to be sent): laneWindow for each attempt its breaker allows in flight, so
// a failing endpoint's lane (one attempt of up to 10 s) keeps 4 bodies in
// memory, not the 32 of a healthy one; a thousand of them held 30-60 MB
// more, which the garbage collector then scanned under its memory limit.
// An open lane refuses what it fetches at once, so it takes the whole
// window per look and keeps its refusals on schedule.
func (l *lane) ahead() int {
	if l.breaker.open() {
		return l.window()
	}
	return min(l.window(), l.breaker.limit*laneWindow)
}

// fill re-reads the subscription and fetches due deliveries not already
// held, up to the window: a rotated secret signs the very next attempt, and
// a deleted or disabled subscription's pending deliveries are dropped and
// the lane ends.
// A lane whose breaker is open also learns when its next delivery comes
// due, and looks again then rather than polling.
func (l *lane) fill(ctx context.Context) {
	l.s.failing.run(ctx, l.breaker, func() { l.fillNow(ctx) })
}

func (l *lane) fillNow(ctx context.Context) {
	// With every slot taken (an open breaker's probe in flight), nothing
	// fetched now can be sent before the next fill, which re-reads the
	// subscription first. With nothing in flight it is read even while
	// the breaker cools down, so a subscription disabled meanwhile has its
	// queue kept for recover rather than refused.
	if l.sending == 0 || l.sending < l.allowed() {
		if err := l.refreshTarget(ctx); err != nil || l.ending {
			return
		}
	}
	rows, err := l.s.fetchDue(ctx, l.id, l.held, l.ahead()-len(l.queued)-l.sending, l.breaker.failures > 0)
	if err == nil && l.breaker.open() {
		l.nextDue, err = l.s.nextDue(ctx, l.id)
	}
	if err != nil {
		if ctx.Err() == nil {
			l.s.log.WarnContext(ctx, "webhooks: fetch due deliveries", "subscription_id", l.id, "err", err)
		}
		l.ending = true
		return
	}
	for _, row := range rows {
		l.held[row.ID] = true
		l.queued = append(l.queued, row)
	}
	if len(rows) > 0 {
		l.idleSince, l.idlePoll = time.Now(), lanePoll
	} else {
		l.idlePoll = min(l.idlePoll*2, lanePollIdle)
	}
}

// refreshTarget re-reads the subscription.
func (l *lane) refreshTarget(ctx context.Context) error {
	t, err := l.s.loadTarget(ctx, l.id)
	switch {
	case store.IsNoRows(err):
		l.ending = true
		return l.s.dropPending(ctx, l.id)
	case err != nil:
		if ctx.Err() == nil {
			l.s.log.WarnContext(ctx, "webhooks: read subscription", "subscription_id", l.id, "err", err)
		}
		l.ending = true
		return err
	case !t.Enabled:
		l.ending = true
		return l.s.dropPendingKeeping(ctx, l.id)
	}
	l.target = t
	l.setBound(l.s.boundOf(t))
	return nil
}

// setBound applies the in-flight bound of the subscription's destination
// (it is known once the subscription is read, and may change with its URL).
func (l *lane) setBound(bound int) {
	if bound == l.breaker.bound {
		return
	}
	l.breaker.bound = bound
	l.breaker.limit = min(l.breaker.limit, bound)
}

// start sends queued deliveries while the breaker allows. While it is open
// only its probe is sent; the other due deliveries are refused at once, so
// their attempts keep the documented schedule instead of waiting on an
// endpoint that does not answer.
func (l *lane) start(ctx context.Context) {
	if l.ending {
		// Not started: they stay due for the lane's next run.
		for _, row := range l.queued {
			delete(l.held, row.ID)
		}
		l.queued = l.queued[:0]
		return
	}
	for len(l.queued) > 0 && l.sending < l.allowed() {
		row := l.queued[0]
		l.queued = l.queued[1:]
		l.sending++
		go l.attempt(ctx, l.target, row)
	}
	if l.breaker.open() && len(l.queued) > 0 {
		for _, row := range l.queued {
			l.record(result{row: row, attempt: row.Attempts + 1, o: outcome{message: msgCircuitOpen, retryable: true}})
		}
		clear(l.queued)
		l.queued = l.queued[:0]
	}
}

// attempt makes one attempt of row and reports it.
func (l *lane) attempt(ctx context.Context, t subscriptionRow, row deliveryRow) {
	n := row.Attempts + 1
	o := l.s.send(ctx, t, row.delivery(), n)
	l.results <- result{row: row, attempt: n, o: o, skipped: o.interrupted}
}

// wait takes the next outcome, or returns on a poll, a due flush or the
// end of the run. It reports false when the run's deadline passed.
func (l *lane) wait(ctx context.Context, deadline <-chan time.Time) bool {
	var poll, due <-chan time.Time
	var stop, ctxDone, wake <-chan struct{}
	if !l.ending {
		stop, ctxDone, wake = l.run.stop, ctx.Done(), l.wake()
		if d := l.pollAfter(); d > 0 {
			poll = time.After(d)
		}
	}
	if len(l.done) > 0 {
		due = time.After(time.Until(l.firstDone.Add(flushAfter)))
	}
	select {
	case r := <-l.results:
		l.sending--
		l.breaker.record(r.o, l.s.now(), l.s.cooldown)
		l.record(r)
		if len(l.done) >= l.window()/2 || len(l.done) == len(l.held) {
			l.flush(ctx)
		}
	case <-poll:
	case <-wake:
	case <-due:
		l.flush(ctx)
	case <-deadline:
		l.ending = true
		return false
	case <-stop:
		l.ending = true
	case <-ctxDone:
		l.ending = true
	}
	return true
}

// record keeps r to be written with the next batch.
func (l *lane) record(r result) {
	if r.skipped {
		delete(l.held, r.row.ID)
		return
	}
	if len(l.done) == 0 {
		l.firstDone = time.Now()
	}
	l.done = append(l.done, r)
}

func (l *lane) flush(ctx context.Context) {
	if len(l.done) == 0 {
		return
	}
	l.s.failing.run(ctx, l.breaker, func() { l.s.recordBatch(ctx, &l.target, l.done) })
	for _, r := range l.done {
		delete(l.held, r.row.ID)
	}
	// Cleared, so the kept array does not hold the bodies until reused.
	clear(l.done)
	l.done = l.done[:0]
}

// drain lets the attempts in flight finish (each bounded by the attempt
// timeout) and writes every outcome; deliveries never started stay due.
func (l *lane) drain(ctx context.Context) {
	l.ending = true
	l.start(ctx)
	for l.sending > 0 {
		r := <-l.results
		l.sending--
		l.breaker.record(r.o, l.s.now(), l.s.cooldown)
		l.record(r)
	}
	l.flush(ctx)
}

// fetchDue takes up to limit of subscription id's due deliveries not
// already held: retries first, then first attempts, each oldest due first.
// A retry has a documented time (within 10% of its delay) and a first
// attempt has none, so when an endpoint that times out holds its one slot
// for 10 s at a time, a retry that comes due goes next rather than behind
// every event published since; measured in noisy-webhooks, a third of the
// dead endpoints' second attempts came up to 40 s late. The partial index
// webhook_deliveries_retries_due finds the retries without reading a
// backlog of first attempts. Only a failing endpoint's lane (retriesFirst)
// pays the second query: a healthy one keeps up with what comes due, and
// the extra read per fill cost a tenth of its deliveries a second.
func (s *Service) fetchDue(ctx context.Context, id int64, held map[int64]bool, limit int, retriesFirst bool) ([]deliveryRow, error) {
	if limit <= 0 {
		return nil, nil
	}
	var exclude []int64
	for k := range held {
		exclude = append(exclude, k)
	}
	now := s.now().UTC()
	due := func(which string, limit int) ([]deliveryRow, error) {
		q := s.db.Bun.NewSelect().Model((*deliveryRow)(nil)).
			Where("subscription_id = ?", id).Where("next_attempt_at <= ?", now).
			Order("next_attempt_at", "id").Limit(int64(limit))
		if which != "" {
			q = q.Where(which)
		}
		if len(exclude) > 0 {
			q = q.Where("id NOT IN (?)", bun.In(exclude))
		}
		var rows []deliveryRow
		err := q.Scan(ctx, &rows)
		return rows, err
	}
	if !retriesFirst {
		return due("", limit)
	}
	rows, err := due("attempts > 0", limit)
	if err != nil || len(rows) == limit {
		return rows, err
	}
	first, err := due("attempts = 0", limit-len(rows))
	return append(rows, first...), err
}

// nextDue is when subscription id's next delivery not yet due comes due
// (zero when none is scheduled).
func (s *Service) nextDue(ctx context.Context, id int64) (time.Time, error) {
	var at []time.Time
	err := s.db.Bun.NewSelect().Model((*deliveryRow)(nil)).Column("next_attempt_at").
		Where("subscription_id = ?", id).Where("next_attempt_at > ?", s.now().UTC()).
		Order("next_attempt_at").Limit(1).Scan(ctx, &at)
	if err != nil || len(at) == 0 {
		return time.Time{}, err
	}
	return at[0], nil
}

func (s *Service) dropPending(ctx context.Context, id int64) error {
	_, err := s.db.Bun.NewDelete().Model((*deliveryRow)(nil)).Where("subscription_id = ?", id).Exec(ctx)
	return err
}
