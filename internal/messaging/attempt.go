package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/workqueue"
)

// The second stage of a send (after accept.go): its hand-off to the
// Transport and the call. A message is handed to its transport at most
// once per outcome. The hand-off is recorded on the message (handoffs)
// before the request that may create it at the far side; the outcome
// (outcome.go: Sent, Failed, or "not taken, try again") clears it. An
// attempt that finds a hand-off with no outcome (the process died, or
// recording the answer failed) knows the far side may have the message:
//
//   - a Transport that is an IDAssigner gets the message again with the
//     same external id, which its far side treats as the same message;
//   - any other (the official provider, which assigns its own ids) is not
//     called again: the message is marked outcome unknown and a receipt,
//     which echoes our message id, settles it.
//
// A process killed between the record and the request leaves a message
// that reads as possibly sent though it never left: lost to the official
// channel, which cannot be asked. So the record is written by the
// Transport itself (Outbound.HandOff), at the last moment: after media
// uploads and every lookup, right before the request. Attempts handing
// off together share one statement (s.handed, a group commit), so the
// moment costs a round trip, not a statement per message.

// attemptTimeout bounds one attempt: a provider call with its media upload.
const attemptTimeout = 2 * time.Minute

// recoverAfter is how long a synchronous send may take (provider call and
// media upload included) before its safety net considers it interrupted.
const recoverAfter = 15 * time.Minute

// interruptedReason is the failure reason of a sync send the safety net
// finds never handed to its transport (a handed one is outcome unknown).
const interruptedReason = "The send was interrupted before it reached the provider"

// errUnrecorded marks a send the far side accepted whose record could not
// be written, or one interrupted during the transport call: either way
// the far side may have the message and the hand-off stays open.
var errUnrecorded = errors.New("the far side may have the message; no outcome recorded")

// errNotHanded wraps the failure to record a hand-off: the Transport made
// no request, and the message is sent by a later attempt.
var errNotHanded = errors.New("the hand-off could not be recorded; nothing was sent")

// errNotPending is the hand-off of a message that left Pending (a receipt
// or the safety net got there first), or is marked outcome unknown: the
// Transport made no request, and nothing follows.
var errNotPending = errors.New("the message is no longer waiting to be sent")

// recordTimeout bounds the writes that record what a transport call said.
const recordTimeout = 10 * time.Second

// recordContext is ctx for recording a call's outcome: not ended by ctx's
// end (the attempt's timeout or a stop came with the call), bounded by
// recordTimeout.
func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
}

// sendNow is the attempt of a synchronous send, in the request: the
// hand-off, the call, and its outcome. The client hanging up must not leave
// the message half-done: the provider call (bounded by the client's own
// timeouts) and the record of its outcome run to the end. Should the
// process die first, the message's place in the queue (its safety net,
// recoverSync) finishes it.
func (s *Service) sendNow(ctx context.Context, ch channels.Channel, tr Transport, row *messageRow) (SendOutput, error) {
	ctx = context.WithoutCancel(ctx)
	res, err := s.deliver(ctx, ch, row, true)
	if errors.Is(err, errNotHanded) || errors.Is(err, errNotPending) {
		// Nothing was handed to the transport: the safety net fails it.
		return SendOutput{}, fault.Wrap(fault.Unavailable, "The message could not be sent", err)
	}
	if errors.Is(err, errUnrecorded) && res.ExternalID != "" {
		// The far side has the message: the client is told so, never a
		// 500 that invites a second send. The safety net or a receipt
		// reconciles the record.
		s.deps.Logger.ErrorContext(ctx, "sent message not recorded; left to reconcile", "message_id", row.ID, "external_id", res.ExternalID, "err", err)
		return SendOutput{MessageID: row.ID, ExternalID: res.ExternalID, Raw: res.Raw}, nil
	}
	if errors.Is(err, ErrOutcomeUnknown) {
		// Not an error for the client: a 5xx-like answer would release
		// the idempotency key and invite the resend that could duplicate
		// the message. It is marked now, so that it reads as waiting for
		// its receipt; should the mark fail, the safety net makes it.
		if !mayResend(tr) {
			if merr := s.markOutcomeUnknown(ctx, ch, row); merr != nil {
				s.deps.Logger.ErrorContext(ctx, "could not mark a send outcome unknown; left to the safety net", "message_id", row.ID, "err", merr)
			}
		}
		s.deps.Logger.WarnContext(ctx, "synchronous send has an unknown outcome", "message_id", row.ID, "err", err)
		return SendOutput{MessageID: row.ID, ExternalID: deref(row.ExternalID), OutcomeUnknown: true}, nil
	}
	if err != nil {
		return SendOutput{MessageID: row.ID}, err
	}
	return SendOutput{MessageID: row.ID, ExternalID: res.ExternalID, Raw: res.Raw}, nil
}

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

