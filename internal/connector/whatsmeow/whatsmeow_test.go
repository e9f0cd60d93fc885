package whatsmeow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	wa "go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waCompanionReg"
	wastore "go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

func TestChatJIDAndBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		chat connector.Chat
		jid  string
	}{
		{connector.Chat{Key: "5511977776666"}, "5511977776666@s.whatsapp.net"},
		{connector.Chat{Key: "+5511977776666"}, "5511977776666@s.whatsapp.net"},
		{connector.Chat{Key: "5511977776666@s.whatsapp.net"}, "5511977776666@s.whatsapp.net"},
		{connector.Chat{Key: "5511988887777-1699999999", IsGroup: true}, "5511988887777-1699999999@g.us"},
		{connector.Chat{Key: "120363025246125486", IsGroup: true}, "120363025246125486@g.us"},
		{connector.Chat{Key: "120363025246125486@g.us", IsGroup: true}, "120363025246125486@g.us"},
	} {
		jid, err := ChatJID(tc.chat)
		if err != nil || jid.String() != tc.jid {
			t.Errorf("ChatJID(%+v) = %s, %v; want %s", tc.chat, jid, err, tc.jid)
			continue
		}
		back, ok := ChatOf(jid)
		want, _ := connector.ParseChat(tc.chat.Key, tc.chat.IsGroup)
		if !ok || back != want {
			t.Errorf("ChatOf(%s) = %+v, %v; want %+v", jid, back, ok, want)
		}
	}
	for _, bad := range []connector.Chat{{Key: "abc"}, {Key: "123", IsGroup: true}, {Key: "5511977776666-x", IsGroup: true}} {
		if _, err := ChatJID(bad); fault.KindOf(err) != fault.Invalid {
			t.Errorf("ChatJID(%+v): %v, want Invalid", bad, err)
		}
	}
	for _, jid := range []types.JID{types.NewJID("123", types.HiddenUserServer), types.StatusBroadcastJID, types.NewJID("1", types.NewsletterServer)} {
		if c, ok := ChatOf(jid); ok {
			t.Errorf("ChatOf(%s) = %+v, want not a chat", jid, c)
		}
	}
}

func TestDeviceRefRoundTrip(t *testing.T) {
	t.Parallel()
	jid := types.NewADJID("5511988887777", 0, 12)
	back, err := ParseDeviceRef(DeviceRef(jid))
	if err != nil || back != jid {
		t.Fatalf("device ref %q → %v, %v", DeviceRef(jid), back, err)
	}
}

