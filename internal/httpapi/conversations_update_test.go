package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"net/http"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// convEnsure creates a conversation the way the channel capabilities do.
func convEnsure(t *testing.T, h *apitest.Harness, in conversations.EnsureInput) conversations.Ref {
	t.Helper()
	var ref conversations.Ref
	err := h.App.DB.InTx(context.Background(), func(ctx context.Context, tx *store.Tx) error {
		var err error
		ref, err = h.App.Conversations.Ensure(ctx, tx, in)
		return err
	})
	if err != nil {
		t.Fatalf("ensure: %v", err)
	}
	return ref
}

func TestUpdateContactChannel(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		ctx := context.Background()
		// Only the permission the update needs.
		a, b := h.Tenant("Company A", auth.PermConversationsUpdate), h.Tenant("Company B")
		off, err := h.App.Channels.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: a.CompanyID, Name: "Official", Key: "5511900000001",
			BusinessAccountID: "waba", PhoneNumberID: "pn-1", AccessToken: "tok", AppSecret: "sec", BaseURL: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		ref := convEnsure(t, h, conversations.EnsureInput{CompanyID: a.CompanyID, CompanyChannelID: off.ID,
			ChannelTypeID: channels.OfficialChatapp, ContactKey: "5511977776666", ContactName: "Maria", OriginID: 1})
		attendant, _ := h.App.Auth.CreateUser(ctx, a.CompanyID, "Ana Lima", "ana.lima@a.test")
		sector, _ := h.App.Conversations.CreateSector(ctx, a.CompanyID, "Suporte")
		foreignSector, _ := h.App.Conversations.CreateSector(ctx, b.CompanyID, "Vendas")
		path := fmt.Sprintf("/api/contact-channels/%d", ref.ID)

		resp := h.Do(apitest.Request{Method: "PATCH", Path: path, Token: a.Token,
			JSON: map[string]any{"user_id": attendant, "sector_id": sector.ID, "status_id": 3, "pinned": true, "mark_read": true}})
		if resp.Status != 200 {
			t.Fatalf("update: %d %s", resp.Status, resp.Body)
		}
		var res struct {
			Success bool           `json:"success"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		}
		resp.JSON(t, &res)
		d := res.Data
		user, _ := d["user"].(map[string]any)
		sec, _ := d["sector"].(map[string]any)
		if !res.Success || d["status_id"].(float64) != 3 || d["pinned"] != true || user["name"] != "Ana Lima" || sec["name"] != "Suporte" ||
			d["contact"] == nil || d["tags"] == nil || d["provider_opened_window"] == nil {
			t.Fatalf("answer %s", resp.Body)
		}

		cases := []struct {
			name    string
			token   string
			path    string
			body    any
			status  int
			field   string
			message string
		}{
			{"empty body", a.Token, path, map[string]any{}, 422, "body", "At least one of user_id, without_user, sector_id, without_sector, status_id, pinned, muted, opened or mark_read is required"},
			{"user id not an integer", a.Token, path, map[string]any{"user_id": "ana"}, 422, "user_id", "User id must be an integer"},
			{"status out of range", a.Token, path, map[string]any{"status_id": 8}, 422, "status_id", "Status id must be an integer from 1 to 7"},
			{"pinned not a boolean", a.Token, path, map[string]any{"pinned": "yes"}, 422, "pinned", "Pinned must be true or false"},
			{"user with without_user", a.Token, path, map[string]any{"user_id": attendant, "without_user": true}, 422, "user_id", "User id cannot be combined with without_user"},
			{"sector with without_sector", a.Token, path, map[string]any{"sector_id": sector.ID, "without_sector": true}, 422, "sector_id", "Sector id cannot be combined with without_sector"},
			{"user of another company", a.Token, path, map[string]any{"user_id": b.UserID}, 422, "user_id", "The selected user id is not a user of this company."},
			{"sector of another company", a.Token, path, map[string]any{"sector_id": foreignSector.ID}, 422, "sector_id", "The selected sector id is not a sector of this company."},
			{"id not an integer", a.Token, "/api/contact-channels/abc", map[string]any{"pinned": true}, 422, "id", "Id must be an integer"},
			{"unknown conversation", a.Token, "/api/contact-channels/999999", map[string]any{"pinned": true}, 404, "", "Conversation not found."},
			{"another company's conversation", b.Token, path, map[string]any{"without_user": true}, 404, "", "Conversation not found."},
			{"no token", "", path, map[string]any{"pinned": true}, 401, "", "Unauthenticated."},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := h.Do(apitest.Request{Method: "PATCH", Path: tc.path, Token: tc.token, JSON: tc.body})
				if resp.Status != tc.status {
					t.Errorf("%d %s", resp.Status, resp.Body)
					return
				}
				var body validationAnswer
				resp.JSON(t, &body)
				if body.Message != tc.message || (tc.field != "" && len(body.Errors[tc.field]) == 0) {
					t.Errorf("%s", resp.Body)
				}
			})
		}

		// Company B's failed attempt changed nothing.
		c, err := h.App.Conversations.Get(ctx, a.CompanyID, ref.ID, conversations.Relations{})
		if err != nil || c.UserID == nil || *c.UserID != attendant || c.SectorID == nil {
			t.Fatalf("after refused updates: %+v %v", c, err)
		}
	})
}

func TestPublishEventEndpoint(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		publisher := h.Tenant("Publisher", auth.PermEventsPublish)
		viewer := h.Tenant("Viewer", auth.PermWebhooksView)
		data := map[string]any{"import_id": "imp-1", "total_contacts": 3, "imported_contacts": 2, "skipped_contacts": 1,
			"failed_contacts": 0, "started_by_user_id": publisher.UserID, "completed_at": "2026-11-22T09:00:00-03:00"}

		resp := h.Do(apitest.Request{Method: "POST", Path: "/api/events", Token: publisher.Token, JSON: map[string]any{"event": "contact.import.completed", "data": data}})
		if resp.Status != 202 {
			t.Fatalf("publish: %d %s", resp.Status, resp.Body)
		}
		if m := resp.Map(t); m["success"] != true || m["event"] != "contact.import.completed" {
			t.Fatalf("answer %s", resp.Body)
		}

		bad := map[string]any{"import_id": "imp-1", "total_contacts": "three"}
		cases := []struct {
			name    string
			token   string
			body    any
			status  int
			field   string
			message string
		}{
			{"without the permission", viewer.Token, map[string]any{"event": "contact.import.completed", "data": data}, 403, "", "This action is unauthorized."},
			{"no token", "", map[string]any{"event": "contact.import.completed", "data": data}, 401, "", "Unauthenticated."},
			{"event missing", publisher.Token, map[string]any{"data": data}, 422, "event", "Event is required"},
			{"data missing", publisher.Token, map[string]any{"event": "contact.import.completed"}, 422, "data", "Data is required"},
			{"data not an object", publisher.Token, map[string]any{"event": "contact.import.completed", "data": []int{1}}, 422, "data", "Data must be an object"},
			{"channel-scope event", publisher.Token, map[string]any{"event": "omnichat.conversation.closed", "data": data}, 422, "event", ""},
			{"ping", publisher.Token, map[string]any{"event": "ping", "data": map[string]any{}}, 422, "event", ""},
			{"data against the schema", publisher.Token, map[string]any{"event": "contact.import.completed", "data": bad}, 422, "data.total_contacts", ""},
			{"business data against the schema", publisher.Token, map[string]any{"event": "crm.business.won", "data": data}, 422, "data", ""},
			{"occurred_at malformed", publisher.Token, map[string]any{"event": "contact.import.completed", "data": data, "occurred_at": "yesterday"}, 422, "occurred_at", ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := h.Do(apitest.Request{Method: "POST", Path: "/api/events", Token: tc.token, JSON: tc.body})
				if resp.Status != tc.status {
					t.Errorf("%d %s", resp.Status, resp.Body)
					return
				}
				var body validationAnswer
				resp.JSON(t, &body)
				if body.Message == "" || (tc.message != "" && body.Message != tc.message) || (tc.field != "" && len(body.Errors[tc.field]) == 0) {
					t.Errorf("%s", resp.Body)
				}
			})
		}
	})
}

// TestConversationEventsEndToEnd runs the real webhooks engine: the
// lifecycle events and a published company-scope event reach a receiver on
// 127.0.0.1, signed, with AsyncAPI-valid headers and bodies; the channel
// filter of the subscription applies to the conversation events only.
func TestConversationEventsEndToEnd(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		sink := newEventSink(t, http.StatusNoContent)
		h := apitest.Start(t, db, apitest.Options{WorkJobs: true})
		ctx := context.Background()
		ten := h.Tenant("Acme")
		off, err := h.App.Channels.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: ten.CompanyID, Name: "Official", Key: "5511900000001",
			BusinessAccountID: "waba", PhoneNumberID: "pn-e2e", AccessToken: "tok", AppSecret: "sec", BaseURL: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		other := insertConvChannel(t, db, ten.CompanyID, channels.UnofficialChatapp, "5511900000002")
		sub := sink.subscribe(h, ten.Token, map[string]any{
			"name": "crm", "company_channel_ids": []int64{off.ID},
			"events": []string{events.OmnichatConversationCreated, events.OmnichatConversationAssigned, events.OmnichatConversationClosed, events.ContactImportCompleted},
		})

		// Not delivered: another channel than the subscription's.
		convEnsure(t, h, conversations.EnsureInput{CompanyID: ten.CompanyID, CompanyChannelID: other,
			ChannelTypeID: channels.UnofficialChatapp, ContactKey: "5511977770000", OriginID: 1})
		ref := convEnsure(t, h, conversations.EnsureInput{CompanyID: ten.CompanyID, CompanyChannelID: off.ID,
			ChannelTypeID: channels.OfficialChatapp, ContactKey: "5511977776666", ContactName: "Maria", OriginID: 1})
		path := fmt.Sprintf("/api/contact-channels/%d", ref.ID)
		if resp := h.Do(apitest.Request{Method: "PATCH", Path: path, Token: ten.Token, JSON: map[string]any{"user_id": ten.UserID}}); resp.Status != 200 {
			t.Fatalf("assign: %d %s", resp.Status, resp.Body)
		}
		if resp := h.Do(apitest.Request{Method: "PATCH", Path: path, Token: ten.Token, JSON: map[string]any{"status_id": 4}}); resp.Status != 200 {
			t.Fatalf("close: %d %s", resp.Status, resp.Body)
		}
		if resp := h.Do(apitest.Request{Method: "POST", Path: "/api/events", Token: ten.Token, JSON: map[string]any{
			"event": events.ContactImportCompleted, "occurred_at": "2026-11-22T09:00:00-03:00",
			"data": map[string]any{"import_id": "imp-1", "total_contacts": 3, "imported_contacts": 2, "skipped_contacts": 1,
				"failed_contacts": 0, "started_by_user_id": ten.UserID, "completed_at": "2026-11-22T09:00:00-03:00"}}}); resp.Status != 202 {
			t.Fatalf("publish: %d %s", resp.Status, resp.Body)
		}

		want := map[string]bool{events.OmnichatConversationCreated: true, events.OmnichatConversationAssigned: true,
			events.OmnichatConversationClosed: true, events.ContactImportCompleted: true}
		sink.wait("conversation", len(want), anyDelivery)
		time.Sleep(300 * time.Millisecond) // a stray delivery (the other channel's conversation) would arrive by now
		hits := sink.all()
		if len(hits) != len(want) {
			t.Fatalf("%d deliveries, want %d", len(hits), len(want))
		}
		for _, hd := range hits {
			name := hd.Header.Get("X-Svc-Event")
			if !want[name] {
				t.Errorf("unexpected delivery %s", name)
				continue
			}
			delete(want, name)
			if err := subscriber.Verify(sub.Secret, hd.Header, hd.Body, time.Now(), 5*time.Minute); err != nil {
				t.Errorf("%s signature: %v", name, err)
			}
			if err := eventschema.ValidatePayload(name, hd.Body); err != nil {
				t.Errorf("%s payload: %v", name, err)
			}
			if err := eventschema.ValidateHeaders(name, hd.Header); err != nil {
				t.Errorf("%s headers: %v", name, err)
			}
			var env struct {
				CompanyID  int64           `json:"company_id"`
				OccurredAt string          `json:"occurred_at"`
				Data       json.RawMessage `json:"data"`
			}
			_ = json.Unmarshal(hd.Body, &env)
			var data map[string]any
			_ = json.Unmarshal(env.Data, &data)
			if env.CompanyID != ten.CompanyID {
				t.Errorf("%s company %d", name, env.CompanyID)
			}
			switch name {
			case events.OmnichatConversationAssigned:
				cc, _ := json.Marshal(data["change_context"])
				if string(cc) != fmt.Sprintf(`{"assigned_user_id":%d,"previous_user_id":null}`, ten.UserID) {
					t.Errorf("assigned change_context %s", cc)
				}
			case events.OmnichatConversationClosed:
				cc, _ := json.Marshal(data["change_context"])
				if string(cc) != `{"previous_status_id":1,"status_id":4}` || data["status_id"].(float64) != 4 {
					t.Errorf("closed %s", env.Data)
				}
			case events.ContactImportCompleted:
				if env.OccurredAt != "2026-11-22T12:00:00+00:00" || data["import_id"] != "imp-1" {
					t.Errorf("import %s %s", env.OccurredAt, env.Data)
				}
			case events.OmnichatConversationCreated:
				if data["id"].(float64) != float64(ref.ID) {
					t.Errorf("created for %v, want %d", data["id"], ref.ID)
				}
			}
		}
	})
}
