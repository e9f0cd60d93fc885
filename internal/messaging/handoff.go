package messaging

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// A message is handed to its transport at most once per outcome. handOff
// records the hand-off on the message before the transport call; the
// outcome (Sent, Failed, or "not taken, try again") clears it. An attempt
// that finds a hand-off with no outcome (the process died, or recording
// the answer failed) knows the far side may have the message:
//
//   - a Transport that is an IDAssigner gets the message again with the
//     same external id, which its far side treats as the same message;
//   - any other (the official provider, which assigns its own ids) is not
//     called again: the message is marked outcome unknown and a receipt,
//     which echoes our message id, settles it.

// OutcomeUnknownReason is the failure_reason of a message marked outcome
// unknown (its status stays Pending until a receipt arrives).
const OutcomeUnknownReason = "Outcome unknown: the provider may have accepted the message, but its answer was lost; waiting for its receipt"

// errUnrecorded marks a send the far side accepted whose record could not
// be written, or one interrupted during the transport call: either way
// the far side may have the message and the hand-off stays open.
var errUnrecorded = errors.New("the far side may have the message; no outcome recorded")

// Record retries: a lost connection or a restarting database should not
// leave an accepted send unrecorded when a moment later would do.
const recordAttempts = 3

var recordBackoff = 100 * time.Millisecond

// handOff claims a Pending message for one hand-off to its transport and
// returns it, in one statement that is also the attempt's read. It returns
// nil when there is nothing to hand: the message is gone, no longer
// Pending, or marked outcome unknown. row.Handoffs > 1 means an earlier
// hand-off has no recorded outcome.
func (s *Service) handOff(ctx context.Context, id int64) (*messageRow, error) {
	var row messageRow
	err := store.ScanBound(ctx, s.deps.DB.Bun, `UPDATE messages SET handoffs = handoffs + 1
		WHERE id = ? AND status_id = ? AND outcome_unknown = ? RETURNING *`, []any{id, StatusPending, false}, &row)
	if store.IsNoRows(err) || (err == nil && row.ID == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, fault.Internalf(err, "hand off message %d", id)
	}
	return &row, nil
}

// release takes back a hand-off that never reached the transport, or that
// the transport refused to take for now, so that the next attempt sends
// normally. It is best effort: should it fail, the next attempt treats the
// message as possibly sent, which errs on the side of never sending twice.
func (s *Service) release(ctx context.Context, row *messageRow) {
	_, err := s.deps.DB.Bun.NewUpdate().Model((*messageRow)(nil)).Set("handoffs = CASE WHEN handoffs > 0 THEN handoffs - 1 ELSE 0 END").
		Where("id = ?", row.ID).Where("status_id = ?", StatusPending).Exec(ctx)
	if err != nil {
		s.deps.Logger.WarnContext(ctx, "could not release a message's hand-off", "message_id", row.ID, "err", err)
	}
}

// markOutcomeUnknown records that the message's earlier hand-off has no
// outcome and that it will not be sent again (see OutcomeUnknownReason).
// No event: the status does not change.
func (s *Service) markOutcomeUnknown(ctx context.Context, ch channels.Channel, row *messageRow) error {
	_, err := s.deps.DB.Bun.NewUpdate().Model((*messageRow)(nil)).
		Set("outcome_unknown = ?", true).Set("failure_reason = ?", OutcomeUnknownReason).Set("send_due_at = NULL").Set("updated_at = ?", s.deps.Now()).
		Where("id = ?", row.ID).Where("status_id = ?", StatusPending).Exec(ctx)
	if err != nil {
		return fault.Internalf(err, "mark message %d outcome unknown", row.ID)
	}
	s.metrics.delivered.WithLabelValues(ch.TypeID.Name(), "unknown").Inc()
	return nil
}

// mayResend reports whether a message whose earlier hand-off has no
// outcome may be handed to tr again: only when tr's far side takes the
// message id from us (IDAssigner), so the same message is recognised.
func mayResend(tr Transport) bool {
	_, ok := tr.(IDAssigner)
	return ok
}

// recordSent records the far side's acceptance: Sent with its id. An id
// another message of the channel holds (the far side reused it, e.g. a
// simulator restarted) goes to this message, the one the far side now
// means by it, and the other message loses it, since receipts, edits and
// revokes by that id would reach this message. Failures to write are
// retried (recordAttempts); the same id already on this message is
// success.
func (s *Service) recordSent(ctx context.Context, ch channels.Channel, row *messageRow, ext string) error {
	set := leaving{status: StatusSent, externalID: &ext}
	var takeOver func(ctx context.Context, tx *store.Tx, now time.Time) error
	return retryRecord(ctx, func() error {
		err := s.leavePending(ctx, ch, row, "sent", takeOver, set)
		if store.IsUniqueViolation(err) && takeOver == nil {
			takeOver = func(ctx context.Context, tx *store.Tx, now time.Time) error {
				res, err := tx.NewUpdate().Model((*messageRow)(nil)).Set("external_id = NULL").Set("updated_at = ?", now).Set(bumpVersion).
					Where("company_channel_id = ?", ch.ID).Where("external_id = ?", ext).Where("id <> ?", row.ID).Exec(ctx)
				if err != nil {
					return fault.Internalf(err, "release external id %s", ext)
				}
				n, _ := res.RowsAffected()
				s.deps.Logger.WarnContext(ctx, "the far side reused an external id; it now names the newest message",
					"message_id", row.ID, "external_id", ext, "previous_holders", n)
				return nil
			}
			return s.leavePending(ctx, ch, row, "sent", takeOver, set)
		}
		return err
	})
}

// retryRecord runs write up to recordAttempts times while it fails with
// anything but a domain error, waiting a little longer each time.
func retryRecord(ctx context.Context, write func() error) error {
	var err error
	for attempt := range recordAttempts {
		if attempt > 0 {
			t := time.NewTimer(recordBackoff * time.Duration(attempt*attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return errors.Join(err, ctx.Err())
			case <-t.C:
			}
		}
		if err = write(); err == nil || fault.KindOf(err) != fault.Internal {
			return err
		}
	}
	return err
}

// insertOutbound inserts a new outbound message. For a transport that is
// an IDAssigner the external id is chosen first and stored with the
// message, so every attempt hands the far side the same id; an id some
// message of the channel already holds is drawn again.
func insertOutbound(ctx context.Context, tx *store.Tx, ch channels.Channel, tr Transport, row *messageRow) error {
	ida, ok := tr.(IDAssigner)
	if !ok {
		if _, err := tx.NewInsert().Model(row).Returning("id").Exec(ctx); err != nil {
			return fault.Internalf(err, "insert message")
		}
		return nil
	}
	const draws = 3
	for range draws {
		id := ida.NewExternalID(ch)
		row.ExternalID = &id
		_, err := tx.NewInsert().Model(row).On("CONFLICT DO NOTHING").Returning("id").Exec(ctx)
		if err != nil && !store.IsNoRows(err) {
			return fault.Internalf(err, "insert message")
		}
		if row.ID != 0 {
			return nil
		}
	}
	return fault.Internalf(fmt.Errorf("%d external ids in a row already taken on channel %d", draws, ch.ID), "insert message")
}
