// Package connections owns the unofficial chat-app connections: company
// channels of type 2 paired with a phone through a connector driver (the
// simulator or the real whatsmeow driver). It serves endpoints 1 to 9 of the
// API document, holds each connection's live session on exactly one replica
// (a lease in the database, taken over when its holder dies; calls reaching
// another replica are forwarded to the holder through the database), sends,
// edits and revokes for the messaging capability (Transport,
// GroupAuthorizer), and hands inbound messages and receipts to it.
package connections

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/skip2/go-qrcode"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// Receiver takes what sessions report: the messaging capability.
type Receiver interface {
	ReceiveInbound(ctx context.Context, in messaging.Inbound) error
	ApplyReceipt(ctx context.Context, r messaging.Receipt) error
	ApplyInboundChange(ctx context.Context, c messaging.InboundChange) error
}

// DeleteByChannelFunc deletes, inside tx, what another capability keeps for
// a company channel (its messages, their files) when a connection is
// deleted; afterCommit (may be nil) runs once tx committed, for what a
// rollback could not undo (files). messaging.Service.DeleteChannelMessages
// has this shape.
type DeleteByChannelFunc func(ctx context.Context, tx *store.Tx, companyChannelID int64) (afterCommit func(), err error)

// Options configure the service; zero durations take the defaults.
type Options struct {
	DB       *store.DB
	Channels *channels.Service
	Driver   connector.Driver
	Now      clock.Clock
	Logger   *slog.Logger
	Registry prometheus.Registerer
	// ReplicaID names this replica in leases (default: host, pid and a
	// random suffix, so a restarted process is a new replica).
	ReplicaID string
	// LeaseTTL is how long a lease lasts without renewal (default 30 s);
	// Heartbeat is how often leases are renewed and orphans taken over
	// (default 10 s).
	LeaseTTL  time.Duration
	Heartbeat time.Duration
	// CallPoll is how often the holder looks for forwarded calls (default
	// 100 ms); CallTimeout bounds one forwarded call (default 60 s).
	CallPoll    time.Duration
	CallTimeout time.Duration
	// PairingIdle closes an unpaired session nobody used for that long
	// (default 5 min).
	PairingIdle time.Duration
	// DeleteByChannel run inside the delete transaction of a connection.
	DeleteByChannel []DeleteByChannelFunc
	// Events publishes chatapp.connection.state_changed (nil: not
	// published); Times formats its times.
	Events webhooks.Publisher
	Times  clock.Formatter
}

// Service is the connections capability.
type Service struct {
	db          *store.DB
	channels    *channels.Service
	driver      connector.Driver
	now         clock.Clock
	log         *slog.Logger
	id          string
	ttl         time.Duration
	heartbeat   time.Duration
	callPoll    time.Duration
	callTimeout time.Duration
	pairingIdle time.Duration
	deleters    []DeleteByChannelFunc
	events      webhooks.Publisher
	times       clock.Formatter
	metrics     metrics

	receiverMu sync.RWMutex
	receiver   Receiver

	mu      sync.Mutex
	live    map[int64]*live
	opening map[int64]*sync.Mutex

	calls     sync.WaitGroup
	callSlots chan struct{}
}

type metrics struct {
	sessions  prometheus.Gauge
	takeovers prometheus.Counter
	leaseLost prometheus.Counter
	forwarded prometheus.Counter
}

// New builds the service. Call Run to hold sessions in the background.
func New(o Options) *Service {
	s := &Service{db: o.DB, channels: o.Channels, driver: o.Driver, now: o.Now, log: o.Logger, id: o.ReplicaID,
		ttl: o.LeaseTTL, heartbeat: o.Heartbeat, callPoll: o.CallPoll, callTimeout: o.CallTimeout, pairingIdle: o.PairingIdle,
		deleters: o.DeleteByChannel, events: o.Events, times: o.Times, live: map[int64]*live{}, opening: map[int64]*sync.Mutex{},
		callSlots: make(chan struct{}, maxConcurrentCalls)}
	if s.now == nil {
		s.now = clock.System
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.id == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		s.id = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&s.ttl, 30 * time.Second}, {&s.heartbeat, 10 * time.Second}, {&s.callPoll, 100 * time.Millisecond},
		{&s.callTimeout, 60 * time.Second}, {&s.pairingIdle, 5 * time.Minute}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	s.metrics = metrics{
		sessions:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "gateway_connection_sessions", Help: "Chat-app sessions held by this replica."}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_connection_takeovers_total", Help: "Connections taken over from a replica whose lease expired."}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_connection_leases_lost_total", Help: "Sessions closed here because another replica took the lease."}),
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_connection_calls_forwarded_total", Help: "Calls forwarded to the replica holding the connection."}),
	}
	if o.Registry != nil {
		o.Registry.MustRegister(s.metrics.sessions, s.metrics.takeovers, s.metrics.leaseLost, s.metrics.forwarded)
	}
	return s
}