// handOffRecord is one hand-off to record: the message and the count of
// open hand-offs its attempt read. A count that moved since means another
// attempt (the safety net of a sync send) handed it meanwhile.
type handOffRecord struct {
	id     int64
	expect int
}

// handOffBatchMax bounds the hand-offs of one statement: a claim's worth.
const handOffBatchMax = queueBatch

func (s *Service) newHandOffGroup() *workqueue.Group[handOffRecord, bool] {
	return &workqueue.Group[handOffRecord, bool]{Max: handOffBatchMax, Timeout: queueWriteTimeout, Exec: s.execHandOff}
}

// execHandOff counts the hand-off of every message of the batch still
// Pending, not marked outcome unknown and with the count its attempt read,
// in one UPDATE; true for those it counted. Should the statement fail, a
// connection cut after its commit loses the answer, not the change: a
// message whose count moved reads as possibly sent, which the official
// channel never sends again, so settleHandOff reads back what was written.
func (s *Service) execHandOff(ctx context.Context, batch []handOffRecord) ([]bool, []error) {
	var q strings.Builder
	q.WriteString(`UPDATE messages SET handoffs = handoffs + 1
		WHERE id IN (?) AND status_id = ? AND outcome_unknown = ? AND handoffs = CASE id`)
	ids := make([]int64, len(batch))
	args := []any{nil, StatusPending, false}
	for i, r := range batch {
		ids[i] = r.id
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, r.id, r.expect)
	}
	args[0] = bun.In(ids)
	q.WriteString(" END RETURNING id")
	var handed []int64
	err := s.deps.DB.Bun.NewRaw(q.String(), args...).Scan(ctx, &handed)
	if err != nil && !store.IsNoRows(err) {
		s.deps.Logger.WarnContext(ctx, "send queue: hand-off failed; settling it", "messages", len(batch), "err", err)
		return s.settleHandOff(ctx, batch, err)
	}
	s.metrics.handOffBatch.Observe(float64(len(batch)))
	out := make([]bool, len(batch))
	for i, r := range batch {
		out[i] = slices.Contains(handed, r.id) // at most handOffBatchMax each
	}
	return out, nil
}

// settleHandOff finds out, after execHandOff's statement failed, whether
// its count was written anyway. A count one above the one read is this
// hand-off's own and its request has not been made: it is made now. The
// read is retried for up to a third of the lease (the database that cut
// the connection is often back by then; the claim's lease keeps the
// messages this replica's meanwhile): a message left unsettled keeps a
// count whose request was never made, and waits for a receipt that will
// not come.
func (s *Service) settleHandOff(ctx context.Context, batch []handOffRecord, cause error) ([]bool, []error) {
	ids := make([]int64, len(batch))
	for i, r := range batch {
		ids[i] = r.id
	}
	var now []messageRow
	err := workqueue.Persist(context.WithoutCancel(ctx), s.opts.SendLease/3, func(ctx context.Context) error {
		now = nil
		return s.deps.DB.Bun.NewSelect().Model(&now).Column("id", "handoffs").Where("id IN (?)", bun.In(ids)).
			Where("status_id = ?", StatusPending).Where("outcome_unknown = ?", false).Scan(ctx)
	})
	if err != nil {
		s.deps.Logger.ErrorContext(ctx, "send queue: hand-off not settled; a message whose count was written waits for a receipt", "messages", len(batch), "err", err)
		return nil, allFailed(len(batch), fmt.Errorf("%w: %w", errNotHanded, fault.Internalf(cause, "hand off %d messages", len(batch))))
	}
	count := make(map[int64]int, len(now))
	for _, r := range now {
		count[r.ID] = r.Handoffs
	}
	out, errs := make([]bool, len(batch)), make([]error, len(batch))
	for i, r := range batch {
		switch c, ok := count[r.id]; {
		case ok && c == r.expect+1:
			out[i] = true
		case ok && c == r.expect:
			errs[i] = fmt.Errorf("%w: %w", errNotHanded, fault.Internalf(cause, "hand off message %d", r.id))
		}
	}
	return out, errs
}

// handing is the hand-off of one attempt: deliver gives the Transport its
// record function (Outbound.HandOff) and reads afterwards whether the
// request may have been made.
type handing struct {
	s      *Service
	row    *messageRow
	handed bool
}

// handOff records the hand-off, once; row.Handoffs then counts it.
func (h *handing) handOff(context.Context) error {
	if h.handed {
		return nil
	}
	// execHandOff's errors already wrap errNotHanded.
	ok, err := h.s.handed.Do(handOffRecord{id: h.row.ID, expect: h.row.Handoffs})
	switch {
	case err != nil:
		return err
	case !ok:
		return errNotPending
	}
	h.handed = true
	h.row.Handoffs++
	return nil
}

