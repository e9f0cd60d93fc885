package httpapi_test

// One vocabulary across REST and events (issue 16): a field both documents
// carry has one meaning and one representation, an absent value included.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// sameFields compares every field the REST record and the event payload
// both carry (event names, renamed to their REST names by rename), nested
// objects member by member, and returns the dotted names it compared. A
// field only one side has is not compared: the two documents are not the
// same resource, only the same vocabulary.
func sameFields(t *testing.T, what string, rest, event map[string]any, rename map[string]string, prefix string) []string {
	t.Helper()
	var compared []string
	keys := make([]string, 0, len(event))
	for k := range event {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ev := event[k]
		rk := k
		if r, ok := rename[prefix+k]; ok {
			rk = r
		}
		rv, ok := rest[rk]
		if !ok {
			continue
		}
		em, eIsObj := ev.(map[string]any)
		rm, rIsObj := rv.(map[string]any)
		if eIsObj && rIsObj {
			compared = append(compared, sameFields(t, what, rm, em, rename, prefix+k+".")...)
			continue
		}
		compared = append(compared, prefix+k)
		if !reflect.DeepEqual(ev, rv) {
			t.Errorf("%s: %s%s is %s in REST (%s) but %s in the event", what, prefix, k, j(rv), rk, j(ev))
		}
	}
	return compared
}

// coversAll fails unless every name in want was compared: a comparison that
// silently skipped a field (renamed, missing on one side) would prove nothing.
func coversAll(t *testing.T, what string, compared, want []string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(compared, w) {
			t.Errorf("%s: %s was not compared (compared %v)", what, w, compared)
		}
	}
}