// ReplicaID is this replica's name in leases.
func (s *Service) ReplicaID() string { return s.id }

// SetReceiver connects the messaging capability (built after this one,
// because it needs this service's Transport).
func (s *Service) SetReceiver(r Receiver) {
	s.receiverMu.Lock()
	s.receiver = r
	s.receiverMu.Unlock()
}

// OnDelete adds functions that run inside the delete transaction of a
// connection (messaging's DeleteChannelMessages, built after this service).
func (s *Service) OnDelete(fns ...DeleteByChannelFunc) {
	s.mu.Lock()
	s.deleters = append(s.deleters, fns...)
	s.mu.Unlock()
}

// Selector chooses a connection by id or key (at least one).
type Selector struct {
	ID  *int64
	Key *string
}

func (s *Service) resolve(ctx context.Context, companyID int64, sel Selector) (channels.Unofficial, error) {
	return s.channels.GetUnofficial(ctx, companyID, sel.ID, sel.Key)
}

// ListChatapps lists the company's connections (endpoint 1).
func (s *Service) ListChatapps(ctx context.Context, companyID int64, f channels.UnofficialFilter) ([]channels.Unofficial, int, error) {
	return s.channels.ListUnofficial(ctx, companyID, f)
}

// QRCode is a pairing code ready for the API: the QR image as PNG.
type QRCode struct {
	Connection channels.Unofficial
	Code       string
	PNG        []byte
	ExpiresAt  time.Time
}

// ChatappQrcode starts or continues pairing (endpoint 2). Errors: NotFound,
// Rule when already logged in.
func (s *Service) ChatappQrcode(ctx context.Context, companyID int64, sel Selector, opts connector.PairingOptions) (QRCode, error) {
	conn, err := s.resolve(ctx, companyID, sel)
	if err != nil {
		return QRCode{}, err
	}
	if conn.Logged {
		return QRCode{}, fault.New(fault.Rule, "Connection is already logged in")
	}
	qr, err := invoke[connector.QRCode](ctx, s, conn.ID, opQR{Opts: opts})
	if err != nil {
		return QRCode{}, err
	}
	png, err := qrcode.Encode(qr.Payload, qrcode.Medium, 256)
	if err != nil {
		return QRCode{}, fault.Internalf(err, "encode QR code")
	}
	return QRCode{Connection: conn, Code: qr.Code, PNG: png, ExpiresAt: qr.ExpiresAt}, nil
}

// ChatappCreate creates a connection (endpoint 3). Errors: Rule when the
// number is used by another connection.
func (s *Service) ChatappCreate(ctx context.Context, companyID int64, name, key string) (channels.Unofficial, error) {
	return s.channels.CreateUnofficial(ctx, companyID, name, key)
}

// ChatappUpdate renames a connection or changes its number (endpoint 4).
// The number of a logged-in connection cannot change: the paired phone is
// that number. Errors: NotFound, Rule.
func (s *Service) ChatappUpdate(ctx context.Context, companyID int64, sel Selector, ch channels.UnofficialChange) (channels.Unofficial, error) {
	conn, err := s.resolve(ctx, companyID, sel)
	if err != nil {
		return channels.Unofficial{}, err
	}
	keyChanges := ch.NewKey != nil && *ch.NewKey != conn.Key
	if keyChanges && conn.Logged {
		return channels.Unofficial{}, fault.New(fault.Rule, "Log the connection out before changing its number")
	}
	if !keyChanges {
		ch.NewKey = nil
	}
	out, err := s.channels.UpdateUnofficial(ctx, companyID, conn.ID, ch)
	if err != nil {
		return channels.Unofficial{}, err
	}
	if keyChanges {
		// A pairing in progress was for the old number.
		s.closeIfHeld(ctx, conn.ID)
	}
	return out, nil
}

