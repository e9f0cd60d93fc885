package webhooks

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/chatmsg/gateway/internal/fault"
)

// RetentionArgs is the periodic job that prunes the delivery log.
type RetentionArgs struct{}

// Kind implements river.JobArgs.
func (RetentionArgs) Kind() string { return "webhook_log_retention" }

// InsertOpts keeps the pruning on the webhooks queue, and one at a time.
func (RetentionArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueName, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: time.Hour}}
}

type retentionWorker struct {
	river.WorkerDefaults[RetentionArgs]
	s *Service
}

func (w *retentionWorker) Timeout(*river.Job[RetentionArgs]) time.Duration { return 30 * time.Minute }

func (w *retentionWorker) Work(ctx context.Context, _ *river.Job[RetentionArgs]) error {
	n, err := w.s.PruneDeliveryLog(ctx)
	if n > 0 {
		w.s.log.InfoContext(ctx, "webhooks: pruned delivery log", "deleted", n)
	}
	return err
}

// pruneBatch bounds each DELETE so pruning never holds long locks against
// the workers appending to the log.
const pruneBatch = 5000

// PruneDeliveryLog deletes successful entries older than 7 days and failed
// ones older than 30 days (by the service clock) and returns how many; the
// events kept for redelivery are pruned by the same rule.
func (s *Service) PruneDeliveryLog(ctx context.Context) (int64, error) {
	now := s.now().UTC()
	var total int64
	for _, rule := range []struct {
		succeeded bool
		before    time.Time
	}{{true, now.Add(-SuccessRetention)}, {false, now.Add(-FailureRetention)}} {
		for {
			ids := s.db.Bun.NewSelect().Model((*logRow)(nil)).Column("id").
				Where("succeeded = ?", rule.succeeded).Where("created_at < ?", rule.before).Limit(pruneBatch)
			res, err := s.db.Bun.NewDelete().Model((*logRow)(nil)).Where("id IN (?)", ids).Exec(ctx)
			if err != nil {
				return total, fault.Internalf(err, "prune delivery log")
			}
			n, _ := res.RowsAffected()
			total += n
			if n < pruneBatch {
				break
			}
		}
	}
	// The events kept for redelivery go with their log entries.
	if err := s.pruneFinished(ctx, now); err != nil {
		return total, err
	}
	return total, s.pruneEventLog(ctx, now)
}

// pruneEventLog deletes fanned-out events older than the redelivery
// retention of delivered events: a stream resumes within that window.
func (s *Service) pruneEventLog(ctx context.Context, now time.Time) error {
	for {
		ids := s.db.Bun.NewSelect().Model((*eventRow)(nil)).Column("id").
			Where("seq IS NOT NULL").Where("created_at < ?", now.Add(-EventLogRetention)).Limit(pruneBatch)
		res, err := s.db.Bun.NewDelete().Model((*eventRow)(nil)).Where("id IN (?)", ids).Exec(ctx)
		if err != nil {
			return fault.Internalf(err, "prune event log")
		}
		if n, _ := res.RowsAffected(); n < pruneBatch {
			return nil
		}
	}
}
