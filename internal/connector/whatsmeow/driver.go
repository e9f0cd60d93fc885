// Package whatsmeow is the real connector driver: each connection is a
// linked device of the chat app through go.mau.fi/whatsmeow, with the
// library's session store (keys, contacts, LID map) in the gateway's own
// database — the whatsmeow_* tables, created by the library's own upgrade on
// start, next to the service's tables, on SQLite as on PostgreSQL.
//
// It needs the chat app's servers, which the build and test machines cannot
// reach: everything that runs offline — the event handling fed with
// library-built events, pairing outcomes, message building, error mapping,
// the store and the media inbox on both engines — is tested; connecting,
// pairing, sending and downloading are exercised only with a real phone
// (internal/connections/README.md lists the manual steps).
package whatsmeow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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

// logoutConnectWait bounds how long a logout of a disconnected session
// waits to be connected to unlink the device.
const logoutConnectWait = 15 * time.Second

// versionWait bounds the latest-version lookup at connect.
const versionWait = 10 * time.Second

// Driver opens whatsmeow sessions over one session store.
type Driver struct {
	container *sqlstore.Container
	db        *gwstore.DB
	log       *slog.Logger
	now       clock.Clock

	// DownloadFunc replaces the client's media download (tests).
	DownloadFunc func(ctx context.Context, media wa.DownloadableMessage) ([]byte, error)

	// sleep waits between reconnect attempts (tests make it instant).
	sleep func(time.Duration)

	// LookupVersionFunc asks the chat app's web client for its current
	// version (the library's GetLatestVersion); tests replace it.
	LookupVersionFunc func(ctx context.Context) (*store.WAVersionContainer, error)
	versionOnce       sync.Once
}