// release takes back a hand-off that never reached the transport, or that
// the transport refused to take for now, so that the next attempt sends
// normally. Should it fail, the next attempt treats the message as
// possibly sent and never sends it (the official channel): a send lost.
// So it is retried through cut connections (a replica cut off the network,
// a database restart) for half the lease, which the claim's lease keeps
// this replica's alone. It sets the count back from this hand-off's own
// (row.Handoffs) only, so a retry whose first try did commit cannot undo
// an earlier hand-off too.
func (s *Service) release(ctx context.Context, row *messageRow) {
	err := workqueue.Persist(ctx, s.opts.SendLease/2, func(ctx context.Context) error {
		_, err := s.deps.DB.Bun.NewUpdate().Model((*messageRow)(nil)).Set("handoffs = ?", max(row.Handoffs-1, 0)).
			Where("id = ?", row.ID).Where("status_id = ?", StatusPending).Where("handoffs = ?", row.Handoffs).Exec(ctx)
		return err
	})
	if err != nil {
		s.deps.Logger.ErrorContext(ctx, "could not release a message's hand-off; it will read as possibly sent", "message_id", row.ID, "err", err)
	}
}

// mayResend reports whether a message whose earlier hand-off has no
// outcome may be handed to tr again: only when tr's far side takes the
// message id from us (IDAssigner), so the same message is recognised.
func mayResend(tr Transport) bool {
	_, ok := tr.(IDAssigner)
	return ok
}

// outbound rebuilds what the Transport sends from a stored message.
func (s *Service) outbound(row *messageRow) (Outbound, error) {
	out := Outbound{MessageID: row.ID, ContactKey: row.ContactKey, IsGroup: row.IsGroup, Text: row.Text}
	var media *Media
	if row.MediaPath != nil {
		m, err := s.storedMedia(row)
		if err != nil {
			return out, err
		}
		media = m
	}
	if row.Outbound != nil {
		var so storedOutbound
		if err := json.Unmarshal([]byte(*row.Outbound), &so); err != nil {
			return out, fault.Internalf(err, "decode outbound of message %d", row.ID)
		}
		if so.Template != nil {
			so.Template.HeaderMedia = media
			out.Template = so.Template
			out.Text = ""
			return out, nil
		}
	}
	out.Media = media
	return out, nil
}

// deliver hands a message to its channel's Transport and records the
// outcome (outcome.go): Sent with the external id, or Failed with the
// reason. The Transport records the hand-off right before its request
// (Outbound.HandOff); until then a failure is an ordinary one, as no
// request was made. When final is false an Unavailable error (or, before
// the hand-off, an Internal one) leaves the message Pending for a retry,
// the hand-off taken back. After the hand-off, a transport error means
// the far side did not take the message unless it wraps ErrOutcomeUnknown
// or the attempt's ctx ended during the call; those, and an accepted
// message whose record could not be written, return errUnrecorded (with
// the far side's answer, if any): the message stays handed, and is never
// sent blindly again. errNotHanded and errNotPending say no request was
// made and nothing was recorded.
func (s *Service) deliver(ctx context.Context, ch channels.Channel, row *messageRow, final bool) (SendResult, error) {
	tr := s.transport(ch.TypeID)
	if tr == nil {
		err := noTransport(ch.TypeID)
		if final {
			return SendResult{}, s.fail(ctx, ch, row, err)
		}
		return SendResult{}, err
	}
	out, err := s.outbound(row)
	if err != nil {
		return SendResult{}, err
	}
	if _, ok := tr.(IDAssigner); ok {
		out.ExternalID = deref(row.ExternalID)
	}
	h := &handing{s: s, row: row}
	out.HandOff = h.handOff
	res, err := tr.Send(ctx, ch, out)
	callCtx := ctx
	// What the call said is recorded even when the attempt's own context
	// ended with it (its timeout, a stop): within a bound of its own.
	ctx, cancel := recordContext(ctx)
	defer cancel()
	if errors.Is(err, errNotHanded) || errors.Is(err, errNotPending) {
		return SendResult{}, err
	}
	if !h.handed && (err == nil || errors.Is(err, ErrOutcomeUnknown)) {
		// A Transport that broke its contract: the far side may have the
		// message with no hand-off on record. Recorded as if handed.
		s.deps.Logger.ErrorContext(ctx, "transport made its request without recording the hand-off", "message_id", row.ID, "channel_type", ch.TypeID.Name())
		h.handed = true
	}
	if err != nil && h.handed && (callCtx.Err() != nil || errors.Is(err, ErrOutcomeUnknown) || (!final && fault.KindOf(err) == fault.Internal)) {
		// The attempt was cancelled or timed out during the call, or the
		// transport's own call went unanswered: the far side may have
		// taken the message, so the hand-off stays open. So too when the
		// transport failed on our side during the call (Internal: e.g. the
		// database connection of a call forwarded to the replica holding a
		// chat-app session was cut while it waited for the answer): the
		// message is not failed for it while attempts remain; the next one
		// resends it under its own id or marks it outcome unknown.
		return SendResult{}, fmt.Errorf("%w: no outcome from the call: %w", errUnrecorded, err)
	}
	if err != nil {
		kind := fault.KindOf(err)
		if !final && (kind == fault.Unavailable || (!h.handed && kind == fault.Internal)) {
			s.metrics.delivered.WithLabelValues(ch.TypeID.Name(), "retry").Inc()
			if h.handed {
				s.release(ctx, row)
			}
			return SendResult{}, err
		}
		s.metrics.delivered.WithLabelValues(ch.TypeID.Name(), "failed").Inc()
		return SendResult{}, s.fail(ctx, ch, row, err)
	}
	s.metrics.delivered.WithLabelValues(ch.TypeID.Name(), "sent").Inc()
	if res.ExternalID == "" {
		res.ExternalID = out.ExternalID
	}
	if res.ExternalID == "" {
		return SendResult{}, s.fail(ctx, ch, row, fault.New(fault.Unavailable, "The far side accepted the message without an id"))
	}
	if err := s.recordSent(ctx, ch, row, res.ExternalID); err != nil {
		return res, fmt.Errorf("%w: %w", errUnrecorded, err)
	}
	return res, nil
}

