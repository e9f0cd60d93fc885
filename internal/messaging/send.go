package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/ratelimit"
	"github.com/chatmsg/gateway/internal/store"
)

// WindowClosedMessage is the 409 answer (Portuguese, as the document asks)
// to free text or a file on an official channel whose window is closed.
const WindowClosedMessage = "A janela de atendimento de 24 horas está fechada. Envie um template para iniciar a conversa."

// SendInput is one send (operation sendMessage).
type SendInput struct {
	CompanyID int64
	// Platform is channels.UnofficialChatapp (chatapp) or
	// channels.OfficialChatapp (ofc_chatapp).
	Platform   channels.TypeID
	SenderKey  string
	ContactKey string
	IsGroup    bool
	// Enqueue overrides the platform default: queued on chatapp,
	// synchronous on ofc_chatapp.
	Enqueue  *bool
	Text     string
	File     *Media
	Template *TemplateRequest
	// SourceID is who sends (default SourceAPI); UserID the attendant, if any.
	SourceID int
	UserID   *int64
}

// SendOutput is the outcome of an accepted send.
type SendOutput struct {
	MessageID int64
	// Queued is true when the send was queued (the {message} answer).
	Queued bool
	// ExternalID and Raw are the far side's answer to a synchronous send.
	ExternalID string
	Raw        map[string]any
	// OutcomeUnknown is true for a synchronous send the far side may have
	// taken without saying so (ErrOutcomeUnknown): the message stays
	// Pending until a receipt settles it, and must not be sent again.
	OutcomeUnknown bool
}

// draft is a send resolved and checked, ready to store.
type draft struct {
	typeID   int
	text     string
	media    *Media
	template *TemplateSend
	// mediaURL is the header media URL the client gave (marked used when
	// it is a gateway upload).
	mediaURL string
}

// storedOutbound is the part of an Outbound that is not in the message's
// columns; queued sends rebuild the Outbound from the row and this.
type storedOutbound struct {
	Template *TemplateSend `json:"template,omitempty"`
}

