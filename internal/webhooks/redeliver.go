package webhooks

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// Client-safe messages of redeliver and recover (extensions, issue 14).
const (
	msgDeliveryNotFound = "Delivery not found."
	msgDeliveryQueued   = "Delivery is already queued."
)

// finishedRow is the event of a delivery whose outcome is final, kept so it
// can be sent again (see redeliveryMigration).
type finishedRow struct {
	bun.BaseModel  `bun:"table:webhook_finished_deliveries"`
	DeliveryID     string    `bun:"delivery_id,pk"`
	SubscriptionID int64     `bun:"subscription_id"`
	Event          string    `bun:"event"`
	Body           string    `bun:"body"`
	Failed         bool      `bun:"failed"`
	FinishedAt     time.Time `bun:"finished_at"`
}

// archiveFinished copies the events of the pending deliveries ids into
// webhook_finished_deliveries, marked failed or not, before the caller
// deletes them (same transaction). A delivery id already there (an earlier
// outcome of a redelivered event) takes the new outcome. The caller
// guarantees a delivery id is pending at most once (redeliver and recover
// lock the subscription and skip pending ones), so no statement touches a
// row twice.
func archiveFinished(ctx context.Context, db bun.IDB, ids []int64, failed bool, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	return archive(ctx, db, failed, now, "id IN (?)", bun.In(ids))
}

// archive copies the pending deliveries that where selects into
// webhook_finished_deliveries (see archiveFinished).
func archive(ctx context.Context, db bun.IDB, failed bool, now time.Time, where string, args ...any) error {
	_, err := db.NewRaw(`INSERT INTO webhook_finished_deliveries (delivery_id, subscription_id, event, body, failed, finished_at)
SELECT delivery_id, subscription_id, event, body, ?, ? FROM webhook_deliveries WHERE `+where+`
ON CONFLICT (delivery_id) DO UPDATE SET failed = excluded.failed, finished_at = excluded.finished_at`,
		append([]any{failed, now}, args...)...).Exec(ctx)
	return err
}

// dropPendingKeeping deletes subscription id's pending deliveries, keeping
// their events as failed so recover can send them once the subscription is
// enabled again (a disabled subscription's queue is dropped, not sent). The
// rows are bounded by the highest id seen first, so a delivery published
// meanwhile is neither deleted unkept nor kept undeleted; however long the
// queue, it is two set statements.
func (s *Service) dropPendingKeeping(ctx context.Context, id int64) error {
	return s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		var last *int64
		if err := tx.NewSelect().Model((*deliveryRow)(nil)).ColumnExpr("MAX(id)").Where("subscription_id = ?", id).Scan(ctx, &last); err != nil {
			return err
		}
		if last == nil {
			return nil
		}
		if err := archive(ctx, tx, true, s.now().UTC(), "subscription_id = ? AND id <= ?", id, *last); err != nil {
			return err
		}
		_, err := tx.NewDelete().Model((*deliveryRow)(nil)).Where("subscription_id = ?", id).Where("id <= ?", *last).Exec(ctx)
		return err
	})
}

// lockForRequeue loads the company's subscription id inside tx and locks
// its row (an UPDATE that changes nothing takes the row lock on both
// engines), so concurrent redeliver and recover calls of one subscription
// run one after the other and never queue one delivery id twice. A disabled
// subscription is refused: its lane drops what is queued.
func (s *Service) lockForRequeue(ctx context.Context, tx *store.Tx, companyID, id int64) error {
	res, err := tx.NewUpdate().Table("webhook_subscriptions").Set("id = id").
		Where("id = ?", id).Where("company_id = ?", companyID).Exec(ctx)
	if err != nil {
		return fault.Internalf(err, "lock subscription %d", id)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fault.New(fault.NotFound, msgNotFound)
	}
	row, err := s.get(ctx, tx, companyID, id)
	if err != nil {
		return err
	}
	if !row.Enabled {
		return fault.New(fault.Rule, msgDisabled)
	}
	return nil
}

