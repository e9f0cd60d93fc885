package messaging

import (
	"context"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// Payload is the webhook message payload of m (every field of the
// document's "Webhook message payload" table).
func (s *Service) Payload(ch channels.Channel, m Message) events.MessagePayload {
	f := s.deps.Times
	return events.MessagePayload{
		ID: m.ID, UUID: m.UUID, ExternalID: externalID(m), Text: m.Text,
		MessageTypeID: events.MessageType(m.TypeID), MessageSourceID: events.MessageSource(m.SourceID),
		StatusID: events.MessageStatus(m.StatusID), Edited: m.Edited, IsForwarded: m.IsForwarded,
		RevokedAt: f.OffsetPtr(m.RevokedAt), CompanyChannelID: m.CompanyChannelID, CompanyChannelKey: ch.Key,
		ContactChannelID: m.ContactChannelID, ContactChannelKey: m.ContactKey, RepliedMessageID: m.RepliedMessageID,
		UserID: m.UserID, PlatformAt: f.Offset(m.PlatformAt), ReceivedAt: f.Offset(m.ReceivedAt), CreatedAt: f.Offset(m.CreatedAt),
		Conversation: events.MessageConversation{ID: m.ContactChannelID, Name: m.ConversationName, Key: m.ContactKey, IsGroup: m.IsGroup},
		Sender:       sender(m),
		Version:      m.Version,
		Media:        mediaPayload(f, m),
	}
}

// externalID is the payload's external_id: null until the far side
// confirmed the message, as the API document's "present only once the
// provider confirmed" (an absent value is null in both documents, never "").
func externalID(m Message) *string {
	if m.ExternalID == "" {
		return nil
	}
	id := m.ExternalID
	return &id
}

// sender is the payload's `sender` extension: the member who wrote a group
// message, nil (absent) for any other message.
func sender(m Message) *events.MessageSender {
	if m.SenderKey == "" {
		return nil
	}
	return &events.MessageSender{Key: m.SenderKey, Name: m.SenderName}
}

// publish emits the message's event inside tx: omnichat.message.received
// for a contact's message, omnichat.message.sent for every other source
// (on creation and again on each later status change, as the AsyncAPI
// document describes).
func (s *Service) publish(ctx context.Context, tx *store.Tx, ch channels.Channel, m Message) error {
	if s.deps.Events == nil {
		return nil
	}
	// Each event carries its own URL of the message's file.
	m, err := s.withMediaLink(ctx, tx, m)
	if err != nil {
		return err
	}
	p := s.Payload(ch, m)
	ev := webhooks.Event{Name: eventOf(m.SourceID), CompanyID: m.CompanyID, CompanyChannelID: &m.CompanyChannelID, OccurredAt: m.UpdatedAt}
	if ev.Name == events.OmnichatMessageReceived {
		ev.Data = events.MessageReceivedPayload(p)
	} else {
		ev.Data = events.MessageSentPayload(p)
	}
	if err := s.deps.Events.Publish(ctx, tx, ev); err != nil {
		return fault.Internalf(err, "publish %s", ev.Name)
	}
	return nil
}

// eventOf is the event a message of the source publishes on each change.
func eventOf(sourceID int) string {
	if sourceID == SourceContact {
		return events.OmnichatMessageReceived
	}
	return events.OmnichatMessageSent
}

// eventWanted reports whether a subscription may want the event a change
// of a message of the company and source on ch would publish. When it
// does not, the change is written without the event (and without a
// transaction); with no publisher nobody listens. It answers true when it
// cannot tell: the publisher is no webhooks.Audience, or asking failed
// (the transaction's Publish then reports it).
func (s *Service) eventWanted(ctx context.Context, ch channels.Channel, companyID int64, sourceID int) bool {
	if s.deps.Events == nil {
		return false
	}
	a, ok := s.deps.Events.(webhooks.Audience)
	if !ok {
		return true
	}
	listens, err := a.Listens(ctx, companyID, eventOf(sourceID), &ch.ID)
	return err != nil || listens
}