func j(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRESTAndEventsSpeakOneVocabulary reads a conversation and a message
// through REST and receives the same ones as events on a loopback
// subscriber, and compares them field by field: channel_type is the
// channel type's name and platform its code on both sides; an absent
// phone or e-mail is null on both sides, never "".
func TestRESTAndEventsSpeakOneVocabulary(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{WorkJobs: true})
		ten := h.Tenant("Acme")
		c := connAPI{t: t, h: h, token: ten.Token}
		ctx := context.Background()
		sink := newEventSink(t, http.StatusNoContent)
		sink.subscribe(h, ten.Token, map[string]any{"name": "sink", "events": []string{events.OmnichatMessageReceived,
			events.OmnichatMessageSent, events.OmnichatConversationCreated, events.OmnichatConversationAssigned}})
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		var team struct {
			Key string `json:"key"`
		}
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/groups", conn.ID), map[string]any{"name": "Team"}, &team)

		// A contact with a phone and no e-mail, and a group (no phone), each
		// writes; an attendant of a sector takes both conversations.
		const ana = "5511977776666"
		c.inbound(conn.ID, map[string]any{"from": ana, "name": "Ana", "text": "Oi"})
		c.inbound(conn.ID, map[string]any{"from": "5511966665555", "name": "Bia", "group_key": team.Key, "text": "Bom dia"})
		attendant, err := h.App.Auth.CreateUser(ctx, ten.CompanyID, "Carla Lima", "carla.lima@acme.test")
		if err != nil {
			t.Fatal(err)
		}
		sector, err := h.App.Conversations.CreateSector(ctx, ten.CompanyID, "Suporte")
		if err != nil {
			t.Fatal(err)
		}
		created := map[string]float64{}
		for _, d := range sink.wait("conversation created", 2, named(events.OmnichatConversationCreated)) {
			created[d.Data["key"].(string)] = d.Data["id"].(float64)
		}
		for key, id := range created {
			resp := h.Do(apitest.Request{Method: "PATCH", Path: fmt.Sprintf("/api/contact-channels/%d", int(id)), Token: ten.Token,
				JSON: map[string]any{"user_id": attendant, "sector_id": sector.ID}})
			if resp.Status != http.StatusOK {
				t.Fatalf("assign %s: %d %s", key, resp.Status, resp.Body)
			}
		}

		// REST: the listing with every relation the event carries.
		q := url.Values{"with": {`["contact","sector","user"]`}}
		resp := h.Do(apitest.Request{Method: "GET", Path: "/api/contact-channels?" + q.Encode(), Token: ten.Token})
		if resp.Status != http.StatusOK {
			t.Fatalf("list: %d %s", resp.Status, resp.Body)
		}
		var page struct {
			Data []map[string]any `json:"data"`
		}
		resp.JSON(t, &page)
		listed := map[string]map[string]any{}
		for _, r := range page.Data {
			listed[r["key"].(string)] = r
		}

		wantConv := []string{"id", "name", "key", "phone", "is_group", "status_id", "company_channel_id", "channel_type_id",
			"channel_type", "platform", "origin_id", "unread_count", "last_message_at", "created_at",
			"contact.id", "contact.name", "contact.email", "sector.id", "sector.name",
			"assigned_user.id", "assigned_user.name", "assigned_user.email"}
		for key, id := range created {
			// The event published by the last change describes the
			// conversation as REST reads it now.
			ev := sink.first("conversation assigned "+key, func(d delivery) bool {
				return d.Name == events.OmnichatConversationAssigned && d.Data["id"] == id
			}).Data
			rest, ok := listed[key]
			if !ok {
				t.Fatalf("conversation %s not listed: %s", key, resp.Body)
			}
			what := "conversation " + key
			coversAll(t, what, sameFields(t, what, rest, ev, map[string]string{"assigned_user": "user"}, ""), wantConv)
			if rest["channel_type"] != "Unofficial chat app" || rest["platform"] != "chatapp" {
				t.Errorf("%s: channel_type %v platform %v, want the type's name and its platform code", what, rest["channel_type"], rest["platform"])
			}
			contact := rest["contact"].(map[string]any)
			if v, present := contact["email"]; !present || v != nil {
				t.Errorf("%s: contact email %s, want null (unknown)", what, j(v))
			}
		}
		if listed[ana]["phone"] != ana || listed[team.Key]["phone"] != nil {
			t.Errorf("phones: contact %v, group %v (want the number, and null for a group)", listed[ana]["phone"], listed[team.Key]["phone"])
		}

		// A message: sent, edited through REST (the edit answer is the
		// API's message record), then delivered; the delivery's event
		// carries the message as it is now.
		sent := c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": ana, "contact_is_group": false, "text": "Our hours are 9 to 5"})
		edit := h.Do(apitest.Request{Method: "POST", Path: "/api/edit-message", Token: ten.Token,
			JSON: map[string]any{"id": c.stored(conn.ID, sent.Data.ExternalID).ID, "text": "Our hours are 9 to 6"}})
		if edit.Status != http.StatusOK {
			t.Fatalf("edit: %d %s", edit.Status, edit.Body)
		}
		rest := edit.Map(t)
		// The edit publishes the message as the edit answer shows it, at
		// the same version.
		ev := sink.first("message edited", func(d delivery) bool {
			return messageEvent(events.OmnichatMessageSent, sent.Data.ExternalID, 0)(d) && d.Data["version"] == rest["version"]
		}).Data
		coversAll(t, "message", sameFields(t, "message", rest, ev, nil, ""),
			[]string{"id", "text", "edited", "external_id", "company_channel_id", "contact_channel_id", "message_type_id", "version"})
		// A later receipt's event carries the edited message at the next version.
		c.ok(fmt.Sprintf("/api/chatapp-simulator/%d/receipts", conn.ID), map[string]any{"external_id": sent.Data.ExternalID, "status": "delivered"}, nil)
		delivered := sink.first("message delivered", messageEvent(events.OmnichatMessageSent, sent.Data.ExternalID, 3)).Data
		if delivered["text"] != rest["text"] || delivered["edited"] != true || delivered["version"] != rest["version"].(float64)+1 {
			t.Errorf("delivered event: text %v edited %v version %v, want the edit's text, edited, version %v+1",
				delivered["text"], delivered["edited"], delivered["version"], rest["version"])
		}

		// A message the chat app has not confirmed has no external id: the
		// event says null, as the API document's "present only once the
		// provider confirmed" and the REST side (which omits it) mean.
		queued := c.send(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": ana, "contact_is_group": false, "text": "later"})
		if queued.Status != http.StatusOK {
			t.Fatalf("queued send: %d %s", queued.Status, queued.Body)
		}
		first := sink.first("queued message", func(d delivery) bool {
			return d.Name == events.OmnichatMessageSent && d.Data["text"] == "later" && d.Data["status_id"] == float64(1)
		}).Data
		if v, present := first["external_id"]; !present || v != nil {
			t.Errorf("unconfirmed message: external_id %s, want null", j(v))
		}
	})
}

