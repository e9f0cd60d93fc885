package messaging

import (
	"context"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// legacySendKind is the River job of a queued send before the send queue
// (queue.go) replaced it: {"message_id": …, "recover": …}.
const legacySendKind = "messaging.send"

// adoptLegacySends moves the queued sends a gateway of the earlier design
// left as River jobs into the send queue, and deletes the jobs: each
// message still Pending becomes due now (a synchronous send's safety net
// keeps its mark). No worker of that kind is registered any more. A job
// an old replica is still running is moved too: its message's hand-off is
// then open, and the queue's attempt never sends it blindly (attempt.go).
// It runs when the queue starts.
//
// End: once every deployment has started a gateway of this version, no
// such job is left anywhere and this function and its call go.
func (s *Service) adoptLegacySends(ctx context.Context) (int, error) {
	db := s.deps.DB
	var present bool
	query := `SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'river_job'`
	if db.Dialect == store.Postgres {
		query = `SELECT to_regclass('river_job') IS NOT NULL`
	}
	if err := db.Bun.NewRaw(query).Scan(ctx, &present); err != nil {
		return 0, fault.Internalf(err, "look for River's jobs")
	}
	if !present {
		return 0, nil
	}
	id, recover := `json_extract(args, '$.message_id')`, `COALESCE(json_extract(args, '$.recover'), 0)`
	if db.Dialect == store.Postgres {
		id, recover = `(args->>'message_id')::bigint`, `COALESCE((args->>'recover')::boolean, FALSE)`
	}
	moved := 0
	err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		var jobs []struct {
			ID      int64 `bun:"id"`
			Message int64 `bun:"message_id"`
			Recover bool  `bun:"recover"`
		}
		if err := tx.NewRaw(`SELECT id, `+id+` AS message_id, `+recover+` AS recover FROM river_job
			WHERE kind = ? AND state NOT IN ('completed', 'cancelled', 'discarded')`, legacySendKind).Scan(ctx, &jobs); err != nil && !store.IsNoRows(err) {
			return err
		}
		now := s.deps.Now().UnixMilli()
		for _, j := range jobs {
			if _, err := tx.NewUpdate().Model((*messageRow)(nil)).Set("send_due_at = ?", now).Set("send_recover = ?", j.Recover).
				Where("id = ?", j.Message).Where("status_id = ?", StatusPending).Where("outcome_unknown = ?", false).Exec(ctx); err != nil {
				return err
			}
			if _, err := tx.NewRaw(`DELETE FROM river_job WHERE id = ?`, j.ID).Exec(ctx); err != nil {
				return err
			}
			moved++
		}
		return nil
	})
	if err != nil {
		return 0, fault.Internalf(err, "move River's queued sends into the send queue")
	}
	return moved, nil
}
