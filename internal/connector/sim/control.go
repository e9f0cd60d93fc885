package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/msgtype"
)

// The control side of the simulator: what the phone and the contacts do.
// Each call acts on one connection's session; events it causes reach the
// session's handler after the driver's lock is released.

// ContactSpec seeds an address-book entry of the connection's account.
type ContactSpec struct {
	Key    string `json:"key"`
	Name   string `json:"name"`
	Notify string `json:"notify,omitempty"`
	// OnChatapp registers the number on the chat app (default true), so
	// number checks find it.
	OnChatapp *bool `json:"on_chatapp,omitempty"`
}

// GroupSpec seeds a group the connection's account can see.
type GroupSpec struct {
	// Key is generated ("<connection key>-<digits>") when empty.
	Key      string `json:"key,omitempty"`
	Name     string `json:"name"`
	Announce bool   `json:"announce"`
	// IsMember defaults to true.
	IsMember     *bool `json:"is_member,omitempty"`
	IsAdmin      bool  `json:"is_admin"`
	Participants int   `json:"participants"`
}

// InboundSpec is a message a contact sends to the connection, in any of
// the kinds the real chat app delivers.
type InboundSpec struct {
	From string `json:"from"`
	Name string `json:"name"`
	// GroupKey, when set, makes it a message written in that group.
	GroupKey string          `json:"group_key,omitempty"`
	Text     string          `json:"text"`
	File     *connector.File `json:"file,omitempty"`
	// FromMe: the connection's own account wrote it on the phone, to From.
	FromMe    bool   `json:"from_me,omitempty"`
	ReplyTo   string `json:"reply_to,omitempty"`
	Forwarded bool   `json:"forwarded,omitempty"`
	// Reaction is an emoji on the message ReplyTo ("" with ReactionRemoved
	// takes one back).
	Reaction        string `json:"reaction,omitempty"`
	ReactionRemoved bool   `json:"reaction_removed,omitempty"`
	// EditOf and RevokeOf change a message From sent earlier (Text is the
	// new text of an edit), within the chat app's time limits.
	EditOf   string        `json:"edit_of,omitempty"`
	RevokeOf string        `json:"revoke_of,omitempty"`
	Location *LocationSpec `json:"location,omitempty"`
	Contact  *CardSpec     `json:"contact,omitempty"`
	Poll     *PollSpec     `json:"poll,omitempty"`
}

// LocationSpec is a shared pin.
type LocationSpec struct {
	Latitude  float64 `json:"latitude"`
	Longitude float64 `json:"longitude"`
	Name      string  `json:"name,omitempty"`
	Address   string  `json:"address,omitempty"`
}

// CardSpec is a shared contact card.
type CardSpec struct {
	Name  string `json:"name"`
	VCard string `json:"vcard"`
}

// PollSpec is a poll.
type PollSpec struct {
	Question string   `json:"question"`
	Options  []string `json:"options"`
}

// sentInbound is what the simulated chat app remembers of a message a
// contact wrote, to enforce who may change it and until when.
type sentInbound struct {
	channelID int64
	from      string
	at        time.Time
	revoked   bool
}

// Scan is the phone scanning the current QR code: the session becomes
// logged and the handler learns the device ref.
func (s *Session) Scan(ctx context.Context) error {
	s.d.mu.Lock()
	if s.closed {
		s.d.mu.Unlock()
		return fault.New(fault.Unavailable, "The session was replaced by another login")
	}
	if s.logged {
		s.d.mu.Unlock()
		return fault.New(fault.Rule, MsgAlreadyLogged)
	}
	if s.pairing == nil {
		s.d.mu.Unlock()
		return fault.New(fault.Rule, MsgNoPairing)
	}
	if _, _, ok := codeIndex(s.pairing.started, s.d.now()); !ok {
		s.pairing = nil
		s.d.mu.Unlock()
		return fault.New(fault.Rule, MsgPairingExpired)
	}
	ref := fmt.Sprintf("sim:%s.%d", s.acct.Key, s.pairing.nonce)
	s.logged, s.deviceRef, s.pairing = true, ref, nil
	s.d.registered[s.scope(s.acct.Key)] = true
	s.d.mu.Unlock()
	return s.h.Paired(ctx, ref)
}

// Unlink is the phone removing the linked device.
func (s *Session) Unlink(ctx context.Context) error {
	s.d.mu.Lock()
	if err := s.usable(); err != nil {
		s.d.mu.Unlock()
		return err
	}
	s.logged, s.deviceRef = false, ""
	s.d.mu.Unlock()
	return s.h.LoggedOut(ctx, "The device was removed on the phone")
}

