// Package messaging owns messages: the send pipeline shared by both channel
// kinds (rules, rate limit, quota, queueing), edit and revoke, inbound
// messages and delivery receipts. The channel capabilities plug in as
// Transports: the official provider client and the unofficial chat-app
// connector.
package messaging

import (
	"context"
	"time"

	"github.com/chatmsg/gateway/internal/channels"
)

// This file is the contract between messaging and the two channel
// capabilities (official, connections). Fields may be added; existing
// names and meanings stay.

// Media is a file to send: an upload from the request, or header media
// fetched from a URL.
type Media struct {
	FileName    string
	ContentType string
	Data        []byte
}

// Outbound is one message for a Transport to send.
type Outbound struct {
	MessageID  int64 // internal id, for logs and idempotency
	ContactKey string
	IsGroup    bool
	Text       string
	Media      *Media
	// Template is set for official template sends: the provider template
	// with its variable values already resolved.
	Template *TemplateSend
}

// TemplateSend is a provider template with its resolved parameters.
type TemplateSend struct {
	Name       string
	Language   string
	Positional []string
	Named      map[string]string
	// HeaderFormat is TEXT, IMAGE, VIDEO or DOCUMENT ("" without a header).
	HeaderFormat   string
	HeaderMedia    *Media
	HeaderMediaURL string
}

// SendResult is what the far side answered.
type SendResult struct {
	ExternalID string
	// Raw is the far side's answer, diagnostic only (Data.raw).
	Raw map[string]any
}

// Transport sends through one kind of channel. Errors: fault.Refused with
// Details for a refusal by the far side (answered 509 with details),
// fault.Unavailable when it could not be reached (retried when queued),
// fault.GroupNotAuthorized for a group send the sender may not make.
type Transport interface {
	Send(ctx context.Context, ch channels.Channel, out Outbound) (SendResult, error)
	Edit(ctx context.Context, ch channels.Channel, externalID, contactKey, text string) error
	Revoke(ctx context.Context, ch channels.Channel, externalID, contactKey string) error
}

// GroupAuthorizer checks, before a group send, that the sender is a member
// and, in announce mode, an administrator. It returns
// fault.GroupNotAuthorized otherwise. Only the unofficial channel has one.
type GroupAuthorizer interface {
	AuthorizeGroupSend(ctx context.Context, ch channels.Channel, groupKey string) error
}

// Inbound is a message a contact sent to a company channel, as a channel
// capability reports it to messaging.ReceiveInbound.
type Inbound struct {
	Channel     channels.Channel
	ExternalID  string // the far side's id; repeated deliveries are ignored
	ContactKey  string
	ContactName string
	IsGroup     bool
	Text        string
	TypeID      int // message_type_id
	Media       *Media
	// SentAt is when the contact sent it (platform_at).
	SentAt time.Time
}

// Receipt is a delivery status reported by the far side for a message it
// accepted earlier; statuses only move forward (Sent → Delivered → Read),
// or to Failed with a reason.
type Receipt struct {
	Channel    channels.Channel
	ExternalID string
	StatusID   int // MessageStatusId: 2 Sent, 3 Delivered, 4 Read, 5 Failed
	Reason     string
	At         time.Time
}
