package messaging

import (
	"context"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// Revoke scopes.
const (
	ScopeMe  = "me"
	ScopeAll = "all"
)

// RevokeInput is a removal request (operation revokeMessages).
type RevokeInput struct {
	CompanyID   int64
	IDs         []int64
	Scope       string // ScopeMe (default) or ScopeAll
	RemoveMedia bool
}

// RevokeResult is the answer for one processed message.
type RevokeResult struct {
	Status  bool
	Message string
}

// Answers of RevokeMessages.
const (
	revokedMessage         = "Message revoked for everyone"
	deletedMessage         = "Message deleted"
	notFoundMessage        = "Message not found"
	revokeUnsupported      = "Revoking for everyone is not supported on this channel"
	revokeDisabled         = "Revoking for everyone is disabled on this channel"
	revokeNoExternalID     = "Message has no external id and cannot be revoked for everyone"
	revokeOnlyCompanySent  = "Only messages sent by the company can be revoked for everyone"
	revokeInternalFailure  = "Internal failure while revoking messages"
	revokeChannelNotServed = "Revoking on this channel is not available in this deployment"
)

// revokeAllBlocked lists the channel types where scope all is refused and
// why (API document, Message removal).
var revokeAllBlocked = map[channels.TypeID]string{
	channels.SocialMessenger: revokeUnsupported, channels.PhotoSocialNetwork: revokeUnsupported,
	channels.EmbeddedChat: revokeDisabled, channels.BotMessenger: revokeDisabled,
}

// RevokeMessages removes messages, one answer per id in order. Scope me
// deletes the record without calling the far side; scope all revokes at
// the far side (Transport.Revoke) and marks the message revoked, publishing
// its event again (revoked_at set, next version), and on a
// message already revoked deletes it. RemoveMedia also deletes the stored
// file. A refusal by the far side is that message's answer (Status false,
// with the reason) and leaves it unchanged.
//
// Errors: Invalid for no ids or an unknown scope; Unavailable for an
// internal failure while revoking (answered 509).
func (s *Service) RevokeMessages(ctx context.Context, in RevokeInput) ([]RevokeResult, error) {
	if len(in.IDs) == 0 {
		return nil, fault.New(fault.Invalid, "Ids is required and must be an array")
	}
	if in.Scope == "" {
		in.Scope = ScopeMe
	}
	if in.Scope != ScopeMe && in.Scope != ScopeAll {
		return nil, fault.New(fault.Invalid, "Scope must be me or all")
	}
	out := make([]RevokeResult, 0, len(in.IDs))
	for _, id := range in.IDs {
		res, err := s.revokeOne(ctx, in, id)
		if err != nil {
			return nil, fault.Wrap(fault.Unavailable, revokeInternalFailure, err)
		}
		out = append(out, res)
	}
	return out, nil
}

func (s *Service) revokeOne(ctx context.Context, in RevokeInput, id int64) (RevokeResult, error) {
	row, err := loadMessage(ctx, s.deps.DB.Bun, in.CompanyID, id)
	if fault.KindOf(err) == fault.NotFound {
		return RevokeResult{Status: false, Message: notFoundMessage}, nil
	}
	if err != nil {
		return RevokeResult{}, err
	}
	if in.Scope == ScopeMe || row.RevokedAt != nil {
		return s.deleteMessage(ctx, row, in.RemoveMedia)
	}
	ch, err := s.deps.Channels.Get(ctx, in.CompanyID, row.CompanyChannelID)
	if err != nil {
		return RevokeResult{}, err
	}
	if why, blocked := revokeAllBlocked[ch.TypeID]; blocked {
		return RevokeResult{Status: false, Message: why}, nil
	}
	if row.MessageSourceID == SourceContact {
		return RevokeResult{Status: false, Message: revokeOnlyCompanySent}, nil
	}
	if row.confirmedExternalID() == "" {
		return RevokeResult{Status: false, Message: revokeNoExternalID}, nil
	}
	if ch.TypeID == channels.UnofficialChatapp && s.deps.Now().Sub(row.PlatformAt) > connector.RevokeWindow {
		return RevokeResult{Status: false, Message: connector.MsgRevokeTooLate}, nil
	}
	tr := s.transport(ch.TypeID)
	if tr == nil {
		return RevokeResult{Status: false, Message: revokeChannelNotServed}, nil
	}
	if err := tr.Revoke(ctx, ch, row.target()); err != nil {
		switch fe := fault.As(err); fe.Kind {
		case fault.Refused, fault.Unavailable, fault.Rule:
			msg := fe.Message
			if r, ok := fe.Details["reason"].(string); ok && r != "" {
				msg = r
			}
			return RevokeResult{Status: false, Message: msg}, nil
		}
		return RevokeResult{}, err
	}
	var media string
	// revoked_at is set and the message's event published again (with
	// revoked_at and the next version) in one transaction.
	err = s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		now := s.deps.Now()
		var cur messageRow
		q := tx.NewUpdate().Model(&cur).Set("revoked_at = ?", now).Set("updated_at = ?", now).Set(bumpVersion).
			Where("id = ?", row.ID).Where("revoked_at IS NULL")
		if in.RemoveMedia && row.MediaPath != nil {
			media = *row.MediaPath
			q = q.Set("media_path = NULL")
		}
		_, err := q.Returning("*").Exec(ctx)
		if store.IsNoRows(err) || (err == nil && cur.ID == 0) {
			return nil // deleted or revoked meanwhile: nothing changed here
		}
		if err != nil {
			return err
		}
		return s.publish(ctx, tx, ch, cur.toDomain())
	})
	if err != nil {
		return RevokeResult{}, err
	}
	s.removeMedia(media)
	return RevokeResult{Status: true, Message: revokedMessage}, nil
}

// deleteMessage physically deletes the record (and, when asked, its file).
func (s *Service) deleteMessage(ctx context.Context, row *messageRow, removeMedia bool) (RevokeResult, error) {
	err := s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		_, err := tx.NewDelete().Model((*messageRow)(nil)).Where("id = ?", row.ID).Exec(ctx)
		return err
	})
	if err != nil {
		return RevokeResult{}, err
	}
	if removeMedia && row.MediaPath != nil {
		s.removeMedia(*row.MediaPath)
	}
	return RevokeResult{Status: true, Message: deletedMessage}, nil
}
