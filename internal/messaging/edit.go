package messaging

import (
	"context"
	"strings"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// EditInput is an edit (operation editMessage).
type EditInput struct {
	CompanyID int64
	ID        int64
	Text      string
}

// editable lists the channel types on which a sent text can be edited (API
// document: unofficial chat app, official chat app, embedded chat).
var editable = map[channels.TypeID]bool{
	channels.EmbeddedChat: true, channels.UnofficialChatapp: true, channels.OfficialChatapp: true,
}

// EditMessage replaces the text of a sent message. The edit is forwarded
// to the channel's Transport first (embedded chat has none: the edit is
// stored only); the stored text changes, with edited=true, only once the
// far side accepted it; that change publishes the message's event again
// (omnichat.message.sent with edited=true, the new text and the next
// version) in the same transaction.
//
// Errors (all answered 509): Invalid for an empty text; NotFound for a
// missing message or one of another company; Rule when it has no external
// id, is not a sent message, or its channel does not support editing;
// Refused (with Details) when the far side refused; Unavailable when it
// could not be reached.
func (s *Service) EditMessage(ctx context.Context, in EditInput) (Message, error) {
	if strings.TrimSpace(in.Text) == "" {
		return Message{}, fault.New(fault.Invalid, "Text is required")
	}
	row, err := loadMessage(ctx, s.deps.DB.Bun, in.CompanyID, in.ID)
	if err != nil {
		return Message{}, err
	}
	if row.confirmedExternalID() == "" {
		return Message{}, fault.New(fault.Rule, "Message has no external id and cannot be edited")
	}
	if row.MessageSourceID == SourceContact {
		return Message{}, fault.New(fault.Rule, "Only messages sent by the company can be edited")
	}
	if row.RevokedAt != nil {
		return Message{}, fault.New(fault.Rule, "A revoked message cannot be edited")
	}
	ch, err := s.deps.Channels.Get(ctx, in.CompanyID, row.CompanyChannelID)
	if err != nil {
		return Message{}, err
	}
	if !editable[ch.TypeID] {
		return Message{}, fault.New(fault.Rule, "Editing messages is not supported on this channel")
	}
	// The chat app refuses late edits; refusing here spares the call and
	// answers the same on every driver.
	if ch.TypeID == channels.UnofficialChatapp && s.deps.Now().Sub(row.PlatformAt) > connector.EditWindow {
		return Message{}, fault.New(fault.Rule, connector.MsgEditTooLate)
	}
	if ch.TypeID != channels.EmbeddedChat {
		tr := s.transport(ch.TypeID)
		if tr == nil {
			return Message{}, fault.New(fault.Unavailable, "Editing on this channel is not available in this deployment")
		}
		if err := tr.Edit(ctx, ch, row.target(), in.Text); err != nil {
			return Message{}, err
		}
	}
	// The stored text changes and the message's event is published again
	// (edited, new text, next version) in one transaction.
	err = s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		var cur messageRow
		_, err := tx.NewUpdate().Model(&cur).Set("text = ?", in.Text).Set("edited = ?", true).Set(bumpVersion).
			Set("updated_at = ?", s.deps.Now()).Where("id = ?", row.ID).Returning("*").Exec(ctx)
		if store.IsNoRows(err) || (err == nil && cur.ID == 0) {
			return fault.New(fault.NotFound, "Message not found") // deleted meanwhile
		}
		if err != nil {
			return fault.Internalf(err, "store edit of message %d", row.ID)
		}
		row = &cur
		return s.publish(ctx, tx, ch, cur.toDomain())
	})
	if err != nil {
		return Message{}, err
	}
	return row.toDomain(), nil
}