var (
	_ connector.Driver      = (*Driver)(nil)
	_ connector.IDGenerator = (*Driver)(nil)
)

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
	if db.Dialect == gwstore.Postgres {
		// The library decides whether its store exists by looking for its
		// version table in information_schema without naming a schema: a
		// whatsmeow store in another schema of the same database (another
		// deployment, a parallel test) makes it skip creating its own and
		// then fail. Creating the (empty) version table here, in the
		// gateway's schema, exactly as the library would, makes the answer
		// true for this schema; an empty table means "version 0", so the
		// library's upgrade then creates everything else.
		if _, err := db.Bun.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS whatsmeow_version (version INTEGER, compat INTEGER)`); err != nil {
			return nil, fmt.Errorf("whatsmeow session store: %w", err)
		}
	}
	c := sqlstore.NewWithDB(db.Bun.DB, dialect, slogLogger{l: logger.With("component", "whatsmeow")})
	if err := c.Upgrade(ctx); err != nil {
		return nil, fmt.Errorf("whatsmeow session store: %w", err)
	}
	if err := createInbox(ctx, db); err != nil {
		return nil, fmt.Errorf("whatsmeow media inbox: %w", err)
	}
	lookup := func(ctx context.Context) (*store.WAVersionContainer, error) {
		return wa.GetLatestVersion(ctx, &http.Client{Timeout: versionWait})
	}
	return &Driver{container: c, db: db, log: logger, now: now, LookupVersionFunc: lookup, sleep: time.Sleep}, nil
}

// Name implements connector.Driver.
func (d *Driver) Name() string { return "whatsmeow" }

// NewMessageID implements connector.IDGenerator with the library's own id
// scheme, so the chat app sees the id a web client would choose.
func (d *Driver) NewMessageID(connector.Account) string {
	var cli *wa.Client // the library builds ids without a client too
	return cli.GenerateMessageID()
}

// refreshVersion runs once, before the first connect: the chat app rejects
// clients older than its current web version (405, "client outdated"), so
// the version it publishes is used when it can be read; else the
// library's built-in one, which is current as of the pinned release.
func (d *Driver) refreshVersion(ctx context.Context) {
	d.versionOnce.Do(func() {
		builtIn := store.GetWAVersion()
		ctx, cancel := context.WithTimeout(ctx, versionWait)
		defer cancel()
		latest, err := d.LookupVersionFunc(ctx)
		if err != nil || latest == nil || latest.IsZero() {
			d.log.Warn("chat-app client version: latest unknown, using the library's built-in one", "version", builtIn.String(), "err", err)
			return
		}
		store.SetWAVersion(*latest)
		d.log.Info("chat-app client version: using the latest published one", "version", latest.String(), "built_in", builtIn.String())
	})
}

// Open implements connector.Driver: a stored device connects (and
// reconnects in the background, by the library's own retries or, when the
// first connect fails, by the driver's backoff); a device the store no
// longer has opens as not logged, which the caller records.
func (d *Driver) Open(ctx context.Context, acct connector.Account, h connector.Handler) (connector.Session, error) {
	s := d.newSession(acct, h)
	// Media messages parked by an earlier holder are finished here.
	go s.runInbox()
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
	d.refreshVersion(ctx)
	if err := s.client.Connect(); err != nil {
		// The library reconnects by itself only after a connection it
		// made; a first connect that failed is retried here, and the
		// session is open meanwhile (calls answer "unreachable", and a
		// logout still forgets the device locally).
		d.log.Warn("connect failed; retrying with backoff", "channel_id", acct.ChannelID, "err", err)
		go s.reconnect(s.client)
	}
	return s, nil
}

func (d *Driver) newSession(acct connector.Account, h connector.Handler) *session {
	return &session{d: d, acct: acct, h: h, groupNames: map[string]string{}, registered: map[string]types.JID{},
		kick: make(chan struct{}, 1), done: make(chan struct{})}
}

type session struct {
	d    *Driver
	acct connector.Account
	h    connector.Handler
	// kick wakes the media-inbox worker; done ends it (Close).
	kick chan struct{}
	done chan struct{}

	mu       sync.Mutex
	device   *store.Device
	client   *wa.Client
	pairing  bool
	qr       connector.QRCode
	qrReady  chan struct{}
	pairErr  error
	closed   bool
	stopped  bool // a terminal connection event: no reconnect
	retrying bool
	// groupNames caches group subjects so that naming a group's
	// conversation never waits for the chat app on the event goroutine.
	groupNames map[string]string
	// registered caches the account the chat app has for a number written
	// with the ninth digit.
	registered map[string]types.JID
}

var _ connector.Session = (*session)(nil)

func (s *session) attach(dev *store.Device, props *pairingProps) {
	cli := wa.NewClient(dev, waLogger(s.d.log, s.acct.ChannelID))
	// The driver reconnects, not the library: before each attempt it
	// confirms that this replica still holds the connection, so a replica
	// that lost its lease never connects over the new holder (which the
	// chat app would answer by ending the new holder's stream).
	cli.EnableAutoReconnect = false
	// A message is acknowledged only after every handler returned, and not
	// at all when the handler reports failure (it could not be stored, or
	// the lease is gone): the chat app then delivers it again. The
	// decrypted-event buffer keeps the plaintext for that redelivery, whose
	// ciphertext the ratchet can no longer open.
	cli.SynchronousAck = true
	cli.EnableDecryptedEventBuffer = true
	if props != nil {
		// The linked-device name is per connection: the library's default
		// payload carries process-wide device properties, so the
		// registration payload is rebuilt with this connection's.
		cli.GetClientPayload = func() *waWa6.ClientPayload { return props.payload(dev) }
	}
	cli.AddEventHandlerWithSuccessStatus(s.onEvent)
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
	dp.Os = proto.String(DeviceOS(opts.OS))
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
// all), and, only when the caller asks for one, a pairing code for the
// connection's number once the socket is up (asking pushes a notification
// to the phone). A pairing that ends without a code answers why
// (PairingFault).
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
		if err := s.startPairing(ctx, opts); err != nil {
			s.mu.Unlock()
			return connector.QRCode{}, err
		}
	}
	ready := s.qrReady
	s.mu.Unlock()
	return s.awaitCode(ctx, ready, firstCodeWait)
}

// awaitCode waits for the first code of the running pairing, or for the
// event that ended it.
func (s *session) awaitCode(ctx context.Context, ready <-chan struct{}, wait time.Duration) (connector.QRCode, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ready:
	case <-timer.C:
		return connector.QRCode{}, fault.New(fault.Unavailable, MsgUnreachable)
	case <-ctx.Done():
		return connector.QRCode{}, fault.Wrap(fault.Unavailable, MsgUnreachable, ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.qr.Payload == "" {
		if s.pairErr != nil {
			return connector.QRCode{}, s.pairErr
		}
		return connector.QRCode{}, fault.New(fault.Unavailable, MsgPairingEnded)
	}
	return s.qr, nil
}

// startPairing runs with s.mu held.
func (s *session) startPairing(ctx context.Context, opts connector.PairingOptions) error {
	if s.client != nil {
		s.client.Disconnect()
	}
	dev := s.d.container.NewDevice()
	s.attach(dev, &pairingProps{opts: opts})
	codes, err := s.client.GetQRChannel(context.Background())
	if err != nil {
		return MapError(err)
	}
	s.d.refreshVersion(ctx)
	if err := s.client.Connect(); err != nil {
		return MapError(err)
	}
	s.pairing, s.qr, s.qrReady, s.pairErr = true, connector.QRCode{}, make(chan struct{}), nil
	cli := s.client
	var phoneCode func() string
	if opts.PhoneCode {
		phoneCode = func() string {
			clientType, _ := PairClient(opts.Browser)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			code, err := cli.PairPhone(ctx, s.acct.Key, true, clientType, DisplayName(opts))
			if err != nil {
				s.d.log.Warn("pairing code", "channel_id", s.acct.ChannelID, "err", err)
			}
			return code
		}
	}
	go s.followCodes(codes, phoneCode)
	return nil
}

// followCodes keeps the current code until pairing ends, and records why
// it ended when no phone paired.
func (s *session) followCodes(codes <-chan wa.QRChannelItem, phoneCode func() string) {
	first := true
	pairCode := ""
	var end error
	for item := range codes {
		if item.Event != wa.QRChannelEventCode {
			end = PairingFault(item)
			s.d.log.Info("pairing ended", "channel_id", s.acct.ChannelID, "event", item.Event, "err", item.Error)
			break
		}
		if first && phoneCode != nil {
			pairCode = phoneCode()
		}
		first = false
		s.mu.Lock()
		s.qr = connector.QRCode{Payload: item.Code, Code: pairCode, ExpiresAt: s.d.now().Add(item.Timeout)}
		closeOnce(s.qrReady)
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.pairing = false
	if s.device == nil || s.device.ID == nil {
		s.qr, s.pairErr = connector.QRCode{}, end
		closeOnce(s.qrReady)
	}
	s.mu.Unlock()
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// Messages of the pairing faults.
const (
	MsgPairingEnded    = "Pairing ended before a code was issued; ask again"
	MsgPairingTimeout  = "Pairing timed out: no phone scanned the code; ask for a new one"
	MsgClientOutdated  = "The chat app rejected this gateway's client version as outdated; the gateway must be upgraded"
	MsgNoMultidevice   = "The code was scanned by a phone without linked-device support; update the chat app on the phone and ask again"
	MsgPairingState    = "Pairing ended in an unexpected state (the device may already be paired); ask again"
	MsgPairingRejected = "The chat app refused the pairing; ask again"
)

// PairingFault is the fault a QR request answers when pairing ended with
// item instead of a code; nil for a success.
func PairingFault(item wa.QRChannelItem) error {
	switch item.Event {
	case wa.QRChannelSuccess.Event, wa.QRChannelEventCode:
		return nil
	case wa.QRChannelTimeout.Event:
		return fault.New(fault.Rule, MsgPairingTimeout)
	case wa.QRChannelClientOutdated.Event:
		return fault.New(fault.Unavailable, MsgClientOutdated)
	case wa.QRChannelScannedWithoutMultidevice.Event:
		return fault.New(fault.Rule, MsgNoMultidevice)
	case wa.QRChannelErrUnexpectedEvent.Event:
		return fault.New(fault.Unavailable, MsgPairingState)
	case wa.QRChannelEventError:
		return fault.Wrap(fault.Unavailable, MsgPairingRejected, item.Error)
	}
	return fault.New(fault.Unavailable, MsgPairingEnded)
}

// Logout implements connector.Session. A session that is not connected
// right now still unlinks: it connects just for the request, best effort,
// and the device's keys are deleted locally whatever the chat app said, so
// the connection is logged out either way (the phone may then show a
// stale device until it next syncs).
func (s *session) Logout(ctx context.Context) error {
	cli, err := s.cli()
	if err != nil {
		return err
	}
	if !cli.IsLoggedIn() {
		if err := cli.Connect(); err != nil && !errors.Is(err, wa.ErrAlreadyConnected) {
			s.d.log.Warn("logout: could not connect to unlink", "channel_id", s.acct.ChannelID, "err", err)
		} else {
			cli.WaitForConnection(logoutConnectWait)
		}
	}
	if err := cli.Logout(ctx); err != nil {
		s.d.log.Warn("logout: unlink failed; forgetting the device locally", "channel_id", s.acct.ChannelID, "err", err)
		cli.Disconnect()
		if err := cli.Store.Delete(ctx); err != nil {
			return fault.Wrap(fault.Unavailable, "The session store could not be updated", err)
		}
	}
	s.mu.Lock()
	s.device = nil
	s.mu.Unlock()
	return nil
}

func (s *session) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		close(s.done)
	}
	s.closed = true
	if cli := s.client; cli != nil {
		// Close also runs from the library's event goroutine (a logout or
		// a terminal state closes the session); the disconnect must not
		// wait there for locks the library holds around that goroutine.
		go cli.Disconnect()
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

// recipient applies the Brazilian ninth-digit correction the number check
// applies: a mobile number written with the ninth digit may be registered
// without it, and the chat app answers the registered one. Sending to the
// unregistered spelling would go nowhere.
func (s *session) recipient(ctx context.Context, cli *wa.Client, to types.JID) types.JID {
	if to.Server != types.DefaultUserServer || !connector.BrazilianMobile(to.User) {
		return to
	}
	s.mu.Lock()
	known, ok := s.registered[to.User]
	s.mu.Unlock()
	if ok {
		return known
	}
	answers, err := cli.IsOnWhatsApp(ctx, []string{phoneQuery(to.User)})
	if err != nil {
		s.d.log.Warn("ninth-digit check before send", "channel_id", s.acct.ChannelID, "err", err)
		return to
	}
	for _, a := range answers {
		if a.IsIn && !a.JID.IsEmpty() {
			// A number's registration does not change between sends: one
			// lookup per number and session.
			s.mu.Lock()
			s.registered[to.User] = a.JID
			s.mu.Unlock()
			return a.JID
		}
	}
	return to
}

// Send implements connector.Session. The message goes with the id chosen
// before the first attempt (m.ExternalID), so a retry is the same message.
func (s *session) Send(ctx context.Context, m connector.Outgoing) (connector.Sent, error) {
	cli, to, err := s.chat(m.Chat)
	if err != nil {
		return connector.Sent{}, err
	}
	to = s.recipient(ctx, cli, to)
	id := m.ExternalID
	if id == "" {
		id = cli.GenerateMessageID()
	}
	msg := TextMessage(m.Text)
	if m.File != nil {
		up, err := cli.Upload(ctx, m.File.Data, MediaType(m.File.ContentType))
		if err != nil {
			return connector.Sent{}, MapError(err)
		}
		msg = MediaMessage(m.File, up, m.Text)
		if MediaType(m.File.ContentType) == wa.MediaAudio && m.Text != "" {
			// Audio carries no caption: the text goes first, on its own,
			// with an id derived from the message's so a retry repeats it
			// rather than adding one.
			text := WithReply(TextMessage(m.Text), m.ReplyTo, to)
			if _, err := cli.SendMessage(ctx, to, text, wa.SendRequestExtra{ID: CompanionID(id, "text")}); err != nil {
				return connector.Sent{}, MapError(err)
			}
		}
	}
	msg = WithReply(msg, m.ReplyTo, to)
	resp, err := cli.SendMessage(ctx, to, msg, wa.SendRequestExtra{ID: id})
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
	to = s.recipient(ctx, cli, to)
	_, err = cli.SendMessage(ctx, to, cli.BuildEdit(to, externalID, TextMessage(text)))
	return MapError(err)
}

func (s *session) Revoke(ctx context.Context, chat connector.Chat, externalID string) error {
	cli, to, err := s.chat(chat)
	if err != nil {
		return err
	}
	to = s.recipient(ctx, cli, to)
	_, err = cli.SendMessage(ctx, to, cli.BuildRevoke(to, types.EmptyJID, externalID))
	return MapError(err)
}

// onEvent turns the library's events into the connector's. Its answer is
// the library's success status: false for a message that could not be
// handed over (not stored, lease lost), which is then not acknowledged and
// comes again.
func (s *session) onEvent(evt any) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	switch e := evt.(type) {
	case *events.PairSuccess:
		err = s.h.Paired(ctx, DeviceRef(e.ID))
	case *events.Message:
		err = s.onMessage(ctx, e)
		if err != nil {
			s.d.log.Warn("chat-app message not stored; it will be delivered again", "channel_id", s.acct.ChannelID, "id", e.Info.ID, "err", err)
			return false
		}
		return true
	case *events.Receipt:
		err = s.onReceipt(ctx, e)
	default:
		if st, ok := StateOf(evt); ok {
			err = s.onState(ctx, evt, st)
		}
	}
	if err != nil {
		s.d.log.Warn("whatsmeow event not handled", "channel_id", s.acct.ChannelID, "event", fmt.Sprintf("%T", evt), "err", err)
	}
	return true
}

// StateOf is the connection state a library connection event means; ok is
// false for other events. Terminal states stop the library's own
// reconnecting: the session is closed (or, for a failed connect,
// reconnected with backoff by the driver).
func StateOf(evt any) (connector.SessionState, bool) {
	switch e := evt.(type) {
	case *events.Connected:
		return connector.SessionState{State: connector.StateConnected}, true
	case *events.Disconnected:
		return connector.SessionState{State: connector.StateDisconnected, Reason: "The connection dropped; reconnecting"}, true
	case *events.KeepAliveTimeout:
		return connector.SessionState{State: connector.StateDisconnected, Reason: "The chat app stopped answering keep-alives"}, true
	case *events.LoggedOut:
		return connector.SessionState{State: connector.StateLoggedOut, Reason: "Logged out by the chat app: " + e.Reason.String(), Terminal: true}, true
	case *events.StreamReplaced:
		return connector.SessionState{State: connector.StateReplaced, Reason: "Another client connected with this device's credentials", Terminal: true}, true
	case *events.TemporaryBan:
		return connector.SessionState{State: connector.StateBanned, Reason: e.String(), Terminal: true}, true
	case *events.ClientOutdated:
		return connector.SessionState{State: connector.StateOutdated, Reason: MsgClientOutdated, Terminal: true}, true
	case *events.ConnectFailure:
		// Not terminal: the driver reconnects with backoff.
		return connector.SessionState{State: connector.StateFailed, Reason: fmt.Sprintf("The chat app refused the connection: %s %s", e.Reason.String(), e.Message)}, true
	}
	return connector.SessionState{}, false
}

// onState reports a state change and acts on it: a logged-out device is
// forgotten, a terminal state stops the client, a failed connect is
// retried with backoff.
func (s *session) onState(ctx context.Context, evt any, st connector.SessionState) error {
	if _, ok := evt.(*events.LoggedOut); ok {
		s.mu.Lock()
		s.device = nil
		s.mu.Unlock()
		return s.h.LoggedOut(ctx, st.Reason)
	}
	s.mu.Lock()
	if s.closed {
		// A closed session (lease lost, shutdown) reports nothing more: the
		// new holder speaks for the connection.
		s.mu.Unlock()
		return nil
	}
	cli := s.client
	if st.Terminal {
		s.stopped = true
	}
	s.mu.Unlock()
	if st.Terminal && cli != nil {
		// Disconnect from the event goroutine would wait for itself.
		go cli.Disconnect()
	}
	switch e := evt.(type) {
	case *events.ConnectFailure, *events.Disconnected:
		go s.reconnect(cli)
	case *events.KeepAliveTimeout:
		if time.Since(e.LastSuccess) > wa.KeepAliveMaxFailTime && cli != nil {
			// A connection that stopped answering is dropped and made again
			// (what the library does when it reconnects by itself).
			go func() {
				cli.Disconnect()
				s.reconnect(cli)
			}()
		}
	}
	return s.h.State(ctx, st)
}

// Reconnect backoff after a refused connection.
var reconnectBackoff = []time.Duration{2 * time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute}

// reconnect retries a dropped or refused connection with growing pauses
// until it is up, the session is closed or stopped, or another retry is
// running. Before each attempt the handler confirms the lease: lost, the
// session stops for good; unknown (database unreachable), it waits.
func (s *session) reconnect(cli *wa.Client) {
	s.mu.Lock()
	if s.retrying || cli == nil {
		s.mu.Unlock()
		return
	}
	s.retrying = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.retrying = false
		s.mu.Unlock()
	}()
	for i := 0; ; i++ {
		s.d.sleep(reconnectBackoff[min(i, len(reconnectBackoff)-1)])
		s.mu.Lock()
		stop := s.closed || s.stopped || s.client != cli
		s.mu.Unlock()
		if stop || cli.IsConnected() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := s.h.Holds(ctx)
		cancel()
		if fe := fault.As(err); fe != nil && fe.Kind == fault.Unavailable && fe.Message == connector.MsgLeaseLost {
			s.d.log.Warn("lease lost: not reconnecting", "channel_id", s.acct.ChannelID)
			s.mu.Lock()
			s.stopped = true
			s.mu.Unlock()
			return
		}
		if err != nil {
			s.d.log.Warn("reconnect: lease unknown; waiting", "channel_id", s.acct.ChannelID, "err", err)
			continue
		}
		if err := cli.Connect(); err == nil || errors.Is(err, wa.ErrAlreadyConnected) {
			return
		} else {
			s.d.log.Warn("reconnect", "channel_id", s.acct.ChannelID, "attempt", i+1, "err", err)
		}
	}
}

// resolver looks LIDs up in the store's LID map (shared by every device
// of the store, which the library fills from what the chat app tells it).
func (s *session) resolver(ctx context.Context) func(types.JID) (types.JID, bool) {
	return func(lid types.JID) (types.JID, bool) {
		pn, err := s.d.container.LIDMap.GetPNForLID(ctx, lid)
		return pn, err == nil && !pn.IsEmpty()
	}
}

// onMessage stores one message event; an error means it was not stored.
func (s *session) onMessage(ctx context.Context, e *events.Message) error {
	s.mu.Lock()
	cli := s.client
	s.mu.Unlock()
	if cli == nil {
		return nil
	}
	p := ParseMessage(e, s.resolver(ctx))
	switch {
	case p.Skip != "":
		return nil
	case p.Change != nil:
		return s.h.Changed(ctx, *p.Change)
	}
	in := p.In
	if in.Chat.IsGroup {
		in.ChatName = s.groupName(cli, in.Chat)
	}
	if p.Media != nil {
		// Downloaded by the session's inbox worker, off this goroutine.
		return s.park(ctx, in, e.Message)
	}
	return s.h.Inbound(ctx, in)
}

// groupName is the cached subject of a group. A group seen for the first
// time is looked up in the background, off the library's event goroutine:
// its first message is named by key, the next ones by subject.
func (s *session) groupName(cli *wa.Client, chat connector.Chat) string {
	s.mu.Lock()
	name, known := s.groupNames[chat.Key]
	if !known {
		s.groupNames[chat.Key] = ""
	}
	s.mu.Unlock()
	if known {
		return name
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		jid, err := ChatJID(chat)
		if err != nil {
			return
		}
		info, err := cli.GetGroupInfo(ctx, jid)
		if err != nil {
			s.mu.Lock()
			delete(s.groupNames, chat.Key) // ask again next time
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		s.groupNames[chat.Key] = info.Name
		s.mu.Unlock()
	}()
	return ""
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