// closeIfHeld ends the live session of channelID wherever it is held,
// without claiming a lease when none is.
func (s *Service) closeIfHeld(ctx context.Context, channelID int64) {
	if owner, err := s.Owner(ctx, channelID); err != nil || owner == "" {
		return
	}
	if _, err := invoke[none](ctx, s, channelID, opClose{}); err != nil {
		s.log.WarnContext(ctx, "close connection session", "channel_id", channelID, "err", err)
	}
}

// ChatappDelete deletes a connection and, in the same transaction, its
// conversations and messages (endpoint 5). A logged-in session is logged
// out first so the phone drops the linked device; when the chat app cannot
// be reached the deletion still happens and the phone keeps a dead device
// entry until the user removes it.
func (s *Service) ChatappDelete(ctx context.Context, companyID int64, sel Selector) error {
	conn, err := s.resolve(ctx, companyID, sel)
	if err != nil {
		return err
	}
	if conn.Logged {
		if _, err := invoke[none](ctx, s, conn.ID, opLogout{}); err != nil {
			s.log.WarnContext(ctx, "log out before delete", "channel_id", conn.ID, "err", err)
		}
	}
	s.closeIfHeld(ctx, conn.ID)
	var after []func()
	err = s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		after = after[:0]
		s.mu.Lock()
		deleters := slices.Clone(s.deleters)
		s.mu.Unlock()
		for _, del := range deleters {
			fn, err := del(ctx, tx, conn.ID)
			if err != nil {
				return err
			}
			if fn != nil {
				after = append(after, fn)
			}
		}
		// Conversations (and anything else referencing the channel) go
		// with it through their ON DELETE CASCADE foreign keys.
		forget, err := s.channels.DeleteUnofficial(ctx, tx, companyID, conn.ID)
		if err != nil {
			return err
		}
		after = append(after, forget)
		return nil
	})
	if err != nil {
		return err
	}
	for _, fn := range after {
		fn()
	}
	if l := s.local(conn.ID); l != nil {
		s.drop(l)
	}
	return nil
}

// ChatappLogout closes the chat-app session (endpoint 6). Errors: NotFound,
// Rule when not logged in.
func (s *Service) ChatappLogout(ctx context.Context, companyID int64, sel Selector) error {
	conn, err := s.loggedConnection(ctx, companyID, sel)
	if err != nil {
		return err
	}
	_, err = invoke[none](ctx, s, conn.ID, opLogout{})
	return err
}

func (s *Service) loggedConnection(ctx context.Context, companyID int64, sel Selector) (channels.Unofficial, error) {
	conn, err := s.resolve(ctx, companyID, sel)
	if err != nil {
		return conn, err
	}
	if !conn.Logged {
		return conn, fault.New(fault.Rule, connector.MsgNotLogged)
	}
	return conn, nil
}

// ChatappContactList lists the account's contacts (endpoint 7).
func (s *Service) ChatappContactList(ctx context.Context, companyID int64, sel Selector) ([]connector.Contact, error) {
	conn, err := s.loggedConnection(ctx, companyID, sel)
	if err != nil {
		return nil, err
	}
	return invoke[[]connector.Contact](ctx, s, conn.ID, opContacts{})
}

// ChatappGroupList lists the account's groups (endpoint 8).
func (s *Service) ChatappGroupList(ctx context.Context, companyID int64, sel Selector) ([]connector.Group, error) {
	conn, err := s.loggedConnection(ctx, companyID, sel)
	if err != nil {
		return nil, err
	}
	return invoke[[]connector.Group](ctx, s, conn.ID, opGroups{})
}

// ChatappCheckOnChatapp checks numbers or group keys (endpoint 9).
func (s *Service) ChatappCheckOnChatapp(ctx context.Context, companyID int64, sel Selector, entries []string, groups bool) ([]connector.NumberCheck, error) {
	conn, err := s.loggedConnection(ctx, companyID, sel)
	if err != nil {
		return nil, err
	}
	return invoke[[]connector.NumberCheck](ctx, s, conn.ID, opCheck{Entries: entries, Groups: groups})
}

