// Package sim is the simulator connector driver: a deterministic, in-process
// stand-in for the chat app, and the default driver. One Driver is the whole
// simulated network (accounts, address books, groups, linked devices); each
// connection's Session is a linked device on it. Pairing completes only
// through a control call (Session.Scan, exposed over HTTP by the
// connections capability), so tests and local users drive every state
// change themselves. Times come from the injected clock; message ids are
// random in the chat app's own form, so a restarted simulator never hands
// out an id it used before (a counter would, and a new message would take
// an old one's id).
package sim

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
)

// Pairing timing, as the chat app does it: the first code lives 60 s, then
// five more codes of 20 s each; after that pairing has timed out and a new
// QR request starts over.
const (
	FirstCodeTTL = 60 * time.Second
	NextCodeTTL  = 20 * time.Second
	Refreshes    = 5
	// EditWindow and RevokeWindow are how long after sending the chat app
	// still accepts an edit or a revoke for everyone.
	EditWindow   = connector.EditWindow
	RevokeWindow = connector.RevokeWindow
)

// Messages of the faults the simulator returns.
const (
	MsgAlreadyLogged  = "Connection is already logged in"
	MsgNoPairing      = "No pairing in progress: ask for a QR code first"
	MsgPairingExpired = "The QR code expired: ask for a new one"
	MsgGroupNotFound  = "Group not found"
	MsgMessageUnknown = "The chat app does not know this message"
	MsgEditTooLate    = connector.MsgEditTooLate
	MsgRevokeTooLate  = connector.MsgRevokeTooLate
	MsgRevoked        = "The message was revoked"
	MsgNotMember      = "The account is not a member of the group"
	MsgAnnounceOnly   = "Only administrators can send to this group"
	MsgIDTaken        = "The message id belongs to another account's message"
)

// Driver is the simulated chat app.
type Driver struct {
	now clock.Clock

	mu         sync.Mutex
	seq        uint64
	registered map[scoped]bool     // numbers with a chat-app account, per company
	books      map[scoped]*book    // per company and account number
	sessions   map[int64]*Session  // live linked devices by connection
	messages   map[string]*Message // every message sent through the network
	inbound    map[string]*sentInbound
}

// scoped is a number as one company sees the simulated chat app: the
// numbers "on the chat app" and the address books of one company are never
// another's (one simulator serves every tenant of a deployment).
type scoped struct {
	company int64
	number  string
}

// scope is number as the session's company sees it.
func (s *Session) scope(number string) scoped {
	return scoped{company: s.acct.CompanyID, number: number}
}

type book struct {
	contacts map[string]connector.Contact
	groups   map[string]connector.Group
}

// New returns an empty simulated network.
func New(now clock.Clock) *Driver {
	if now == nil {
		now = clock.System
	}
	return &Driver{now: now, registered: map[scoped]bool{}, books: map[scoped]*book{},
		sessions: map[int64]*Session{}, messages: map[string]*Message{}, inbound: map[string]*sentInbound{}}
}

// Name implements connector.Driver.
func (d *Driver) Name() string { return "simulator" }

// Open implements connector.Driver. A stored device ref restores the logged
// session (the simulator trusts it as the real chat app trusts stored
// credentials). A second Open for the same connection replaces the first
// session, which stops working, as a duplicate login does on the chat app.
func (d *Driver) Open(_ context.Context, acct connector.Account, h connector.Handler) (connector.Session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.sessions[acct.ChannelID]; old != nil {
		old.closed = true
	}
	s := &Session{d: d, acct: acct, h: h, deviceRef: acct.DeviceRef, logged: acct.DeviceRef != ""}
	d.sessions[acct.ChannelID] = s
	if s.logged {
		d.registered[scoped{company: acct.CompanyID, number: acct.Key}] = true
	}
	return s, nil
}

func (d *Driver) bookOf(key scoped) *book {
	b := d.books[key]
	if b == nil {
		b = &book{contacts: map[string]connector.Contact{}, groups: map[string]connector.Group{}}
		d.books[key] = b
	}
	return b
}

func (d *Driver) next() uint64 { d.seq++; return d.seq }

// Message is what the simulated chat app knows of a message a session sent.
type Message struct {
	ExternalID  string         `json:"external_id"`
	ChannelID   int64          `json:"-"`
	Chat        connector.Chat `json:"chat"`
	Text        string         `json:"text"`
	FileName    string         `json:"file_name,omitempty"`
	ContentType string         `json:"content_type,omitempty"`
	FileSize    int            `json:"file_size,omitempty"`
	Edited      bool           `json:"edited"`
	Revoked     bool           `json:"revoked"`
	SentAt      time.Time      `json:"sent_at"`
	// SendCount is how many times the connection handed this message (by
	// its id) to the chat app: more than 1 means the gateway sent it again
	// (the chat app shows it once, like the real one, which keys messages
	// by id).
	SendCount int `json:"send_count"`
	seq       uint64
}

