package whatsmeow

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	wa "go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/connector/connectortest"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// The identities of the event tests: the connection's own number, a
// contact, a group member known only by a LID the session's map resolves,
// and one it cannot resolve.
var (
	ownPN      = types.NewJID("5511988887777", types.DefaultUserServer)
	contactPN  = types.NewJID("5511977776666", types.DefaultUserServer)
	memberLID  = types.NewJID("123456789012345", types.HiddenUserServer)
	memberPN   = types.NewJID("5511966665555", types.DefaultUserServer)
	strangeLID = types.NewJID("987654321098765", types.HiddenUserServer)
	groupJID   = types.NewJID("120363025246125486", types.GroupServer)
	sentAt     = time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)
)

// eventBundle is a session with a real (never connected) library client
// over the session store in the test database, its handler a recorder.
type eventBundle struct {
	s   *session
	rec *connectortest.Recorder
}

func setupEvents(t *testing.T, db *store.DB) eventBundle {
	t.Helper()
	ctx := context.Background()
	d, err := New(ctx, db, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &connectortest.Recorder{}
	s := d.newSession(connector.Account{ChannelID: 1, Key: ownPN.User}, rec)
	s.groupNames[groupJID.User] = "Team"
	s.attach(d.container.NewDevice(), nil)
	if err := d.container.LIDMap.PutLIDMapping(ctx, memberLID, memberPN); err != nil {
		t.Fatal(err)
	}
	return eventBundle{s: s, rec: rec}
}

// message is a library message event as the library dispatches it: the
// raw message unwrapped by the library's own UnwrapRaw.
func message(id string, chat, sender types.JID, raw *waE2E.Message) *events.Message {
	info := types.MessageInfo{
		MessageSource: types.MessageSource{Chat: chat, Sender: sender, IsGroup: chat.Server == types.GroupServer},
		ID:            id, PushName: "Ana", Timestamp: sentAt,
	}
	return (&events.Message{Info: info, RawMessage: raw}).UnwrapRaw()
}

func direct(id string, raw *waE2E.Message) *events.Message {
	return message(id, contactPN, contactPN, raw)
}

func TestEveryInboundKind(t *testing.T) {
	t.Parallel()
	var cli *wa.Client // the library's message builders need no connection
	vcard := "BEGIN:VCARD\nVERSION:3.0\nFN:Bruno Lima\nTEL;type=CELL;waid=5511955554444:+55 11 95555-4444\nEND:VCARD"
	fromPhone := message("OWN1", contactPN, ownPN, &waE2E.Message{Conversation: proto.String("typed on the phone")})
	fromPhone.Info.IsFromMe = true
	unresolved := message("LID2", strangeLID, strangeLID, &waE2E.Message{Conversation: proto.String("who am I")})
	// Changes carry who made them (the event's sender), whatever the
	// changed message's key claims: a member revoking "as" the phone.
	editFromPhone := message("E2", contactPN, ownPN, cli.BuildEdit(contactPN, "SENT3", &waE2E.Message{Conversation: proto.String("fixed by me")}))
	editFromPhone.Info.IsFromMe = true
	groupRevoke := message("V2", groupJID, memberLID, cli.BuildRevoke(groupJID, types.EmptyJID, "SENT4"))
	groupEdit := message("E3", groupJID, memberPN, cli.BuildEdit(groupJID, "G2", &waE2E.Message{Conversation: proto.String("fixed")}))
	team := connector.Chat{Key: groupJID.User, IsGroup: true}

	for _, tc := range []struct {
		name string
		evts []*events.Message
		want []connector.Inbound // compared on the fields set
		chg  *connector.Change
	}{
		{"sender-key distribution, then the text with the same id",
			[]*events.Message{
				message("G1", groupJID, memberPN, &waE2E.Message{SenderKeyDistributionMessage: &waE2E.SenderKeyDistributionMessage{
					GroupID: proto.String(groupJID.String()), AxolotlSenderKeyDistributionMessage: []byte{1, 2, 3}}}),
				message("G1", groupJID, memberPN, &waE2E.Message{Conversation: proto.String("first words in the group")}),
			},
			[]connector.Inbound{{ExternalID: "G1", Chat: connector.Chat{Key: groupJID.User, IsGroup: true}, ChatName: "Team",
				SenderKey: memberPN.User, SenderName: "Ana", Text: "first words in the group", TypeID: msgtype.Text}}, nil},
		{"group member known only by a LID", []*events.Message{message("G2", groupJID, memberLID, &waE2E.Message{Conversation: proto.String("hello team")})},
			[]connector.Inbound{{ExternalID: "G2", Chat: connector.Chat{Key: groupJID.User, IsGroup: true}, ChatName: "Team",
				SenderKey: memberPN.User, SenderName: "Ana", Text: "hello team", TypeID: msgtype.Text}}, nil},
		{"reaction", []*events.Message{direct("R1", cli.BuildReaction(contactPN, ownPN, "SENT1", "👍"))},
			[]connector.Inbound{{ExternalID: "R1", Text: "Reacted 👍", TypeID: msgtype.Reaction, ReplyTo: "SENT1"}}, nil},
		{"edit", []*events.Message{direct("E1", cli.BuildEdit(contactPN, "IN1", &waE2E.Message{Conversation: proto.String("fixed text")}))},
			nil, &connector.Change{ExternalID: "IN1", Text: "fixed text"}},
		{"revoke", []*events.Message{direct("V1", cli.BuildRevoke(contactPN, contactPN, "IN2"))},
			nil, &connector.Change{ExternalID: "IN2", Revoked: true}},
		{"edit typed on the phone", []*events.Message{editFromPhone},
			nil, &connector.Change{ExternalID: "SENT3", Text: "fixed by me", FromMe: true, SenderKey: ownPN.User}},
		{"group edit by a member", []*events.Message{groupEdit},
			nil, &connector.Change{ExternalID: "G2", Chat: team, Text: "fixed", SenderKey: memberPN.User}},
		{"group revoke by a LID member claiming the phone's message", []*events.Message{groupRevoke},
			nil, &connector.Change{ExternalID: "SENT4", Chat: team, Revoked: true, SenderKey: memberPN.User}},
		{"vCard", []*events.Message{direct("C1", &waE2E.Message{ContactMessage: &waE2E.ContactMessage{DisplayName: proto.String("Bruno Lima"), Vcard: proto.String(vcard)}})},
			[]connector.Inbound{{ExternalID: "C1", Text: "Contact: Bruno Lima (+55 11 95555-4444)", TypeID: msgtype.Contacts,
				File: &connector.File{Name: "Bruno Lima.vcf", ContentType: "text/vcard", Data: []byte(vcard)}}}, nil},
		{"location", []*events.Message{direct("L1", &waE2E.Message{LocationMessage: &waE2E.LocationMessage{Name: proto.String("Shop"),
			Address: proto.String("Main St 1"), DegreesLatitude: proto.Float64(-23.55052), DegreesLongitude: proto.Float64(-46.633308)}})},
			[]connector.Inbound{{ExternalID: "L1", Text: "Location: Shop, Main St 1 (-23.550520,-46.633308)", TypeID: msgtype.Location}}, nil},
		{"poll", []*events.Message{direct("P1", cli.BuildPollCreation("Lunch?", []string{"Pizza", "Sushi"}, 1))},
			[]connector.Inbound{{ExternalID: "P1", Text: "Poll: Lunch? (Pizza / Sushi)", TypeID: msgtype.Poll}}, nil},
		{"ephemeral", []*events.Message{direct("T1", &waE2E.Message{EphemeralMessage: &waE2E.FutureProofMessage{
			Message: &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String("disappearing")}}}})},
			[]connector.Inbound{{ExternalID: "T1", Text: "disappearing", TypeID: msgtype.Text}}, nil},
		{"view-once", []*events.Message{direct("O1", &waE2E.Message{ViewOnceMessageV2: &waE2E.FutureProofMessage{
			Message: &waE2E.Message{LocationMessage: &waE2E.LocationMessage{DegreesLatitude: proto.Float64(1.5), DegreesLongitude: proto.Float64(2.25)}}}})},
			[]connector.Inbound{{ExternalID: "O1", Text: "Location: 1.500000,2.250000", TypeID: msgtype.Location}}, nil},
		{"reply", []*events.Message{direct("Q1", &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String("yes"),
			ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String("SENT2"), Participant: proto.String(ownPN.String())}}})},
			[]connector.Inbound{{ExternalID: "Q1", Text: "yes", TypeID: msgtype.Text, ReplyTo: "SENT2"}}, nil},
		{"forwarded", []*events.Message{direct("F1", &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String("look"),
			ContextInfo: &waE2E.ContextInfo{IsForwarded: proto.Bool(true), ForwardingScore: proto.Uint32(1)}}})},
			[]connector.Inbound{{ExternalID: "F1", Text: "look", TypeID: msgtype.Text, IsForwarded: true}}, nil},
		{"LID-only sender resolved through the LID store", []*events.Message{message("LID1", memberLID, memberLID, &waE2E.Message{Conversation: proto.String("hi")})},
			[]connector.Inbound{{ExternalID: "LID1", Chat: connector.Chat{Key: memberPN.User}, SenderKey: memberPN.User, Text: "hi", TypeID: msgtype.Text}}, nil},
		{"LID-only sender the store does not know is kept under the LID", []*events.Message{unresolved},
			[]connector.Inbound{{ExternalID: "LID2", Chat: connector.Chat{Key: strangeLID.User + "@lid"}, SenderKey: strangeLID.User + "@lid", Text: "who am I", TypeID: msgtype.Text}}, nil},
		{"typed on the phone", []*events.Message{fromPhone},
			[]connector.Inbound{{ExternalID: "OWN1", Chat: connector.Chat{Key: contactPN.User}, SenderKey: ownPN.User, Text: "typed on the phone", TypeID: msgtype.Text, FromMe: true}}, nil},
		{"unknown content is kept with a text that says so", []*events.Message{direct("U1", &waE2E.Message{ButtonsMessage: &waE2E.ButtonsMessage{ContentText: proto.String("?")}})},
			[]connector.Inbound{{ExternalID: "U1", Text: "Unsupported message", TypeID: msgtype.Unsupported}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				b := setupEvents(t, db)
				for _, e := range tc.evts {
					if !b.s.onEvent(e) {
						t.Fatalf("event %s reported failure", e.Info.ID)
					}
				}
				if len(b.rec.Messages) != len(tc.want) {
					t.Fatalf("stored %d messages, want %d: %+v", len(b.rec.Messages), len(tc.want), b.rec.Messages)
				}
				for i, want := range tc.want {
					assertInbound(t, b.rec.Messages[i], want)
				}
				switch {
				case tc.chg == nil && len(b.rec.Changes) != 0:
					t.Fatalf("unexpected changes %+v", b.rec.Changes)
				case tc.chg != nil:
					if len(b.rec.Changes) != 1 {
						t.Fatalf("changes %+v", b.rec.Changes)
					}
					got, want := b.rec.Changes[0], *tc.chg
					if want.Chat == (connector.Chat{}) {
						want.Chat = connector.Chat{Key: contactPN.User}
					}
					if want.SenderKey == "" {
						want.SenderKey = contactPN.User
					}
					if got.ExternalID != want.ExternalID || got.Revoked != want.Revoked || got.Text != want.Text || got.Chat != want.Chat ||
						got.FromMe != want.FromMe || got.SenderKey != want.SenderKey || !got.At.Equal(sentAt) {
						t.Fatalf("change\n got %+v\nwant %+v", got, want)
					}
				}
			})
		})
	}
}

