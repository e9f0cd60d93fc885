package messaging

import (
	"context"
	"errors"
	"strings"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/store"
)

// originCompanyInitiated is the origin of a conversation the channel's own
// account opened from outside the gateway (typed on the phone).
const originCompanyInitiated = 2

// errDuplicate rolls back a transaction that lost the race to store the
// same inbound message.
var errDuplicate = errors.New("duplicate inbound message")

// ReceiveInbound stores a message a contact sent to a company channel:
// it ensures the contact and the conversation (origin ContactInitiated;
// a new conversation publishes omnichat.conversation.created), stores the
// message (source Contact), records it on the conversation (which opens or
// extends the official 24-hour window), and publishes
// omnichat.message.received, all in one transaction. A repeated delivery
// of the same (channel, ExternalID) changes nothing and returns nil.
//
// Errors: Invalid when ExternalID or ContactKey is empty; Internal.
func (s *Service) ReceiveInbound(ctx context.Context, in Inbound) error {
	if strings.TrimSpace(in.ExternalID) == "" || strings.TrimSpace(in.ContactKey) == "" {
		return fault.New(fault.Invalid, "an inbound message needs its external id and contact key")
	}
	in.ContactKey = NormalizeContactKey(in.ContactKey)
	if in.TypeID == 0 {
		in.TypeID = msgtype.Text
		if in.Media != nil {
			in.TypeID = msgtype.ForContentType(in.Media.ContentType)
		}
	}
	if _, err := loadByExternalID(ctx, s.deps.DB.Bun, in.Channel.ID, in.ExternalID); err == nil {
		return nil
	} else if fault.KindOf(err) != fault.NotFound {
		return err
	}
	var mediaPath string
	if in.Media != nil {
		if in.Media.ContentType == "" {
			ct, err := in.Media.Sniff(ctx)
			if err != nil {
				return fault.Internalf(err, "read inbound media")
			}
			in.Media.ContentType = ct
		}
		p, err := s.saveMedia(ctx, in.Channel.CompanyID, in.Media)
		if err != nil {
			return err
		}
		mediaPath = p
	}
	err := s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		now := s.deps.Now()
		sentAt := in.SentAt.UTC()
		if sentAt.IsZero() || sentAt.After(now) {
			sentAt = now
		}
		origin, source, status := originContactInitiated, SourceContact, StatusDelivered
		if in.FromMe {
			origin, source, status = originCompanyInitiated, SourceAttendant, StatusSent
		}
		ref, err := s.deps.Conversations.Ensure(ctx, tx, conversations.EnsureInput{
			CompanyID: in.Channel.CompanyID, CompanyChannelID: in.Channel.ID, ChannelTypeID: in.Channel.TypeID,
			ContactKey: in.ContactKey, ContactName: in.ContactName, IsGroup: in.IsGroup, OriginID: origin,
		})
		if err != nil {
			return err
		}
		row := newMessageRow(in.Channel, ref, in.ContactName, messageFields{ContactKey: in.ContactKey, IsGroup: in.IsGroup,
			Text: in.Text, TypeID: in.TypeID, SourceID: source, StatusID: status, PlatformAt: sentAt}, now)
		row.ExternalID = &in.ExternalID
		row.IsForwarded = in.IsForwarded
		if in.IsGroup && !in.FromMe {
			if key := NormalizeContactKey(in.SenderKey); key != "" {
				row.SenderKey, row.SenderName = &key, nullable(strings.TrimSpace(in.SenderName))
			}
		}
		if in.ReplyToExternalID != "" {
			if replied, err := loadByExternalID(ctx, tx, in.Channel.ID, in.ReplyToExternalID); err == nil {
				row.RepliedMessageID = &replied.ID
			}
		}
		if in.Media != nil {
			row.MediaPath, row.MediaName, row.MediaContentType = nullable(mediaPath), nullable(in.Media.FileName), nullable(in.Media.ContentType)
			row.MediaSize = &in.Media.Size
		} else if p := in.PendingMedia; p != nil {
			row.MediaPendingID, row.MediaName, row.MediaContentType = &p.ID, nullable(p.FileName), nullable(p.ContentType)
		}
		res, err := tx.NewInsert().Model(&row).On("CONFLICT (company_channel_id, external_id) DO NOTHING").Returning("id").Exec(ctx)
		if err != nil {
			return fault.Internalf(err, "insert inbound message")
		}
		if n, _ := res.RowsAffected(); n == 0 || row.ID == 0 {
			return errDuplicate
		}
		if err := s.deps.Conversations.RecordMessage(ctx, tx, ref.ID, sentAt, !in.FromMe); err != nil {
			return err
		}
		if row.MediaPendingID != nil {
			if err := s.queueMediaFetch(ctx, tx, row.ID); err != nil {
				return err
			}
		}
		return s.publish(ctx, tx, in.Channel, row.toDomain())
	})
	if errors.Is(err, errDuplicate) {
		s.removeMedia(mediaPath)
		return nil
	}
	if err != nil {
		s.removeMedia(mediaPath)
		return err
	}
	s.metrics.inbound.WithLabelValues(in.Channel.TypeID.Name()).Inc()
	return nil
}