// SendMessage sends (or queues) a message through one of the company's
// channels, applying in order: the company send rate (600 per minute),
// the sender channel, the content, the official 24-hour window (free
// content only), group authorization, and the monthly quota. The message
// is stored and omnichat.message.sent published in one transaction; a
// queued send is a place in the send queue in that same row (queue.go).
//
// Errors: RateLimited (with RetryAfterSeconds); Rule when sender_key is not
// a channel of the company of that platform; Invalid when the channel's
// transport cannot address contact_key (see KeyNormalizer); for template problems (see
// TemplatePreparer), for media over its limit, and for a synchronous send
// the far side refused (Refused, with Details) or could not take
// (Unavailable) — the message is then stored as Failed; a synchronous send
// whose outcome is unknown is no error but SendOutput.OutcomeUnknown;
// WindowClosed;
// GroupNotAuthorized (the message is stored as Unauthorized); Quota;
// Unavailable when no transport serves the platform.
func (s *Service) SendMessage(ctx context.Context, in SendInput) (out SendOutput, err error) {
	defer func() {
		if err != nil && out.MessageID == 0 {
			s.metrics.refused.WithLabelValues(in.Platform.Name(), fault.KindOf(err).String()).Inc()
		}
	}()
	if in.SourceID == 0 {
		in.SourceID = SourceAPI
	}
	in.ContactKey = NormalizeContactKey(in.ContactKey)
	if err := s.allowSend(ctx, in.CompanyID); err != nil {
		return SendOutput{}, err
	}
	ch, err := s.deps.Channels.FindByKey(ctx, in.CompanyID, in.Platform, strings.TrimSpace(in.SenderKey))
	if fault.KindOf(err) == fault.NotFound {
		return SendOutput{}, senderNotFound(in.Platform)
	}
	if err != nil {
		return SendOutput{}, err
	}
	tr := s.transport(ch.TypeID)
	if tr == nil {
		return SendOutput{}, noTransport(ch.TypeID)
	}
	if in.ContactKey, err = canonicalKey(tr, in.ContactKey, in.IsGroup); err != nil {
		return SendOutput{}, err
	}
	enqueue := ch.TypeID != channels.OfficialChatapp
	if in.Enqueue != nil {
		enqueue = *in.Enqueue
	}

	d, err := s.draft(ctx, ch, in)
	if err != nil {
		return SendOutput{}, err
	}
	// Free content on the official channel needs the contact's 24-hour
	// window. A one-to-one send reads it in its transaction, from the
	// conversation row it updates anyway (one statement less, and no
	// connection taken from the pool on the side); a group send, which
	// the official channel does not model, reads it first.
	checkWindow := ch.TypeID == channels.OfficialChatapp && d.template == nil
	if checkWindow && in.IsGroup {
		w, err := s.deps.Conversations.WindowFor(ctx, ch.ID, in.ContactKey, s.deps.Now())
		if err != nil {
			return SendOutput{}, err
		}
		if !w.Open {
			return SendOutput{}, fault.New(fault.WindowClosed, WindowClosedMessage)
		}
		checkWindow = false
	}
	if in.IsGroup {
		if ga := s.authorizer(ch.TypeID); ga != nil {
			if err := ga.AuthorizeGroupSend(ctx, ch, in.ContactKey); err != nil {
				if fault.KindOf(err) == fault.GroupNotAuthorized {
					if serr := s.storeUnauthorized(ctx, ch, in, d, err); serr != nil {
						return SendOutput{}, serr
					}
				}
				return SendOutput{}, err
			}
		}
	}

	row, err := s.store(ctx, ch, tr, in, d, enqueue, checkWindow)
	if err != nil {
		return SendOutput{}, err
	}
	if enqueue {
		s.queue.poke()
		s.metrics.accepted.WithLabelValues(ch.TypeID.Name(), "queued").Inc()
		return SendOutput{MessageID: row.ID, Queued: true}, nil
	}
	s.metrics.accepted.WithLabelValues(ch.TypeID.Name(), "sync").Inc()
	// The client hanging up must not leave the message half-done: the
	// provider call (bounded by the client's own timeouts) and the record
	// of its outcome run to the end.
	ctx = context.WithoutCancel(ctx)
	if row, err = s.handOff(ctx, row.ID); err != nil || row == nil {
		// Nothing was handed to the transport: the safety net fails it.
		return SendOutput{}, fault.Wrap(fault.Unavailable, "The message could not be sent", err)
	}
	res, err := s.deliver(ctx, ch, row, true)
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

// noTransport is the answer for a channel type no Transport serves.
func noTransport(t channels.TypeID) error {
	return fault.New(fault.Unavailable, fmt.Sprintf("Sending on %s channels is not available in this deployment", t.Name()))
}

// NormalizeContactKey trims what clients commonly put around a number (a
// leading +, blanks); group keys (number-digits) pass unchanged.
func NormalizeContactKey(key string) string {
	return strings.TrimPrefix(strings.TrimSpace(key), "+")
}

// canonicalKey is the key the conversation and the message are stored
// under: the transport's canonical form when it has one (KeyNormalizer),
// else key as trimmed.
func canonicalKey(tr Transport, key string, isGroup bool) (string, error) {
	if kn, ok := tr.(KeyNormalizer); ok {
		return kn.NormalizeContactKey(key, isGroup)
	}
	return key, nil
}

func (s *Service) allowSend(ctx context.Context, companyID int64) error {
	if s.deps.Limiter == nil {
		return nil
	}
	ok, wait, err := s.deps.Limiter.Allow(ctx, ratelimit.Key("send:company", companyID), s.opts.SendRate, s.opts.SendWindow)
	if err != nil {
		// A limiter outage must not stop sending: fail open, loudly.
		s.deps.Logger.WarnContext(ctx, "send rate limiter unavailable; allowing", "err", err)
		return nil
	}
	if !ok {
		return &fault.Error{Kind: fault.RateLimited, Message: "Too many requests: the company's limit of 600 sends per minute was reached.",
			RetryAfterSeconds: ratelimit.RetryAfterSeconds(wait)}
	}
	return nil
}

// draft resolves the content of a send: a template, a file or text.
func (s *Service) draft(ctx context.Context, ch channels.Channel, in SendInput) (draft, error) {
	switch {
	case in.Template != nil:
		if ch.TypeID != channels.OfficialChatapp {
			return draft{}, fault.New(fault.Rule, "provider_template_id is only accepted with platform ofc_chatapp")
		}
		if s.deps.Templates == nil {
			return draft{}, fault.New(fault.Unavailable, "Templates are not available in this deployment")
		}
		p, err := s.deps.Templates.PrepareTemplate(ctx, ch, *in.Template)
		if err != nil {
			return draft{}, err
		}
		t := p.Send
		return draft{typeID: msgtype.Template, text: p.Text, media: t.HeaderMedia, template: &t, mediaURL: in.Template.HeaderMediaURL}, nil
	case in.File != nil:
		m := *in.File
		m.ContentType = SniffContentType(m.Data)
		typeID := msgtype.ForContentType(m.ContentType)
		if ch.TypeID == channels.OfficialChatapp {
			if limit, msg := LimitFor(typeID); len(m.Data) > limit {
				return draft{}, fault.New(fault.Rule, msg)
			}
		}
		return draft{typeID: typeID, text: in.Text, media: &m}, nil
	}
	return draft{typeID: msgtype.Text, text: in.Text}, nil
}

// newRow builds the row of an outbound message.
func (s *Service) newRow(ch channels.Channel, in SendInput, d draft, ref conversations.Ref, status int, now time.Time) messageRow {
	name := ref.Name
	if name == "" {
		name = in.ContactKey
	}
	return messageRow{
		UUID: uuid.NewString(), CompanyID: ch.CompanyID, CompanyChannelID: ch.ID, ContactChannelID: ref.ID,
		ContactKey: in.ContactKey, ConversationName: name, IsGroup: in.IsGroup, Text: d.text,
		MessageTypeID: d.typeID, MessageSourceID: in.SourceID, StatusID: status, UserID: in.UserID,
		PlatformAt: now, ReceivedAt: now, CreatedAt: now, UpdatedAt: now, Version: 1,
	}
}

func (s *Service) ensureInput(ch channels.Channel, in SendInput) conversations.EnsureInput {
	return conversations.EnsureInput{CompanyID: ch.CompanyID, CompanyChannelID: ch.ID, ChannelTypeID: ch.TypeID,
		ContactKey: in.ContactKey, ContactName: in.ContactKey, IsGroup: in.IsGroup, OriginID: originAPI}
}

// store writes the message (Pending), counts it against the quota, keeps
// the conversation current, and publishes omnichat.message.sent, all in
// one transaction; the message row is also its place in the send queue.
// The common send on PostgreSQL, with no event to publish, is one
// statement instead (storeInOne).
//
// The statements are as few as the work allows: the quota is one upsert,
// an existing conversation one UPDATE … RETURNING (RecordOutbound), the
// message (with its place in the queue) one INSERT … RETURNING.
//
// With checkWindow the official 24-hour window is checked on the
// conversation the UPDATE returned, before the quota is counted (a closed
// window answers 409 before an exhausted quota's 402), and a closed one
// rolls everything back.
func (s *Service) store(ctx context.Context, ch channels.Channel, tr Transport, in SendInput, d draft, enqueue, checkWindow bool) (*messageRow, error) {
	var mediaPath string
	if d.media != nil {
		p, err := s.saveMedia(ctx, ch.CompanyID, d.media)
		if err != nil {
			return nil, err
		}
		mediaPath = p
	}
	var outbound *string
	if d.template != nil {
		t := *d.template
		t.HeaderMedia = nil // the bytes are the message's media file
		b, err := json.Marshal(storedOutbound{Template: &t})
		if err != nil {
			return nil, fault.Internalf(err, "encode outbound")
		}
		outbound = nullable(string(b))
	}
	pending := func(ref conversations.Ref, now time.Time) messageRow {
		row := s.newRow(ch, in, d, ref, StatusPending, now)
		row.Outbound = outbound
		if d.media != nil {
			row.MediaPath, row.MediaName, row.MediaContentType = nullable(mediaPath), nullable(d.media.FileName), nullable(d.media.ContentType)
			size := int64(len(d.media.Data))
			row.MediaSize = &size
		}
		// Its place in the send queue, on wall-clock time like the claim.
		// A synchronous send's place is its safety net, for should it
		// be cut off before its outcome is recorded (recoverSync).
		due := time.Now()
		if !enqueue {
			due = due.Add(recoverAfter)
			row.SendRecover = true
		}
		row.SendDueAt = new(due.UnixMilli())
		return row
	}
	if s.deps.DB.Dialect == store.Postgres && d.mediaURL == "" && s.unheard(ctx, ch, ch.CompanyID, in.SourceID) {
		now := s.deps.Now()
		row := pending(conversations.Ref{}, now)
		done, err := s.storeInOne(ctx, ch, tr, in, &row, checkWindow, now)
		if err != nil {
			s.removeMedia(mediaPath)
			return nil, err
		}
		if done {
			return &row, nil
		}
	}
	var row messageRow
	err := s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		now := s.deps.Now()
		ref, err := s.deps.Conversations.RecordOutbound(ctx, tx, s.ensureInput(ch, in), now)
		if err != nil {
			return err
		}
		if checkWindow && !conversations.WindowAt(ref.LastInboundAt, now).Open {
			return fault.New(fault.WindowClosed, WindowClosedMessage)
		}
		if err := consumeQuota(ctx, tx, ch.CompanyID, now); err != nil {
			return err
		}
		row = pending(ref, now)
		if err := insertOutbound(ctx, tx, ch, tr, &row); err != nil {
			return err
		}
		if d.mediaURL != "" && s.deps.Templates != nil {
			if err := s.deps.Templates.MarkMediaUsed(ctx, tx, ch.CompanyID, d.mediaURL); err != nil {
				return err
			}
		}
		if err := s.publish(ctx, tx, ch, row.toDomain()); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		s.removeMedia(mediaPath)
		if store.IsForeignKeyViolation(err) {
			// The channel was deleted (by another replica, whose change this
			// one's channel cache sees only within its bound) between the
			// lookup and the insert: the sender is no channel any more.
			return nil, senderNotFound(in.Platform)
		}
		return nil, err
	}
	s.metrics.stored.WithLabelValues("transaction").Inc()
	return &row, nil
}

