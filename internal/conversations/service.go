package conversations

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/uptrace/bun"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// StatusID is a conversation status, numbered as the OpenAPI and AsyncAPI
// documents list them.
type StatusID int

const (
	StatusOpen       StatusID = 1
	StatusPending    StatusID = 2
	StatusInProgress StatusID = 3
	StatusResolved   StatusID = 4
	StatusCancelled  StatusID = 5
	StatusSpam       StatusID = 6
	StatusBanned     StatusID = 7
)

// Valid reports whether s is one of the seven statuses.
func (s StatusID) Valid() bool { return s >= StatusOpen && s <= StatusBanned }

// Closed reports whether s is Resolved or Cancelled, the statuses whose
// arrival publishes omnichat.conversation.closed.
func (s StatusID) Closed() bool { return s == StatusResolved || s == StatusCancelled }

// OriginID says how a conversation started.
type OriginID int

const (
	OriginContactInitiated OriginID = 1
	OriginCompanyInitiated OriginID = 2
	OriginImport           OriginID = 3
	OriginAPI              OriginID = 4
)

// Valid reports whether o is one of the four origins.
func (o OriginID) Valid() bool { return o >= OriginContactInitiated && o <= OriginAPI }

// WindowLength is the official channel's session window: 24 hours from the
// contact's latest inbound message.
const WindowLength = 24 * time.Hour

// UserDirectory is what conversations needs of auth: the company's users by
// id (assignees). auth.Service implements it. Users are never read from
// auth's tables.
type UserDirectory interface {
	UsersByID(ctx context.Context, companyID int64, ids []int64) (map[int64]auth.User, error)
}

// ChannelDirectory is what conversations needs of channels: resolving the
// `channel_key` filter to channel ids. channels.Service implements it.
type ChannelDirectory interface {
	ListCompanyChannels(ctx context.Context, companyID int64, f channels.ListFilter) ([]channels.Channel, int, error)
}

// Service is the conversations capability.
type Service struct {
	db       *store.DB
	now      clock.Clock
	times    clock.Formatter
	users    UserDirectory
	channels ChannelDirectory
	pub      webhooks.Publisher
}

// The channel capabilities code against ForMessaging.
var _ ForMessaging = (*Service)(nil)

// NewService returns the conversations service. Events are published
// through pub inside the transaction that makes the change they describe.
func NewService(db *store.DB, now clock.Clock, times clock.Formatter, users UserDirectory, chans ChannelDirectory, pub webhooks.Publisher) *Service {
	return &Service{db: db, now: now, times: times, users: users, channels: chans, pub: pub}
}

// Contact is the person (or group) behind conversations. One contact can
// have conversations on several company channels.
type Contact struct {
	ID    int64
	Name  string
	Email *string
	Phone *string
}

// Sector is a department conversations are routed to.
type Sector struct {
	ID   int64
	Name string
}

// TagKind is one of the three kinds of tags.
type TagKind string

const (
	// ContactTag tags a contact (filter member contactTags).
	ContactTag TagKind = "contact"
	// TicketTag tags a conversation (filter member ticketTags).
	TicketTag TagKind = "ticket"
	// BusinessTag tags a CRM business of the contact (filter member crmBusinessTags).
	BusinessTag TagKind = "crm_business"
)

// Valid reports whether k is a known kind.
func (k TagKind) Valid() bool { return k == ContactTag || k == TicketTag || k == BusinessTag }

// Tag is a label of one kind.
type Tag struct {
	ID   int64
	Kind TagKind
	Name string
}