// SeedContacts adds entries to the account's address book.
func (s *Session) SeedContacts(specs []ContactSpec) ([]connector.Contact, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	b := s.d.bookOf(s.scope(s.acct.Key))
	out := make([]connector.Contact, 0, len(specs))
	for _, c := range specs {
		key, err := connector.NormalizeNumber(c.Key)
		if err != nil {
			return nil, err
		}
		ct := connector.Contact{Key: key, Name: c.Name, Notify: c.Notify}
		b.contacts[key] = ct
		if c.OnChatapp == nil || *c.OnChatapp {
			s.d.registered[s.scope(key)] = true
		} else {
			delete(s.d.registered, s.scope(key))
		}
		out = append(out, ct)
	}
	return out, nil
}

// SeedGroup adds (or replaces) a group the account can see.
func (s *Session) SeedGroup(spec GroupSpec) (connector.Group, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	key := spec.Key
	if key == "" {
		key = fmt.Sprintf("%s-%d", s.acct.Key, 1700000000+s.d.next())
	}
	key, err := connector.NormalizeGroupKey(key)
	if err != nil {
		return connector.Group{}, err
	}
	g := connector.Group{Key: key, Name: spec.Name, Announce: spec.Announce, IsMember: spec.IsMember == nil || *spec.IsMember,
		IsAdmin: spec.IsAdmin, Participants: spec.Participants}
	if !g.IsMember {
		g.IsAdmin = false
	}
	s.d.bookOf(s.scope(s.acct.Key)).groups[key] = g
	return g, nil
}

// Deliver is a contact (or a group member) writing to the connection.
func (s *Session) Deliver(ctx context.Context, spec InboundSpec) (connector.Inbound, error) {
	s.d.mu.Lock()
	if err := s.usable(); err != nil {
		s.d.mu.Unlock()
		return connector.Inbound{}, err
	}
	from, err := connector.NormalizeNumber(spec.From)
	if err != nil {
		s.d.mu.Unlock()
		return connector.Inbound{}, err
	}
	chat := connector.Chat{Key: from}
	chatName := ""
	if spec.GroupKey != "" {
		key, err := connector.NormalizeGroupKey(spec.GroupKey)
		if err != nil {
			s.d.mu.Unlock()
			return connector.Inbound{}, err
		}
		if g, ok := s.d.bookOf(s.scope(s.acct.Key)).groups[key]; !ok || !g.IsMember {
			s.d.mu.Unlock()
			return connector.Inbound{}, fault.New(fault.NotFound, MsgGroupNotFound)
		}
		chat = connector.Chat{Key: key, IsGroup: true}
		chatName = s.d.bookOf(s.scope(s.acct.Key)).groups[key].Name
	}
	s.d.registered[s.scope(from)] = true
	if spec.EditOf != "" || spec.RevokeOf != "" {
		c, err := s.change(from, chat, spec)
		s.d.mu.Unlock()
		if err != nil {
			return connector.Inbound{}, err
		}
		return connector.Inbound{ExternalID: c.ExternalID, Chat: chat, SenderKey: from, Text: c.Text, TypeID: msgtype.Text, SentAt: c.At},
			s.h.Changed(ctx, c)
	}
	in := connector.Inbound{ExternalID: randomID("3A", 10), Chat: chat, ChatName: chatName, SenderKey: from, SenderName: spec.Name,
		Text: spec.Text, TypeID: msgtype.Text, File: spec.File, SentAt: s.d.now(), FromMe: spec.FromMe, ReplyTo: spec.ReplyTo,
		IsForwarded: spec.Forwarded}
	switch {
	case spec.File != nil:
		in.TypeID = msgtype.ForContentType(spec.File.ContentType)
	case spec.Reaction != "" || spec.ReactionRemoved:
		in.Text, in.TypeID = connector.ReactionText(spec.Reaction), msgtype.Reaction
	case spec.Location != nil:
		l := spec.Location
		in.Text, in.TypeID = connector.LocationText(l.Name, l.Address, l.Latitude, l.Longitude), msgtype.Location
	case spec.Contact != nil:
		in.Text, in.TypeID = connector.ContactCardText(spec.Contact.Name, spec.Contact.VCard), msgtype.Contacts
		in.File = &connector.File{Name: spec.Contact.Name + ".vcf", ContentType: "text/vcard", Data: []byte(spec.Contact.VCard)}
	case spec.Poll != nil:
		in.Text, in.TypeID = connector.PollText(spec.Poll.Question, spec.Poll.Options), msgtype.Poll
	}
	if spec.FromMe {
		in.SenderKey, in.SenderName = s.acct.Key, ""
	}
	s.d.inbound[in.ExternalID] = &sentInbound{channelID: s.acct.ChannelID, from: in.SenderKey, at: in.SentAt}
	s.d.mu.Unlock()
	return in, s.h.Inbound(ctx, in)
}