// senderNotFound is the answer to a sender_key that names no channel of
// the company on the requested platform.
func senderNotFound(platform channels.TypeID) error {
	what := "a connection"
	if platform == channels.OfficialChatapp {
		what = "an official channel"
	}
	return fault.New(fault.Rule, fmt.Sprintf("sender_key is not %s of the company", what))
}

// storeUnauthorized records a group send refused for lack of group
// authorization (status Unauthorized). It is not counted against the
// quota (it was never sent), but it publishes omnichat.message.sent with
// status 6 in the same transaction: the API document says such a message
// "is marked failed for lack of authorization", and subscribers see it.
func (s *Service) storeUnauthorized(ctx context.Context, ch channels.Channel, in SendInput, d draft, cause error) error {
	return s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		now := s.deps.Now()
		ref, err := s.deps.Conversations.Ensure(ctx, tx, s.ensureInput(ch, in))
		if err != nil {
			return err
		}
		row := s.newRow(ch, in, d, ref, StatusUnauthorized, now)
		row.FailureReason = nullable(fault.As(cause).Message)
		if _, err := tx.NewInsert().Model(&row).Returning("id").Exec(ctx); err != nil {
			return fault.Internalf(err, "insert message")
		}
		return s.publish(ctx, tx, ch, row.toDomain())
	})
}

