package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/connector/connectortest"
	"github.com/chatmsg/gateway/internal/connector/sim"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/msgtype"
)

type bundle struct {
	clock *clock.Manual
	drv   *sim.Driver
	rec   *connectortest.Recorder
	sess  *sim.Session
}

func setup(t *testing.T) bundle {
	t.Helper()
	clk := clock.NewManual(time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC))
	drv := sim.New(clk.Now)
	rec := &connectortest.Recorder{}
	s, err := drv.Open(context.Background(), connector.Account{ChannelID: 7, Key: "5511988887777"}, rec)
	if err != nil {
		t.Fatal(err)
	}
	return bundle{clock: clk, drv: drv, rec: rec, sess: s.(*sim.Session)}
}

func pair(t *testing.T, b bundle) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.sess.Pairing(ctx, connector.PairingOptions{OS: "Linux", Browser: "Chrome"}); err != nil {
		t.Fatal(err)
	}
	if err := b.sess.Scan(ctx); err != nil {
		t.Fatal(err)
	}
}

func wantKind(t *testing.T, what string, err error, kind fault.Kind, msg string) {
	t.Helper()
	if fault.KindOf(err) != kind || (msg != "" && fault.As(err).Message != msg) {
		t.Fatalf("%s: got %v, want %s %q", what, err, kind, msg)
	}
}

func TestPairingRefreshesUntilScannedOrTimedOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	opts := connector.PairingOptions{OS: "Windows", Browser: "Chrome", PhoneCode: true}
	start := b.clock.Now()
	// A code to type comes only when asked for (it notifies the phone).
	if qr, err := setup(t).sess.Pairing(ctx, connector.PairingOptions{OS: "Windows", Browser: "Chrome"}); err != nil || qr.Code != "" || qr.Payload == "" {
		t.Fatalf("QR without phone code: %+v %v", qr, err)
	}

	wantKind(t, "scan before any code", b.sess.Scan(ctx), fault.Rule, sim.MsgNoPairing)

	first, err := b.sess.Pairing(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !first.ExpiresAt.Equal(start.Add(sim.FirstCodeTTL)) || first.Code == "" || first.Payload == "" {
		t.Fatalf("first code %+v", first)
	}
	again, _ := b.sess.Pairing(ctx, opts)
	if again != first {
		t.Fatalf("asking again within the code's life changed it: %+v vs %+v", again, first)
	}
	b.clock.Advance(sim.FirstCodeTTL)
	second, _ := b.sess.Pairing(ctx, opts)
	if second.Payload == first.Payload || second.Code == first.Code || !second.ExpiresAt.Equal(start.Add(sim.FirstCodeTTL+sim.NextCodeTTL)) {
		t.Fatalf("code after 60 s: %+v (first %+v)", second, first)
	}
	// Past the last refresh pairing has timed out: the phone can no longer
	// scan, and the next request starts a new pairing.
	b.clock.Advance(time.Duration(sim.Refreshes) * sim.NextCodeTTL)
	wantKind(t, "scan after timeout", b.sess.Scan(ctx), fault.Rule, sim.MsgPairingExpired)
	restarted, _ := b.sess.Pairing(ctx, opts)
	if !restarted.ExpiresAt.Equal(b.clock.Now().Add(sim.FirstCodeTTL)) || restarted.Payload == first.Payload {
		t.Fatalf("restarted pairing %+v", restarted)
	}
	if err := b.sess.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if !b.sess.Logged() || len(b.rec.Refs) != 1 || b.rec.Refs[0] == "" {
		t.Fatalf("after scan logged=%v paired=%v", b.sess.Logged(), b.rec.Refs)
	}
	_, err = b.sess.Pairing(ctx, opts)
	wantKind(t, "QR when logged", err, fault.Rule, sim.MsgAlreadyLogged)
}

func TestDeterministic(t *testing.T) {
	t.Parallel()
	a, b := setup(t), setup(t)
	ctx := context.Background()
	qa, _ := a.sess.Pairing(ctx, connector.PairingOptions{})
	qb, _ := b.sess.Pairing(ctx, connector.PairingOptions{})
	if qa != qb {
		t.Fatalf("same calls, different codes: %+v vs %+v", qa, qb)
	}
}

func TestNotLoggedRefusesEverything(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.sess.Contacts(ctx)
	wantKind(t, "contacts", err, fault.Rule, connector.MsgNotLogged)
	_, err = b.sess.Send(ctx, connector.Outgoing{Chat: connector.Chat{Key: "5511977776666"}, Text: "hi"})
	wantKind(t, "send", err, fault.Rule, connector.MsgNotLogged)
	wantKind(t, "logout", b.sess.Logout(ctx), fault.Rule, connector.MsgNotLogged)
}