func TestPhoneOf(t *testing.T) {
	t.Parallel()
	pn := types.NewJID("5511977776666", types.DefaultUserServer)
	lid := types.NewJID("98765432109876", types.HiddenUserServer)
	known := func(j types.JID) (types.JID, bool) {
		if j == lid {
			return pn, true
		}
		return types.JID{}, false
	}
	for _, tc := range []struct {
		name     string
		jid, alt types.JID
		resolve  func(types.JID) (types.JID, bool)
		want     string
	}{
		{"phone jid", pn, types.EmptyJID, nil, "5511977776666"},
		{"device jid", types.NewADJID("5511977776666", 0, 3), types.EmptyJID, nil, "5511977776666"},
		{"lid with phone alt", lid, pn, nil, "5511977776666"},
		{"lid resolved by the map", lid, types.EmptyJID, known, "5511977776666"},
		{"lid unknown", types.NewJID("111", types.HiddenUserServer), types.EmptyJID, known, ""},
	} {
		if got := phoneOf(tc.jid, tc.alt, tc.resolve); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if phoneQuery("5511977776666") != "+5511977776666" {
		t.Error("IsOnWhatsApp wants numbers with a plus")
	}
}

func TestMediaMessage(t *testing.T) {
	t.Parallel()
	up := wa.UploadResponse{URL: "https://mmg.example/x", DirectPath: "/v/x", MediaKey: []byte{1}, FileEncSHA256: []byte{2}, FileSHA256: []byte{3}, FileLength: 42}
	img := MediaMessage(&connector.File{Name: "p.jpg", ContentType: "image/jpeg"}, up, "look")
	if im := img.GetImageMessage(); im.Width != nil || im.JPEGThumbnail != nil {
		t.Errorf("an undecodable image gets no made-up dimensions: %v", im)
	}
	if im := img.GetImageMessage(); im == nil || im.GetCaption() != "look" || im.GetMimetype() != "image/jpeg" || im.GetFileLength() != 42 ||
		im.GetDirectPath() != "/v/x" || string(im.GetMediaKey()) != "\x01" {
		t.Errorf("image: %v", img)
	}
	doc := MediaMessage(&connector.File{Name: "invoice.pdf", ContentType: "application/pdf"}, up, "")
	if dm := doc.GetDocumentMessage(); dm == nil || dm.GetFileName() != "invoice.pdf" || dm.Caption != nil {
		t.Errorf("document: %v", doc)
	}
	vid := MediaMessage(&connector.File{Name: "v.mp4", ContentType: "video/mp4"}, up, "clip")
	if vid.GetVideoMessage().GetCaption() != "clip" {
		t.Errorf("video: %v", vid)
	}
	aud := MediaMessage(&connector.File{Name: "a.ogg", ContentType: "audio/ogg; codecs=opus"}, up, "dropped")
	if am := aud.GetAudioMessage(); am == nil || !am.GetPTT() || am.GetMimetype() != "audio/ogg; codecs=opus" {
		t.Errorf("ogg/opus goes as a voice note: %v", aud)
	}
	if am := MediaMessage(&connector.File{Name: "a.ogg", ContentType: "audio/ogg"}, up, "").GetAudioMessage(); !am.GetPTT() {
		t.Errorf("plain ogg is opus in practice: %v", am)
	}
	if am := MediaMessage(&connector.File{Name: "a.mp3", ContentType: "audio/mpeg"}, up, "").GetAudioMessage(); am.GetPTT() || am.GetMimetype() != "audio/mpeg" {
		t.Errorf("mp3 is no voice note: %v", am)
	}
	unnamed := MediaMessage(&connector.File{ContentType: ""}, up, "")
	if dm := unnamed.GetDocumentMessage(); dm.GetFileName() != "file" || dm.GetMimetype() != "application/octet-stream" {
		t.Errorf("unnamed: %v", unnamed)
	}
	if TextMessage("hi").GetConversation() != "hi" {
		t.Error("text")
	}
	if MediaType("image/webp") != wa.MediaImage || MediaType("application/zip") != wa.MediaDocument || MediaType("audio/mpeg") != wa.MediaAudio {
		t.Error("media types")
	}
}

func TestMapError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		kind fault.Kind
		msg  string
	}{
		{wa.ErrNotLoggedIn, fault.Rule, connector.MsgNotLogged},
		{fmt.Errorf("send: %w", wa.ErrNotConnected), fault.Unavailable, MsgUnreachable},
		{wa.ErrIQTimedOut, fault.Unavailable, MsgUnreachable},
		{&wa.DisconnectedError{Action: "info query"}, fault.Unavailable, MsgUnreachable},
		{context.DeadlineExceeded, fault.Unavailable, MsgUnreachable},
		{wa.ErrGroupNotFound, fault.NotFound, MsgGroupMissing},
		{&wa.IQError{Code: 404, Text: "item-not-found"}, fault.NotFound, MsgGroupMissing},
		{wa.ErrNotInGroup, fault.Refused, MsgNotInGroup},
		{&wa.IQError{Code: 403, Text: "forbidden"}, fault.Refused, MsgRefused},
		{wa.ErrServerReturnedError, fault.Refused, MsgRefused},
		{fmt.Errorf("%w %d", wa.ErrServerReturnedError, 479), fault.Refused, MsgRefused},
		{fmt.Errorf("send: %w", fmt.Errorf("%w %d", wa.ErrServerReturnedError, 463)), fault.Refused, MsgNotOpened},
		{errors.New("something odd"), fault.Unavailable, MsgUnreachable},
		{fault.New(fault.Invalid, "kept"), fault.Invalid, "kept"},
	} {
		got := MapError(tc.err)
		if fault.KindOf(got) != tc.kind || fault.As(got).Message != tc.msg {
			t.Errorf("MapError(%v) = %v, want %s %q", tc.err, got, tc.kind, tc.msg)
		}
	}
	if MapError(nil) != nil {
		t.Error("nil")
	}
	if d := fault.As(MapError(&wa.IQError{Code: 403, Text: "forbidden"})).Details; d["code"] != 403 || d["reason"] != "forbidden" {
		t.Errorf("refusal details %v", d)
	}
}