// ApplyInboundChange applies an edit or a revoke the author of a stored
// message made on the far side: an edit replaces the text (edited=true), a
// revoke sets revoked_at; either publishes the message again, with the next
// version, in the same transaction. A change of
// a message the service never stored, or repeated, changes nothing.
//
// The chat app relays a change from any client, so one that is not the
// author's (see author) is ignored: logged at debug level and answered nil,
// since an error would make the far side deliver it again forever.
//
// Errors: Invalid when ExternalID is empty; Internal.
func (s *Service) ApplyInboundChange(ctx context.Context, c InboundChange) error {
	if strings.TrimSpace(c.ExternalID) == "" {
		return fault.New(fault.Invalid, "a message change needs the changed message's external id")
	}
	return s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		row, err := loadByExternalID(ctx, tx, c.Channel.ID, c.ExternalID)
		if fault.KindOf(err) == fault.NotFound {
			return nil
		}
		if err != nil {
			return err
		}
		if why := notAuthor(row, c); why != "" {
			s.deps.Logger.DebugContext(ctx, "inbound change ignored", "channel_id", c.Channel.ID, "message_id", row.ID,
				"revoke", c.Revoked, "reason", why)
			return nil
		}
		now := s.deps.Now()
		q := tx.NewUpdate().Model((*messageRow)(nil)).Set("updated_at = ?", now).Set(bumpVersion).
			Where("id = ?", row.ID).Where("revoked_at IS NULL")
		if c.Revoked {
			at := c.At.UTC()
			if at.IsZero() || at.After(now) {
				at = now
			}
			q = q.Set("revoked_at = ?", at)
		} else {
			if row.Edited && row.Text == c.Text {
				return nil
			}
			q = q.Set("text = ?", c.Text).Set("edited = ?", true)
		}
		res, err := q.Exec(ctx)
		if err != nil {
			return fault.Internalf(err, "apply inbound change of message %d", row.ID)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // already revoked
		}
		cur, err := loadMessageByID(ctx, tx, row.ID)
		if err != nil {
			return err
		}
		return s.publish(ctx, tx, c.Channel, cur.toDomain())
	})
}

