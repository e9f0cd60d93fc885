package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/connections"
	"github.com/chatmsg/gateway/internal/connector/sim"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

type simMessage struct {
	ExternalID  string  `json:"external_id"`
	ChatKey     string  `json:"chat_key"`
	IsGroup     bool    `json:"is_group"`
	Text        string  `json:"text"`
	FileName    *string `json:"file_name"`
	ContentType *string `json:"content_type"`
	Edited      bool    `json:"edited"`
	Revoked     bool    `json:"revoked"`
}

func (c connAPI) outbox(id int) []simMessage {
	c.t.Helper()
	resp := c.h.Do(apitest.Request{Method: "GET", Path: fmt.Sprintf("/api/chatapp-simulator/%d/messages", id), Token: c.token})
	if resp.Status != http.StatusOK {
		c.t.Fatalf("outbox: %d %s", resp.Status, resp.Body)
	}
	var env struct {
		Data []simMessage `json:"data"`
	}
	resp.JSON(c.t, &env)
	return env.Data
}

func (c connAPI) send(body map[string]any) *apitest.Response {
	c.t.Helper()
	return c.post("/api/api-send-message", body)
}

type syncAnswer struct {
	Status  bool   `json:"Status"`
	Message string `json:"Message"`
	Data    struct {
		ExternalID string         `json:"ExternalID"`
		Raw        map[string]any `json:"raw"`
	} `json:"Data"`
}

func (c connAPI) sendSync(body map[string]any) syncAnswer {
	c.t.Helper()
	body["enqueue"] = false
	resp := c.send(body)
	if resp.Status != http.StatusOK {
		c.t.Fatalf("send %v: %d %s", body, resp.Status, resp.Body)
	}
	var a syncAnswer
	resp.JSON(c.t, &a)
	if !a.Status || a.Data.ExternalID == "" {
		c.t.Fatalf("sync answer %s", resp.Body)
	}
	return a
}

// sendPhoto sends a PNG synchronously from conn to contactKey (multipart)
// and returns the stored message and the path of its stored file.
func (c connAPI) sendPhoto(conn chatappRecord, contactKey string) (messaging.Message, string) {
	c.t.Helper()
	resp := c.h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: c.token,
		Form:      map[string]string{"platform": "chatapp", "sender_key": conn.Key, "contact_key": contactKey, "contact_is_group": "false", "enqueue": "false"},
		FileField: "file", FileName: "photo.png", FileType: "image/png", FileContent: pngImage(c.t, 4, 4)})
	if resp.Status != http.StatusOK {
		c.t.Fatalf("file send: %d %s", resp.Status, resp.Body)
	}
	var a syncAnswer
	resp.JSON(c.t, &a)
	m, err := c.h.App.Messaging.FindByExternalID(context.Background(), int64(conn.ID), a.Data.ExternalID)
	if err != nil || m.MediaPath == "" {
		c.t.Fatalf("file message %+v %v", m, err)
	}
	return m, messageFileKey(m.MediaPath)
}