// TestTemplateValuesTheProviderDecidesPassThrough: component types and
// header formats are open sets the provider decides; a value the document
// does not list (a LOCATION header, a CAROUSEL component) reaches the
// client as the provider gave it, and the answer still matches the document.
func TestTemplateValuesTheProviderDecidesPassThrough(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		defs := []providersim.Template{{Name: "store_visit", Language: "pt_BR", Category: "UTILITY", Components: []providersim.TemplateDefComponent{
			{Type: "HEADER", Format: "LOCATION"},
			{Type: "BODY", Text: "Visite a loja {{1}}."},
			{Type: "CAROUSEL"},
		}}}
		if _, err := e.ctl.SeedTemplates(context.Background(), providersim.TemplatesRequest{BusinessAccountID: "waba-" + e.pnid, Templates: defs}); err != nil {
			t.Fatal(err)
		}
		resp := e.h.Do(apitest.Request{Method: "GET", Path: fmt.Sprintf("/api/provider-templates/for-channel?company_channel_id=%d", e.ch.ID), Token: e.ten.Token})
		if resp.Status != http.StatusOK {
			t.Fatalf("list: %d %s", resp.Status, resp.Body)
		}
		var list struct {
			Templates []struct {
				Status string `json:"status"`
				Value  struct {
					Components []struct {
						Type   string  `json:"type"`
						Format *string `json:"format"`
					} `json:"components"`
				} `json:"value"`
			} `json:"templates"`
		}
		resp.JSON(t, &list)
		if len(list.Templates) != 1 || list.Templates[0].Status != "APPROVED" {
			t.Fatalf("templates: %s", resp.Body)
		}
		var got []string
		for _, c := range list.Templates[0].Value.Components {
			s := c.Type
			if c.Format != nil {
				s += "/" + *c.Format
			}
			got = append(got, s)
		}
		if want := []string{"HEADER/LOCATION", "BODY", "CAROUSEL"}; !slices.Equal(got, want) {
			t.Errorf("components %v, want %v", got, want)
		}
	})
}

// TestListQueryValidationIs422: the ruling written in both operations'
// descriptions. A malformed query parameter of the conversation and
// company-channel lists is input validation, not one of the API document's
// "business and rule-validation errors on the management and message
// endpoints" (509): it answers 422 {message, errors} naming the parameter.
func TestListQueryValidationIs422(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		ten := h.Tenant("Acme")
		cases := []struct {
			name, path, field, message string
		}{
			{"channels: channel type out of range", "/api/company-channels?channel_type_id=7", "channel_type_id", "Channel type id must be an integer from 1 to 6"},
			{"channels: channel type not a number", "/api/company-channels?channel_type_id=abc", "channel_type_id", "Channel type id must be an integer from 1 to 6"},
			{"channels: perPage over 500", "/api/company-channels?perPage=501", "perPage", "Per page must be an integer from 1 to 500"},
			{"channels: page 0", "/api/company-channels?page=0", "page", ""},
			{"conversations: channel type out of range", "/api/contact-channels?channel_type_id=7", "channel_type_id", "Channel type id must be an integer from 1 to 6"},
			{"conversations: channelable type by its label", "/api/contact-channels?channelable_type=Official%20chat%20app", "channelable_type", ""},
			{"conversations: perPage 0", "/api/contact-channels?perPage=0", "perPage", "Per page must be an integer from 1 to 500"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := h.Do(apitest.Request{Method: "GET", Path: tc.path, Token: ten.Token})
				var body validationAnswer
				resp.JSON(t, &body)
				if resp.Status != http.StatusUnprocessableEntity || len(body.Errors[tc.field]) == 0 || (tc.message != "" && body.Message != tc.message) {
					t.Errorf("%d %s", resp.Status, resp.Body)
				}
			})
		}
	})
}