// Conversation is a contact channel: a contact (or group) on one company
// channel. The relation fields are filled only when asked for (With).
type Conversation struct {
	ID               int64
	CompanyID        int64
	ContactID        int64
	CompanyChannelID int64
	ChannelTypeID    channels.TypeID
	Key              string
	Name             string
	IsGroup          bool
	StatusID         StatusID
	OriginID         OriginID
	SectorID         *int64
	UserID           *int64
	UnreadCount      int
	LastMessageAt    *time.Time
	LastInboundAt    *time.Time
	FirstResponseAt  *time.Time
	Muted            bool
	Pinned           bool
	Opened           bool
	// Version orders the conversation's states: 1 when created, one more
	// with every change of its record (events and the listing carry it).
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time

	// Phone is the contact's phone (always loaded; nil for groups and
	// channels without phone numbers).
	Phone *string

	Contact *Contact   // With.Contact
	Sector  *Sector    // With.Sector; nil when the conversation has none
	User    *auth.User // With.User; nil when unassigned
	Tags    []Tag      // With.Tags: contact, ticket and CRM-business tags
	// Window is the official 24-hour window (With.Window); nil on channels
	// that are not official, which have no such window.
	Window *Window
	// WindowRemainingMinutes is Window's whole minutes left when it was
	// read, 0 when closed.
	WindowRemainingMinutes int
}

// LastMessageAtOrCreated is the conversation's last_message_at as both API
// documents carry it: the time of the latest message, or the creation time
// until the first message is recorded (a conversation is created by its
// first message, so the two differ only inside that transaction). It is
// never absent, so REST and events need no null for it.
func (c Conversation) LastMessageAtOrCreated() time.Time {
	if c.LastMessageAt != nil {
		return *c.LastMessageAt
	}
	return c.CreatedAt
}

// WindowAt computes the official session window from the contact's latest
// inbound message.
func WindowAt(lastInbound *time.Time, now time.Time) Window {
	if lastInbound == nil {
		return Window{}
	}
	exp := lastInbound.Add(WindowLength)
	return Window{Open: now.Before(exp), ExpiresAt: &exp}
}

// RemainingMinutes is the whole minutes left in w at now, 0 when closed.
func (w Window) RemainingMinutes(now time.Time) int {
	if !w.Open || w.ExpiresAt == nil {
		return 0
	}
	m := int(w.ExpiresAt.Sub(now) / time.Minute)
	return max(0, min(m, int(WindowLength/time.Minute)))
}

type conversationRow struct {
	bun.BaseModel    `bun:"table:contact_channels,alias:cc"`
	ID               int64      `bun:"id,pk,autoincrement"`
	CompanyID        int64      `bun:"company_id"`
	ContactID        int64      `bun:"contact_id"`
	CompanyChannelID int64      `bun:"company_channel_id"`
	ChannelTypeID    int        `bun:"channel_type_id"`
	Key              string     `bun:"key"`
	Name             string     `bun:"name"`
	IsGroup          bool       `bun:"is_group"`
	StatusID         int        `bun:"status_id"`
	OriginID         int        `bun:"origin_id"`
	SectorID         *int64     `bun:"sector_id"`
	UserID           *int64     `bun:"user_id"`
	UnreadCount      int        `bun:"unread_count"`
	LastMessageAt    *time.Time `bun:"last_message_at"`
	LastInboundAt    *time.Time `bun:"last_inbound_at"`
	FirstResponseAt  *time.Time `bun:"first_response_at"`
	Muted            bool       `bun:"muted"`
	Pinned           bool       `bun:"pinned"`
	Opened           bool       `bun:"opened"`
	// Version is 1 on insert and grows by one with every UPDATE of the
	// row, in that statement (bumpVersion).
	Version   int64     `bun:"version"`
	CreatedAt time.Time `bun:"created_at"`
	UpdatedAt time.Time `bun:"updated_at"`
}