type pairing struct {
	started time.Time
	nonce   uint64
	opts    connector.PairingOptions
}

// Session is one connection's linked device.
type Session struct {
	d    *Driver
	acct connector.Account
	h    connector.Handler

	// guarded by d.mu
	deviceRef string
	logged    bool
	closed    bool
	pairing   *pairing
}

var (
	_ connector.Session     = (*Session)(nil)
	_ connector.IDGenerator = (*Driver)(nil)
)

// NewMessageID implements connector.IDGenerator: random, in the real
// chat app's web form, so ids never repeat after a restart (a counter
// would, and a new message would then take an old one's id).
func (d *Driver) NewMessageID(connector.Account) string {
	return randomID("3EB0", 9)
}

// randomID is prefix followed by n random bytes in upper-case hex.
func randomID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + strings.ToUpper(hex.EncodeToString(b))
}

// codeIndex is which of the refreshing codes is current at now, and false
// when pairing has timed out.
func codeIndex(started, now time.Time) (int, time.Time, bool) {
	elapsed := now.Sub(started)
	if elapsed < FirstCodeTTL {
		return 0, started.Add(FirstCodeTTL), true
	}
	i := 1 + int((elapsed-FirstCodeTTL)/NextCodeTTL)
	if i > Refreshes {
		return 0, time.Time{}, false
	}
	return i, started.Add(FirstCodeTTL + time.Duration(i)*NextCodeTTL), true
}

func qrFor(key string, nonce uint64, idx int) (payload, code string) {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s|%d|%d", key, nonce, idx))
	enc := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])
	return fmt.Sprintf("2@SIM%s,%s,%d", enc[:24], key, idx), enc[24:28] + "-" + enc[28:32]
}

func (s *Session) usable() error {
	if s.closed {
		return fault.New(fault.Unavailable, "The session was replaced by another login")
	}
	if !s.logged {
		return fault.New(fault.Rule, connector.MsgNotLogged)
	}
	return nil
}

// Pairing implements connector.Session.
func (s *Session) Pairing(_ context.Context, opts connector.PairingOptions) (connector.QRCode, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if s.closed {
		return connector.QRCode{}, fault.New(fault.Unavailable, "The session was replaced by another login")
	}
	if s.logged {
		return connector.QRCode{}, fault.New(fault.Rule, MsgAlreadyLogged)
	}
	now := s.d.now()
	if s.pairing != nil {
		if _, _, ok := codeIndex(s.pairing.started, now); !ok {
			s.pairing = nil
		}
	}
	if s.pairing == nil {
		s.pairing = &pairing{started: now, nonce: s.d.next(), opts: opts}
	}
	idx, exp, _ := codeIndex(s.pairing.started, now)
	payload, code := qrFor(s.acct.Key, s.pairing.nonce, idx)
	if !opts.PhoneCode {
		// As on the chat app: a code to type is issued only on request.
		code = ""
	}
	return connector.QRCode{Payload: payload, Code: code, ExpiresAt: exp}, nil
}

// Logged implements connector.Session.
func (s *Session) Logged() bool {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return s.logged && !s.closed
}

// Logout implements connector.Session.
func (s *Session) Logout(context.Context) error {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	s.logged, s.deviceRef, s.pairing = false, "", nil
	return nil
}

// Close implements connector.Session.
func (s *Session) Close() {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.closed = true
	if s.d.sessions[s.acct.ChannelID] == s {
		delete(s.d.sessions, s.acct.ChannelID)
	}
}

// Contacts implements connector.Session: the address book, by key.
func (s *Session) Contacts(context.Context) ([]connector.Contact, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, err
	}
	b := s.d.bookOf(s.scope(s.acct.Key))
	out := make([]connector.Contact, 0, len(b.contacts))
	for _, c := range b.contacts {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b connector.Contact) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Groups implements connector.Session: the groups the account is in, by key.
