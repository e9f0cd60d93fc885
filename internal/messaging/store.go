package messaging

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

type messageRow struct {
	bun.BaseModel    `bun:"table:messages,alias:m"`
	ID               int64      `bun:"id,pk,autoincrement"`
	UUID             string     `bun:"uuid"`
	ExternalID       *string    `bun:"external_id"`
	CompanyID        int64      `bun:"company_id"`
	CompanyChannelID int64      `bun:"company_channel_id"`
	ContactChannelID int64      `bun:"contact_channel_id"`
	ContactKey       string     `bun:"contact_key"`
	ConversationName string     `bun:"conversation_name"`
	IsGroup          bool       `bun:"is_group"`
	Text             string     `bun:"text"`
	MessageTypeID    int        `bun:"message_type_id"`
	MessageSourceID  int        `bun:"message_source_id"`
	StatusID         int        `bun:"status_id"`
	FailureReason    *string    `bun:"failure_reason"`
	Edited           bool       `bun:"edited"`
	IsForwarded      bool       `bun:"is_forwarded"`
	RevokedAt        *time.Time `bun:"revoked_at"`
	RepliedMessageID *int64     `bun:"replied_message_id"`
	UserID           *int64     `bun:"user_id"`
	MediaPath        *string    `bun:"media_path"`
	MediaName        *string    `bun:"media_name"`
	MediaContentType *string    `bun:"media_content_type"`
	MediaSize        *int64     `bun:"media_size"`
	// MediaPendingID is the provider's id of an inbound file not fetched
	// yet (official channel); NULL once fetched or given up.
	MediaPendingID *string `bun:"media_pending_id"`
	// Outbound is the JSON of what the Transport is to send (template
	// parameters, group flag) so a queued send is rebuilt exactly.
	Outbound *string `bun:"outbound"`
	// SenderKey and SenderName are the member who wrote a group message
	// (NULL for any other message).
	SenderKey  *string `bun:"sender_key"`
	SenderName *string `bun:"sender_name"`
	// Handoffs counts hand-offs to the transport whose outcome is not
	// recorded yet (0 once Sent, Failed, or refused by the transport).
	Handoffs int `bun:"handoffs"`
	// OutcomeUnknown marks a message handed to a transport that assigns its
	// own ids (the official provider) whose answer was lost: it is not sent
	// again, and stays Pending until a receipt tells what became of it.
	OutcomeUnknown bool `bun:"outcome_unknown"`
	// SendDueAt (unix ms) puts the message in the send queue: it is due
	// then. A claim moves it a lease ahead; the outcome clears it.
	SendDueAt *int64 `bun:"send_due_at"`
	// SendAttempts counts the queue's claims of the message.
	SendAttempts int `bun:"send_attempts"`
	// SendRecover marks a synchronous send: when it comes due the queue
	// runs its safety net (recoverSync), never a plain send.
	SendRecover bool `bun:"send_recover"`
	// Version is 1 on insert and grows by one with every change a
	// subscriber can see (bumpVersion), in the statement that makes it.
	Version    int64     `bun:"version"`
	PlatformAt time.Time `bun:"platform_at"`
	ReceivedAt time.Time `bun:"received_at"`
	CreatedAt  time.Time `bun:"created_at"`
	UpdatedAt  time.Time `bun:"updated_at"`
}

// messageFields are what the rows of a sent and of a received message
// differ in.
type messageFields struct {
	ContactKey string
	IsGroup    bool
	Text       string
	TypeID     int
	SourceID   int
	StatusID   int
	UserID     *int64
	// PlatformAt is when the message was written (platform_at).
	PlatformAt time.Time
}

// newMessageRow is the row of a new message of ch in the conversation ref,
// sent (accept.go) or received (inbound.go), stored at now. brought is the
// contact's name the message brings ("" for a send).
func newMessageRow(ch channels.Channel, ref conversations.Ref, brought string, f messageFields, now time.Time) messageRow {
	return messageRow{
		UUID: uuid.NewString(), CompanyID: ch.CompanyID, CompanyChannelID: ch.ID, ContactChannelID: ref.ID,
		ContactKey: f.ContactKey, ConversationName: conversationName(ref.Name, brought, f.ContactKey), IsGroup: f.IsGroup,
		Text: f.Text, MessageTypeID: f.TypeID, MessageSourceID: f.SourceID, StatusID: f.StatusID, UserID: f.UserID,
		PlatformAt: f.PlatformAt, ReceivedAt: now, CreatedAt: now, UpdatedAt: now, Version: 1,
	}
}

