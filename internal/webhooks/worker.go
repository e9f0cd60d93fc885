package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/netguard"
	"github.com/chatmsg/gateway/internal/store"
)

// DeliveryWorker makes one attempt of a delivery per River job run.
//
// Outcomes map to River like this:
//   - 2xx: done.
//   - retryable failure (5xx, 408, 429, 3xx, no answer) before the last
//     attempt: a plain error, and River runs the job again at NextRetry.
//   - 4xx other than 408/429, a refused destination, or the last attempt
//     failed: JobCancel (no more attempts); the event counts as failed.
//   - subscription deleted or disabled: JobCancel, nothing sent or logged.
//   - this subscription already has its share of attempts in flight in
//     this process, or the database failed before sending: JobSnooze, which
//     River does not count as an attempt.
//
// The subscription (URL, secret, enabled) is read at every attempt, so a
// rotation, deletion or disabling applies to retries already scheduled.
type DeliveryWorker struct {
	river.WorkerDefaults[DeliveryArgs]
	s *Service
}

// DeliveryWorker returns the service's worker (tests drive it directly).
func (s *Service) DeliveryWorker() *DeliveryWorker { return &DeliveryWorker{s: s} }

// Timeout leaves room for the receiver's 10 seconds plus the database work
// around them; the job rescuer also waits at least this long before
// treating a running job as stuck.
func (w *DeliveryWorker) Timeout(*river.Job[DeliveryArgs]) time.Duration {
	return AttemptTimeout + 20*time.Second
}

// NextRetry schedules attempt n+1 after the document's delay for n.
func (w *DeliveryWorker) NextRetry(job *river.Job[DeliveryArgs]) time.Time {
	return w.s.nextRetryAt(job.Attempt)
}

func (s *Service) nextRetryAt(attempt int) time.Time {
	if attempt < 1 || attempt > len(s.delays) {
		return time.Time{} // River's default; never reached with MaxAttempts
	}
	return s.now().Add(s.delays[attempt-1])
}

var (
	errGone     = errors.New("subscription deleted")
	errDisabled = errors.New("subscription disabled")
)

// Work makes attempt job.Attempt of the delivery.
func (w *DeliveryWorker) Work(ctx context.Context, job *river.Job[DeliveryArgs]) error {
	s, a, attempt := w.s, job.Args, job.Attempt
	if attempt > MaxAttempts {
		return river.JobCancel(fmt.Errorf("attempt %d exceeds %d", attempt, MaxAttempts))
	}
	release, ok := s.slots.acquire(a.SubscriptionID)
	if !ok {
		return river.JobSnooze(snoozeDelay(job.Metadata))
	}
	defer release()

	t, err := s.loadTarget(ctx, a.SubscriptionID)
	switch {
	case store.IsNoRows(err):
		return river.JobCancel(errGone)
	case err != nil:
		s.log.WarnContext(ctx, "webhooks: load subscription", "subscription_id", a.SubscriptionID, "err", err)
		return river.JobSnooze(5 * time.Second)
	case !t.Enabled:
		return river.JobCancel(errDisabled)
	}

	o := s.send(ctx, t, a, attempt)
	if o.interrupted {
		// Shutdown cut the attempt short: no verdict, same attempt later.
		return river.JobSnooze(time.Second)
	}
	final := !o.ok() && (!o.retryable || attempt >= MaxAttempts)
	s.record(ctx, t, a, attempt, o, final)
	switch {
	case o.ok():
		s.metrics.attempts.WithLabelValues("succeeded").Inc()
		return nil
	case final:
		s.metrics.attempts.WithLabelValues("failed").Inc()
		return river.JobCancel(errors.New(o.message))
	default:
		s.metrics.attempts.WithLabelValues("retry").Inc()
		return errors.New(o.message)
	}
}

// loadTarget reads what an attempt needs, nothing more.
func (s *Service) loadTarget(ctx context.Context, id int64) (subscriptionRow, error) {
	var row subscriptionRow
	err := s.db.Bun.NewSelect().Model(&row).
		Column("id", "url", "secret", "enabled", "failure_count", "last_success_at", "last_failure_at").
		Where("id = ?", id).Limit(1).Scan(ctx)
	return row, err
}

// outcome is the verdict on one attempt.
type outcome struct {
	status   int // 0 when there was no answer
	message  string
	success  bool
	duration time.Duration
	// retryable failures get another attempt (until the last one).
	retryable bool
	// interrupted: the job's context ended (shutdown) mid-attempt.
	interrupted bool
}

func (o outcome) ok() bool { return o.success }

// send makes the HTTP attempt and classifies its result.
func (s *Service) send(ctx context.Context, t subscriptionRow, a DeliveryArgs, attempt int) outcome {
	reqCtx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	secret, err := s.signingSecret(t.Secret)
	if err != nil {
		s.log.ErrorContext(ctx, "webhooks: subscription secret unreadable", "subscription_id", t.ID, "err", err)
		return outcome{message: "signing secret unavailable", retryable: true}
	}
	req, err := NewDeliveryRequest(reqCtx, t.URL, secret, a.Delivery(), attempt, s.now())
	if err != nil {
		return outcome{message: "invalid url: " + err.Error()}
	}
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		o := outcome{duration: time.Since(start), retryable: true}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is the subscriber's own; no need to repeat it
		}
		var ne net.Error
		switch {
		case ctx.Err() != nil:
			o.interrupted = true
		case errors.Is(err, netguard.ErrBlocked):
			// Retrying cannot change where the URL points.
			o.retryable, o.message = false, err.Error()
		case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
			o.message = "timeout: no answer within 10 seconds"
		default:
			o.message = "request failed: " + err.Error()
		}
		return o
	}
	// Drain a little so the connection can be reused; the body is not used.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	o := outcome{status: resp.StatusCode, duration: time.Since(start)}
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		o.success = true
	case code >= 400 && code < 500 && code != 408 && code != 429:
		o.message = fmt.Sprintf("HTTP %d: client error, not retried", code)
	default:
		o.retryable, o.message = true, fmt.Sprintf("HTTP %d", code)
	}
	s.metrics.duration.Observe(o.duration.Seconds())
	return o
}