func countMessages(t *testing.T, db *store.DB, channelID int, where string) int {
	t.Helper()
	var n int
	if err := db.Bun.NewRaw("SELECT COUNT(*) FROM messages WHERE company_channel_id = ? AND "+where, channelID).Scan(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestChatappSendThroughTheConnector(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h, c := startConnections(t, db, apitest.Options{WorkJobs: true})
		ctx := context.Background()
		sink := newEventSink(t, http.StatusNoContent)
		sink.subscribe(h, c.token, map[string]any{"name": "sink",
			"events": []string{events.OmnichatMessageReceived, events.OmnichatMessageSent, events.OmnichatConversationCreated}})
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		idle := c.create("Idle", "5511988886666")
		seed := func(body map[string]any) string {
			var g struct {
				Key string `json:"key"`
			}
			c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/groups", conn.ID), body, &g)
			return g.Key
		}
		team := seed(map[string]any{"name": "Team"})
		news := seed(map[string]any{"name": "News", "announce": true})
		vip := seed(map[string]any{"key": "120363025246125486", "name": "VIP", "announce": true, "is_admin": true})
		left := seed(map[string]any{"name": "Left", "is_member": false})
		lounge := seed(map[string]any{"name": "Lounge"})

		// enqueue defaults to true on chatapp: {message} now, the River job
		// sends through the connector afterwards.
		resp := c.send(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": "5511977776666",
			"contact_is_group": false, "text": "queued hello"})
		if resp.Status != http.StatusOK || resp.Map(t)["message"] == nil {
			t.Fatalf("queued send: %d %s", resp.Status, resp.Body)
		}
		eventually(t, "the queued message to reach the chat app", func() bool { return len(c.outbox(conn.ID)) > 0 })
		queued := c.outbox(conn.ID)[0]
		if queued.Text != "queued hello" || queued.ChatKey != "5511977776666" || queued.IsGroup {
			t.Fatalf("queued message at the chat app: %+v", queued)
		}
		eventually(t, "the queued message to be marked sent", func() bool {
			m, err := h.App.Messaging.FindByExternalID(ctx, int64(conn.ID), queued.ExternalID)
			return err == nil && m.StatusID == messaging.StatusSent
		})

		// enqueue=false answers after the send, with the official shape.
		sync := c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": "5511977776666",
			"contact_is_group": false, "text": "sync hello"})
		out := c.outbox(conn.ID)
		if last := out[len(out)-1]; last.ExternalID != sync.Data.ExternalID || last.Text != "sync hello" || sync.Data.Raw["driver"] != "simulator" {
			t.Fatalf("sync answer %+v vs chat app %+v", sync, last)
		}

		// A file (multipart, booleans as text).
		fresp := c.h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: c.token,
			Form:      map[string]string{"platform": "chatapp", "sender_key": conn.Key, "contact_key": "5511977776666", "contact_is_group": "false", "enqueue": "false", "text": "invoice"},
			FileField: "file", FileName: "invoice.pdf", FileType: "application/pdf", FileContent: []byte("%PDF-1.4\n%test\n")})
		if fresp.Status != http.StatusOK {
			t.Fatalf("file send: %d %s", fresp.Status, fresp.Body)
		}
		out = c.outbox(conn.ID)
		if last := out[len(out)-1]; last.FileName == nil || *last.FileName != "invoice.pdf" || last.Text != "invoice" {
			t.Fatalf("file at the chat app: %+v", last)
		}

		// Groups: member → sent; announce-only with admin rights → sent.
		c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": team, "contact_is_group": true, "text": "hi team"})
		c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": vip, "contact_is_group": true, "text": "hi vip"})

		// Not authorized → 400, stored as Unauthorized (6), nothing sent; the
		// queued path checks before queueing too.
		before := len(c.outbox(conn.ID))
		for _, tc := range []struct {
			name, key, msg string
			enqueue        bool
		}{
			{"announcement group, not an admin", news, connections.MsgNotGroupAdmin, false},
			{"group the connection left", left, connections.MsgNotGroupMember, false},
			{"unknown group, queued", "120363000000000001", connections.MsgNotGroupMember, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := c.send(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": tc.key, "contact_is_group": true,
					"text": "not allowed", "enqueue": tc.enqueue})
				if resp.Status != http.StatusBadRequest || resp.Map(t)["message"] != tc.msg {
					t.Errorf("%d %s, want 400 %q", resp.Status, resp.Body, tc.msg)
				}
			})
		}
		if got := countMessages(t, db, conn.ID, fmt.Sprintf("status_id = %d", messaging.StatusUnauthorized)); got != 3 {
			t.Errorf("%d messages stored as Unauthorized, want 3", got)
		}
		// Each refusal is published once, as the message "marked failed for
		// lack of authorization": status 6, its first version.
		for _, d := range sink.wait("refused group sends", 3, messageEvent(events.OmnichatMessageSent, "", messaging.StatusUnauthorized)) {
			if d.Data["version"] != float64(1) || d.Data["external_id"] != nil || d.Data["text"] != "not allowed" {
				t.Errorf("refused group send event %s", d.Body)
			}
		}
		if after := len(c.outbox(conn.ID)); after != before {
			t.Errorf("unauthorized group sends reached the chat app: %d → %d", before, after)
		}

		for _, tc := range []struct {
			name string
			body map[string]any
			msg  string
		}{
			{"contact_is_group missing", map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": "5511977776666", "text": "x"},
				"contact_is_group is required with platform chatapp"},
			{"sender not logged in", map[string]any{"platform": "chatapp", "sender_key": idle.Key, "contact_key": "5511977776666",
				"contact_is_group": false, "text": "x", "enqueue": false}, "Connection is not logged in"},
			{"malformed group key", map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": "team-chat",
				"contact_is_group": true, "text": "x", "enqueue": false}, "Group key must be number-digits or a plain group number"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := c.send(tc.body)
				if resp.Status != 509 || resp.Map(t)["message"] != tc.msg {
					t.Errorf("%d %s, want 509 %q", resp.Status, resp.Body, tc.msg)
				}
			})
		}

		// Receipts from the recipient's device move the status forward.
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/receipts", conn.ID), map[string]any{"external_id": sync.Data.ExternalID, "status": "read"}, nil)
		if m, err := h.App.Messaging.FindByExternalID(ctx, int64(conn.ID), sync.Data.ExternalID); err != nil || m.StatusID != messaging.StatusRead {
			t.Fatalf("after the read receipt: %+v %v", m, err)
		}
		c.refused(fmt.Sprintf("/api/chatapp-simulator/%d/receipts", conn.ID), map[string]any{"external_id": "nope", "status": "read"}, sim.MsgMessageUnknown)

		// A contact writes: conversation and message are created and
		// published.
		var in struct {
			ExternalID string `json:"external_id"`
		}
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/inbound", conn.ID), map[string]any{"from": "5521955554444", "name": "Carla", "text": "hello?"}, &in)
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/inbound", conn.ID), map[string]any{"from": "5521955554444", "group_key": lounge, "text": "in the group"}, nil)
		received := sink.data(events.OmnichatMessageReceived, 2)
		byKey := map[string]map[string]any{}
		for _, d := range received {
			byKey[d["contact_channel_key"].(string)] = d
		}
		if d := byKey["5521955554444"]; d == nil || d["external_id"] != in.ExternalID || d["text"] != "hello?" || d["message_source_id"] != float64(2) ||
			d["company_channel_key"] != conn.Key {
			t.Errorf("received %+v", received)
		}
		// A group conversation a contact opens is named after the group.
		if d := byKey[lounge]; d == nil || d["conversation"].(map[string]any)["is_group"] != true || d["conversation"].(map[string]any)["name"] != "Lounge" {
			t.Errorf("group message received %+v", byKey[lounge])
		}
		sink.first(events.OmnichatConversationCreated, func(ev delivery) bool {
			d := ev.Data
			return ev.Name == events.OmnichatConversationCreated &&
				d["key"] == "5521955554444" && d["is_group"] == false && d["origin_id"] == float64(1) && d["channel_type_id"] == float64(2)
		})
		sent := sink.data(events.OmnichatMessageSent, 5)
		for _, d := range sent {
			if d["message_source_id"] == float64(2) {
				t.Errorf("a sent event with the contact's source: %+v", d)
			}
		}
	})
}

