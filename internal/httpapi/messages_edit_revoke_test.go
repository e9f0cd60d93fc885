package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// fakeTransport stands in for the far side of channel types that have no
// real transport in this build (embedded chat), recording calls.
type fakeTransport struct{ edits, revokes int }

func (f *fakeTransport) Send(ctx context.Context, _ channels.Channel, out messaging.Outbound) (messaging.SendResult, error) {
	if err := out.HandOff(ctx); err != nil {
		return messaging.SendResult{}, err
	}
	return messaging.SendResult{ExternalID: fmt.Sprintf("emb-%d", out.MessageID)}, nil
}
func (f *fakeTransport) Edit(context.Context, channels.Channel, messaging.Target, string) error {
	f.edits++
	return nil
}
func (f *fakeTransport) Revoke(context.Context, channels.Channel, messaging.Target) error {
	f.revokes++
	return nil
}

// ofcChannelOfType adds a company channel of any type (only official and
// unofficial channels have registration commands in this build).
func ofcChannelOfType(t *testing.T, db *store.DB, companyID int64, typ channels.TypeID, key string) channels.Channel {
	t.Helper()
	var id int64
	if err := db.Bun.NewRaw(`INSERT INTO company_channels (company_id, key, name, channel_type_id, created_at, updated_at) VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP) RETURNING id`,
		companyID, key, typ.Name(), int(typ)).Scan(context.Background(), &id); err != nil {
		t.Fatalf("insert channel: %v", err)
	}
	return channels.Channel{ID: id, CompanyID: companyID, Key: key, TypeID: typ}
}

