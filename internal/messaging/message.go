package messaging

import "time"

// Message status ids (MessageStatusId in both documents).
const (
	StatusPending      = 1 // accepted by the service, not yet by the far side
	StatusSent         = 2 // Enviada: the provider (or chat app) accepted it
	StatusDelivered    = 3 // Entregue
	StatusRead         = 4 // Lida
	StatusFailed       = 5 // Falha
	StatusUnauthorized = 6 // not sent: no group authorization
)

// Message source ids (MessageSourceId).
const (
	SourceAttendant = 1
	SourceContact   = 2
	SourceChatbot   = 3
	SourceAPI       = 4
	SourceWorkflow  = 5
)

// Conversation origin ids (OriginId) used by messaging when it ensures a
// conversation.
const (
	originContactInitiated = 1
	originAPI              = 4
)

// Message is a stored message.
type Message struct {
	ID               int64
	UUID             string
	ExternalID       string // "" until the far side confirmed it
	CompanyID        int64
	CompanyChannelID int64
	// ContactChannelID is the conversation.
	ContactChannelID int64
	// ContactKey, ConversationName and IsGroup are the conversation as it
	// was when the message was stored (the event payload's `conversation`);
	// conversations owns the live record.
	ContactKey       string
	ConversationName string
	IsGroup          bool
	Text             string
	TypeID           int
	SourceID         int
	StatusID         int
	FailureReason    string
	// OutcomeUnknown: handed to the official provider, whose answer was
	// lost (StatusID stays Pending, FailureReason says so); a receipt
	// settles it. The message is not sent again.
	OutcomeUnknown   bool
	Edited           bool
	IsForwarded      bool
	RevokedAt        *time.Time
	RepliedMessageID *int64
	UserID           *int64
	// SenderKey and SenderName are the member who wrote a group message
	// (the event payload's `sender`); "" for every other message.
	SenderKey  string
	SenderName string
	// MediaPath is the stored file, relative to the media directory; "" when
	// the message has none.
	MediaPath        string
	MediaName        string
	MediaContentType string
	MediaSize        int64
	// MediaPending: the far side's file is still being fetched (official
	// channel); the message is published again once it is stored.
	MediaPending bool
	// MediaLink is the URL the message's file is served at, minted for one
	// event or one API answer (publish and MediaOf set it); Payload
	// carries `media` only when it is set.
	MediaLink  *MediaLink
	PlatformAt time.Time
	ReceivedAt time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Version orders the message's states: 1 when stored, one more with
	// each change its events show (status, text, revocation, external id).
	Version int64
}

// statusRank orders the delivery statuses so receipts only move forward.
func statusRank(status int) int {
	switch status {
	case StatusPending:
		return 1
	case StatusSent:
		return 2
	case StatusDelivered:
		return 3
	case StatusRead:
		return 4
	}
	return 0
}

// terminal reports statuses no receipt changes any more.
func terminal(status int) bool { return status == StatusFailed || status == StatusUnauthorized }
