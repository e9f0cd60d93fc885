package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestChatappGroupMessageSaysWhichMemberWrote: a message a member writes in
// a group is stored with the member and its events carry them as `sender`
// (extension); a direct message, and one the account typed in the group on
// the phone, carry none. Every event is checked against the AsyncAPI
// document by the sink.
func TestChatappGroupMessageSaysWhichMemberWrote(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h, c := startConnections(t, db, apitest.Options{WorkJobs: true})
		ctx := context.Background()
		sink := newEventSink(t, http.StatusNoContent)
		sink.subscribe(h, c.token, map[string]any{"name": "sink", "events": []string{events.OmnichatMessageReceived, events.OmnichatMessageSent}})
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		var g struct {
			Key string `json:"key"`
		}
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/groups", conn.ID), map[string]any{"name": "Team"}, &g)

		for _, tc := range []struct {
			name       string
			body       map[string]any
			event      string
			senderKey  string // "" when the message has no sender
			senderName string
		}{
			{"member with a name", map[string]any{"from": "5521955554444", "name": "Carla", "group_key": g.Key, "text": "morning all"},
				events.OmnichatMessageReceived, "5521955554444", "Carla"},
			{"member without a name", map[string]any{"from": "5531944443333", "group_key": g.Key, "text": "hi"},
				events.OmnichatMessageReceived, "5531944443333", ""},
			{"direct message", map[string]any{"from": "5521955554444", "name": "Carla", "text": "just to you"},
				events.OmnichatMessageReceived, "", ""},
			{"typed in the group on the phone", map[string]any{"from": "5521955554444", "group_key": g.Key, "from_me": true, "text": "noted"},
				events.OmnichatMessageSent, "", ""},
		} {
			ext := c.inbound(conn.ID, tc.body)
			m, err := h.App.Messaging.FindByExternalID(ctx, int64(conn.ID), ext)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if m.SenderKey != tc.senderKey || m.SenderName != tc.senderName {
				t.Errorf("%s: stored sender %q %q, want %q %q", tc.name, m.SenderKey, m.SenderName, tc.senderKey, tc.senderName)
			}
			assertEventSender(t, tc.name, sink.first(tc.name, messageEvent(tc.event, ext, 0)).Data, tc.senderKey, tc.senderName)
		}

		// The member edits the message: published again, still saying who wrote it.
		first := c.inbound(conn.ID, map[string]any{"from": "5521955554444", "name": "Carla", "group_key": g.Key, "text": "typo"})
		c.inbound(conn.ID, map[string]any{"from": "5521955554444", "group_key": g.Key, "edit_of": first, "text": "fixed"})
		edited := sink.first("edit", func(d delivery) bool {
			return messageEvent(events.OmnichatMessageReceived, first, 0)(d) && d.Data["edited"] == true
		})
		assertEventSender(t, "edit", edited.Data, "5521955554444", "Carla")
		if m, err := h.App.Messaging.FindByExternalID(ctx, int64(conn.ID), first); err != nil || m.SourceID != messaging.SourceContact || m.SenderKey != "5521955554444" {
			t.Errorf("edited group message %+v %v", m, err)
		}
	})
}

// assertEventSender checks a message event's `sender`: absent when key is
// "", else exactly {key, name}.
func assertEventSender(t *testing.T, what string, data map[string]any, key, name string) {
	t.Helper()
	got, present := data["sender"]
	if key == "" {
		if present {
			t.Errorf("%s: event sender %v, want none", what, got)
		}
		return
	}
	s, ok := got.(map[string]any)
	if !ok || s["key"] != key || s["name"] != name || len(s) != 2 {
		t.Errorf("%s: event sender %v, want {key: %q, name: %q}", what, got, key, name)
	}
}
