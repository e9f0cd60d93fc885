// Package conversations owns contacts, conversations (contact channels),
// sectors and tags: the listing with its filters and relations, the
// conversation lifecycle and the events it publishes.
package conversations

import (
	"context"
	"time"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/store"
)

// This file is the contract the channel capabilities (messaging, official,
// connections) code against; *Service implements ForMessaging. Fields may be
// added; existing names and meanings stay.

// EnsureInput identifies the conversation of a message: a contact (or
// group) on a company channel.
type EnsureInput struct {
	CompanyID        int64
	CompanyChannelID int64
	ChannelTypeID    channels.TypeID
	ContactKey       string
	ContactName      string // used when the contact is created
	IsGroup          bool
	OriginID         int // OriginId: 1 contact initiated, 2 company initiated, 3 import, 4 API
}

// Ref is what a message needs of its conversation (the webhook message
// payload's `conversation` object and ids).
type Ref struct {
	ID        int64
	ContactID int64
	Name      string
	Key       string
	IsGroup   bool
	// LastInboundAt is when the contact last wrote (nil: never), as read
	// in the same statement: the official 24-hour window of a send is
	// checked on it inside the send's transaction (WindowAt).
	LastInboundAt *time.Time
}

// Window is the official channel's 24-hour session window of a conversation.
type Window struct {
	Open      bool
	ExpiresAt *time.Time // nil when the contact never wrote
}

// ForMessaging is what messaging needs from conversations.
type ForMessaging interface {
	// Ensure finds or creates the contact and the conversation inside tx;
	// a new conversation publishes omnichat.conversation.created in tx.
	Ensure(ctx context.Context, tx *store.Tx, in EnsureInput) (Ref, error)
	// RecordMessage updates last_message_at (and, for an inbound message,
	// unread_count and the time that opens the 24-hour window).
	RecordMessage(ctx context.Context, tx *store.Tx, conversationID int64, at time.Time, inbound bool) error
	// RecordOutbound is Ensure followed by RecordMessage(at, outbound) for
	// a message the company sends, in one statement when the conversation
	// exists (the send path's common case).
	RecordOutbound(ctx context.Context, tx *store.Tx, in EnsureInput, at time.Time) (Ref, error)
	// OutboundParts is RecordOutbound's common case as typed parts of a
	// statement the caller composes (PostgreSQL only).
	OutboundParts(in EnsureInput, at time.Time, checkWindow bool) OutboundParts
	// WindowFor reports the window of the conversation of contactKey on a
	// company channel at now; a conversation that does not exist is closed.
	WindowFor(ctx context.Context, companyChannelID int64, contactKey string, now time.Time) (Window, error)
}
