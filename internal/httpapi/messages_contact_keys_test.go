package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// conversationKeys lists the keys of a channel's conversations of one kind.
func conversationKeys(t *testing.T, db *store.DB, channelID int64, isGroup bool) []string {
	t.Helper()
	var keys []string
	if err := db.Bun.NewRaw("SELECT key FROM contact_channels WHERE company_channel_id = ? AND is_group = ? ORDER BY key",
		channelID, isGroup).Scan(context.Background(), &keys); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestChatappContactKeySpellingsShareOneConversation: the API document says
// the chat app's suffixes are not needed; when a client sends them anyway
// (or a leading +, or a device part) the message lands in the conversation
// of the plain key, reaches the chat app under that key, and a key the
// connector cannot address is refused (509) before anything is stored —
// queued sends included.
func TestChatappContactKeySpellingsShareOneConversation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		_, c := startConnections(t, db, apitest.Options{})
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		var g struct {
			Key string `json:"key"`
		}
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/groups", conn.ID), map[string]any{"name": "Team"}, &g)

		const number = "5511977776666"
		for _, tc := range []struct {
			key     string
			isGroup bool
			want    string
		}{
			{number, false, number},
			{"+" + number, false, number},
			{number + "@s.whatsapp.net", false, number},
			{number + ":7@s.whatsapp.net", false, number},
			{number + "@c.us", false, number},
			{g.Key, true, g.Key},
			{g.Key + "@g.us", true, g.Key},
		} {
			c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": tc.key, "contact_is_group": tc.isGroup, "text": tc.key})
			out := c.outbox(conn.ID)
			if last := out[len(out)-1]; last.Text != tc.key || last.ChatKey != tc.want || last.IsGroup != tc.isGroup {
				t.Errorf("send to %q reached the chat app as %+v, want chat %q", tc.key, last, tc.want)
			}
		}
		if got := conversationKeys(t, db, int64(conn.ID), false); len(got) != 1 || got[0] != number {
			t.Errorf("contact conversations %v, want only %s", got, number)
		}
		if got := conversationKeys(t, db, int64(conn.ID), true); len(got) != 1 || got[0] != g.Key {
			t.Errorf("group conversations %v, want only %s", got, g.Key)
		}
		if n := countMessages(t, db, conn.ID, fmt.Sprintf("contact_key NOT IN ('%s', '%s')", number, g.Key)); n != 0 {
			t.Errorf("%d messages stored under a non-canonical key", n)
		}

		before := countMessages(t, db, conn.ID, "1 = 1")
		for _, tc := range []struct {
			name    string
			key     string
			isGroup bool
			enqueue bool
			msg     string
		}{
			{"group suffix on a contact", number + "@g.us", false, false, connector.MsgBadNumber},
			{"letters", "maria", false, false, connector.MsgBadNumber},
			{"too short", "1234567", false, true, connector.MsgBadNumber},
			{"contact suffix on a group", g.Key + "@s.whatsapp.net", true, false, connector.MsgBadGroupKey},
			{"malformed group, queued", "team-chat", true, true, connector.MsgBadGroupKey},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := c.send(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": tc.key,
					"contact_is_group": tc.isGroup, "text": "x", "enqueue": tc.enqueue})
				if resp.Status != 509 || resp.Map(t)["message"] != tc.msg {
					t.Errorf("%q: %d %s, want 509 %q", tc.key, resp.Status, resp.Body, tc.msg)
				}
			})
		}
		if after := countMessages(t, db, conn.ID, "1 = 1"); after != before {
			t.Errorf("refused keys stored messages: %d → %d", before, after)
		}
	})
}

// TestOfficialContactKeyFormattingSharesOneConversation: on the official
// channel a number written for people reaches the provider, and is
// stored, as its digits.
func TestOfficialContactKeyFormattingSharesOneConversation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		e.contactWrites(ofcContactKey, "Oi") // opens the window
		for _, key := range []string{ofcContactKey, "+" + ofcContactKey, "+55 (11) 97777-6666", " 55.11.97777.6666 "} {
			if resp := e.send(map[string]any{"contact_key": key, "text": key}); resp.Status != http.StatusOK {
				t.Fatalf("send to %q: %d %s", key, resp.Status, resp.Body)
			}
			sent := e.sent()
			if last := sent[len(sent)-1]; last.To != ofcContactKey {
				t.Errorf("send to %q reached the provider for %q", key, last.To)
			}
		}
		if got := conversationKeys(t, db, e.ch.ID, false); len(got) != 1 || got[0] != ofcContactKey {
			t.Errorf("conversations %v, want only %s", got, ofcContactKey)
		}
		for _, key := range []string{"maria", "5511977776666@s.whatsapp.net", "05511977776666", "1234567", "5511977776666123456"} {
			resp := e.send(map[string]any{"contact_key": key, "text": "x"})
			if resp.Status != 509 || resp.Map(t)["message"] != official.MsgBadNumber {
				t.Errorf("send to %q: %d %s, want 509 %q", key, resp.Status, resp.Body, official.MsgBadNumber)
			}
		}
	})
}