func TestChatappEditAndRevoke(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		h, c := startConnections(t, db, apitest.Options{Now: clk.Now})
		ctx := context.Background()
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		var g struct {
			Key string `json:"key"`
		}
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/groups", conn.ID), map[string]any{"name": "Team"}, &g)
		msgID := func(ext string) int {
			m, err := h.App.Messaging.FindByExternalID(ctx, int64(conn.ID), ext)
			if err != nil {
				t.Fatal(err)
			}
			return int(m.ID)
		}
		toAna := c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": "5511977776666", "contact_is_group": false, "text": "typo"})
		toTeam := c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": g.Key, "contact_is_group": true, "text": "team"})
		const shortGroup = "1203630252461" // 13 digits: would pass for a phone number
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/groups", conn.ID), map[string]any{"key": shortGroup, "name": "Short"}, nil)
		toShort := c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": shortGroup, "contact_is_group": true, "text": "short"})

		resp := c.post("/api/edit-message", map[string]any{"id": msgID(toAna.Data.ExternalID), "text": "fixed"})
		if resp.Status != http.StatusOK {
			t.Fatalf("edit: %d %s", resp.Status, resp.Body)
		}
		var edited struct {
			ID         int    `json:"id"`
			Text       string `json:"text"`
			Edited     bool   `json:"edited"`
			ExternalID string `json:"external_id"`
			ChannelID  int    `json:"company_channel_id"`
			UpdatedAt  string `json:"updated_at"`
		}
		resp.JSON(t, &edited)
		if edited.Text != "fixed" || !edited.Edited || edited.ExternalID != toAna.Data.ExternalID || edited.ChannelID != conn.ID || len(edited.UpdatedAt) != len("2026-11-22T14:03:07.123456Z") {
			t.Fatalf("edit answer %s", resp.Body)
		}
		// In groups too: the conversation's stored group flag tells the
		// connector, even for a plain group key short enough to read as a
		// phone number.
		if resp := c.post("/api/edit-message", map[string]any{"id": msgID(toTeam.Data.ExternalID), "text": "team!"}); resp.Status != http.StatusOK {
			t.Fatalf("group edit: %d %s", resp.Status, resp.Body)
		}
		if resp := c.post("/api/edit-message", map[string]any{"id": msgID(toShort.Data.ExternalID), "text": "short!"}); resp.Status != http.StatusOK {
			t.Fatalf("short group key edit: %d %s", resp.Status, resp.Body)
		}
		out := c.outbox(conn.ID)
		if out[0].Text != "fixed" || !out[0].Edited || out[1].Text != "team!" || out[2].Text != "short!" || !out[2].IsGroup {
			t.Fatalf("chat app after edits: %+v", out)
		}
		// The chat app refuses late edits: 509 with its reason, nothing changes.
		clk.Advance(sim.EditWindow + time.Minute)
		resp = c.post("/api/edit-message", map[string]any{"id": msgID(toAna.Data.ExternalID), "text": "too late"})
		if resp.Status != 509 {
			t.Fatalf("late edit: %d %s", resp.Status, resp.Body)
		}
		if m, _ := h.App.Messaging.FindByExternalID(ctx, int64(conn.ID), toAna.Data.ExternalID); m.Text != "fixed" {
			t.Fatalf("a refused edit changed the text to %q", m.Text)
		}

		revoke := func(body map[string]any) []map[string]any {
			t.Helper()
			resp := c.post("/api/revoke-messages", body)
			if resp.Status != http.StatusOK {
				t.Fatalf("revoke %v: %d %s", body, resp.Status, resp.Body)
			}
			var res []map[string]any
			resp.JSON(t, &res)
			return res
		}
		anaID, teamID := msgID(toAna.Data.ExternalID), msgID(toTeam.Data.ExternalID)
		if res := revoke(map[string]any{"ids": []int{msgID(toShort.Data.ExternalID)}, "scope": "all"}); res[0]["Status"] != true {
			t.Fatalf("revoke in the short-key group: %+v", res)
		}
		if out := c.outbox(conn.ID); !out[2].Revoked {
			t.Fatalf("not revoked in the short-key group: %+v", out[2])
		}
		if res := revoke(map[string]any{"ids": []int{anaID}, "scope": "all"}); res[0]["Status"] != true {
			t.Fatalf("revoke all: %+v", res)
		}
		if out := c.outbox(conn.ID); !out[0].Revoked {
			t.Fatalf("not revoked at the chat app: %+v", out[0])
		}
		if m, err := h.App.Messaging.FindByExternalID(ctx, int64(conn.ID), toAna.Data.ExternalID); err != nil || m.RevokedAt == nil {
			t.Fatalf("revoked message: %+v %v", m, err)
		}
		// A second "all" deletes it.
		if res := revoke(map[string]any{"ids": []int{anaID}, "scope": "all"}); res[0]["Status"] != true {
			t.Fatalf("second revoke all: %+v", res)
		}
		if _, err := h.App.Messaging.FindByExternalID(ctx, int64(conn.ID), toAna.Data.ExternalID); fault.KindOf(err) != fault.NotFound {
			t.Fatalf("after the second revoke: %v", err)
		}
		// "me" deletes here only: the chat app is not called.
		if res := revoke(map[string]any{"ids": []int{teamID}}); res[0]["Status"] != true {
			t.Fatalf("revoke me: %+v", res)
		}
		if out := c.outbox(conn.ID); out[1].Revoked {
			t.Fatal("scope me revoked at the chat app")
		}

		// remove_media removes the stored file.
		fm, file := c.sendPhoto(conn, "5511977776666")
		if _, ok := storedFile(t, c.h.App, file); !ok {
			t.Fatalf("no stored file %s", file)
		}
		if res := revoke(map[string]any{"ids": []int{int(fm.ID)}, "scope": "all", "remove_media": true}); res[0]["Status"] != true {
			t.Fatalf("revoke with remove_media: %+v", res)
		}
		if _, ok := storedFile(t, c.h.App, file); ok {
			t.Fatalf("the file survived remove_media: %s", file)
		}
	})
}

