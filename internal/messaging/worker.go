package messaging

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
)

// SendArgs is the River job of a queued send.
type SendArgs struct {
	MessageID int64 `json:"message_id"`
	// Recover marks the safety net of a synchronous send (recoverSync): if
	// the message is still Pending when it runs (the process died between
	// storing the message and recording the far side's answer), it is
	// marked Falha when it was never handed to the transport; a hand-off
	// with no outcome is resent only with its own id (IDAssigner), else
	// marked outcome unknown. A blind resend could duplicate a message the
	// provider accepted.
	Recover bool `json:"recover,omitempty"`
}

// recoverAfter is how long a synchronous send may take (provider call and
// media upload included) before its safety net considers it interrupted.
const recoverAfter = 15 * time.Minute

// interruptedReason is the failure reason of a sync send the safety net
// finds never handed to its transport (a handed one is outcome unknown).
const interruptedReason = "The send was interrupted before it reached the provider"

// Kind implements river.JobArgs.
func (SendArgs) Kind() string { return "messaging.send" }

// SendWorker works queued sends: it hands the message to its Transport,
// retries while the far side is unreachable (fault.Unavailable: provider
// 5xx, network), and marks the message Failed on a refusal or on the last
// attempt.
type SendWorker struct {
	river.WorkerDefaults[SendArgs]
	svc *Service
}

// NewSendWorker returns the worker of queued sends.
func NewSendWorker(svc *Service) *SendWorker { return &SendWorker{svc: svc} }

// Timeout bounds one attempt: a provider call with its media upload.
func (w *SendWorker) Timeout(*river.Job[SendArgs]) time.Duration { return attemptTimeout }

// Work implements river.Worker. Queued sends go through the send queue
// (queue.go) since it replaced one River job per message; this worker
// finishes the jobs a gateway of the earlier design left queued, and is
// the same attempt either way.
func (w *SendWorker) Work(ctx context.Context, job *river.Job[SendArgs]) error {
	s := w.svc
	if job.Args.Recover {
		return s.recoverSync(ctx, job.Args.MessageID)
	}
	row, err := s.handOff(ctx, job.Args.MessageID)
	if err != nil || row == nil {
		// nil: deleted (revoked for "me"), already sent or failed
		// (at-least-once delivery of the job), or outcome unknown.
		return err
	}
	ch, err := s.deps.Channels.Get(ctx, row.CompanyID, row.CompanyChannelID)
	if fault.KindOf(err) == fault.NotFound {
		return nil // the channel is gone, and its messages with it
	}
	if err != nil {
		s.release(ctx, row)
		return err
	}
	return s.attempt(ctx, ch, row, job.Attempt, job.Attempt >= job.MaxAttempts)
}

// attempt works one attempt of a queued send on a message of channel ch
// whose hand-off was just counted (handOff, or the send queue's handOffMany:
// the attempt's only read); the outcome is recorded with its event. An
// error means the attempt should be retried while attempts remain (final
// is the last).
func (s *Service) attempt(ctx context.Context, ch channels.Channel, row *messageRow, n int, final bool) error {
	if row.Handoffs > 1 && !mayResend(s.transport(ch.TypeID)) {
		s.deps.Logger.WarnContext(ctx, "queued send handed before with no outcome; not sent again", "message_id", row.ID)
		return s.markOutcomeUnknown(ctx, ch, row)
	}
	_, err := s.deliver(ctx, ch, row, final)
	if err == nil {
		return nil
	}
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
		s.deps.Logger.WarnContext(ctx, "queued send will be retried", "message_id", row.ID, "attempt", n, "err", err)
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
// after it began (run by the send queue, or by a River job of the earlier
// design). It hands the message off first, so handoffs then counts this
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