// ApplyReceipt records a delivery status the far side reported for a
// message it accepted. Statuses only move forward (Sent → Delivered →
// Read); Failed (with its reason) applies to a message not yet delivered;
// anything else is ignored as stale. Each change bumps the message's
// version and publishes another omnichat.message.sent with the new
// status_id and version, in the same transaction. Repeated receipts change
// nothing and publish nothing.
//
// Errors: Invalid for a status that is not 2–5; NotFound when no message
// of the channel has that external id; Internal.
func (s *Service) ApplyReceipt(ctx context.Context, r Receipt) error {
	if r.StatusID < StatusSent || r.StatusID > StatusFailed {
		return fault.New(fault.Invalid, "a receipt status is 2 (sent), 3 (delivered), 4 (read) or 5 (failed)")
	}
	return s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		row, err := loadByExternalID(ctx, tx, r.Channel.ID, r.ExternalID)
		if fault.KindOf(err) == fault.NotFound && r.MessageID != 0 {
			row, err = s.adoptExternalID(ctx, tx, r)
		}
		if err != nil {
			return err
		}
		if terminal(row.StatusID) || row.MessageSourceID == SourceContact {
			return nil
		}
		var from []int
		for _, st := range []int{StatusPending, StatusSent, StatusDelivered, StatusRead} {
			if r.StatusID == StatusFailed {
				if st == StatusPending || st == StatusSent {
					from = append(from, st)
				}
			} else if statusRank(st) < statusRank(r.StatusID) {
				from = append(from, st)
			}
		}
		now := s.deps.Now()
		// A receipt is the outcome of any hand-off still open, and settles
		// a message marked outcome unknown.
		q := tx.NewUpdate().Model((*messageRow)(nil)).Set("status_id = ?", r.StatusID).Set("updated_at = ?", now).
			Set(bumpVersion).Set("handoffs = 0").Set("outcome_unknown = ?", false).
			Where("id = ?", row.ID).Where("status_id IN (?)", bun.In(from))
		if r.StatusID == StatusFailed {
			reason := r.Reason
			if reason == "" {
				reason = "Delivery failed"
			}
			q = q.Set("failure_reason = ?", reason)
		} else if row.OutcomeUnknown {
			q = q.Set("failure_reason = NULL")
		}
		res, err := q.Exec(ctx)
		if err != nil {
			return fault.Internalf(err, "apply receipt")
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // stale or repeated
		}
		cur, err := loadMessageByID(ctx, tx, row.ID)
		if err != nil {
			return err
		}
		s.metrics.receipts.WithLabelValues(r.Channel.TypeID.Name(), receiptLabel(r.StatusID)).Inc()
		return s.publish(ctx, tx, r.Channel, cur.toDomain())
	})
}

// adoptExternalID handles a receipt that overtook the send's answer: the
// message the far side echoed is still waiting for its external id, which
// the receipt carries.
func (s *Service) adoptExternalID(ctx context.Context, tx *store.Tx, r Receipt) (*messageRow, error) {
	res, err := tx.NewUpdate().Model((*messageRow)(nil)).Set("external_id = ?", r.ExternalID).
		Where("id = ?", r.MessageID).Where("company_channel_id = ?", r.Channel.ID).Where("external_id IS NULL").
		Where("message_source_id <> ?", SourceContact).Exec(ctx)
	if err != nil {
		return nil, fault.Internalf(err, "adopt external id")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, fault.New(fault.NotFound, "Message not found")
	}
	return loadMessageByID(ctx, tx, r.MessageID)
}

// FindByExternalID returns the message a channel's far side knows as
// externalID. Errors: NotFound.
func (s *Service) FindByExternalID(ctx context.Context, companyChannelID int64, externalID string) (Message, error) {
	row, err := loadByExternalID(ctx, s.deps.DB.Bun, companyChannelID, externalID)
	if err != nil {
		return Message{}, err
	}
	return row.toDomain(), nil
}

// notAuthor says why the change c may not apply to row ("" when it may).
// The change must come from the message's conversation and its author: the
// channel's own account (a change from the phone) for a message the company
// sent, the contact for one it wrote. A stored group message records the
// member who wrote it, and only that member's change applies; one stored
// before that was recorded takes no member's change. A group
// administrator may revoke another member's message on the chat app, but
// telling an administrator apart would mean asking the chat app while its
// events wait, so such a revoke is ignored too.
func notAuthor(row *messageRow, c InboundChange) string {
	switch {
	case row.ContactKey != NormalizeContactKey(c.ContactKey) || row.IsGroup != c.IsGroup:
		return "the message belongs to another conversation"
	case c.FromMe:
		if row.MessageSourceID == SourceContact {
			return "the account changed a message a contact wrote"
		}
	case row.MessageSourceID != SourceContact:
		return "a contact changed a message the company sent"
	case row.IsGroup && (row.SenderKey == nil || *row.SenderKey != NormalizeContactKey(c.SenderKey)):
		return "a group member changed a message another member wrote"
	}
	return ""
}