func TestChatappDeleteTakesItsConversationsAndMessages(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		_, c := startConnections(t, db, apitest.Options{})
		ctx := context.Background()
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		keep := c.pair(c.create("Support", "5511988886666").ID)
		for _, id := range []int{conn.ID, keep.ID} {
			c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/inbound", id), map[string]any{"from": "5521955554444", "text": "hi"}, nil)
		}
		_, file := c.sendPhoto(conn, "5521955554444")
		conversations := func(channelID int) int {
			var n int
			if err := db.Bun.NewRaw("SELECT COUNT(*) FROM contact_channels WHERE company_channel_id = ?", channelID).Scan(ctx, &n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if conversations(conn.ID) != 1 || countMessages(t, db, conn.ID, "1 = 1") != 2 {
			t.Fatalf("before delete: %d conversations, %d messages", conversations(conn.ID), countMessages(t, db, conn.ID, "1 = 1"))
		}

		c.ok("/api/chatapp-delete", map[string]any{"id": conn.ID}, nil)
		if conversations(conn.ID) != 0 || countMessages(t, db, conn.ID, "1 = 1") != 0 {
			t.Fatalf("after delete: %d conversations, %d messages", conversations(conn.ID), countMessages(t, db, conn.ID, "1 = 1"))
		}
		if _, ok := storedFile(t, c.h.App, file); ok {
			t.Fatalf("the deleted connection's file survived: %s", file)
		}
		if conversations(keep.ID) != 1 || countMessages(t, db, keep.ID, "1 = 1") != 1 {
			t.Fatal("deleting one connection touched another's data")
		}
		// The phone was unlinked: the simulated chat app no longer has a live
		// session for it, and the number can be connected again.
		c.create("Sales again", conn.Key)
	})
}