func TestPairClientAndDisplayName(t *testing.T) {
	t.Parallel()
	for browser, want := range map[string]waCompanionReg.DeviceProps_PlatformType{
		"Chrome": waCompanionReg.DeviceProps_CHROME, "firefox": waCompanionReg.DeviceProps_FIREFOX, " Safari ": waCompanionReg.DeviceProps_SAFARI,
		"Microsoft Edge": waCompanionReg.DeviceProps_EDGE, "Lynx": waCompanionReg.DeviceProps_UNKNOWN,
	} {
		if _, got := PairClient(browser); got != want {
			t.Errorf("PairClient(%q) platform %v, want %v", browser, got, want)
		}
	}
	if c, _ := PairClient("Lynx"); c != wa.PairClientOtherWebClient {
		t.Errorf("unknown browser client %v", c)
	}
	// The chat app answers 400 to names it does not accept: a known
	// browser and a short plain OS name.
	for _, tc := range []struct{ os, browser, want string }{
		{"Windows", "Chrome", "Chrome (Windows)"},
		{" Mac OS ", "safari", "Safari (Mac OS)"},
		{"Ubuntu 24.04 — Büro (my laptop) with a long description", "Firefox", "Firefox (Ubuntu 24.04 Bro my)"},
		{"😀😀", "Lynx", "Chrome (Linux)"},
		{"", "Microsoft Edge", "Edge (Linux)"},
	} {
		if got := DisplayName(connector.PairingOptions{OS: tc.os, Browser: tc.browser}); got != tc.want {
			t.Errorf("DisplayName(%q, %q) = %q, want %q", tc.os, tc.browser, got, tc.want)
		}
	}
	for typ, want := range map[types.ReceiptType]int{types.ReceiptTypeDelivered: connector.StatusDelivered, types.ReceiptTypeRead: connector.StatusRead,
		types.ReceiptTypePlayed: connector.StatusRead, types.ReceiptTypeServerError: connector.StatusFailed} {
		if got, ok := receiptStatus(typ); !ok || got != want {
			t.Errorf("receipt %q → %d %v", typ, got, ok)
		}
	}
	if _, ok := receiptStatus(types.ReceiptTypeReadSelf); ok {
		t.Error("read-self is not a receipt of a sent message")
	}
}

// TestSessionStoreInTheServiceDatabase opens the library's store on both
// engines (its own migrations), builds a new device's registration payload
// with a connection's os and browser, and opens sessions that need no
// network: never paired, and paired but forgotten by the store.
func TestSessionStoreInTheServiceDatabase(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		d, err := New(ctx, db, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		// A second replica opening the same store finds it up to date.
		if _, err := New(ctx, db, nil, nil); err != nil {
			t.Fatal(err)
		}
		dev := d.container.NewDevice()
		payload := PairingPayload(dev, connector.PairingOptions{OS: "Windows", Browser: "Chrome"})
		var props waCompanionReg.DeviceProps
		if err := proto.Unmarshal(payload.GetDevicePairingData().GetDeviceProps(), &props); err != nil {
			t.Fatal(err)
		}
		if props.GetOs() != "Windows" || props.GetPlatformType() != waCompanionReg.DeviceProps_CHROME {
			t.Fatalf("device props %v", &props)
		}
		other := PairingPayload(d.container.NewDevice(), connector.PairingOptions{OS: "Mac OS", Browser: "Safari"})
		_ = proto.Unmarshal(other.GetDevicePairingData().GetDeviceProps(), &props)
		if props.GetOs() != "Mac OS" {
			t.Fatal("one connection's device name leaked into another's")
		}

		s, err := d.Open(ctx, connector.Account{ChannelID: 1, Key: "5511988887777"}, nil)
		if err != nil || s.Logged() {
			t.Fatalf("never paired: logged=%v err=%v", s != nil && s.Logged(), err)
		}
		if _, err := s.Contacts(ctx); fault.KindOf(err) != fault.Rule {
			t.Fatalf("contacts without pairing: %v", err)
		}
		gone, err := d.Open(ctx, connector.Account{ChannelID: 2, Key: "5511988886666", DeviceRef: DeviceRef(types.NewADJID("5511988886666", 0, 7))}, nil)
		if err != nil || gone.Logged() {
			t.Fatalf("a device the store forgot must open as not logged: %v", err)
		}
	})
}

// TestClientVersionRefresh: the first connect uses the chat app's latest
// published version when it can be read, else keeps the built-in one, and
// says which. Not parallel: the version is process-wide.
func TestClientVersionRefresh(t *testing.T) {
	builtIn := wastore.GetWAVersion()
	t.Cleanup(func() { wastore.SetWAVersion(builtIn) })
	ctx := context.Background()
	var logs strings.Builder
	offline := &Driver{log: slog.New(slog.NewTextHandler(&logs, nil)),
		LookupVersionFunc: func(context.Context) (*wastore.WAVersionContainer, error) {
			return nil, errors.New("no route to web.whatsapp.com")
		}}
	offline.refreshVersion(ctx)
	if wastore.GetWAVersion() != builtIn || !strings.Contains(logs.String(), "built-in") || !strings.Contains(logs.String(), builtIn.String()) {
		t.Fatalf("offline: version %s, log %s", wastore.GetWAVersion(), logs.String())
	}

	logs.Reset()
	latest := wastore.WAVersionContainer{2, 3000, builtIn[2] + 1}
	lookups := 0
	online := &Driver{log: slog.New(slog.NewTextHandler(&logs, nil)),
		LookupVersionFunc: func(context.Context) (*wastore.WAVersionContainer, error) { lookups++; return &latest, nil }}
	online.refreshVersion(ctx)
	online.refreshVersion(ctx)
	if wastore.GetWAVersion() != latest || lookups != 1 || !strings.Contains(logs.String(), latest.String()) {
		t.Fatalf("online: version %s after %d lookups, log %s", wastore.GetWAVersion(), lookups, logs.String())
	}
}