// change is an edit or a revoke of a message the chat app carried on this
// connection. The author's own client keeps to the chat app's time limits;
// the chat app itself relays a change of anyone's message, as a modified
// client sends it, so a change by someone else is passed on unchecked for
// the gateway to ignore. It runs with the driver's lock held.
func (s *Session) change(from string, chat connector.Chat, spec InboundSpec) (connector.Change, error) {
	id := spec.EditOf
	if spec.RevokeOf != "" {
		id = spec.RevokeOf
	}
	if spec.FromMe {
		from = s.acct.Key
	}
	now := s.d.now()
	c := connector.Change{ExternalID: id, Chat: chat, FromMe: spec.FromMe, SenderKey: from, Revoked: spec.RevokeOf != "", At: now}
	if !c.Revoked {
		c.Text = spec.Text
	}
	var (
		author  string
		at      time.Time
		revoked *bool
		edited  *bool
		text    *string
	)
	if m := s.d.inbound[id]; m != nil && m.channelID == s.acct.ChannelID {
		author, at, revoked = m.from, m.at, &m.revoked
	} else if m := s.d.messages[id]; m != nil && m.ChannelID == s.acct.ChannelID {
		// Sent through the gateway: the account's own, which the phone may
		// change too.
		author, at, revoked, edited, text = s.acct.Key, m.SentAt, &m.Revoked, &m.Edited, &m.Text
	} else {
		return connector.Change{}, fault.New(fault.NotFound, MsgMessageUnknown)
	}
	if author != from {
		return c, nil
	}
	switch {
	case *revoked:
		return connector.Change{}, fault.New(fault.Rule, MsgRevoked)
	case c.Revoked && now.Sub(at) > RevokeWindow:
		return connector.Change{}, fault.New(fault.Rule, MsgRevokeTooLate)
	case !c.Revoked && now.Sub(at) > EditWindow:
		return connector.Change{}, fault.New(fault.Rule, MsgEditTooLate)
	}
	if c.Revoked {
		*revoked = true
	} else if text != nil {
		*text, *edited = c.Text, true
	}
	return c, nil
}

// Ack is the recipient's device reporting a sent message delivered, read or
// failed.
func (s *Session) Ack(ctx context.Context, externalID string, statusID int, reason string) (connector.Receipt, error) {
	if !slices.Contains([]int{connector.StatusDelivered, connector.StatusRead, connector.StatusFailed}, statusID) {
		return connector.Receipt{}, fault.New(fault.Invalid, "Status must be delivered, read or failed")
	}
	s.d.mu.Lock()
	if err := s.usable(); err != nil {
		s.d.mu.Unlock()
		return connector.Receipt{}, err
	}
	m := s.d.messages[externalID]
	if m == nil || m.ChannelID != s.acct.ChannelID {
		s.d.mu.Unlock()
		return connector.Receipt{}, fault.New(fault.NotFound, MsgMessageUnknown)
	}
	r := connector.Receipt{ExternalID: externalID, Chat: m.Chat, StatusID: statusID, Reason: reason, At: s.d.now()}
	s.d.mu.Unlock()
	return r, s.h.Receipt(ctx, r)
}

// Outbox lists what the connection sent through the simulated chat app, in
// order, with edits and revokes applied.
func (s *Session) Outbox() []Message {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	var out []Message
	for _, m := range s.d.messages {
		if m.ChannelID == s.acct.ChannelID {
			out = append(out, *m)
		}
	}
	slices.SortFunc(out, func(a, b Message) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// Report is the chat app ending or changing the connection the way the
// real one does (connected, dropped, replaced by another client, banned,
// outdated, refused): the handler learns the state, and a terminal state
// stops the session, which then answers as closed.
func (s *Session) Report(ctx context.Context, st connector.SessionState) error {
	s.d.mu.Lock()
	if s.closed {
		s.d.mu.Unlock()
		return fault.New(fault.Unavailable, "The session was replaced by another login")
	}
	if st.Terminal {
		s.closed = true
	}
	s.d.mu.Unlock()
	return s.h.State(ctx, st)
}

// Session is the live session of a connection on the simulated chat app
// (nil when none is open): what the control calls act on.
func (d *Driver) Session(channelID int64) *Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sessions[channelID]
}
