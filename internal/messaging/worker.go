package messaging

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/chatmsg/gateway/internal/fault"
)

// SendArgs is the River job of a queued send.
type SendArgs struct {
	MessageID int64 `json:"message_id"`
	// Recover marks the safety net of a synchronous send: it never sends;
	// if the message is still Pending when it runs (the process died
	// between storing the message and recording the provider's answer), it
	// is marked Falha rather than left pending for ever. Resending could
	// duplicate a message the provider accepted.
	Recover bool `json:"recover,omitempty"`
}

// recoverAfter is how long a synchronous send may take (provider call and
// media upload included) before its safety net considers it interrupted.
const recoverAfter = 15 * time.Minute

// interruptedReason is the failure reason of an interrupted sync send.
const interruptedReason = "The send was interrupted before the provider answered"

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
func (w *SendWorker) Timeout(*river.Job[SendArgs]) time.Duration { return 2 * time.Minute }

// Work implements river.Worker.
func (w *SendWorker) Work(ctx context.Context, job *river.Job[SendArgs]) error {
	s := w.svc
	row, err := loadMessageByID(ctx, s.deps.DB.Bun, job.Args.MessageID)
	if fault.KindOf(err) == fault.NotFound {
		return nil // deleted (revoked for "me") before it was sent
	}
	if err != nil {
		return err
	}
	if row.StatusID != StatusPending {
		return nil // already sent or failed: at-least-once delivery of the job
	}
	ch, err := s.deps.Channels.Get(ctx, row.CompanyID, row.CompanyChannelID)
	if fault.KindOf(err) == fault.NotFound {
		return nil // the channel is gone, and its messages with it
	}
	if err != nil {
		return err
	}
	if job.Args.Recover {
		if err := s.fail(ctx, ch, row, fault.New(fault.Unavailable, interruptedReason)); fault.KindOf(err) == fault.Internal {
			return err
		}
		return nil
	}
	final := job.Attempt >= job.MaxAttempts
	_, err = s.deliver(ctx, ch, row, final)
	if err == nil {
		return nil
	}
	switch fault.KindOf(err) {
	case fault.Unavailable:
		if final {
			return nil // marked Failed by deliver
		}
		s.deps.Logger.WarnContext(ctx, "queued send will be retried", "message_id", row.ID, "attempt", job.Attempt, "err", err)
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