func (r conversationRow) toDomain() Conversation {
	return Conversation{ID: r.ID, CompanyID: r.CompanyID, ContactID: r.ContactID, CompanyChannelID: r.CompanyChannelID,
		ChannelTypeID: channels.TypeID(r.ChannelTypeID), Key: r.Key, Name: r.Name, IsGroup: r.IsGroup,
		StatusID: StatusID(r.StatusID), OriginID: OriginID(r.OriginID), SectorID: r.SectorID, UserID: r.UserID,
		UnreadCount: r.UnreadCount, LastMessageAt: store.UTC(r.LastMessageAt), LastInboundAt: store.UTC(r.LastInboundAt),
		FirstResponseAt: store.UTC(r.FirstResponseAt), Muted: r.Muted, Pinned: r.Pinned, Opened: r.Opened,
		Version: r.Version, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

type contactRow struct {
	bun.BaseModel `bun:"table:contacts,alias:ct"`
	ID            int64     `bun:"id,pk,autoincrement"`
	CompanyID     int64     `bun:"company_id"`
	Identity      string    `bun:"identity"`
	Name          string    `bun:"name"`
	Email         *string   `bun:"email"`
	Phone         *string   `bun:"phone"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

func (r contactRow) toDomain() Contact {
	return Contact{ID: r.ID, Name: r.Name, Email: r.Email, Phone: r.Phone}
}

type sectorRow struct {
	bun.BaseModel `bun:"table:sectors,alias:s"`
	ID            int64     `bun:"id,pk,autoincrement"`
	CompanyID     int64     `bun:"company_id"`
	Name          string    `bun:"name"`
	CreatedAt     time.Time `bun:"created_at"`
}

type tagRow struct {
	bun.BaseModel `bun:"table:tags,alias:t"`
	ID            int64     `bun:"id,pk,autoincrement"`
	CompanyID     int64     `bun:"company_id"`
	Kind          string    `bun:"kind"`
	Name          string    `bun:"name"`
	CreatedAt     time.Time `bun:"created_at"`
}

type businessRow struct {
	bun.BaseModel    `bun:"table:businesses,alias:b"`
	ID               int64     `bun:"id,pk,autoincrement"`
	CompanyID        int64     `bun:"company_id"`
	ContactID        int64     `bun:"contact_id"`
	ContactChannelID *int64    `bun:"contact_channel_id"`
	Title            string    `bun:"title"`
	CreatedAt        time.Time `bun:"created_at"`
}

// bumpVersion is the SET clause of every UPDATE of a conversation: the
// version grows in the statement that changes the row, so concurrent
// changes (serialised by the row lock) never share a version, and the event
// published in that transaction carries the new one.
const bumpVersion = "version = version + 1"

// stamp is a time as stored: UTC, microseconds (PostgreSQL's precision), so
// a value reads back equal on both engines.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// foldAccents hands out transformers that remove combining marks after
// canonical decomposition, so "João" and "JOÃO" both become "joao" after
// lower-casing. A transform.Chain keeps internal buffers and must never be
// used by two goroutines at once (sharing one garbled concurrent filters and
// stored search text), so each call takes its own from the pool.
var foldAccents = sync.Pool{New: func() any {
	return transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
}}

// normalise is the one text normalisation of the search column and of the
// filter value: Unicode lower case without accents. It runs in Go because
// SQLite's LIKE and lower() fold ASCII only, so an accented name would match
// case-insensitively on PostgreSQL (ILIKE) but not on SQLite; with both sides
// normalised here a plain LIKE answers the same on both engines, and the
// filter is accent-insensitive too ("joao" finds "João").
func normalise(s string) string {
	t := foldAccents.Get().(transform.Transformer)
	defer foldAccents.Put(t)
	out, _, err := transform.String(t, s)
	if err != nil {
		out = s
	}
	return strings.ToLower(out)
}

// setSearchText writes the search text of a conversation (see searchText)
// into contact_channel_search, creating its row the first time.
func setSearchText(ctx context.Context, tx *store.Tx, conversationID, companyID int64, text string) error {
	if _, err := tx.NewRaw(`INSERT INTO contact_channel_search (contact_channel_id, company_id, search_text) VALUES (?, ?, ?)
		ON CONFLICT (contact_channel_id) DO UPDATE SET search_text = excluded.search_text`,
		conversationID, companyID, text).Exec(ctx); err != nil {
		return fault.Internalf(err, "write search text of conversation %d", conversationID)
	}
	return nil
}

// searchText is what the text filter matches, kept in
// contact_channel_search: the conversation's name and key and its
// contact's name and email.
func searchText(name, key string, c contactRow) string {
	parts := []string{name, key, c.Name}
	if c.Email != nil {
		parts = append(parts, *c.Email)
	}
	return normalise(strings.Join(parts, "\x1f"))
}