// outbound rebuilds what the Transport sends from a stored message.
func (s *Service) outbound(row *messageRow) (Outbound, error) {
	out := Outbound{MessageID: row.ID, ContactKey: row.ContactKey, IsGroup: row.IsGroup, Text: row.Text}
	var media *Media
	if row.MediaPath != nil {
		data, err := s.readMedia(*row.MediaPath)
		if err != nil {
			return out, fault.Internalf(err, "read media of message %d", row.ID)
		}
		media = &Media{FileName: deref(row.MediaName), ContentType: deref(row.MediaContentType), Data: data}
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

// deliver hands a message claimed by handOff to its channel's Transport
// and records the outcome: Sent with the external id, or Failed with the
// reason. When final is false an Unavailable error from the transport
// clears the hand-off without marking the message, so the queued send is
// retried. A transport error means the far side did not take the message,
// unless it wraps ErrOutcomeUnknown or the attempt's ctx ended during the
// call; those, and an accepted message whose record could not be written,
// return errUnrecorded (with the far side's answer, if any): the message
// stays handed, and is never sent blindly again (see the worker).
func (s *Service) deliver(ctx context.Context, ch channels.Channel, row *messageRow, final bool) (SendResult, error) {
	tr := s.transport(ch.TypeID)
	if tr == nil {
		s.release(ctx, row)
		err := noTransport(ch.TypeID)
		if final {
			return SendResult{}, s.fail(ctx, ch, row, err)
		}
		return SendResult{}, err
	}
	out, err := s.outbound(row)
	if err != nil {
		s.release(ctx, row)
		return SendResult{}, err
	}
	if _, ok := tr.(IDAssigner); ok {
		out.ExternalID = deref(row.ExternalID)
	}
	res, err := tr.Send(ctx, ch, out)
	if err != nil && (ctx.Err() != nil || errors.Is(err, ErrOutcomeUnknown) || (!final && fault.KindOf(err) == fault.Internal)) {
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
		if fault.KindOf(err) == fault.Unavailable && !final {
			s.metrics.delivered.WithLabelValues(ch.TypeID.Name(), "retry").Inc()
			s.release(ctx, row)
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

// leaving is how a message leaves Pending: its new status and, when not
// nil, its external id (with received_at, when the far side took it) or
// its failure reason.
type leaving struct {
	status        int
	externalID    *string
	failureReason *string
}

// leaveSet is what every way out of Pending sets on the message, with
// leaveArgs: it is no longer handed, nor outcome unknown, nor queued, and
// has the new status. leavePending and the batched Sent outcome
// (execSent) add what their way out records.
const leaveSet = `updated_at = ?, ` + bumpVersion + `, handoffs = 0, outcome_unknown = ?, send_due_at = NULL, status_id = ?`

func leaveArgs(now time.Time, status int) []any { return []any{now, false, status} }

// leavePending moves a message out of Pending as to says, clearing its
// hand-off (what names the new state in errors), and publishes the change,
// in one transaction: one UPDATE … RETURNING (which refreshes row, its
// values bound, see store.ScanBound) and the event. prep, when not nil,
// runs first in the same transaction. When no subscription wants the
// event (and there is no prep), the UPDATE alone is the write, with no
// transaction around it: two round trips fewer on every outcome of a
// company that does not listen. A message no longer Pending is left as it
// is: a receipt (which carried the external id) or another attempt got
// there first.
func (s *Service) leavePending(ctx context.Context, ch channels.Channel, row *messageRow, what string,
	prep func(ctx context.Context, tx *store.Tx, now time.Time) error, to leaving) error {
	update := func(ctx context.Context, db bun.IDB, now time.Time) (bool, error) {
		var receivedAt *time.Time
		if to.externalID != nil {
			receivedAt = &now
		}
		var cur messageRow
		err := store.ScanBound(ctx, db, `UPDATE messages SET `+leaveSet+`,
			external_id = COALESCE(?, external_id), received_at = COALESCE(?, received_at),
			failure_reason = COALESCE(?, failure_reason)
			WHERE id = ? AND status_id = ? RETURNING *`,
			append(leaveArgs(now, to.status), to.externalID, receivedAt, to.failureReason, row.ID, StatusPending), &cur)
		if store.IsNoRows(err) || (err == nil && cur.ID == 0) {
			return false, nil
		}
		if err != nil {
			return false, fault.Internalf(err, "mark message %d %s", row.ID, what)
		}
		*row = cur
		return true, nil
	}
	if prep == nil && s.unheard(ctx, ch, row.CompanyID, row.MessageSourceID) {
		if to.status == StatusSent && to.externalID != nil {
			if cur, changed, err := s.writeSent(ctx, row.ID, *to.externalID); err == nil {
				if changed {
					*row = cur
				}
				return nil
			}
			// Not written with the batch: written alone below, which
			// reports why or settles it (recordSent's take-over).
		}
		_, err := update(ctx, s.deps.DB.Bun, s.deps.Now())
		return err
	}
	return s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		now := s.deps.Now()
		if prep != nil {
			if err := prep(ctx, tx, now); err != nil {
				return err
			}
		}
		if changed, err := update(ctx, tx, now); !changed || err != nil {
			return err
		}
		return s.publish(ctx, tx, ch, row.toDomain())
	})
}

// fail marks a Pending message Failed (Unauthorized for a group refusal)
// with the reason of err, publishes the
// change, and returns the error the caller answers with: a refusal keeps
// its kind and details; anything else becomes Unavailable with the
// message the client sees.
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
		return s.leavePending(ctx, ch, row, "failed", nil, leaving{status: status, failureReason: &reason})
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
