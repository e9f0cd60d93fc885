// Package messaging owns messages: the send pipeline shared by both channel
// kinds (rules, rate limit, quota, queueing), edit and revoke, inbound
// messages and delivery receipts. The channel capabilities plug in as
// Transports: the official provider client and the unofficial chat-app
// connector.
package messaging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/store"
)

// This file is the contract between messaging and the two channel
// capabilities (official, connections). Fields may be added; existing
// names and meanings stay.

// Media is a file a message carries: an upload from the request, header
// media, a stored file of a queued send, a received file. It is read
// through Open, so no layer it passes holds it whole: a document may be
// 100 MB, and a replica serves many at once.
type Media struct {
	FileName    string
	ContentType string
	Size        int64
	// Open reads the file from its start; each call is a new reader, so a
	// Transport may read it once per attempt. Errors: those of where the
	// file lives (the media store's Unavailable, NotFound).
	Open func(ctx context.Context) (io.ReadCloser, error)
	// StoreKey is the file's key when it is in the media store already (a
	// header-media upload): storing it for a message is then a copy made
	// by the store, not a read and a write through the replica.
	StoreKey string
}

// MediaBytes is a Media already in memory: a file a connector received
// or downloaded whole.
func MediaBytes(fileName, contentType string, data []byte) *Media {
	return &Media{FileName: fileName, ContentType: contentType, Size: int64(len(data)),
		Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}
}

// sniffLen is what content-type sniffing reads (http.DetectContentType's
// window).
const sniffLen = 512

// Sniff tells m's type from its first bytes (http.DetectContentType's
// window, with the video brands it does not know). Errors: those of m.Open,
// as they are.
func (m *Media) Sniff(ctx context.Context) (string, error) {
	r, err := m.Open(ctx)
	if err != nil {
		return "", err
	}
	defer r.Close()
	head := make([]byte, sniffLen)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	return SniffContentType(head[:n]), nil
}

// ReadAll reads m whole. Only for a far side whose client takes a file as
// bytes (the chat-app connector encrypts it in memory); m's Size bounds
// the read.
func (m *Media) ReadAll(ctx context.Context) ([]byte, error) {
	r, err := m.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, m.Size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != m.Size {
		return nil, fmt.Errorf("media %q: read %d bytes, expected %d", m.FileName, len(data), m.Size)
	}
	return data, nil
}

// Outbound is one message for a Transport to send.
type Outbound struct {
	MessageID int64 // internal id, for logs and idempotency
	// ExternalID is the far side's id chosen before the first attempt by a
	// Transport that is an IDAssigner (empty for the others): every attempt
	// of the message carries the same id.
	ExternalID string
	ContactKey string
	IsGroup    bool
	Text       string
	Media      *Media
	// Template is set for official template sends: the provider template
	// with its variable values already resolved.
	Template *TemplateSend
	// HandOff records that the message is being handed to the far side.
	// Send calls it once, right before the request that may create the
	// message there, after everything that cannot (media uploads, lookups):
	// from then on an attempt interrupted by a crash reads as possibly
	// sent, and the official channel never sends it again, so the later
	// it is called, the fewer sends a crash can lose. When it returns an
	// error Send makes no request and returns that error as it is.
	HandOff func(ctx context.Context) error
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
	// Components are the text parameters per component of the template
	// (header, body, URL buttons), in the template's order, as the provider
	// wants them; filled by TemplatePreparer.
	Components []TemplateComponentParams
}

// TemplateComponentParams are the text parameters of one template
// component.
type TemplateComponentParams struct {
	Type    string // "header", "body" or "button"
	SubType string // "url" for a URL button
	Index   int    // position of a button among the template's buttons
	Params  []TemplateParam
}