// conversationName is the conversation's name a message is stored with:
// the conversation's own, else the name the message brings, else the
// contact's key. (The one-statement send writes the same in SQL.)
func conversationName(stored, brought, key string) string {
	if stored != "" {
		return stored
	}
	if b := strings.TrimSpace(brought); b != "" {
		return b
	}
	return key
}

// target is the message as Transport.Edit and Revoke address it. The
// group flag is the one stored with the message's conversation, so the
// transport never has to guess it from the key. Only called once the
// message is known to have an external id.
func (r *messageRow) target() Target {
	return Target{ExternalID: deref(r.ExternalID), ContactKey: r.ContactKey, IsGroup: r.IsGroup}
}

// confirmedExternalID is the far side's id once it confirmed the message.
// An id chosen by the sender (IDAssigner) is stored before that, but until
// the far side accepted the message it is no external id in the document's
// sense ("present only once the provider confirmed the message"): it is not
// shown, and the message cannot be edited or revoked through it.
func (r *messageRow) confirmedExternalID() string {
	if r.StatusID == StatusPending {
		return ""
	}
	return deref(r.ExternalID)
}

func (r *messageRow) toDomain() Message {
	ext := r.confirmedExternalID()
	return Message{
		ID: r.ID, UUID: r.UUID, ExternalID: ext, OutcomeUnknown: r.OutcomeUnknown, CompanyID: r.CompanyID,
		CompanyChannelID: r.CompanyChannelID, ContactChannelID: r.ContactChannelID, ContactKey: r.ContactKey,
		ConversationName: r.ConversationName, IsGroup: r.IsGroup, Text: r.Text, TypeID: r.MessageTypeID,
		SourceID: r.MessageSourceID, StatusID: r.StatusID, FailureReason: deref(r.FailureReason), Edited: r.Edited,
		IsForwarded: r.IsForwarded, RevokedAt: store.UTC(r.RevokedAt), RepliedMessageID: r.RepliedMessageID, UserID: r.UserID,
		SenderKey: deref(r.SenderKey), SenderName: deref(r.SenderName), Version: r.Version,
		MediaPath: deref(r.MediaPath), MediaName: deref(r.MediaName), MediaContentType: deref(r.MediaContentType),
		MediaSize: derefInt(r.MediaSize), MediaPending: r.MediaPendingID != nil,
		PlatformAt: r.PlatformAt.UTC(), ReceivedAt: r.ReceivedAt.UTC(), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

func derefInt(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// loadMessage reads a company's message by id; another company's message is
// NotFound like a missing one.
func loadMessage(ctx context.Context, db bun.IDB, companyID, id int64) (*messageRow, error) {
	return loadOne(ctx, db, fmt.Sprintf("load message %d", id), func(q *bun.SelectQuery) *bun.SelectQuery {
		return q.Where("m.company_id = ?", companyID).Where("m.id = ?", id)
	})
}

// loadMessageByID reads a message by id whatever its company (workers).
func loadMessageByID(ctx context.Context, db bun.IDB, id int64) (*messageRow, error) {
	return loadOne(ctx, db, fmt.Sprintf("load message %d", id), func(q *bun.SelectQuery) *bun.SelectQuery {
		return q.Where("m.id = ?", id)
	})
}

// loadByExternalID reads the message a channel's far side knows as externalID.
func loadByExternalID(ctx context.Context, db bun.IDB, channelID int64, externalID string) (*messageRow, error) {
	return loadOne(ctx, db, "load message by external id", func(q *bun.SelectQuery) *bun.SelectQuery {
		return q.Where("m.company_channel_id = ?", channelID).Where("m.external_id = ?", externalID)
	})
}

// loadOne reads the message where selects: NotFound when there is none,
// Internal (described by what) when the query fails.
func loadOne(ctx context.Context, db bun.IDB, what string, where func(*bun.SelectQuery) *bun.SelectQuery) (*messageRow, error) {
	var row messageRow
	err := where(db.NewSelect().Model(&row)).Scan(ctx)
	if store.IsNoRows(err) {
		return nil, fault.New(fault.NotFound, "Message not found")
	}
	if err != nil {
		return nil, fault.Internalf(err, "%s", what)
	}
	return &row, nil
}