// assertInbound compares the fields want sets (a zero chat means the
// direct contact, a zero sender the contact too; the sender's name only
// when want has one).
func assertInbound(t *testing.T, got, want connector.Inbound) {
	t.Helper()
	if want.Chat == (connector.Chat{}) {
		want.Chat = connector.Chat{Key: contactPN.User}
	}
	if want.SenderKey == "" {
		want.SenderKey = contactPN.User
	}
	if got.ExternalID != want.ExternalID || got.Chat != want.Chat || got.SenderKey != want.SenderKey || got.Text != want.Text ||
		got.TypeID != want.TypeID || got.ReplyTo != want.ReplyTo || got.IsForwarded != want.IsForwarded || got.FromMe != want.FromMe ||
		got.ChatName != want.ChatName || !got.SentAt.Equal(sentAt) {
		t.Fatalf("inbound\n got %+v\nwant %+v", got, want)
	}
	if want.SenderName != "" && got.SenderName != want.SenderName {
		t.Fatalf("sender name %q, want %q", got.SenderName, want.SenderName)
	}
	if (got.File == nil) != (want.File == nil) {
		t.Fatalf("file %+v, want %+v", got.File, want.File)
	}
	if want.File != nil && (got.File.Name != want.File.Name || got.File.ContentType != want.File.ContentType || string(got.File.Data) != string(want.File.Data)) {
		t.Fatalf("file %+v, want %+v", got.File, want.File)
	}
}

