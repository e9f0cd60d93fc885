// Package whatsmeow is the real connector driver: each connection is a
// linked device of the chat app through go.mau.fi/whatsmeow, with the
// library's session store (keys, contacts, LID map) in the gateway's own
// database — the whatsmeow_* tables, created by the library's own upgrade on
// start, next to the service's tables, on SQLite as on PostgreSQL.
//
// It needs the chat app's servers, which the build and test machines cannot
// reach: what runs offline (identifier mapping, message building, error
// mapping, the store on both engines) is unit-tested, the rest is built
// against the library's API and exercised only with a real phone.
package whatsmeow

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	wa "go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waCompanionReg"
	"go.mau.fi/whatsmeow/proto/waWa6"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/store/sqlstore"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
	gwstore "github.com/chatmsg/gateway/internal/store"
)

// firstCodeWait bounds how long a QR request waits for the chat app's first
// code after connecting.
const firstCodeWait = 20 * time.Second

// Driver opens whatsmeow sessions over one session store.
type Driver struct {
	container *sqlstore.Container
	log       *slog.Logger
	now       clock.Clock
}

var _ connector.Driver = (*Driver)(nil)

// New opens the session store in db (creating or upgrading the whatsmeow_*
// tables) and returns the driver.
func New(ctx context.Context, db *gwstore.DB, logger *slog.Logger, now clock.Clock) (*Driver, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if now == nil {
		now = clock.System
	}
	// The library's dialect names: "sqlite" is modernc's driver name, "pgx"
	// the pgx stdlib adapter the gateway's PostgreSQL pool runs under.
	dialect := "sqlite"
	if db.Dialect == gwstore.Postgres {
		dialect = "pgx"
	}
	c := sqlstore.NewWithDB(db.Bun.DB, dialect, slogLogger{l: logger.With("component", "whatsmeow")})
	if err := c.Upgrade(ctx); err != nil {
		return nil, fmt.Errorf("whatsmeow session store: %w", err)
	}
	return &Driver{container: c, log: logger, now: now}, nil
}

// Name implements connector.Driver.
func (d *Driver) Name() string { return "whatsmeow" }

// Open implements connector.Driver: a stored device reconnects in the
// background (the library retries on its own); a device the store no longer
// has opens as not logged, which the caller records.
func (d *Driver) Open(ctx context.Context, acct connector.Account, h connector.Handler) (connector.Session, error) {
	s := &session{d: d, acct: acct, h: h}
	if acct.DeviceRef == "" {
		return s, nil
	}
	jid, err := ParseDeviceRef(acct.DeviceRef)
	if err != nil {
		return s, nil
	}
	dev, err := d.container.GetDevice(ctx, jid)
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, "The session store could not be read", err)
	}
	if dev == nil {
		return s, nil
	}
	s.attach(dev, nil)
	if err := s.client.Connect(); err != nil {
		s.client.Disconnect()
		return nil, MapError(err)
	}
	return s, nil
}

type session struct {
	d    *Driver
	acct connector.Account
	h    connector.Handler

	mu      sync.Mutex
	device  *store.Device
	client  *wa.Client
	pairing bool
	qr      connector.QRCode
	qrReady chan struct{}
	closed  bool
}

var _ connector.Session = (*session)(nil)

func (s *session) attach(dev *store.Device, props *pairingProps) {
	cli := wa.NewClient(dev, waLogger(s.d.log, s.acct.ChannelID))
	cli.EnableAutoReconnect = true
	if props != nil {
		// The linked-device name is per connection: the library's default
		// payload carries process-wide device properties, so the
		// registration payload is rebuilt with this connection's.
		cli.GetClientPayload = func() *waWa6.ClientPayload { return props.payload(dev) }
	}
	cli.AddEventHandler(s.onEvent)
	s.device, s.client = dev, cli
}

// pairingProps carry the os and browser of a QR request into the
// registration payload.
type pairingProps struct{ opts connector.PairingOptions }

func (p *pairingProps) payload(dev *store.Device) *waWa6.ClientPayload {
	return PairingPayload(dev, p.opts)
}

// PairingPayload is the payload a new device registers with: the library's
// own, with the device properties naming this connection's os and browser.
func PairingPayload(dev *store.Device, opts connector.PairingOptions) *waWa6.ClientPayload {
	payload := dev.GetClientPayload()
	if dev.ID != nil || payload.GetDevicePairingData() == nil {
		return payload
	}
	dp := proto.Clone(store.DeviceProps).(*waCompanionReg.DeviceProps)
	dp.Os = proto.String(opts.OS)
	_, platform := PairClient(opts.Browser)
	dp.PlatformType = platform.Enum()
	if raw, err := proto.Marshal(dp); err == nil {
		payload.DevicePairingData.DeviceProps = raw
	}
	return payload
}

