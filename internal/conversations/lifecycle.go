package conversations

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// Ensure finds or creates the contact and the conversation of a message
// inside tx; a new conversation publishes omnichat.conversation.created in
// the same tx. A conversation still named by its key (number or group id)
// takes the name the message brings, or else its contact's (see learnName).
// It never reads through another capability (SQLite has one
// connection, held by tx). Errors: Invalid for malformed input, Internal.
//
// Concurrent first messages of the same contact are safe: both inserts use
// ON CONFLICT DO NOTHING on the natural keys, and the loser reads the
// winner's row (on PostgreSQL the insert waits for the winner to commit).
func (s *Service) Ensure(ctx context.Context, tx *store.Tx, in EnsureInput) (Ref, error) {
	key := strings.TrimSpace(in.ContactKey)
	switch {
	case in.CompanyID <= 0 || in.CompanyChannelID <= 0:
		return Ref{}, fault.New(fault.Invalid, "company and company channel are required")
	case !in.ChannelTypeID.Valid():
		return Ref{}, fault.New(fault.Invalid, fmt.Sprintf("unknown channel type %d", in.ChannelTypeID))
	case key == "":
		return Ref{}, fault.New(fault.Invalid, "contact key is required")
	case !OriginID(in.OriginID).Valid():
		return Ref{}, fault.New(fault.Invalid, fmt.Sprintf("unknown origin %d", in.OriginID))
	}
	name := cmp.Or(givenName(in, key), key)

	var existing conversationRow
	err := tx.NewSelect().Model(&existing).
		Where("cc.company_channel_id = ?", in.CompanyChannelID).Where("cc.is_group = ?", in.IsGroup).Where("cc.key = ?", key).
		Scan(ctx)
	if err == nil {
		if existing.Name == existing.Key {
			return s.learnName(ctx, tx, existing, name)
		}
		return refOf(existing), nil
	}
	if !store.IsNoRows(err) {
		return Ref{}, fault.Internalf(err, "find conversation")
	}

	now := stamp(s.now())
	contact, err := s.ensureContact(ctx, tx, in, key, name, now)
	if err != nil {
		return Ref{}, err
	}
	switch {
	case name == key && contact.Name != key:
		name = contact.Name // the contact is known by name from another channel
	case name != key && contact.Name == key:
		// The contact was created nameless by a send on another channel;
		// it learns the name here, so that channel's conversation can
		// adopt it (learnName).
		contact.Name, contact.UpdatedAt = name, now
		if _, err := tx.NewUpdate().Model(&contact).Column("name", "updated_at").WherePK().Exec(ctx); err != nil {
			return Ref{}, fault.Internalf(err, "name contact")
		}
	}
	row := conversationRow{CompanyID: in.CompanyID, ContactID: contact.ID, CompanyChannelID: in.CompanyChannelID,
		ChannelTypeID: int(in.ChannelTypeID), Key: key, Name: name, IsGroup: in.IsGroup, StatusID: int(StatusOpen),
		OriginID: in.OriginID, Version: 1, CreatedAt: now, UpdatedAt: now}
	var id int64
	err = tx.NewRaw(`INSERT INTO contact_channels (company_id, contact_id, company_channel_id, channel_type_id, key, name, is_group,
			status_id, origin_id, unread_count, muted, pinned, opened, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?)
		ON CONFLICT (company_channel_id, is_group, key) DO NOTHING RETURNING id`,
		row.CompanyID, row.ContactID, row.CompanyChannelID, row.ChannelTypeID, row.Key, row.Name, row.IsGroup,
		row.StatusID, row.OriginID, false, false, false, row.CreatedAt, row.UpdatedAt).Scan(ctx, &id)
	if store.IsNoRows(err) {
		// Another transaction created it between our read and insert.
		if err := tx.NewSelect().Model(&existing).
			Where("cc.company_channel_id = ?", in.CompanyChannelID).Where("cc.is_group = ?", in.IsGroup).Where("cc.key = ?", key).
			Scan(ctx); err != nil {
			return Ref{}, fault.Internalf(err, "read concurrently created conversation")
		}
		if existing.Name == existing.Key {
			return s.learnName(ctx, tx, existing, name)
		}
		return refOf(existing), nil
	}
	if err != nil {
		return Ref{}, fault.Internalf(err, "insert conversation")
	}
	row.ID = id
	if err := setSearchText(ctx, tx, id, row.CompanyID, searchText(name, key, contact)); err != nil {
		return Ref{}, err
	}
	conv := row.toDomain()
	ct := contact.toDomain()
	conv.Contact = &ct
	if err := s.publish(ctx, tx, events.OmnichatConversationCreated, conv, s.CreatedPayload(conv)); err != nil {
		return Ref{}, err
	}
	return refOf(row), nil
}

