package webhooks

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/chatmsg/gateway/internal/jobs"
	"github.com/chatmsg/gateway/internal/store"
)

// Jobs of earlier releases that may still be queued in a database being
// upgraded. None is created any more. The workers below settle them once, so
// nothing queued before the upgrade is lost; they are removed in the release
// after the next one (CHANGELOG), by which time every queue has drained.

// DeliveryArgs is a delivery of the first design: one River job per
// delivery. Its worker moves it into the pending deliveries, keeping the
// attempts already made.
type DeliveryArgs struct {
	SubscriptionID int64  `json:"subscription_id"`
	DeliveryID     string `json:"delivery_id"`
	Event          string `json:"event"`
	Body           string `json:"body"`
}

// Kind implements river.JobArgs.
func (DeliveryArgs) Kind() string { return "webhook_delivery" }

// LaneArgs and SweepArgs are the lane and sweep jobs of the second design.
// The pending deliveries they drained are in webhook_deliveries, and the
// migration that made webhook_lanes gave each a due lane, so their workers
// only complete them.
type LaneArgs struct {
	SubscriptionID int64 `json:"subscription_id"`
}

// Kind implements river.JobArgs.
func (LaneArgs) Kind() string { return "webhook_lane" }

// SweepArgs: see LaneArgs.
type SweepArgs struct{}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return "webhook_lane_sweep" }

func addLegacyWorkers(w *river.Workers, s *Service) {
	river.AddWorker(w, &legacyDeliveryWorker{s: s})
	river.AddWorker(w, river.WorkFunc(func(context.Context, *river.Job[LaneArgs]) error { return nil }))
	river.AddWorker(w, river.WorkFunc(func(context.Context, *river.Job[SweepArgs]) error { return nil }))
}

type legacyDeliveryWorker struct {
	river.WorkerDefaults[DeliveryArgs]
	s *Service
}

func (w *legacyDeliveryWorker) Timeout(*river.Job[DeliveryArgs]) time.Duration {
	return 30 * time.Second
}

func (w *legacyDeliveryWorker) Work(ctx context.Context, job *river.Job[DeliveryArgs]) error {
	s, a := w.s, job.Args
	now := s.now().UTC()
	row := deliveryRow{SubscriptionID: a.SubscriptionID, DeliveryID: a.DeliveryID, Event: a.Event, Body: a.Body,
		Attempts: max(job.Attempt-1, 0), NextAttemptAt: now, CreatedAt: job.CreatedAt.UTC()}
	err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if _, err := tx.NewInsert().Model(&row).Returning("NULL").Exec(ctx); err != nil {
			return err
		}
		if err := jobs.CompleteTx(ctx, tx, job); err != nil {
			return err
		}
		return markDue(ctx, tx, []int64{a.SubscriptionID}, now)
	})
	if err == nil {
		s.wakeDispatcher()
	}
	return err
}