func (s *session) Logged() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.device != nil && s.device.ID != nil && !s.closed
}

func (s *session) cli() (*wa.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fault.New(fault.Unavailable, "The session is closed")
	}
	if s.client == nil || s.device == nil || s.device.ID == nil {
		return nil, fault.New(fault.Rule, connector.MsgNotLogged)
	}
	return s.client, nil
}

// Pairing implements connector.Session: a new device connects without
// credentials, the library streams QR codes (60 s, then 20 s each, 160 s in
// all), and a pairing code for the connection's number is asked for once
// the socket is up.
func (s *session) Pairing(ctx context.Context, opts connector.PairingOptions) (connector.QRCode, error) {
	s.mu.Lock()
	if s.device != nil && s.device.ID != nil {
		s.mu.Unlock()
		return connector.QRCode{}, fault.New(fault.Rule, "Connection is already logged in")
	}
	if s.pairing && s.qr.Payload != "" && s.d.now().Before(s.qr.ExpiresAt) {
		qr := s.qr
		s.mu.Unlock()
		return qr, nil
	}
	if !s.pairing {
		if err := s.startPairing(opts); err != nil {
			s.mu.Unlock()
			return connector.QRCode{}, err
		}
	}
	ready := s.qrReady
	s.mu.Unlock()
	select {
	case <-ready:
	case <-time.After(firstCodeWait):
		return connector.QRCode{}, fault.New(fault.Unavailable, MsgUnreachable)
	case <-ctx.Done():
		return connector.QRCode{}, fault.Wrap(fault.Unavailable, MsgUnreachable, ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.qr.Payload == "" {
		return connector.QRCode{}, fault.New(fault.Unavailable, "Pairing ended before a code was issued; ask again")
	}
	return s.qr, nil
}

// startPairing runs with s.mu held.
func (s *session) startPairing(opts connector.PairingOptions) error {
	if s.client != nil {
		s.client.Disconnect()
	}
	dev := s.d.container.NewDevice()
	s.attach(dev, &pairingProps{opts: opts})
	codes, err := s.client.GetQRChannel(context.Background())
	if err != nil {
		return MapError(err)
	}
	if err := s.client.Connect(); err != nil {
		return MapError(err)
	}
	s.pairing, s.qr, s.qrReady = true, connector.QRCode{}, make(chan struct{})
	go s.followCodes(s.client, codes, opts)
	return nil
}

// followCodes keeps the current code until pairing ends.
func (s *session) followCodes(cli *wa.Client, codes <-chan wa.QRChannelItem, opts connector.PairingOptions) {
	first := true
	pairCode := ""
	for item := range codes {
		if item.Event != wa.QRChannelEventCode {
			s.d.log.Info("pairing ended", "channel_id", s.acct.ChannelID, "event", item.Event, "err", item.Error)
			break
		}
		if first {
			first = false
			clientType, _ := PairClient(opts.Browser)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			code, err := cli.PairPhone(ctx, s.acct.Key, true, clientType, DisplayName(opts))
			cancel()
			if err != nil {
				s.d.log.Warn("pairing code", "channel_id", s.acct.ChannelID, "err", err)
			}
			pairCode = code
		}
		s.mu.Lock()
		s.qr = connector.QRCode{Payload: item.Code, Code: pairCode, ExpiresAt: s.d.now().Add(item.Timeout)}
		select {
		case <-s.qrReady:
		default:
			close(s.qrReady)
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.pairing = false
	if s.device == nil || s.device.ID == nil {
		s.qr = connector.QRCode{}
		select {
		case <-s.qrReady:
		default:
			close(s.qrReady)
		}
	}
	s.mu.Unlock()
}

func (s *session) Logout(ctx context.Context) error {
	cli, err := s.cli()
	if err != nil {
		return err
	}
	if err := cli.Logout(ctx); err != nil {
		return MapError(err)
	}
	s.mu.Lock()
	s.device = nil
	s.mu.Unlock()
	return nil
}

func (s *session) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.client != nil {
		s.client.Disconnect()
	}
}

func (s *session) Contacts(ctx context.Context) ([]connector.Contact, error) {
	cli, err := s.cli()
	if err != nil {
		return nil, err
	}
	all, err := cli.Store.Contacts.GetAllContacts(ctx)
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, "The session store could not be read", err)
	}
	out := make([]connector.Contact, 0, len(all))
	for jid, info := range all {
		chat, ok := ChatOf(jid)
		if !ok || chat.IsGroup {
			continue
		}
		name := firstNonEmpty(info.FullName, info.FirstName, info.BusinessName, info.PushName, chat.Key)
		out = append(out, connector.Contact{Key: chat.Key, Name: name, Notify: info.PushName})
	}
	slices.SortFunc(out, func(a, b connector.Contact) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// groupOf reads a group from the account's point of view.
func groupOf(info *types.GroupInfo, own []types.JID) connector.Group {
	g := connector.Group{Key: info.JID.User, Name: info.Name, Announce: info.IsAnnounce, Participants: len(info.Participants)}
	if info.ParticipantCount > g.Participants {
		g.Participants = info.ParticipantCount
	}
	for _, p := range info.Participants {
		for _, me := range own {
			if me.IsEmpty() {
				continue
			}
			if p.JID.User == me.User || p.PhoneNumber.User == me.User || p.LID.User == me.User {
				g.IsMember = true
				g.IsAdmin = p.IsAdmin || p.IsSuperAdmin
			}
		}
	}
	return g
}

func (s *session) own(cli *wa.Client) []types.JID {
	var own []types.JID
	if cli.Store.ID != nil {
		own = append(own, cli.Store.ID.ToNonAD())
	}
	if !cli.Store.LID.IsEmpty() {
		own = append(own, cli.Store.LID.ToNonAD())
	}
	return own
}

func (s *session) Groups(ctx context.Context) ([]connector.Group, error) {
	cli, err := s.cli()
	if err != nil {
		return nil, err
	}
	infos, err := cli.GetJoinedGroups(ctx)
	if err != nil {
		return nil, MapError(err)
	}
	own := s.own(cli)
	out := make([]connector.Group, 0, len(infos))
	for _, info := range infos {
		out = append(out, groupOf(info, own))
	}
	slices.SortFunc(out, func(a, b connector.Group) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *session) GroupInfo(ctx context.Context, groupKey string) (connector.Group, error) {
	cli, err := s.cli()
	if err != nil {
		return connector.Group{}, err
	}
	jid, err := ChatJID(connector.Chat{Key: groupKey, IsGroup: true})
	if err != nil {
		return connector.Group{}, err
	}
	info, err := cli.GetGroupInfo(ctx, jid)
	if err != nil {
		mapped := MapError(err)
		if fault.KindOf(mapped) == fault.Refused && fault.As(mapped).Message == MsgNotInGroup {
			// Visible but not joined: not a member, which the group check
			// answers as such.
			return connector.Group{Key: jid.User}, nil
		}
		return connector.Group{}, mapped
	}
	return groupOf(info, s.own(cli)), nil
}

func (s *session) Check(ctx context.Context, entries []string, groups bool) ([]connector.NumberCheck, error) {
	cli, err := s.cli()
	if err != nil {
		return nil, err
	}
	out := make([]connector.NumberCheck, len(entries))
	if groups {
		for i, e := range entries {
			out[i].Entry = e
			g, err := s.GroupInfo(ctx, e)
			switch {
			case err == nil && g.IsMember:
				out[i].Exists, out[i].Key = true, g.Key
			case err != nil && fault.KindOf(err) == fault.Unavailable:
				return nil, err
			}
		}
		return out, nil
	}
	var queries []string
	for i, e := range entries {
		out[i].Entry = e
		if num, err := connector.NormalizeNumber(e); err == nil {
			queries = append(queries, phoneQuery(num))
		}
	}
	if len(queries) == 0 {
		return out, nil
	}
	answers, err := cli.IsOnWhatsApp(ctx, queries)
	if err != nil {
		return nil, MapError(err)
	}
	byQuery := map[string]types.IsOnWhatsAppResponse{}
	for _, a := range answers {
		byQuery[strings.TrimPrefix(a.Query, "+")] = a
	}
	for i, e := range entries {
		num, err := connector.NormalizeNumber(e)
		if err != nil {
			continue
		}
		if a, ok := byQuery[num]; ok && a.IsIn {
			out[i].Exists, out[i].Key = true, a.JID.User
		}
	}
	return out, nil
}

// chat is the connected client and the JID of chat, for a send.
func (s *session) chat(chat connector.Chat) (*wa.Client, types.JID, error) {
	cli, err := s.cli()
	if err != nil {
		return nil, types.JID{}, err
	}
	to, err := ChatJID(chat)
	return cli, to, err
}

func (s *session) Send(ctx context.Context, m connector.Outgoing) (connector.Sent, error) {
	cli, to, err := s.chat(m.Chat)
	if err != nil {
		return connector.Sent{}, err
	}
	msg := TextMessage(m.Text)
	if m.File != nil {
		up, err := cli.Upload(ctx, m.File.Data, MediaType(m.File.ContentType))
		if err != nil {
			return connector.Sent{}, MapError(err)
		}
		msg = MediaMessage(m.File, up, m.Text)
		if MediaType(m.File.ContentType) == wa.MediaAudio && m.Text != "" {
			// Audio carries no caption: the text goes first, on its own.
			if _, err := cli.SendMessage(ctx, to, TextMessage(m.Text)); err != nil {
				return connector.Sent{}, MapError(err)
			}
		}
	}
	resp, err := cli.SendMessage(ctx, to, msg)
	if err != nil {
		return connector.Sent{}, MapError(err)
	}
	return connector.Sent{ExternalID: resp.ID, At: resp.Timestamp}, nil
}

func (s *session) Edit(ctx context.Context, chat connector.Chat, externalID, text string) error {
	cli, to, err := s.chat(chat)
	if err != nil {
		return err
	}
	_, err = cli.SendMessage(ctx, to, cli.BuildEdit(to, externalID, TextMessage(text)))
	return MapError(err)
}

func (s *session) Revoke(ctx context.Context, chat connector.Chat, externalID string) error {
	cli, to, err := s.chat(chat)
	if err != nil {
		return err
	}
	_, err = cli.SendMessage(ctx, to, cli.BuildRevoke(to, types.EmptyJID, externalID))
	return MapError(err)
}

// onEvent turns the library's events into the connector's.
func (s *session) onEvent(evt any) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	switch e := evt.(type) {
	case *events.PairSuccess:
		err = s.h.Paired(ctx, DeviceRef(e.ID))
	case *events.LoggedOut:
		s.mu.Lock()
		s.device = nil
		s.mu.Unlock()
		err = s.h.LoggedOut(ctx, fmt.Sprintf("logged out by the chat app (%s)", e.Reason))
	case *events.StreamReplaced:
		s.d.log.Warn("whatsmeow session replaced by another login", "channel_id", s.acct.ChannelID)
	case *events.Message:
		err = s.onMessage(ctx, e)
	case *events.Receipt:
		err = s.onReceipt(ctx, e)
	}
	if err != nil {
		s.d.log.Warn("whatsmeow event not handled", "channel_id", s.acct.ChannelID, "event", fmt.Sprintf("%T", evt), "err", err)
	}
}

func (s *session) resolver(ctx context.Context, cli *wa.Client) func(types.JID) (types.JID, bool) {
	return func(lid types.JID) (types.JID, bool) {
		pn, err := cli.Store.LIDs.GetPNForLID(ctx, lid)
		return pn, err == nil && !pn.IsEmpty()
	}
}

func (s *session) onMessage(ctx context.Context, e *events.Message) error {
	if e.Info.IsFromMe || e.Info.Chat.Server == types.BroadcastServer {
		return nil
	}
	s.mu.Lock()
	cli := s.client
	s.mu.Unlock()
	if cli == nil {
		return nil
	}
	sender := phoneOf(e.Info.Sender, e.Info.SenderAlt, s.resolver(ctx, cli))
	if sender == "" {
		return fmt.Errorf("sender %s has no known number", e.Info.Sender)
	}
	chat := connector.Chat{Key: sender}
	if e.Info.IsGroup {
		g, ok := ChatOf(e.Info.Chat)
		if !ok {
			return nil
		}
		chat = g
	}
	text, typeID, media, name, mime := Incoming(e.Message)
	in := connector.Inbound{ExternalID: e.Info.ID, Chat: chat, SenderKey: sender, SenderName: e.Info.PushName,
		Text: text, TypeID: typeID, SentAt: e.Info.Timestamp}
	if media != nil {
		data, err := cli.Download(ctx, media)
		if err != nil {
			s.d.log.Warn("download inbound media", "channel_id", s.acct.ChannelID, "err", err)
		} else {
			in.File = &connector.File{Name: name, ContentType: mime, Data: data}
		}
	}
	return s.h.Inbound(ctx, in)
}

// receiptStatus maps the receipt types that concern a sent message.
func receiptStatus(t types.ReceiptType) (int, bool) {
	switch t {
	case types.ReceiptTypeDelivered:
		return connector.StatusDelivered, true
	case types.ReceiptTypeRead, types.ReceiptTypePlayed:
		return connector.StatusRead, true
	case types.ReceiptTypeServerError:
		return connector.StatusFailed, true
	}
	return 0, false
}

func (s *session) onReceipt(ctx context.Context, e *events.Receipt) error {
	status, ok := receiptStatus(e.Type)
	if !ok || e.IsFromMe {
		return nil
	}
	chat, ok := ChatOf(e.Chat)
	if !ok {
		chat = connector.Chat{Key: e.Chat.User}
	}
	for _, id := range e.MessageIDs {
		r := connector.Receipt{ExternalID: id, Chat: chat, StatusID: status, At: e.Timestamp}
		if status == connector.StatusFailed {
			r.Reason = "The chat app could not deliver the message"
		}
		if err := s.h.Receipt(ctx, r); err != nil && fault.KindOf(err) != fault.NotFound {
			return err
		}
	}
	return nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}