// learnName names a conversation that still carries its key as its name
// (a company-initiated first message knows only the number or the group's
// id), contact and group alike, so the listing and its text filter show the
// person or the group rather than the key. The name is the one the message
// brings; a message that brings none (name is the key again) adopts the
// contact's, which a message on another channel of the same contact (a
// group is one contact on both chat apps) may have taught since this
// conversation was created. The contact takes a brought name too when it is
// as nameless. Only key-named conversations pay the contact read; a real
// name is never replaced here.
func (s *Service) learnName(ctx context.Context, tx *store.Tx, c conversationRow, name string) (Ref, error) {
	var contact contactRow
	if err := tx.NewSelect().Model(&contact).Where("ct.id = ?", c.ContactID).Scan(ctx); err != nil {
		return Ref{}, fault.Internalf(err, "read contact")
	}
	if name == c.Key {
		name = contact.Name
	}
	if name == c.Key {
		return refOf(c), nil // nobody knows a name yet
	}
	now := stamp(s.now())
	if contact.Name == c.Key {
		contact.Name, contact.UpdatedAt = name, now
		if _, err := tx.NewUpdate().Model(&contact).Column("name", "updated_at").WherePK().Exec(ctx); err != nil {
			return Ref{}, fault.Internalf(err, "name contact")
		}
	}
	c.Name, c.UpdatedAt = name, now
	if _, err := tx.NewUpdate().Model(&c).Column("name", "updated_at").Set(bumpVersion).WherePK().Exec(ctx); err != nil {
		return Ref{}, fault.Internalf(err, "name conversation")
	}
	if err := setSearchText(ctx, tx, c.ID, c.CompanyID, searchText(name, c.Key, contact)); err != nil {
		return Ref{}, err
	}
	return refOf(c), nil
}

// ensureContact finds or creates the company's contact for a conversation.
// A contact's identity is its phone number on the chat-app channels (an
// official and an unofficial conversation with the same number share one
// contact) and the channel type plus key elsewhere; a group is a contact of
// its own whose identity is the group key.
func (s *Service) ensureContact(ctx context.Context, tx *store.Tx, in EnsureInput, key, name string, now time.Time) (contactRow, error) {
	identity, phone := contactIdentity(in.ChannelTypeID, in.IsGroup, key)
	var c contactRow
	err := tx.NewRaw(`INSERT INTO contacts (company_id, identity, name, phone, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (company_id, identity) DO NOTHING RETURNING id`,
		in.CompanyID, identity, name, phone, now, now).Scan(ctx, &c.ID)
	if err == nil {
		c.CompanyID, c.Identity, c.Name, c.Phone, c.CreatedAt, c.UpdatedAt = in.CompanyID, identity, name, phone, now, now
		return c, nil
	}
	if !store.IsNoRows(err) {
		return c, fault.Internalf(err, "insert contact")
	}
	if err := tx.NewSelect().Model(&c).Where("ct.company_id = ?", in.CompanyID).Where("ct.identity = ?", identity).Scan(ctx); err != nil {
		return c, fault.Internalf(err, "read contact")
	}
	return c, nil
}