type logRow struct {
	bun.BaseModel  `bun:"table:webhook_delivery_log"`
	ID             int64      `bun:"id,pk,autoincrement"`
	SubscriptionID int64      `bun:"subscription_id"`
	DeliveryID     string     `bun:"delivery_id"`
	Event          string     `bun:"event"`
	Attempt        int        `bun:"attempt"`
	StatusCode     int        `bun:"status_code"`
	Succeeded      bool       `bun:"succeeded"`
	DurationMs     int64      `bun:"duration_ms"`
	Error          *string    `bun:"error"`
	DeliveredAt    *time.Time `bun:"delivered_at"`
	NextRetryAt    *time.Time `bun:"next_retry_at"`
	CreatedAt      time.Time  `bun:"created_at"`
}

// record writes the attempt's log entry and keeps the subscription's
// counters current. It never changes the delivery's outcome: a failure to
// record is logged, and the delivery goes on.
//
// The hot path is one INSERT: the subscription row is written only when
// something visible changes. last_success_at/last_failure_at have
// one-second resolution in the API, so they are rewritten at most once a
// second per subscription, and failure_count only when it is not already 0.
func (s *Service) record(ctx context.Context, t subscriptionRow, a DeliveryArgs, attempt int, o outcome, final bool) {
	now := s.now().UTC()
	entry := logRow{SubscriptionID: t.ID, DeliveryID: a.DeliveryID, Event: a.Event, Attempt: attempt,
		StatusCode: o.status, Succeeded: o.ok(), DurationMs: o.duration.Milliseconds(), CreatedAt: now}
	if o.ok() {
		entry.DeliveredAt = &now
	} else {
		msg := o.message
		entry.Error = &msg
		if !final {
			next := s.nextRetryAt(attempt).UTC()
			entry.NextRetryAt = &next
		}
	}
	if _, err := s.db.Bun.NewInsert().Model(&entry).Exec(ctx); err != nil {
		s.log.ErrorContext(ctx, "webhooks: write delivery log", "delivery_id", a.DeliveryID, "err", err)
	}

	sameSecond := func(p *time.Time) bool { return p != nil && p.Unix() == now.Unix() }
	var q *bun.UpdateQuery
	switch {
	case o.ok():
		if t.FailureCount != 0 || !sameSecond(t.LastSuccessAt) {
			q = s.db.Bun.NewUpdate().Table("webhook_subscriptions").
				Set("failure_count = 0").Set("last_success_at = ?", now)
		}
	case final:
		// One more consecutive failed event; the 20th disables. CASE reads
		// the row's values before the update on both engines.
		q = s.db.Bun.NewUpdate().Table("webhook_subscriptions").
			Set("failure_count = failure_count + 1").
			Set("last_failure_at = ?", now).
			Set("disabled_reason = CASE WHEN enabled AND failure_count + 1 >= ? THEN ? ELSE disabled_reason END", DisableAfter, DisabledReason).
			Set("updated_at = CASE WHEN enabled AND failure_count + 1 >= ? THEN ? ELSE updated_at END", DisableAfter, now).
			Set("enabled = CASE WHEN failure_count + 1 >= ? THEN ? ELSE enabled END", DisableAfter, false)
		if t.FailureCount+1 >= DisableAfter {
			s.log.WarnContext(ctx, "webhooks: subscription disabled after consecutive failed events",
				"subscription_id", t.ID, "failure_count", t.FailureCount+1)
		}
	case !sameSecond(t.LastFailureAt):
		q = s.db.Bun.NewUpdate().Table("webhook_subscriptions").Set("last_failure_at = ?", now)
	}
	if q != nil {
		if _, err := q.Where("id = ?", t.ID).Exec(ctx); err != nil {
			s.log.ErrorContext(ctx, "webhooks: update subscription counters", "subscription_id", t.ID, "err", err)
		}
	}
}

// slots bounds in-flight attempts per subscription in this process.
type slots struct {
	mu    sync.Mutex
	limit int
	used  map[int64]int
}

func newSlots(limit int) *slots { return &slots{limit: limit, used: map[int64]int{}} }

func (s *slots) acquire(id int64) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used[id] >= s.limit {
		return nil, false
	}
	s.used[id]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.used[id]--; s.used[id] <= 0 {
			delete(s.used, id)
		}
	}, true
}

// snoozeDelay backs off a job that keeps finding its subscription busy:
// 1 s, 2 s, 4 s … up to 30 s, with jitter, so a deep backlog for one slow
// receiver costs a few re-fetches rather than a busy loop.
func snoozeDelay(metadata []byte) time.Duration {
	var md struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(metadata, &md)
	d := min(time.Second<<min(md.Snoozes, 5), 30*time.Second)
	return d + rand.N(d/2+1)
}