var microUTC = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$`)

// TestEditMessage covers the edit rules: the official provider refuses by
// default (509 with its reason, nothing changed) and accepts once allowed;
// embedded chat stores the edit; messages without an external id, of the
// contact, of another company or on channels without editing are refused.
func TestEditMessage(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		ctx := context.Background()
		inbound := e.contactWrites(ofcContactKey, "Oi")
		var a struct{ Data struct{ ExternalID string } }
		e.send(map[string]any{"text": "original"}).JSON(t, &a)
		sent, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, a.Data.ExternalID)
		if err != nil {
			t.Fatal(err)
		}
		contactMsg, _ := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, inbound)
		queued := e.send(map[string]any{"text": "queued", "enqueue": true})
		if queued.Status != 200 {
			t.Fatal(queued.Status)
		}
		var queuedID int64
		if err := db.Bun.NewSelect().Table("messages").Column("id").Where("text = ?", "queued").Scan(ctx, &queuedID); err != nil {
			t.Fatal(err)
		}

		emb := ofcChannelOfType(t, db, e.ten.CompanyID, channels.EmbeddedChat, "web-widget")
		social := ofcChannelOfType(t, db, e.ten.CompanyID, channels.SocialMessenger, "page-1")
		fake := &fakeTransport{}
		e.h.App.Messaging.RegisterTransport(channels.EmbeddedChat, fake)
		e.h.App.Messaging.RegisterTransport(channels.SocialMessenger, fake)
		sendOn := func(ch channels.Channel) int64 {
			enqueue := false
			out, err := e.h.App.Messaging.SendMessage(ctx, messaging.SendInput{CompanyID: e.ten.CompanyID, Platform: ch.TypeID,
				SenderKey: ch.Key, ContactKey: "visitor-1", Text: "hello", Enqueue: &enqueue})
			if err != nil {
				t.Fatal(err)
			}
			return out.MessageID
		}
		embMsg, socialMsg := sendOn(emb), sendOn(social)
		other := e.h.Tenant("Other")

		edit := func(token string, id int64, text string) *apitest.Response {
			return e.h.Do(apitest.Request{Method: "POST", Path: "/api/edit-message", Token: token, JSON: map[string]any{"id": id, "text": text}})
		}
		refusals := []struct {
			name    string
			token   string
			id      int64
			message string
		}{
			{"unknown id", e.ten.Token, 999999, "Message not found"},
			{"message of another company", other.Token, sent.ID, "Message not found"},
			{"not confirmed by the provider", e.ten.Token, queuedID, "Message has no external id and cannot be edited"},
			{"the contact's message", e.ten.Token, contactMsg.ID, "Only messages sent by the company can be edited"},
			{"channel without editing", e.ten.Token, socialMsg, "Editing messages is not supported on this channel"},
		}
		for _, tc := range refusals {
			t.Run(tc.name, func(t *testing.T) {
				if r := edit(tc.token, tc.id, "new"); r.Status != 509 || r.Map(t)["message"] != tc.message {
					t.Errorf("%d %s", r.Status, r.Body)
				}
			})
		}

		// The official channel has no edit (DESIGN §4): answered locally,
		// without a provider call, nothing changes.
		calls := len(e.sent())
		r := edit(e.ten.Token, sent.ID, "edited text")
		if r.Status != 509 || r.Map(t)["message"] != "Editing sent messages is not available on the official channel" {
			t.Fatalf("official edit: %d %s", r.Status, r.Body)
		}
		if m, _ := e.h.App.Messaging.Get(ctx, e.ten.CompanyID, sent.ID); m.Text != "original" || m.Edited {
			t.Fatalf("a refused edit changed the message: %+v", m)
		}
		if len(e.sent()) != calls || e.sent()[0].Status != "accepted" {
			t.Fatal("an official edit reached the provider")
		}

		r = edit(e.ten.Token, embMsg, "widget edit")
		if r.Status != 200 || r.Map(t)["edited"] != true || fake.edits != 0 {
			t.Fatalf("embedded chat edit: %d %s (transport calls %d)", r.Status, r.Body, fake.edits)
		}
	})
}

// TestRevokeMessages covers the removal table: scope me deletes without a
// provider call; scope all is answered locally on the official channel
// (not available there, no provider call); channel types without scope all;
// remove_media deletes the stored file; one answer per id, in order.
func TestRevokeMessages(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		ctx := context.Background()
		inbound := e.contactWrites(ofcContactKey, "Oi")
		contactMsg, _ := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, inbound)
		sendText := func(text string) messaging.Message {
			var a struct{ Data struct{ ExternalID string } }
			if r := e.send(map[string]any{"text": text}); r.Status != 200 {
				t.Fatalf("send: %d %s", r.Status, r.Body)
			} else {
				r.JSON(t, &a)
			}
			m, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, a.Data.ExternalID)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		first, second := sendText("one"), sendText("two")
		withFile := e.h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: e.ten.Token,
			Form:      map[string]string{"platform": "ofc_chatapp", "sender_key": ofcSenderKey, "contact_key": ofcContactKey},
			FileField: "file", FileName: "p.png", FileType: "image/png", FileContent: pngImage(t, 8, 8)})
		var fa struct{ Data struct{ ExternalID string } }
		withFile.JSON(t, &fa)
		fileMsg, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, fa.Data.ExternalID)
		if err != nil || fileMsg.MediaPath == "" {
			t.Fatalf("file message %+v %v", fileMsg, err)
		}
		mediaFile := messageFileKey(fileMsg.MediaPath)

		byType := map[channels.TypeID]int64{}
		for i, typ := range []channels.TypeID{channels.EmbeddedChat, channels.PhotoSocialNetwork, channels.SocialMessenger, channels.BotMessenger} {
			ch := ofcChannelOfType(t, db, e.ten.CompanyID, typ, fmt.Sprintf("key-%d", i))
			if err := e.h.App.Messaging.ReceiveInbound(ctx, messaging.Inbound{Channel: ch, ExternalID: fmt.Sprintf("in-%d", i), ContactKey: "c1", Text: "hi"}); err != nil {
				t.Fatal(err)
			}
			m, _ := e.h.App.Messaging.FindByExternalID(ctx, ch.ID, fmt.Sprintf("in-%d", i))
			byType[typ] = m.ID
		}

		revoke := func(body map[string]any) []map[string]any {
			t.Helper()
			r := e.h.Do(apitest.Request{Method: "POST", Path: "/api/revoke-messages", Token: e.ten.Token, JSON: body})
			if r.Status != http.StatusOK {
				t.Fatalf("revoke: %d %s", r.Status, r.Body)
			}
			var out []map[string]any
			r.JSON(t, &out)
			return out
		}
		expect := func(got []map[string]any, want ...string) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%d answers, want %d: %v", len(got), len(want), got)
			}
			for i, w := range want {
				status := w[0] == '+'
				if got[i]["Status"] != status || got[i]["Message"] != w[1:] {
					t.Errorf("answer %d: %v, want %s", i, got[i], w)
				}
			}
		}

		// The official provider refuses revoking by default.
		expect(revoke(map[string]any{"ids": []int64{first.ID, 999999, contactMsg.ID, byType[channels.EmbeddedChat], byType[channels.PhotoSocialNetwork],
			byType[channels.SocialMessenger], byType[channels.BotMessenger]}, "scope": "all"}),
			"-Revoking sent messages is not available on the official channel",
			"-Message not found",
			"-Only messages sent by the company can be revoked for everyone",
			"-Revoking for everyone is disabled on this channel",
			"-Revoking for everyone is not supported on this channel",
			"-Revoking for everyone is not supported on this channel",
			"-Revoking for everyone is disabled on this channel")
		if m, _ := e.h.App.Messaging.Get(ctx, e.ten.CompanyID, first.ID); m.RevokedAt != nil {
			t.Fatal("a refused revoke marked the message")
		}

		if got := e.sent()[0]; got.Status != "accepted" {
			t.Fatalf("an official revoke reached the provider: %+v", got)
		}

		// Scope me (the default) deletes without calling the provider; the
		// file stays unless remove_media.
		before := e.sent()
		expect(revoke(map[string]any{"ids": []int64{second.ID}}), "+Message deleted")
		if after := e.sent(); after[1].Status != before[1].Status {
			t.Fatal("scope me called the provider")
		}
		expect(revoke(map[string]any{"ids": []int64{fileMsg.ID}, "scope": "me", "remove_media": true}), "+Message deleted")
		if _, ok := storedFile(t, e.h.App, mediaFile); ok {
			t.Fatalf("remove_media left the file %s", mediaFile)
		}
		if _, err := e.h.App.Messaging.Get(ctx, e.ten.CompanyID, second.ID); err == nil {
			t.Fatal("scope me did not delete")
		}

		for name, body := range map[string]any{
			"ids empty":  map[string]any{"ids": []int64{}},
			"ids absent": map[string]any{"scope": "all"},
		} {
			r := e.h.Do(apitest.Request{Method: "POST", Path: "/api/revoke-messages", Token: e.ten.Token, JSON: body})
			if r.Status != 509 || r.Map(t)["message"] != "Ids is required and must be an array" {
				t.Errorf("%s: %d %s", name, r.Status, r.Body)
			}
		}
	})
}