// TestMessageNotStoredIsNotAcknowledged: a message the gateway could not
// store (here the lease was lost) answers failure to the library, which
// then neither acknowledges nor sends a receipt, so the chat app delivers it
// again; and the client is set up so that it waits for that answer.
func TestMessageNotStoredIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setupEvents(t, db)
		if !b.s.client.SynchronousAck || !b.s.client.EnableDecryptedEventBuffer {
			t.Fatal("acks must wait for the handler, and the plaintext must be kept for the redelivery")
		}
		b.rec.Fail = fault.New(fault.Unavailable, "lease lost")
		text := direct("N1", &waE2E.Message{Conversation: proto.String("keep me")})
		if b.s.onEvent(text) {
			t.Fatal("a message that was not stored reported success")
		}
		edit := direct("N2", (*wa.Client)(nil).BuildEdit(contactPN, "N1", &waE2E.Message{Conversation: proto.String("x")}))
		if b.s.onEvent(edit) {
			t.Fatal("an edit that was not stored reported success")
		}
		b.rec.Fail = nil
		if !b.s.onEvent(text) || len(b.rec.Messages) != 1 {
			t.Fatalf("redelivery: %+v", b.rec.Messages)
		}
		// What is skipped on purpose is acknowledged.
		if !b.s.onEvent(direct("N3", &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_EPHEMERAL_SETTING.Enum()}})) {
			t.Fatal("a protocol message must be acknowledged")
		}
	})
}