func contactIdentity(t channels.TypeID, isGroup bool, key string) (identity string, phone *string) {
	chatapp := t == channels.UnofficialChatapp || t == channels.OfficialChatapp
	switch {
	case isGroup && chatapp:
		return "chatapp-group:" + key, nil
	case isGroup:
		return fmt.Sprintf("type%d-group:%s", t, key), nil
	case chatapp:
		if isDigits(key) {
			p := key
			return "phone:" + key, &p
		}
		return "chatapp:" + key, nil
	default:
		return fmt.Sprintf("type%d:%s", t, key), nil
	}
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func refOf(r conversationRow) Ref {
	return Ref{ID: r.ID, ContactID: r.ContactID, Name: r.Name, Key: r.Key, IsGroup: r.IsGroup, LastInboundAt: store.UTC(r.LastInboundAt)}
}

// RecordMessage updates the conversation for a message at `at`:
// last_message_at moves forward (never back, so late receipts of older
// messages do not reorder the list). An inbound message also counts as
// unread, moves last_inbound_at (which opens the official 24-hour window)
// and reopens a closed conversation (Resolved or Cancelled become Open:
// the contact wrote again; Spam and Banned stay). An outbound message marks
// the conversation as responded (never_responded_attendant) the first time.
// Errors: NotFound, Internal.
func (s *Service) RecordMessage(ctx context.Context, tx *store.Tx, conversationID int64, at time.Time, inbound bool) error {
	at = stamp(at)
	q := tx.NewUpdate().Table("contact_channels").
		Set("last_message_at = CASE WHEN last_message_at IS NULL OR last_message_at < ? THEN ? ELSE last_message_at END", at, at).
		Set("updated_at = ?", stamp(s.now())).Set(bumpVersion).
		Where("id = ?", conversationID)
	if inbound {
		q = q.Set("unread_count = unread_count + 1").
			Set("last_inbound_at = CASE WHEN last_inbound_at IS NULL OR last_inbound_at < ? THEN ? ELSE last_inbound_at END", at, at).
			Set("status_id = CASE WHEN status_id IN (?, ?) THEN ? ELSE status_id END", int(StatusResolved), int(StatusCancelled), int(StatusOpen))
	} else {
		q = q.Set("first_response_at = COALESCE(first_response_at, ?)", at)
	}
	res, err := q.Exec(ctx)
	if err != nil {
		return fault.Internalf(err, "record message on conversation %d", conversationID)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fault.New(fault.NotFound, "Conversation not found.")
	}
	return nil
}

// RecordOutbound ensures the conversation of an outbound message and
// records the message on it (see Ensure and RecordMessage). An existing
// conversation costs one UPDATE … RETURNING, which also brings when the
// contact last wrote (Ref.LastInboundAt, for the official window) and its
// contact's name so that a key-named conversation is named (learnName)
// only when a name is known; a new one takes Ensure's path and then
// RecordMessage's. Errors: those of Ensure and RecordMessage.
func (s *Service) RecordOutbound(ctx context.Context, tx *store.Tx, in EnsureInput, at time.Time) (Ref, error) {
	key := strings.TrimSpace(in.ContactKey)
	at = stamp(at)
	var c conversationRow
	var contactName string
	err := store.ScanBound(ctx, tx, `UPDATE contact_channels SET `+outboundSet+`
		WHERE company_channel_id = ? AND is_group = ? AND key = ?
		RETURNING id, company_id, contact_id, key, name, is_group, last_inbound_at,
			(SELECT ct.name FROM contacts AS ct WHERE ct.id = contact_channels.contact_id) AS contact_name`,
		append(s.outboundSetArgs(at), in.CompanyChannelID, in.IsGroup, key), &c.ID, &c.CompanyID, &c.ContactID, &c.Key, &c.Name, &c.IsGroup, &c.LastInboundAt, &contactName)
	if store.IsNoRows(err) {
		ref, err := s.Ensure(ctx, tx, in)
		if err != nil {
			return Ref{}, err
		}
		return ref, s.RecordMessage(ctx, tx, ref.ID, at, false)
	}
	if err != nil {
		return Ref{}, fault.Internalf(err, "record outbound message")
	}
	if c.Name != c.Key {
		return refOf(c), nil
	}
	name := cmp.Or(givenName(in, key), contactName)
	if name == "" || name == c.Key {
		return refOf(c), nil // nobody knows a name yet
	}
	return s.learnName(ctx, tx, c, name)
}

// outboundSet is what an outbound message changes on its existing
// conversation; outboundSetArgs are its arguments for a message at at.
const outboundSet = `last_message_at = CASE WHEN last_message_at IS NULL OR last_message_at < ? THEN ? ELSE last_message_at END,
	first_response_at = COALESCE(first_response_at, ?), updated_at = ?, ` + bumpVersion

func (s *Service) outboundSetArgs(at time.Time) []any {
	return []any{at, at, at, stamp(s.now())}
}

// OutboundParts is RecordOutbound's common case as parts of one statement
// the caller composes with its own writes (PostgreSQL's data-modifying
// WITH queries): the send path stores a message that way in one round trip
// (see messaging's accept.go).
type OutboundParts struct {
	// Find selects the conversation (id, name) when recording the message
	// on it takes nothing but Touch: it exists, its window is open (when
	// asked), and it has no name to learn. Anything else selects no row,
	// and the caller takes RecordOutbound's path instead.
	Find store.Part
	// touchArgs are Touch's SET arguments, fixed with Find's time.
	touchArgs []any
}

// Touch is RecordOutbound's UPDATE of the conversation Find selected, made
// only when the caller's query gate returned a row.
func (p OutboundParts) Touch(gate store.Part) store.Part {
	return store.NewPart("touched", `UPDATE contact_channels SET `+outboundSet+`
			WHERE id = (SELECT id FROM `+p.Find.Name+`) AND EXISTS (SELECT 1 FROM `+gate.Name+`)`, p.touchArgs...)
}

// OutboundParts returns RecordOutbound's common case for an outbound
// message at at. With checkWindow, Find selects nothing for a conversation
// whose official window is closed at at (WindowAt's bound: open while the
// last inbound message is less than WindowLength old).
func (s *Service) OutboundParts(in EnsureInput, at time.Time, checkWindow bool) OutboundParts {
	at = stamp(at)
	key := strings.TrimSpace(in.ContactKey)
	// RecordOutbound names a key-named conversation (learnName) after the
	// name it is given, or else its contact's: such a conversation is not
	// the common case.
	noName := `cc.name <> cc.key`
	if givenName(in, key) == "" {
		noName = `(cc.name <> cc.key OR COALESCE((SELECT ct.name FROM contacts AS ct WHERE ct.id = cc.contact_id), '') IN ('', cc.key))`
	}
	window := ``
	findArgs := []any{in.CompanyChannelID, in.IsGroup, key}
	if checkWindow {
		window = ` AND cc.last_inbound_at > ?`
		findArgs = append(findArgs, stamp(at.Add(-WindowLength)))
	}
	return OutboundParts{
		Find: store.NewPart("found", `SELECT cc.id, cc.name FROM contact_channels AS cc
			WHERE cc.company_channel_id = ? AND cc.is_group = ? AND cc.key = ?`+window+` AND `+noName, findArgs...),
		touchArgs: s.outboundSetArgs(at),
	}
}

// WindowFor reports the official 24-hour window of the one-to-one
// conversation of contactKey on a company channel at now; a conversation
// that does not exist is closed (the contact never wrote).
func (s *Service) WindowFor(ctx context.Context, companyChannelID int64, contactKey string, now time.Time) (Window, error) {
	var row conversationRow
	err := s.db.Bun.NewSelect().Model(&row).Column("last_inbound_at").
		Where("cc.company_channel_id = ?", companyChannelID).Where("cc.key = ?", strings.TrimSpace(contactKey)).
		OrderExpr("cc.is_group ASC").Limit(1).Scan(ctx)
	if store.IsNoRows(err) {
		return Window{}, nil
	}
	if err != nil {
		return Window{}, fault.Internalf(err, "read conversation window")
	}
	return WindowAt(store.UTC(row.LastInboundAt), now), nil
}

// CreatedPayload is the data of omnichat.conversation.created for c.
//
// The three event builders are the ones Ensure and UpdateContactChannel
// publish with; they are exported so that what is built outside a change
// (the webhook contract's provider) comes from the same code. c must carry
// its Contact, and its Sector and User when it has them: Get with
// AllRelations (or UpdateContactChannel's result) returns such a snapshot.
func (s *Service) CreatedPayload(c Conversation) events.ConversationCreatedPayload {
	return events.ConversationCreatedPayload(s.payload(c))
}

// AssignedPayload is the data of omnichat.conversation.assigned for c, which
// is assigned (c.UserID set), previously assigned to previousUserID (nil
// when it had no assignee). See CreatedPayload for what c must carry.
func (s *Service) AssignedPayload(c Conversation, previousUserID *int64) events.ConversationAssignedPayload {
	var assigned int64
	if c.UserID != nil {
		assigned = *c.UserID
	}
	return events.ConversationAssignedPayload{ConversationPayload: s.payload(c),
		ChangeContext: events.ConversationAssignedChange{PreviousUserID: previousUserID, AssignedUserID: assigned}}
}

// ClosedPayload is the data of omnichat.conversation.closed for c, which
// arrived at a closed status from previous. See CreatedPayload for what c
// must carry.
func (s *Service) ClosedPayload(c Conversation, previous StatusID) events.ConversationClosedPayload {
	return events.ConversationClosedPayload{ConversationPayload: s.payload(c),
		ChangeContext: events.ConversationClosedChange{PreviousStatusID: events.ConversationStatus(previous),
			StatusID: events.ConversationStatus(c.StatusID)}}
}

// payload is the document's conversation payload of c: every field, times
// ISO 8601 with offset, in the representation GET /api/contact-channels
// uses for the same fields (one vocabulary for REST and events):
// channel_type is the channel type's name (TypeID.DisplayName), platform
// its code; phone and contact.email are null when absent, never "";
// last_message_at is LastMessageAtOrCreated. The phone is the
// conversation's (the contact's; groups have none).
func (s *Service) payload(c Conversation) events.ConversationPayload {
	p := events.ConversationPayload{
		ID: c.ID, Name: c.Name, Key: c.Key, Phone: c.Phone, IsGroup: c.IsGroup, StatusID: events.ConversationStatus(c.StatusID),
		CompanyChannelID: c.CompanyChannelID, ChannelTypeID: events.ChannelType(c.ChannelTypeID),
		ChannelType: c.ChannelTypeID.DisplayName(), Platform: events.ChannelPlatform(c.ChannelTypeID.Name()),
		OriginID: events.ConversationOrigin(c.OriginID), UnreadCount: int64(c.UnreadCount),
		CreatedAt: s.times.Offset(c.CreatedAt), LastMessageAt: s.times.Offset(c.LastMessageAtOrCreated()),
		Version: c.Version,
	}
	if ct := c.Contact; ct != nil {
		p.Contact = events.ConversationContact{ID: ct.ID, Name: ct.Name, Email: ct.Email}
		p.Phone = ct.Phone // Ensure's fresh snapshot carries the phone on its contact only
	}
	if c.Sector != nil {
		p.Sector = &events.ConversationSector{ID: c.Sector.ID, Name: c.Sector.Name}
	}
	if u := c.User; u != nil {
		p.AssignedUser = &events.ConversationUser{ID: u.ID, Name: u.Name, Email: u.Email}
	}
	return p
}

// publish publishes a channel-scope conversation event in tx.
func (s *Service) publish(ctx context.Context, tx *store.Tx, name string, c Conversation, data any) error {
	chID := c.CompanyChannelID
	err := s.pub.Publish(ctx, tx, webhooks.Event{Name: name, CompanyID: c.CompanyID, CompanyChannelID: &chID,
		OccurredAt: s.now(), Data: data})
	if err != nil {
		return fmt.Errorf("publish %s: %w", name, err)
	}
	return nil
}

// givenName is the contact name the caller gave, or "" when it gave none or
// only the key again: a key is not a name, and a conversation named after
// its key takes the first real name it learns (learnName).
func givenName(in EnsureInput, key string) string {
	if name := strings.TrimSpace(in.ContactName); name != key {
		return name
	}
	return ""
}
