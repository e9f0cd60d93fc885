package messaging

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/workqueue"
)

// The third stage of a send (after attempt.go): the message leaves
// Pending. Every way out goes through leave, which chooses how to write:
//
//   - batched: a Sent outcome nobody listens to joins the Sent outcomes of
//     other attempts ending at the same time in one UPDATE (s.sent, a group commit);
//   - bare: any other outcome nobody listens to is one UPDATE, with no
//     transaction around it;
//   - transactional: when a subscription wants the event, or the far side
//     reused an external id another message holds, the UPDATE, that
//     message's release of the id and the event commit together.
//
// Outcome unknown is no way out: the message stays Pending, marked, until
// a receipt settles it (markOutcomeUnknown).

// OutcomeUnknownReason is the failure_reason of a message marked outcome
// unknown (its status stays Pending until a receipt arrives).
const OutcomeUnknownReason = "Outcome unknown: the provider may have accepted the message, but its answer was lost; waiting for its receipt"

// Record retries: a lost connection or a restarting database should not
// leave an accepted send unrecorded when a moment later would do.
const recordAttempts = 3

var recordBackoff = 100 * time.Millisecond

// outcome is where a message goes when it leaves Pending.
type outcome struct {
	status int
	// externalID is the far side's id when it took the message (received_at
	// is then set too).
	externalID *string
	// failureReason is why it failed.
	failureReason *string
	// takeOver: another message of the channel holds externalID (the far
	// side reused it); it loses it to this one.
	takeOver bool
}

// what names the outcome in errors.
func (o outcome) what() string {
	switch o.status {
	case StatusSent:
		return "sent"
	case StatusUnauthorized:
		return "unauthorized"
	}
	return "failed"
}

// leaveSet is what every way out of Pending sets on the message, with its
// arguments: it is no longer handed, nor outcome unknown, nor queued, and
// has the new status.
func leaveSet(now time.Time, status int) (string, []any) {
	return `updated_at = ?, ` + bumpVersion + `, handoffs = 0, outcome_unknown = ?, send_due_at = NULL, status_id = ?`,
		[]any{now, false, status}
}

// leave moves a message out of Pending as to says and publishes the
// change, choosing the write (see the top of this file); row is refreshed
// with what was written. A message no longer Pending is left as it is: a
// receipt (which carried the external id) or another attempt got there
// first.
func (s *Service) leave(ctx context.Context, ch channels.Channel, row *messageRow, to outcome) error {
	if !to.takeOver && !s.eventWanted(ctx, ch, row.CompanyID, row.MessageSourceID) {
		if to.status == StatusSent && to.externalID != nil {
			if cur, changed, err := s.writeSent(row.ID, *to.externalID); err == nil {
				if changed {
					*row = cur
				}
				return nil
			}
			// Not written with the batch: written alone below, which
			// reports why (recordSent settles a reused id).
		}
		_, err := s.leaveRow(ctx, s.deps.DB.Bun, row, to, s.deps.Now())
		return err
	}
	return s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		now := s.deps.Now()
		if to.takeOver {
			if err := s.takeExternalID(ctx, tx, ch, row, *to.externalID, now); err != nil {
				return err
			}
		}
		if changed, err := s.leaveRow(ctx, tx, row, to, now); !changed || err != nil {
			return err
		}
		return s.publish(ctx, tx, ch, row.toDomain())
	})
}

// leaveRow is one message's UPDATE … RETURNING out of Pending (its values
// bound, see store.ScanBound); false when it was no longer Pending.
func (s *Service) leaveRow(ctx context.Context, db bun.IDB, row *messageRow, to outcome, now time.Time) (bool, error) {
	var receivedAt *time.Time
	if to.externalID != nil {
		receivedAt = &now
	}
	set, args := leaveSet(now, to.status)
	var cur messageRow
	err := store.ScanBound(ctx, db, `UPDATE messages SET `+set+`,
		external_id = COALESCE(?, external_id), received_at = COALESCE(?, received_at),
		failure_reason = COALESCE(?, failure_reason)
		WHERE id = ? AND status_id = ? RETURNING *`,
		append(args, to.externalID, receivedAt, to.failureReason, row.ID, StatusPending), &cur)
	if store.IsNoRows(err) || (err == nil && cur.ID == 0) {
		return false, nil
	}
	if err != nil {
		return false, fault.Internalf(err, "mark message %d %s", row.ID, to.what())
	}
	*row = cur
	return true, nil
}