func TestConnectionEvents(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		for _, tc := range []struct {
			evt      any
			state    string
			terminal bool
			reason   string
		}{
			{&events.Connected{}, connector.StateConnected, false, ""},
			{&events.Disconnected{}, connector.StateDisconnected, false, "reconnecting"},
			{&events.KeepAliveTimeout{ErrorCount: 3}, connector.StateDisconnected, false, "keep-alives"},
			{&events.StreamReplaced{}, connector.StateReplaced, true, "Another client"},
			{&events.TemporaryBan{Code: events.TempBanSentToTooManyPeople, Expire: time.Hour}, connector.StateBanned, true, "address books"},
			{&events.ClientOutdated{}, connector.StateOutdated, true, "outdated"},
			{&events.ConnectFailure{Reason: events.ConnectFailureServiceUnavailable, Message: "try later"}, connector.StateFailed, false, "try later"},
		} {
			b := setupEvents(t, db)
			b.s.onEvent(tc.evt)
			if len(b.rec.States) != 1 {
				t.Fatalf("%T: states %+v", tc.evt, b.rec.States)
			}
			st := b.rec.States[0]
			if st.State != tc.state || st.Terminal != tc.terminal || !strings.Contains(st.Reason, tc.reason) {
				t.Errorf("%T: %+v, want %s terminal=%v reason ~%q", tc.evt, st, tc.state, tc.terminal, tc.reason)
			}
			b.s.mu.Lock()
			stopped := b.s.stopped
			b.s.mu.Unlock()
			if stopped != tc.terminal {
				t.Errorf("%T: stopped=%v", tc.evt, stopped)
			}
			b.s.Close()
		}

		b := setupEvents(t, db)
		b.s.onEvent(&events.LoggedOut{OnConnect: true, Reason: events.ConnectFailureLoggedOut})
		if len(b.rec.Out) != 1 || !strings.Contains(b.rec.Out[0], "Logged out") || b.s.Logged() {
			t.Fatalf("logged out: %v logged=%v", b.rec.Out, b.s.Logged())
		}
		// A session closed because its lease was lost reports nothing: the
		// new holder speaks for the connection.
		closed := setupEvents(t, db)
		closed.s.Close()
		closed.s.onEvent(&events.StreamReplaced{})
		if len(closed.rec.States) != 0 {
			t.Fatalf("closed session reported %+v", closed.rec.States)
		}
	})
}

func TestPairingFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		item wa.QRChannelItem
		kind fault.Kind
		msg  string
	}{
		{wa.QRChannelTimeout, fault.Rule, MsgPairingTimeout},
		{wa.QRChannelClientOutdated, fault.Unavailable, MsgClientOutdated},
		{wa.QRChannelScannedWithoutMultidevice, fault.Rule, MsgNoMultidevice},
		{wa.QRChannelErrUnexpectedEvent, fault.Unavailable, MsgPairingState},
		{wa.QRChannelItem{Event: wa.QRChannelEventError, Error: errors.New("pair-device failed")}, fault.Unavailable, MsgPairingRejected},
		{wa.QRChannelItem{Event: "something new"}, fault.Unavailable, MsgPairingEnded},
	} {
		err := PairingFault(tc.item)
		if fault.KindOf(err) != tc.kind || fault.As(err).Message != tc.msg {
			t.Errorf("%s: %v, want %s %q", tc.item.Event, err, tc.kind, tc.msg)
		}
	}
	if PairingFault(wa.QRChannelSuccess) != nil {
		t.Error("success is no fault")
	}
}

// TestPairingEndsWithItsReason follows a QR channel that issues a code and
// then times out, and one that ends at once as outdated: the waiting QR
// request answers the code, then the fault of the event that ended it.
func TestPairingEndsWithItsReason(t *testing.T) {
	t.Parallel()
	s := (&Driver{log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now}).newSession(connector.Account{}, nil)
	ctx := context.Background()

	codes := make(chan wa.QRChannelItem, 2)
	s.pairing, s.qrReady = true, make(chan struct{})
	codes <- wa.QRChannelItem{Event: wa.QRChannelEventCode, Code: "2@abc", Timeout: time.Minute}
	go s.followCodes(codes, nil)
	qr, err := s.awaitCode(ctx, s.qrReady, time.Minute)
	if err != nil || qr.Payload != "2@abc" || qr.Code != "" {
		t.Fatalf("first code %+v %v (no phone code unless asked)", qr, err)
	}
	codes <- wa.QRChannelTimeout
	close(codes)

	outdated := make(chan wa.QRChannelItem, 1)
	s2 := s.d.newSession(connector.Account{}, nil)
	s2.pairing, s2.qrReady = true, make(chan struct{})
	outdated <- wa.QRChannelClientOutdated
	close(outdated)
	go s2.followCodes(outdated, func() string { t.Error("phone code asked for after the pairing ended"); return "" })
	_, err = s2.awaitCode(ctx, s2.qrReady, time.Minute)
	if fault.As(err) == nil || fault.As(err).Message != MsgClientOutdated {
		t.Fatalf("outdated: %v", err)
	}

	asked := make(chan wa.QRChannelItem, 1)
	s3 := s.d.newSession(connector.Account{}, nil)
	s3.pairing, s3.qrReady = true, make(chan struct{})
	asked <- wa.QRChannelItem{Event: wa.QRChannelEventCode, Code: "2@def", Timeout: time.Minute}
	go s3.followCodes(asked, func() string { return "ABCD-EFGH" })
	qr, err = s3.awaitCode(ctx, s3.qrReady, time.Minute)
	if err != nil || qr.Code != "ABCD-EFGH" {
		t.Fatalf("phone code when asked: %+v %v", qr, err)
	}
	close(asked)
}