// TemplateParam is one variable value: positional (Name "") in the order
// of the variables' numbers, or named.
type TemplateParam struct {
	Name string
	Text string
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
// fault.GroupNotAuthorized for a group send the sender may not make. A
// Send error that wraps ErrOutcomeUnknown is neither: see there.
type Transport interface {
	Send(ctx context.Context, ch channels.Channel, out Outbound) (SendResult, error)
	Edit(ctx context.Context, ch channels.Channel, target Target, text string) error
	Revoke(ctx context.Context, ch channels.Channel, target Target) error
}

// ErrOutcomeUnknown is wrapped by a Transport's Send error when the
// message may have reached the far side but no answer said whether it was
// accepted: the whole request was written and the answer never came, came
// cut off or unreadable, or came from something in between (a proxy's 5xx)
// rather than from the far side. Messaging then neither retries the message
// blindly nor marks it Failed: it stays Pending, its hand-off open, until a
// receipt settles it (or, for an IDAssigner, a resend with the same id).
// An error that does not wrap it means the far side did not take the
// message.
var ErrOutcomeUnknown = errors.New("the far side may have taken the message; its answer was lost")

// IDAssigner is implemented by a Transport whose far side takes the
// message id from the sender (the chat app). Messaging asks for the id
// before the first attempt and stores it with the message, so that a retry
// or a restart hands the far side the same message again rather than a
// second one, and a receipt that arrives before the send's answer finds its
// message.
type IDAssigner interface {
	NewExternalID(ch channels.Channel) string
}

// Target is a sent message to edit or revoke, with its conversation as
// stored: the transport is told whether the chat is a group rather than
// guessing it from the shape of the key.
type Target struct {
	ExternalID string
	ContactKey string
	IsGroup    bool
}

// KeyNormalizer is implemented by a Transport whose channel writes one
// recipient in several ways (a leading +, the chat app's @ suffixes).
// Messaging asks it for the canonical key before anything is stored, so
// that every spelling lands in the same conversation. Errors: Invalid with
// a client-safe message for a key the channel cannot address.
type KeyNormalizer interface {
	NormalizeContactKey(key string, isGroup bool) (string, error)
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
	// PendingMedia is a file the far side keeps, fetched after the message
	// is stored (FetchMediaArgs); ignored when Media is set.
	PendingMedia *PendingMedia
	// SentAt is when the contact sent it (platform_at).
	SentAt time.Time
	// IsForwarded marks a message the contact forwarded.
	IsForwarded bool
	// ReplyToExternalID is the far side's id of the message this one
	// answers, if any (stored as replied_message_id when known).
	ReplyToExternalID string
	// FromMe marks a message the channel's own account wrote outside the
	// gateway (typed on the phone): stored as sent by an attendant, in the
	// conversation with ContactKey.
	FromMe bool
	// SenderKey and SenderName are the group member who wrote a group
	// message (ContactKey is then the group): stored and published only for
	// a group message a member wrote, ignored otherwise; only that member's
	// edits and revokes apply to it.
	SenderKey  string
	SenderName string
}

// InboundChange is an edit or a revoke of a message stored earlier
// (ApplyInboundChange), as the far side reported it: it applies only when
// the one who made it wrote the message.
type InboundChange struct {
	Channel    channels.Channel
	ExternalID string
	// ContactKey and IsGroup are the conversation the change was made in.
	ContactKey string
	IsGroup    bool
	// FromMe marks a change made by the channel's own account (on the
	// phone); otherwise SenderKey is the contact (in a group, the member)
	// who made it.
	FromMe    bool
	SenderKey string
	// Revoked marks a revoke; otherwise Text is the new text.
	Revoked bool
	Text    string
	At      time.Time
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
	// MessageID is the internal id when the far side echoes it (the
	// official provider returns it in biz_opaque_callback_data): a receipt
	// that arrives before the send's answer was stored still finds its
	// message. 0 when unknown.
	MessageID int64
}

// TemplateRequest is an official template send as the client asked for it
// (provider_template_id and its variables and header media).
type TemplateRequest struct {
	TemplateID int64
	// Positional fills {{1}}, {{2}}, … in order (variable_values).
	Positional []string
	// Named fills {{name}} (named_variable_values); keys starting with an
	// underscore are reserved and ignored.
	Named               map[string]string
	HeaderMediaURL      string
	HeaderMediaFilename string
}

// PreparedTemplate is a template send resolved against the stored template:
// what to store and what to hand to the Transport.
type PreparedTemplate struct {
	// Send is what the Transport sends. Send.HeaderMedia holds the media
	// fetched from header_media_url (checked against the header format and
	// the size limits); Send.HeaderMediaURL is the template's own media,
	// used when no header_media_url was given.
	Send TemplateSend
	// Text is the rendered body, stored as the message text.
	Text string
}

// TemplatePreparer resolves template sends (*templates.Service).
type TemplatePreparer interface {
	// PrepareTemplate resolves req for a send through ch. Errors: Rule for
	// an unknown template, one of another company or account, one not
	// approved by the provider, header media not allowed for the header
	// format, of the wrong type or over its size limit, or that could not
	// be fetched.
	PrepareTemplate(ctx context.Context, ch channels.Channel, req TemplateRequest) (PreparedTemplate, error)
	// MarkMediaUsed records, inside the send's transaction, that the
	// company's gateway-hosted upload behind url (if url is one) was used in
	// a send: it then has no deadline any more. Errors: Internal.
	MarkMediaUsed(ctx context.Context, tx *store.Tx, companyID int64, url string) error
}
