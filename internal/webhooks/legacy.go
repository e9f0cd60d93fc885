package webhooks

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/chatmsg/gateway/internal/jobs"
	"github.com/chatmsg/gateway/internal/store"
)

// DeliveryArgs is the job of the previous design: one River job per
// delivery. None is created any more; the worker moves jobs still queued
// from before an upgrade into the pending deliveries, keeping the attempts
// already made, so they are not lost.
type DeliveryArgs struct {
	SubscriptionID int64  `json:"subscription_id"`
	DeliveryID     string `json:"delivery_id"`
	Event          string `json:"event"`
	Body           string `json:"body"`
}

// Kind implements river.JobArgs.
func (DeliveryArgs) Kind() string { return "webhook_delivery" }

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
	return s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if _, err := tx.NewInsert().Model(&row).Returning("NULL").Exec(ctx); err != nil {
			return err
		}
		if err := jobs.CompleteTx(ctx, tx, job); err != nil {
			return err
		}
		return s.requestLanes(ctx, tx, []int64{a.SubscriptionID})
	})
}