// RedeliverChannelWebhookDelivery queues the event of a finished delivery
// of subscription id again: same body and delivery id, attempts from 1, a
// fresh timestamp and signature when sent. It returns how many deliveries
// were queued (1). Errors: RateLimited, NotFound (subscription, or a
// delivery that is not a finished one of it), Rule (subscription disabled,
// or the delivery still queued).
func (s *Service) RedeliverChannelWebhookDelivery(ctx context.Context, p auth.Principal, id int64, deliveryID string) (int, error) {
	if err := s.throttle(ctx, p); err != nil {
		return 0, err
	}
	parsed, err := uuid.Parse(deliveryID)
	if err != nil {
		// The API validates the format; another caller's bad id is simply
		// not one of ours. The subscription is still checked first.
		if err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error { return s.lockForRequeue(ctx, tx, p.CompanyID, id) }); err != nil {
			return 0, err
		}
		return 0, fault.New(fault.NotFound, msgDeliveryNotFound)
	}
	deliveryID = parsed.String()
	err = s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if err := s.lockForRequeue(ctx, tx, p.CompanyID, id); err != nil {
			return err
		}
		pending, err := tx.NewSelect().Model((*deliveryRow)(nil)).
			Where("subscription_id = ?", id).Where("delivery_id = ?", deliveryID).Exists(ctx)
		if err != nil {
			return fault.Internalf(err, "look up pending delivery")
		}
		if pending {
			return fault.New(fault.Rule, msgDeliveryQueued)
		}
		var f finishedRow
		err = tx.NewSelect().Model(&f).Where("subscription_id = ?", id).Where("delivery_id = ?", deliveryID).Limit(1).Scan(ctx)
		if store.IsNoRows(err) {
			return fault.New(fault.NotFound, msgDeliveryNotFound)
		}
		if err != nil {
			return fault.Internalf(err, "look up finished delivery")
		}
		now := s.now().UTC()
		row := deliveryRow{SubscriptionID: id, DeliveryID: f.DeliveryID, Event: f.Event, Body: f.Body, NextAttemptAt: now, CreatedAt: now}
		if _, err := tx.NewInsert().Model(&row).Returning("NULL").Exec(ctx); err != nil {
			return fault.Internalf(err, "queue redelivery")
		}
		if err := markDue(ctx, tx, []int64{id}, now); err != nil {
			return fault.Internalf(err, "queue redelivery")
		}
		tx.AfterCommit(func() { s.wakeLanes([]int64{id}) })
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.metrics.queued.Inc()
	return 1, nil
}

// RecoverChannelWebhookDeliveries queues again every event of subscription
// id whose delivery failed (ended without success, or was dropped while the
// subscription was disabled) at or after since, except those queued
// already, and returns how many it queued. Errors: RateLimited, NotFound,
// Rule (subscription disabled).
func (s *Service) RecoverChannelWebhookDeliveries(ctx context.Context, p auth.Principal, id int64, since time.Time) (int, error) {
	if err := s.throttle(ctx, p); err != nil {
		return 0, err
	}
	var queued int
	err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if err := s.lockForRequeue(ctx, tx, p.CompanyID, id); err != nil {
			return err
		}
		now := s.now().UTC()
		res, err := tx.NewRaw(`INSERT INTO webhook_deliveries (subscription_id, delivery_id, event, body, attempts, next_attempt_at, created_at)
SELECT f.subscription_id, f.delivery_id, f.event, f.body, 0, ?, ? FROM webhook_finished_deliveries f
WHERE f.subscription_id = ? AND f.failed = ? AND f.finished_at >= ?
AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.subscription_id = f.subscription_id AND d.delivery_id = f.delivery_id)`,
			now, now, id, true, since.UTC()).Exec(ctx)
		if err != nil {
			return fault.Internalf(err, "queue recovered deliveries")
		}
		n, _ := res.RowsAffected()
		queued = int(n)
		if queued == 0 {
			return nil
		}
		if err := markDue(ctx, tx, []int64{id}, now); err != nil {
			return fault.Internalf(err, "queue recovered deliveries")
		}
		tx.AfterCommit(func() { s.wakeLanes([]int64{id}) })
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.metrics.queued.Add(float64(queued))
	return queued, nil
}

// RedeliverDeliveredFor is how long a delivered event stays redeliverable.
// Shorter than the log's SuccessRetention: a kept body is many times the
// size of a log row, and every delivered event is kept.
const RedeliverDeliveredFor = 3 * 24 * time.Hour

// pruneFinished deletes kept events: delivered ones after
// RedeliverDeliveredFor, failed ones after FailureRetention (with their log
// entries, so recover reaches every failure the log shows).
func (s *Service) pruneFinished(ctx context.Context, now time.Time) error {
	for _, rule := range []struct {
		failed bool
		before time.Time
	}{{false, now.Add(-RedeliverDeliveredFor)}, {true, now.Add(-FailureRetention)}} {
		for {
			ids := s.db.Bun.NewSelect().Model((*finishedRow)(nil)).Column("delivery_id").
				Where("failed = ?", rule.failed).Where("finished_at < ?", rule.before).Limit(pruneBatch)
			res, err := s.db.Bun.NewDelete().Model((*finishedRow)(nil)).Where("delivery_id IN (?)", ids).Exec(ctx)
			if err != nil {
				return fault.Internalf(err, "prune finished deliveries")
			}
			if n, _ := res.RowsAffected(); n < pruneBatch {
				break
			}
		}
	}
	return nil
}

// delivered returns the ids of finished that are not in gaveUp.
func delivered(finished, gaveUp []int64) []int64 {
	if len(gaveUp) == 0 {
		return finished
	}
	out := make([]int64, 0, len(finished)-len(gaveUp))
	for _, id := range finished {
		if !slices.Contains(gaveUp, id) {
			out = append(out, id)
		}
	}
	return out
}
