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
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// inbound makes the simulated chat app deliver body to connection id and
// returns the external id it answered.
func (c connAPI) inbound(id int, body map[string]any) string {
	c.t.Helper()
	var in struct {
		ExternalID string `json:"external_id"`
	}
	c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/inbound", id), body, &in)
	return in.ExternalID
}

// TestChatappInboundKinds: every kind the chat app delivers is stored and
// published with its type, readable text, reply and forward information;
// edits and revokes by the author change the stored message and publish it
// again; a message typed on the phone is stored as sent.
func TestChatappInboundKinds(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		h, c := startConnections(t, db, apitest.Options{Now: clk.Now, WorkJobs: true})
		sink := newEventSink(t, http.StatusNoContent)
		sink.subscribe(h, c.token, map[string]any{"name": "sink", "events": []string{events.OmnichatMessageReceived, events.OmnichatMessageSent}})
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		const ana = "5511977776666"
		stored := func(ext string) messaging.Message { return c.stored(conn.ID, ext) }
		sent := c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": ana, "contact_is_group": false, "text": "Our hours?"})
		question := c.inbound(conn.ID, map[string]any{"from": ana, "name": "Ana", "text": "9 to 5?"})

		vcard := "BEGIN:VCARD\nFN:Bruno\nTEL;type=CELL:+55 11 95555-4444\nEND:VCARD"
		for _, tc := range []struct {
			name      string
			body      map[string]any
			typeID    int
			text      string
			replyTo   string
			forwarded bool
		}{
			{"reply", map[string]any{"text": "yes please", "reply_to": sent.Data.ExternalID}, msgtype.Text, "yes please", sent.Data.ExternalID, false},
			{"forwarded", map[string]any{"text": "look", "forwarded": true}, msgtype.Text, "look", "", true},
			{"reaction", map[string]any{"reaction": "👍", "reply_to": sent.Data.ExternalID}, msgtype.Reaction, "Reacted 👍", sent.Data.ExternalID, false},
			{"location", map[string]any{"location": map[string]any{"latitude": -23.55052, "longitude": -46.633308, "name": "Shop"}},
				msgtype.Location, "Location: Shop (-23.550520,-46.633308)", "", false},
			{"contact card", map[string]any{"contact": map[string]any{"name": "Bruno", "vcard": vcard}}, msgtype.Contacts, "Contact: Bruno (+55 11 95555-4444)", "", false},
			{"poll", map[string]any{"poll": map[string]any{"question": "Lunch?", "options": []string{"Pizza", "Sushi"}}}, msgtype.Poll, "Poll: Lunch? (Pizza / Sushi)", "", false},
		} {
			body := tc.body
			body["from"] = ana
			ext := c.inbound(conn.ID, body)
			m := stored(ext)
			if m.TypeID != tc.typeID || m.Text != tc.text || m.IsForwarded != tc.forwarded || m.SourceID != messaging.SourceContact {
				t.Errorf("%s: stored %+v", tc.name, m)
			}
			if tc.replyTo != "" && (m.RepliedMessageID == nil || *m.RepliedMessageID != stored(tc.replyTo).ID) {
				t.Errorf("%s: replied_message_id %v", tc.name, m.RepliedMessageID)
			}
			d := sink.first(tc.name, messageEvent(events.OmnichatMessageReceived, ext, 0)).Data
			if d["message_type_id"] != float64(tc.typeID) || d["text"] != tc.text || d["is_forwarded"] != tc.forwarded {
				t.Errorf("%s: published %+v", tc.name, d)
			}
		}

		// The author edits, then revokes: stored and published each time.
		c.inbound(conn.ID, map[string]any{"from": ana, "edit_of": question, "text": "9 to 6?"})
		if m := stored(question); m.Text != "9 to 6?" || !m.Edited {
			t.Fatalf("after the contact's edit: %+v", m)
		}
		sink.first("edit", func(d delivery) bool {
			return messageEvent(events.OmnichatMessageReceived, question, 0)(d) && d.Data["edited"] == true && d.Data["text"] == "9 to 6?"
		})
		c.inbound(conn.ID, map[string]any{"from": ana, "revoke_of": question})
		if m := stored(question); m.RevokedAt == nil {
			t.Fatalf("after the contact's revoke: %+v", m)
		}
		sink.first("revoke", func(d delivery) bool {
			return messageEvent(events.OmnichatMessageReceived, question, 0)(d) && d.Data["revoked_at"] != nil
		})
		// A message the chat app never carried cannot be changed (someone
		// else's: TestChatappInboundChangeOnlyByAuthor).
		c.refused(fmt.Sprintf("/api/chatapp-simulator/%d/inbound", conn.ID), map[string]any{"from": "5511966665555", "edit_of": "3A0000000000", "text": "x"}, "The chat app does not know this message")

		// Typed on the phone: stored as sent by an attendant, published as sent.
		own := c.inbound(conn.ID, map[string]any{"from": ana, "from_me": true, "text": "On my way"})
		if m := stored(own); m.SourceID != messaging.SourceAttendant || m.StatusID != messaging.StatusSent || m.ContactKey != ana {
			t.Fatalf("typed on the phone: %+v", m)
		}
		sink.first("from the phone", messageEvent(events.OmnichatMessageSent, own, messaging.StatusSent))
	})
}

// TestChatappEditAndRevokeLimitsBeforeTheDriver: past the chat app's
// limits, edit and revoke are refused by messaging without calling the
// driver — here the session is even logged out, which the driver would
// answer differently.
func TestChatappEditAndRevokeLimitsBeforeTheDriver(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		h, c := startConnections(t, db, apitest.Options{Now: clk.Now})
		ctx := context.Background()
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		sent := c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": "5511977776666", "contact_is_group": false, "text": "typo"})
		m, err := h.App.Messaging.FindByExternalID(ctx, int64(conn.ID), sent.Data.ExternalID)
		if err != nil {
			t.Fatal(err)
		}
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/unlink", conn.ID), map[string]any{}, nil)

		clk.Advance(connector.EditWindow + time.Second)
		if resp := c.post("/api/edit-message", map[string]any{"id": m.ID, "text": "fixed"}); resp.Status != 509 || resp.Map(t)["message"] != connector.MsgEditTooLate {
			t.Fatalf("late edit: %d %s", resp.Status, resp.Body)
		}

		clk.Advance(connector.RevokeWindow)
		resp := c.post("/api/revoke-messages", map[string]any{"ids": []int64{m.ID}, "scope": "all"})
		var res []map[string]any
		resp.JSON(t, &res)
		if resp.Status != http.StatusOK || len(res) != 1 || res[0]["Status"] != false || res[0]["Message"] != connector.MsgRevokeTooLate {
			t.Fatalf("late revoke: %d %s", resp.Status, resp.Body)
		}
		if cur, _ := h.App.Messaging.FindByExternalID(ctx, int64(conn.ID), sent.Data.ExternalID); cur.Text != "typo" || cur.RevokedAt != nil {
			t.Fatalf("a refused change changed the message: %+v", cur)
		}
	})
}