func TestCheckContactsAndGroups(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pair(t, b)
	no := false
	if _, err := b.sess.SeedContacts([]sim.ContactSpec{{Key: "5511977776666", Name: "Ana", Notify: "Ana S"},
		{Key: "5511900000000", Name: "Nobody", OnChatapp: &no}, {Key: "551187654321", Name: "Old mobile"}}); err != nil {
		t.Fatal(err)
	}
	vip, err := b.sess.SeedGroup(sim.GroupSpec{Name: "VIP", Announce: true, IsAdmin: true, Participants: 3})
	if err != nil || vip.Key != "5511988887777-1700000002" {
		t.Fatalf("seed group: %+v %v", vip, err)
	}
	if _, err := b.sess.SeedGroup(sim.GroupSpec{Key: "120363025246125486", Name: "Left", IsMember: &no}); err != nil {
		t.Fatal(err)
	}

	got, err := b.sess.Check(ctx, []string{"5511977776666", "5511900000000", "5511987654321", "garbage"}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []connector.NumberCheck{{Entry: "5511977776666", Exists: true, Key: "5511977776666"}, {Entry: "5511900000000"},
		{Entry: "5511987654321", Exists: true, Key: "551187654321"}, {Entry: "garbage"}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("check[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	gotG, _ := b.sess.Check(ctx, []string{vip.Key, "120363025246125486", "999999999999-123456"}, true)
	if !gotG[0].Exists || gotG[0].Key != vip.Key || gotG[1].Exists || gotG[2].Exists {
		t.Errorf("group check %+v", gotG)
	}
	groups, _ := b.sess.Groups(ctx)
	if len(groups) != 1 || groups[0].Key != vip.Key {
		t.Errorf("groups %+v: the one the account left must not be listed", groups)
	}
	contacts, _ := b.sess.Contacts(ctx)
	if len(contacts) != 3 || contacts[0].Key != "551187654321" || contacts[2].Notify != "Ana S" {
		t.Errorf("contacts %+v", contacts)
	}
}

func TestSendEditRevokeRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pair(t, b)
	no := false
	announce, _ := b.sess.SeedGroup(sim.GroupSpec{Name: "News", Announce: true})
	left, _ := b.sess.SeedGroup(sim.GroupSpec{Name: "Left", IsMember: &no})
	open, _ := b.sess.SeedGroup(sim.GroupSpec{Name: "Team"})

	_, err := b.sess.Send(ctx, connector.Outgoing{Chat: connector.Chat{Key: announce.Key, IsGroup: true}, Text: "x"})
	wantKind(t, "announce group, not admin", err, fault.Refused, sim.MsgAnnounceOnly)
	_, err = b.sess.Send(ctx, connector.Outgoing{Chat: connector.Chat{Key: left.Key, IsGroup: true}, Text: "x"})
	wantKind(t, "not a member", err, fault.Refused, sim.MsgNotMember)

	toGroup, err := b.sess.Send(ctx, connector.Outgoing{Chat: connector.Chat{Key: open.Key, IsGroup: true}, Text: "hello team"})
	if err != nil {
		t.Fatal(err)
	}
	toAna, err := b.sess.Send(ctx, connector.Outgoing{Chat: connector.Chat{Key: "5511977776666"}, Text: "hi",
		File: &connector.File{Name: "a.pdf", ContentType: "application/pdf", Data: []byte("%PDF")}})
	if err != nil {
		t.Fatal(err)
	}
	if toGroup.ExternalID == toAna.ExternalID {
		t.Fatal("ids repeat")
	}
	ana := connector.Chat{Key: "5511977776666"}
	if err := b.sess.Edit(ctx, ana, toAna.ExternalID, "hi, edited"); err != nil {
		t.Fatal(err)
	}
	wantKind(t, "edit of another chat's message", b.sess.Edit(ctx, ana, toGroup.ExternalID, "x"), fault.Refused, sim.MsgMessageUnknown)
	b.clock.Advance(sim.EditWindow + time.Second)
	wantKind(t, "late edit", b.sess.Edit(ctx, ana, toAna.ExternalID, "x"), fault.Refused, sim.MsgEditTooLate)
	if err := b.sess.Revoke(ctx, ana, toAna.ExternalID); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(sim.RevokeWindow)
	wantKind(t, "late revoke", b.sess.Revoke(ctx, connector.Chat{Key: open.Key, IsGroup: true}, toGroup.ExternalID), fault.Refused, sim.MsgRevokeTooLate)

	out := b.sess.Outbox()
	if len(out) != 2 || out[0].ExternalID != toGroup.ExternalID || out[1].Text != "hi, edited" || !out[1].Edited || !out[1].Revoked || out[1].FileName != "a.pdf" {
		t.Fatalf("outbox %+v", out)
	}

	if _, err := b.sess.Ack(ctx, toAna.ExternalID, connector.StatusRead, ""); err != nil {
		t.Fatal(err)
	}
	_, err = b.sess.Ack(ctx, "nope", connector.StatusRead, "")
	wantKind(t, "ack of unknown message", err, fault.NotFound, "")
	if len(b.rec.Receipts) != 1 || b.rec.Receipts[0].StatusID != connector.StatusRead || b.rec.Receipts[0].Chat != ana {
		t.Fatalf("receipts %+v", b.rec.Receipts)
	}
}

func TestInboundAndUnlink(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.sess.Deliver(ctx, sim.InboundSpec{From: "5511977776666", Text: "hi"})
	wantKind(t, "inbound before pairing", err, fault.Rule, connector.MsgNotLogged)
	pair(t, b)
	g, _ := b.sess.SeedGroup(sim.GroupSpec{Name: "Team"})
	if _, err := b.sess.Deliver(ctx, sim.InboundSpec{From: "5511977776666", Name: "Ana", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.sess.Deliver(ctx, sim.InboundSpec{From: "5511966665555", GroupKey: g.Key,
		File: &connector.File{Name: "p.png", ContentType: "image/png", Data: []byte{1}}}); err != nil {
		t.Fatal(err)
	}
	_, err = b.sess.Deliver(ctx, sim.InboundSpec{From: "5511966665555", GroupKey: "120363000000000000", Text: "?"})
	wantKind(t, "unknown group", err, fault.NotFound, sim.MsgGroupNotFound)
	if len(b.rec.Messages) != 2 {
		t.Fatalf("inbound %+v", b.rec.Messages)
	}
	in := b.rec.Messages[1]
	if in.Chat != (connector.Chat{Key: g.Key, IsGroup: true}) || in.SenderKey != "5511966665555" || in.TypeID != msgtype.Image {
		t.Fatalf("group inbound %+v", in)
	}
	if err := b.sess.Unlink(ctx); err != nil {
		t.Fatal(err)
	}
	if b.sess.Logged() || len(b.rec.Out) != 1 {
		t.Fatalf("after unlink logged=%v out=%v", b.sess.Logged(), b.rec.Out)
	}
}

func TestReopenRestoresAndReplaces(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pair(t, b)
	ref := b.rec.Refs[0]
	again, err := b.drv.Open(ctx, connector.Account{ChannelID: 7, Key: "5511988887777", DeviceRef: ref}, &connectortest.Recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Logged() {
		t.Fatal("a stored device ref must restore a logged session")
	}
	_, err = b.sess.Contacts(ctx)
	wantKind(t, "the replaced session", err, fault.Unavailable, "")
	if _, err := again.Contacts(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestMessageIDs: ids are random (a restarted simulator never hands out an
// id it used before), a send repeated with its id is one message whose
// send count says it was repeated, and sends apply the ninth-digit
// correction as the number check does.
func TestMessageIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	pair(t, b)
	restarted := setup(t)
	first, again := b.drv.NewMessageID(connector.Account{}), restarted.drv.NewMessageID(connector.Account{})
	if first == again || len(first) != len("3EB0")+18 {
		t.Fatalf("ids %q and %q", first, again)
	}
	ana := connector.Chat{Key: "5511977776666"}
	out := connector.Outgoing{ExternalID: first, Chat: ana, Text: "once"}
	s1, err := b.sess.Send(ctx, out)
	if err != nil || s1.ExternalID != first {
		t.Fatalf("send: %+v %v", s1, err)
	}
	b.clock.Advance(time.Minute)
	s2, err := b.sess.Send(ctx, out)
	if err != nil || s2 != s1 {
		t.Fatalf("repeated send: %+v %v (first %+v)", s2, err, s1)
	}
	box := b.sess.Outbox()
	if len(box) != 1 || box[0].SendCount != 2 || box[0].ExternalID != first {
		t.Fatalf("outbox %+v", box)
	}
	// Without an id the simulator picks one, as the library would.
	if s, err := b.sess.Send(ctx, connector.Outgoing{Chat: ana, Text: "other"}); err != nil || s.ExternalID == "" || s.ExternalID == first {
		t.Fatalf("send without id: %+v %v", s, err)
	}

	// Registered without the ninth digit: the message reaches that account.
	if _, err := b.sess.SeedContacts([]sim.ContactSpec{{Key: "551187654321", Name: "Old number"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.sess.Send(ctx, connector.Outgoing{Chat: connector.Chat{Key: "5511987654321"}, Text: "ninth"}); err != nil {
		t.Fatal(err)
	}
	if box := b.sess.Outbox(); box[len(box)-1].Chat.Key != "551187654321" {
		t.Fatalf("ninth digit not corrected: %+v", box[len(box)-1])
	}
}