func (s *Session) Groups(context.Context) ([]connector.Group, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, err
	}
	b := s.d.bookOf(s.scope(s.acct.Key))
	out := make([]connector.Group, 0, len(b.groups))
	for _, g := range b.groups {
		if g.IsMember {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b connector.Group) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// GroupInfo implements connector.Session.
func (s *Session) GroupInfo(_ context.Context, groupKey string) (connector.Group, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if err := s.usable(); err != nil {
		return connector.Group{}, err
	}
	key, err := connector.NormalizeGroupKey(groupKey)
	if err != nil {
		return connector.Group{}, err
	}
	g, ok := s.d.bookOf(s.scope(s.acct.Key)).groups[key]
	if !ok {
		return connector.Group{}, fault.New(fault.NotFound, MsgGroupNotFound)
	}
	return g, nil
}

// Check implements connector.Session. A number exists when an account was
// seeded for it (or it is a paired connection); a Brazilian mobile number
// with the ninth digit also matches an account registered without it, and
// the answer's key is then the registered one, as on the chat app.
func (s *Session) Check(_ context.Context, entries []string, groups bool) ([]connector.NumberCheck, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if err := s.usable(); err != nil {
		return nil, err
	}
	out := make([]connector.NumberCheck, len(entries))
	b := s.d.bookOf(s.scope(s.acct.Key))
	for i, e := range entries {
		out[i].Entry = e
		if groups {
			key, err := connector.NormalizeGroupKey(e)
			if g, ok := b.groups[key]; err == nil && ok && g.IsMember {
				out[i].Exists, out[i].Key = true, key
			}
			continue
		}
		num, err := connector.NormalizeNumber(e)
		if err != nil {
			continue
		}
		switch {
		case s.d.registered[s.scope(num)]:
			out[i].Exists, out[i].Key = true, num
		case len(num) == 13 && strings.HasPrefix(num, "55") && num[4] == '9' && s.d.registered[s.scope(num[:4]+num[5:])]:
			out[i].Exists, out[i].Key = true, num[:4]+num[5:]
		}
	}
	return out, nil
}

// Send implements connector.Session. Group sends follow the chat app's own
// rules (member; admin in announce mode) even though the gateway checks them
// before sending.
func (s *Session) Send(_ context.Context, m connector.Outgoing) (connector.Sent, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if err := s.usable(); err != nil {
		return connector.Sent{}, err
	}
	chat, err := connector.ParseChat(m.Chat.Key, m.Chat.IsGroup)
	if err != nil {
		return connector.Sent{}, err
	}
	if chat.IsGroup {
		g, ok := s.d.bookOf(s.scope(s.acct.Key)).groups[chat.Key]
		switch {
		case !ok || !g.IsMember:
			return connector.Sent{}, &fault.Error{Kind: fault.Refused, Message: MsgNotMember, Details: map[string]any{"reason": MsgNotMember}}
		case g.Announce && !g.IsAdmin:
			return connector.Sent{}, &fault.Error{Kind: fault.Refused, Message: MsgAnnounceOnly, Details: map[string]any{"reason": MsgAnnounceOnly}}
		}
	}
	if !chat.IsGroup && !s.d.registered[s.scope(chat.Key)] && s.d.registered[s.scope(connector.WithoutNinthDigit(chat.Key))] {
		// As the number check: the account registered without the digit.
		chat.Key = connector.WithoutNinthDigit(chat.Key)
	}
	now := s.d.now()
	id := m.ExternalID
	if id == "" {
		id = s.d.NewMessageID(s.acct)
	}
	if prev := s.d.messages[id]; prev != nil {
		if prev.ChannelID != s.acct.ChannelID {
			return connector.Sent{}, &fault.Error{Kind: fault.Refused, Message: MsgIDTaken, Details: map[string]any{"reason": MsgIDTaken}}
		}
		// The same message again: the chat app keeps one.
		prev.SendCount++
		return connector.Sent{ExternalID: id, At: prev.SentAt}, nil
	}
	msg := &Message{ExternalID: id, ChannelID: s.acct.ChannelID, Chat: chat, Text: m.Text, SentAt: now, SendCount: 1, seq: s.d.next()}
	if m.File != nil {
		msg.FileName, msg.ContentType, msg.FileSize = m.File.Name, m.File.ContentType, len(m.File.Data)
	}
	s.d.messages[msg.ExternalID] = msg
	return connector.Sent{ExternalID: msg.ExternalID, At: now}, nil
}

func (s *Session) own(externalID string, chat connector.Chat) (*Message, error) {
	m := s.d.messages[externalID]
	if m == nil || m.ChannelID != s.acct.ChannelID || m.Chat.Key != chat.Key {
		return nil, &fault.Error{Kind: fault.Refused, Message: MsgMessageUnknown, Details: map[string]any{"reason": MsgMessageUnknown}}
	}
	return m, nil
}

// Edit implements connector.Session: accepted within EditWindow.
func (s *Session) Edit(_ context.Context, chat connector.Chat, externalID, text string) error {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	m, err := s.own(externalID, chat)
	if err != nil {
		return err
	}
	switch {
	case m.Revoked:
		return &fault.Error{Kind: fault.Refused, Message: MsgRevoked, Details: map[string]any{"reason": MsgRevoked}}
	case s.d.now().Sub(m.SentAt) > EditWindow:
		return &fault.Error{Kind: fault.Refused, Message: MsgEditTooLate, Details: map[string]any{"reason": MsgEditTooLate}}
	}
	m.Text, m.Edited = text, true
	return nil
}

// Revoke implements connector.Session: accepted within RevokeWindow.
func (s *Session) Revoke(_ context.Context, chat connector.Chat, externalID string) error {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	m, err := s.own(externalID, chat)
	if err != nil {
		return err
	}
	if !m.Revoked && s.d.now().Sub(m.SentAt) > RevokeWindow {
		return &fault.Error{Kind: fault.Refused, Message: MsgRevokeTooLate, Details: map[string]any{"reason": MsgRevokeTooLate}}
	}
	m.Revoked = true
	return nil
}