// inbound hands a contact's message to messaging. In a group the
// conversation is the group, named after it when the session knows it, and
// the member who wrote goes along as the message's sender.
func (s *Service) inbound(ctx context.Context, l *live, m connector.Inbound) error {
	ch, err := s.channels.UnofficialByID(ctx, l.channelID)
	if err != nil {
		return err
	}
	in := messaging.Inbound{Channel: ch.Channel, ExternalID: m.ExternalID, ContactKey: m.Chat.Key, ContactName: m.SenderName,
		IsGroup: m.Chat.IsGroup, Text: m.Text, TypeID: m.TypeID, SentAt: m.SentAt, FromMe: m.FromMe,
		IsForwarded: m.IsForwarded, ReplyToExternalID: m.ReplyTo, SenderKey: m.SenderKey}
	if in.TypeID == 0 {
		in.TypeID = msgtype.Text
	}
	if m.FromMe && !m.Chat.IsGroup {
		// The account's own push name is not the contact's.
		in.ContactName = ""
	}
	if m.Chat.IsGroup {
		// The driver names the group from what it knows; asking the chat
		// app here would hold up the session's event delivery.
		in.ContactName = m.Chat.Key
		if m.ChatName != "" {
			in.ContactName = m.ChatName
		}
		in.SenderKey, in.SenderName = m.SenderKey, m.SenderName
	}
	if in.ContactName == "" {
		in.ContactName = in.ContactKey
	}
	if m.File != nil {
		in.Media = messaging.MediaBytes(m.File.Name, m.File.ContentType, m.File.Data)
	}
	r := s.receiverOrNil()
	if r == nil {
		return errNoReceiver
	}
	return r.ReceiveInbound(ctx, in)
}

func (s *Service) changed(ctx context.Context, channelID int64, c connector.Change) error {
	ch, r, err := s.receiverFor(ctx, channelID)
	if err != nil {
		return err
	}
	return r.ApplyInboundChange(ctx, messaging.InboundChange{Channel: ch.Channel, ExternalID: c.ExternalID, ContactKey: c.Chat.Key,
		IsGroup: c.Chat.IsGroup, FromMe: c.FromMe, SenderKey: c.SenderKey, Revoked: c.Revoked, Text: c.Text, At: c.At})
}

func (s *Service) receipt(ctx context.Context, channelID int64, rc connector.Receipt) error {
	ch, r, err := s.receiverFor(ctx, channelID)
	if err != nil {
		return err
	}
	return r.ApplyReceipt(ctx, messaging.Receipt{Channel: ch.Channel, ExternalID: rc.ExternalID, StatusID: rc.StatusID, Reason: rc.Reason, At: rc.At})
}

// receiverFor is the connection an event concerns and who takes it.
func (s *Service) receiverFor(ctx context.Context, channelID int64) (channels.Unofficial, Receiver, error) {
	ch, err := s.channels.UnofficialByID(ctx, channelID)
	if err != nil {
		return ch, nil, err
	}
	r := s.receiverOrNil()
	if r == nil {
		return ch, nil, errNoReceiver
	}
	return ch, r, nil
}

// errNoReceiver is a wiring fault: the app always plugs messaging in
// (SetReceiver) before sessions run.
var errNoReceiver = fault.Internalf(errors.New("no receiver attached"), "hand over a chat-app event")

func (s *Service) receiverOrNil() Receiver {
	s.receiverMu.RLock()
	defer s.receiverMu.RUnlock()
	return s.receiver
}

// DataURL renders a PNG as the data URL the QR answer carries.
func DataURL(png []byte) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
}

// State is a connection's live state for its record (the `state`
// extension).
type State struct {
	State  string
	Reason string
}

// States answers the state of each connection in conns: what its session
// last reported, or, for one that never reported anything, what its logged
// flag says.
func (s *Service) States(ctx context.Context, conns []channels.Unofficial) (map[int64]State, error) {
	out := make(map[int64]State, len(conns))
	if len(conns) == 0 {
		return out, nil
	}
	ids := make([]int64, len(conns))
	for i, c := range conns {
		ids[i] = c.ID
		out[c.ID] = State{State: connector.StateLoggedOut}
		if c.Logged {
			out[c.ID] = State{State: connector.StateConnected}
		}
	}
	var rows []struct {
		ID     int64  `bun:"company_channel_id"`
		State  string `bun:"state"`
		Reason string `bun:"state_reason"`
	}
	err := s.db.Bun.NewRaw(`SELECT company_channel_id, state, state_reason FROM chatapp_sessions WHERE company_channel_id IN (?) AND state <> ''`,
		bun.In(ids)).Scan(ctx, &rows)
	if err != nil {
		return nil, fault.Internalf(err, "read connection states")
	}
	for _, r := range rows {
		out[r.ID] = State{State: r.State, Reason: r.Reason}
	}
	return out, nil
}