// attempt works one attempt of a queued send on a message of channel ch,
// as its claim returned it (the attempt's only read); the outcome is
// recorded with its event. An error means the
// attempt should be retried while attempts remain (final is the last):
// the queue schedules the retry.
func (s *Service) attempt(ctx context.Context, ch channels.Channel, row *messageRow, final bool) error {
	if row.Handoffs > 0 && !mayResend(s.transport(ch.TypeID)) {
		s.deps.Logger.WarnContext(ctx, "queued send handed before with no outcome; not sent again", "message_id", row.ID)
		return s.markOutcomeUnknown(ctx, ch, row)
	}
	_, err := s.deliver(ctx, ch, row, final)
	if err == nil || errors.Is(err, errNotPending) {
		return nil
	}
	ctx, cancel := recordContext(ctx)
	defer cancel()
	if errors.Is(err, errUnrecorded) {
		// The far side did not say whether it took the message: one that
		// would not recognise it again (no IDAssigner) is marked now, and
		// only a receipt settles it; a retry would add nothing but noise.
		if errors.Is(err, ErrOutcomeUnknown) && !mayResend(s.transport(ch.TypeID)) {
			s.deps.Logger.WarnContext(ctx, "queued send has an unknown outcome; not sent again", "message_id", row.ID, "err", err)
			return s.markOutcomeUnknown(ctx, ch, row)
		}
		// Otherwise the next attempt settles it without sending blindly;
		// after the last one, only a receipt can.
		if final {
			err = errors.Join(err, s.markOutcomeUnknown(ctx, ch, row))
		}
		return err
	}
	switch fault.KindOf(err) {
	case fault.Unavailable:
		if final {
			return nil // marked Failed by deliver
		}
		s.deps.Logger.WarnContext(ctx, "queued send will be retried", "message_id", row.ID, "attempt", row.SendAttempts, "err", err)
		return err
	case fault.Internal:
		if final {
			// Nothing will retry it any more: record the failure rather
			// than leave the message Pending for ever.
			return s.fail(ctx, ch, row, err)
		}
		return err
	}
	// A refusal (or group authorization) is final and already recorded.
	return nil
}

// recoverSync is the safety net of a synchronous send still Pending long
// after it began, run by the send queue when the message's place comes
// due. It hands the message off first, so handoffs then counts this
// hand-off too. Never handed before: the send failed before the transport
// call, and is marked Failed. Handed with no outcome: resent with its own
// id when the transport allows (IDAssigner), else marked outcome unknown.
func (s *Service) recoverSync(ctx context.Context, id int64) error {
	row, err := s.handOff(ctx, id)
	if err != nil || row == nil {
		return err
	}
	ch, err := s.deps.Channels.Get(ctx, row.CompanyID, row.CompanyChannelID)
	if fault.KindOf(err) == fault.NotFound {
		return nil
	}
	if err != nil {
		s.release(ctx, row)
		return err
	}
	switch {
	case row.Handoffs <= 1:
		if err := s.fail(ctx, ch, row, fault.New(fault.Unavailable, interruptedReason)); fault.KindOf(err) == fault.Internal {
			return err
		}
		return nil
	case mayResend(s.transport(ch.TypeID)):
		if _, err := s.deliver(ctx, ch, row, true); errors.Is(err, errUnrecorded) || fault.KindOf(err) == fault.Internal {
			return err
		}
		return nil
	}
	return s.markOutcomeUnknown(ctx, ch, row)
}