// TestSendFromAChannelDeletedElsewhere: another replica deleted the
// connection while this one still holds it in its channel cache (bounded
// by channels.CacheTTL); the send is answered as for an unknown sender,
// never 500, and stores nothing.
func TestSendFromAChannelDeletedElsewhere(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, 11, 22, 14, 3, 7, 0, time.UTC))
		_, c := startConnections(t, db, apitest.Options{Now: clk.Now})
		ctx := context.Background()
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		body := map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": "5511977776666",
			"contact_is_group": false, "text": "hello"}
		if resp := c.send(body); resp.Status != http.StatusOK {
			t.Fatalf("first send: %d %s", resp.Status, resp.Body)
		}
		// What the other replica's delete leaves behind, written past this
		// process's cache.
		for _, q := range []string{"DELETE FROM messages WHERE company_channel_id = ?",
			"DELETE FROM contact_channels WHERE company_channel_id = ?"} {
			if _, err := db.Bun.NewRaw(q, conn.ID).Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Bun.NewRaw("DELETE FROM company_channels WHERE id = ?", conn.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		resp := c.send(body)
		if resp.Status != 509 || resp.Map(t)["message"] != "sender_key is not a connection of the company" {
			t.Fatalf("send from a deleted channel: %d %s", resp.Status, resp.Body)
		}
		if n := countMessages(t, db, conn.ID, "1 = 1"); n != 0 {
			t.Fatalf("%d messages stored for a deleted channel", n)
		}
	})
}