// takeExternalID takes ext from any other message of the channel that
// holds it, inside tx.
func (s *Service) takeExternalID(ctx context.Context, tx *store.Tx, ch channels.Channel, row *messageRow, ext string, now time.Time) error {
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

// recordSent records the far side's acceptance: Sent with its id. An id
// another message of the channel holds (the far side reused it, e.g. a
// simulator restarted) goes to this message, the one the far side now
// means by it, and the other message loses it, since receipts, edits and
// revokes by that id would reach this message. Failures to write are
// retried (recordAttempts); the same id already on this message is
// success.
func (s *Service) recordSent(ctx context.Context, ch channels.Channel, row *messageRow, ext string) error {
	to := outcome{status: StatusSent, externalID: &ext}
	return retryRecord(ctx, func() error {
		err := s.leave(ctx, ch, row, to)
		if store.IsUniqueViolation(err) && !to.takeOver {
			to.takeOver = true
			return s.leave(ctx, ch, row, to)
		}
		return err
	})
}

// fail marks a Pending message Failed (Unauthorized for a group refusal)
// with the reason of err, publishes the change, and returns the error the
// caller answers with: a refusal keeps its kind and details; anything else
// becomes Unavailable with the message the client sees.
func (s *Service) fail(ctx context.Context, ch channels.Channel, row *messageRow, cause error) error {
	fe := fault.As(cause)
	reason := fe.Message
	if fe.Kind == fault.Internal {
		reason = "Internal failure while sending"
	}
	if r, ok := fe.Details["reason"].(string); ok && r != "" {
		reason = r
	}
	status := StatusFailed
	if fe.Kind == fault.GroupNotAuthorized {
		status = StatusUnauthorized
	}
	err := retryRecord(ctx, func() error {
		return s.leave(ctx, ch, row, outcome{status: status, failureReason: &reason})
	})
	if err != nil {
		return err
	}
	switch fe.Kind {
	case fault.Refused, fault.Unavailable, fault.Rule, fault.GroupNotAuthorized:
		return cause
	}
	return fault.Wrap(fault.Unavailable, "The message could not be sent", cause)
}

// markOutcomeUnknown records that the message's earlier hand-off has no
// outcome and that it will not be sent again (see OutcomeUnknownReason);
// it leaves the queue. No event: the status does not change.
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

// The Sent outcomes of attempts that finish together are written by one
// UPDATE, a group commit (s.sent, workqueue.Group): alone, an outcome is
// written as soon as it would be by itself.
//
// Only the plain case goes there: a message whose company does not listen
// to the event (no transaction, no event to publish), leaving Pending for
// Sent. Anything a batch cannot settle (an external id another message
// holds, a failed statement) is left to the single-message path, which
// knows how.

// sentBatchMax bounds the messages of one statement.
const sentBatchMax = 100

// sentRecord is one Sent outcome to write: the message and its external id.
type sentRecord struct {
	id  int64
	ext string
}

// sentResult is what the statement did to one message: changed is false
// when it had already left Pending, else row is the message as written.
type sentResult struct {
	row     messageRow
	changed bool
}

func (s *Service) newSentGroup() *workqueue.Group[sentRecord, sentResult] {
	return &workqueue.Group[sentRecord, sentResult]{Max: sentBatchMax, Timeout: queueWriteTimeout, Exec: s.execSent}
}

// writeSent records message id as Sent with external id ext, together with
// whatever else is waiting. changed is false when the message had already
// left Pending (a receipt or another attempt got there first). An error
// means nothing is known to be written: the caller takes the single path.
func (s *Service) writeSent(id int64, ext string) (messageRow, bool, error) {
	r, err := s.sent.Do(sentRecord{id: id, ext: ext})
	return r.row, r.changed, err
}

// execSent runs one batch: one UPDATE … RETURNING * over every message of
// it, each given its own external id. The messages it returns were still
// Pending; the others are left as they are, as leave would.
func (s *Service) execSent(ctx context.Context, batch []sentRecord) ([]sentResult, []error) {
	now := s.deps.Now()
	set, args := leaveSet(now, StatusSent)
	var q strings.Builder
	q.WriteString(`UPDATE messages SET ` + set + `, received_at = ?, external_id = CASE id`)
	args = append(args, now)
	ids := make([]int64, len(batch))
	for i, r := range batch {
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, r.id, r.ext)
		ids[i] = r.id
	}
	q.WriteString(" END WHERE status_id = ? AND id IN (?) RETURNING *")
	args = append(args, StatusPending, bun.In(ids))
	var rows []messageRow
	err := s.deps.DB.Bun.NewRaw(q.String(), args...).Scan(ctx, &rows)
	if store.IsNoRows(err) {
		err = nil // none was Pending any more
	}
	if err != nil {
		s.deps.Logger.Warn("batched sent outcomes not written; each is written alone", "messages", len(batch), "err", err)
		return nil, allFailed(len(batch), fault.Internalf(err, "mark %d messages sent", len(batch)))
	}
	s.metrics.sentBatch.Observe(float64(len(batch)))
	byID := make(map[int64]*messageRow, len(rows))
	for i := range rows {
		byID[rows[i].ID] = &rows[i]
	}
	out := make([]sentResult, len(batch))
	for i, r := range batch {
		if row, ok := byID[r.id]; ok {
			out[i] = sentResult{row: *row, changed: true}
		}
	}
	return out, nil
}

// allFailed answers every write of a batch with err.
func allFailed(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}