func parked(t *testing.T, db *store.DB) int {
	t.Helper()
	var n int
	if err := db.Bun.NewRaw(`SELECT COUNT(*) FROM whatsmeow_gateway_inbox`).Scan(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMediaIsDownloadedOffTheEventGoroutine: a media message (here a
// view-once image) is parked in the inbox and acknowledged without
// downloading; the session's worker downloads it and hands it over,
// keeping it while the handover fails, and hands it over with its text only
// once the download failed too often.
func TestMediaIsDownloadedOffTheEventGoroutine(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		b := setupEvents(t, db)
		downloads := 0
		fail := true
		b.s.d.DownloadFunc = func(_ context.Context, media wa.DownloadableMessage) ([]byte, error) {
			downloads++
			if _, ok := media.(*waE2E.ImageMessage); !ok {
				t.Errorf("downloaded %T", media)
			}
			if fail {
				return nil, errors.New("media host unreachable")
			}
			return []byte("jpeg bytes"), nil
		}
		img := func(id string) *events.Message {
			return direct(id, &waE2E.Message{ViewOnceMessageV2: &waE2E.FutureProofMessage{Message: &waE2E.Message{
				ImageMessage: &waE2E.ImageMessage{Caption: proto.String("see"), Mimetype: proto.String("image/jpeg"), DirectPath: proto.String("/v/1")}}}})
		}
		if !b.s.onEvent(img("M1")) || !b.s.onEvent(img("M2")) {
			t.Fatal("parking failed")
		}
		if downloads != 0 || len(b.rec.Messages) != 0 || parked(t, db) != 2 {
			t.Fatalf("the event goroutine downloaded (%d) or handed over (%d); parked %d", downloads, len(b.rec.Messages), parked(t, db))
		}
		if !b.s.onEvent(img("M1")) || parked(t, db) != 2 {
			t.Fatal("a redelivered media message is parked once")
		}

		// The store refuses (lease lost): nothing is lost.
		fail = false
		b.rec.Fail = fault.New(fault.Unavailable, "lease lost")
		b.s.drainInbox(ctx)
		if parked(t, db) != 2 {
			t.Fatal("a message the store refused left the inbox")
		}
		b.rec.Fail = nil
		b.s.drainInbox(ctx)
		if parked(t, db) != 0 || len(b.rec.Messages) != 2 {
			t.Fatalf("after drain: parked %d, stored %+v", parked(t, db), b.rec.Messages)
		}
		for i, m := range b.rec.Messages {
			assertInbound(t, m, connector.Inbound{ExternalID: []string{"M1", "M2"}[i], Text: "see", TypeID: msgtype.Image,
				File: &connector.File{Name: "image.jpg", ContentType: "image/jpeg", Data: []byte("jpeg bytes")}})
		}

		// A file that never downloads: the message comes with its text.
		fail = true
		if !b.s.onEvent(img("M3")) {
			t.Fatal("parking failed")
		}
		for range maxDownloadAttempts {
			b.s.drainInbox(ctx)
		}
		if parked(t, db) != 0 || len(b.rec.Messages) != 3 || b.rec.Messages[2].File != nil || b.rec.Messages[2].Text != "see" {
			t.Fatalf("undownloadable: parked %d, %+v", parked(t, db), b.rec.Messages)
		}
	})
}

// TestNoReconnectOverTheNewHolder: before each reconnect the session asks
// whether it still holds the connection; lost, it stops for good without
// connecting; unknown, it waits and asks again.
func TestNoReconnectOverTheNewHolder(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setupEvents(t, db)
		if b.s.client.EnableAutoReconnect {
			t.Fatal("the library must not reconnect by itself")
		}
		b.s.d.sleep = func(time.Duration) {}
		b.rec.Lost = fault.New(fault.Unavailable, connector.MsgLeaseLost)
		b.s.reconnect(b.s.client)
		b.s.mu.Lock()
		stopped := b.s.stopped
		b.s.mu.Unlock()
		if !stopped || b.rec.Checks != 1 || b.s.client.IsConnected() {
			t.Fatalf("lease lost: stopped=%v checks=%d", stopped, b.rec.Checks)
		}

		// Unknown (database down): wait and ask again; here the session is
		// closed while waiting, which ends the retries.
		u := setupEvents(t, db)
		waits := 0
		u.s.d.sleep = func(time.Duration) {
			if waits++; waits == 3 {
				u.s.Close()
			}
		}
		u.rec.Lost = errors.New("database unreachable")
		u.s.reconnect(u.s.client)
		if u.rec.Checks != 2 || u.s.stopped {
			t.Fatalf("lease unknown: %d checks, stopped=%v", u.rec.Checks, u.s.stopped)
		}
	})
}
