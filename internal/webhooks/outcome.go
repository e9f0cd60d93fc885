package webhooks

import (
	"context"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/workqueue"
)

// nextRetryAt is when the attempt after a failed attempt number attempt is
// due: the documented schedule, counted from now.
func (s *Service) nextRetryAt(attempt int) time.Time {
	if attempt < 1 || attempt > len(s.delays) {
		return s.now() // never reached with MaxAttempts
	}
	return s.now().Add(s.delays[attempt-1])
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

	// The outcomes must land: a lost write sends the batch again.
	err := workqueue.Persist(ctx, AttemptTimeout+10*time.Second, func(wctx context.Context) error {
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
		if err != nil {
			s.log.WarnContext(ctx, "webhooks: write delivery outcomes; retrying", "subscription_id", t.ID, "err", err)
		}
		return err
	})
	if err != nil {
		s.log.ErrorContext(ctx, "webhooks: delivery outcomes not written; the deliveries will be sent again",
			"subscription_id", t.ID, "deliveries", len(done), "err", err)
		return
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
