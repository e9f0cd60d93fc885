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
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// stored is the message connection id's far side knows as ext.
func (c connAPI) stored(id int, ext string) messaging.Message {
	c.t.Helper()
	m, err := c.h.App.Messaging.FindByExternalID(context.Background(), int64(id), ext)
	if err != nil {
		c.t.Fatalf("message %s: %v", ext, err)
	}
	return m
}

// TestChatappInboundChangeOnlyByAuthor: the chat app relays an edit or a
// revoke from any client (the simulator does so for a message someone else
// wrote, as a modified client would send it). Only the author's change of a
// message in its own conversation applies; any other is ignored (answered
// as relayed, the message unchanged, nothing published).
func TestChatappInboundChangeOnlyByAuthor(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		h, c := startConnections(t, db, apitest.Options{Now: clk.Now, WorkJobs: true})
		ctx := context.Background()
		sink := newEventSink(t, http.StatusNoContent)
		sink.subscribe(h, c.token, map[string]any{"name": "sink", "events": []string{events.OmnichatMessageReceived, events.OmnichatMessageSent}})
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		const ana, bia = "5511977776666", "5511966665555"
		var team struct {
			Key string `json:"key"`
		}
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/groups", conn.ID), map[string]any{"name": "Team"}, &team)
		stored := func(ext string) messaging.Message { return c.stored(conn.ID, ext) }

		toAna := c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": ana, "contact_is_group": false, "text": "Our hours are 9 to 5"}).Data.ExternalID
		toTeam := c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": team.Key, "contact_is_group": true, "text": "Meeting at 3"}).Data.ExternalID
		fromAna := c.inbound(conn.ID, map[string]any{"from": ana, "text": "Thanks"})
		fromBia := c.inbound(conn.ID, map[string]any{"from": bia, "text": "Hello"})
		anaInTeam := c.inbound(conn.ID, map[string]any{"from": ana, "group_key": team.Key, "text": "I'll be there"})
		biaInTeam := c.inbound(conn.ID, map[string]any{"from": bia, "group_key": team.Key, "text": "Me too"})

		const forged = "forged"
		for _, tc := range []struct {
			name   string
			target string
			body   map[string]any
		}{
			{"a contact edits the company's message", toAna, map[string]any{"from": ana, "edit_of": toAna, "text": forged}},
			{"a contact revokes the company's message", toAna, map[string]any{"from": ana, "revoke_of": toAna}},
			{"a contact edits another contact's message", fromBia, map[string]any{"from": ana, "edit_of": fromBia, "text": forged}},
			{"a contact revokes another contact's message", fromBia, map[string]any{"from": ana, "revoke_of": fromBia}},
			{"a member edits the company's group message", toTeam, map[string]any{"from": ana, "group_key": team.Key, "edit_of": toTeam, "text": forged}},
			{"a member revokes another member's message", biaInTeam, map[string]any{"from": ana, "group_key": team.Key, "revoke_of": biaInTeam}},
			{"a member edits another member's message", biaInTeam, map[string]any{"from": ana, "group_key": team.Key, "edit_of": biaInTeam, "text": forged}},
			{"the author edits a group message from the direct chat", anaInTeam, map[string]any{"from": ana, "edit_of": anaInTeam, "text": forged}},
			{"the phone edits a contact's message", fromAna, map[string]any{"from": ana, "from_me": true, "edit_of": fromAna, "text": forged}},
			{"the phone revokes the company's message in another chat", toTeam, map[string]any{"from": ana, "from_me": true, "revoke_of": toTeam}},
		} {
			before := stored(tc.target)
			c.inbound(conn.ID, tc.body)
			if after := stored(tc.target); after.Text != before.Text || after.Edited || after.RevokedAt != nil || !after.UpdatedAt.Equal(before.UpdatedAt) {
				t.Errorf("%s: changed %+v", tc.name, after)
			}
		}

		// The authors' own changes apply and are published.
		for _, tc := range []struct {
			name   string
			target string
			body   map[string]any
			text   string
			event  string
		}{
			{"the contact edits its message", fromAna, map[string]any{"from": ana, "edit_of": fromAna, "text": "Thanks a lot"}, "Thanks a lot", events.OmnichatMessageReceived},
			{"the member edits its group message", anaInTeam, map[string]any{"from": ana, "group_key": team.Key, "edit_of": anaInTeam, "text": "I'll be late"}, "I'll be late", events.OmnichatMessageReceived},
			{"the phone edits the company's message", toAna, map[string]any{"from": ana, "from_me": true, "edit_of": toAna, "text": "Our hours are 9 to 6"}, "Our hours are 9 to 6", events.OmnichatMessageSent},
			{"the member revokes its group message", anaInTeam, map[string]any{"from": ana, "group_key": team.Key, "revoke_of": anaInTeam}, "", events.OmnichatMessageReceived},
		} {
			c.inbound(conn.ID, tc.body)
			m := stored(tc.target)
			revoke := tc.body["revoke_of"] != nil
			if revoke && m.RevokedAt == nil || !revoke && (m.Text != tc.text || !m.Edited) {
				t.Fatalf("%s: stored %+v", tc.name, m)
			}
			sink.first(tc.name, func(d delivery) bool {
				return messageEvent(tc.event, tc.target, 0)(d) && (revoke && d.Data["revoked_at"] != nil || !revoke && d.Data["text"] == tc.text)
			})
		}
		// Every event is written with its change, so once the outbox is
		// drained the sink has all the forged changes would have published.
		eventually(t, "the outbox drained", func() bool {
			unfanned, err := db.Bun.NewSelect().Table("webhook_events").Where("seq IS NULL").Count(ctx)
			if err != nil || unfanned != 0 {
				return false
			}
			n, err := db.Bun.NewSelect().Table("webhook_deliveries").Count(ctx)
			return err == nil && n == 0
		})
		forgedTargets := map[any]bool{toAna: true, toTeam: true, fromBia: true, biaInTeam: true}
		if n := sink.count(func(d delivery) bool {
			return d.Data["text"] == forged || forgedTargets[d.Data["external_id"]] && d.Data["revoked_at"] != nil
		}); n != 0 {
			t.Errorf("%d events of forged changes", n)
		}
	})
}
