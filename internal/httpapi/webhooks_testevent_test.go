package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/eventexamples"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// POST /api/channel-webhooks/{id}/test with {"event": …} (extension) sends
// that event's AsyncAPI example through the subscription's delivery path:
// the receiver (eventSink: signature and document checks) gets it under this
// company, and the delivery log records it like any delivery. Without a
// body it still sends ping; an event the catalog lacks is a 422 on `event`.
func TestTestEventSendsTheExample(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		sink := newEventSink(t, http.StatusNoContent)
		h := apitest.Start(t, db, apitest.Options{WorkJobs: true})
		ten := h.Tenant("Acme")
		// The subscription lists another event: a test is sent whatever it lists.
		created := sink.subscribe(h, ten.Token, map[string]any{"name": "rcv", "events": []string{events.ContactImportCompleted}})
		path := fmt.Sprintf("/api/channel-webhooks/%d/test", created.Data.ID)

		cases := []struct {
			name   string
			body   any
			status int
			event  string // delivered event; "" for none
		}{
			{"an event's example", map[string]any{"event": events.CrmBusinessWon}, http.StatusOK, events.CrmBusinessWon},
			{"a channel event's example", map[string]any{"event": events.OmnichatMessageReceived}, http.StatusOK, events.OmnichatMessageReceived},
			{"no body sends ping", nil, http.StatusOK, events.Ping},
			{"unknown event", map[string]any{"event": "crm.business.exploded"}, http.StatusUnprocessableEntity, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				resp := h.Do(apitest.Request{Method: "POST", Path: path, Token: ten.Token, JSON: c.body})
				if resp.Status != c.status {
					t.Fatalf("%d %s, want %d", resp.Status, resp.Body, c.status)
				}
				if c.event == "" {
					var v struct {
						Errors map[string][]string `json:"errors"`
					}
					resp.JSON(t, &v)
					if len(v.Errors["event"]) == 0 {
						t.Fatalf("422 without errors.event: %s", resp.Body)
					}
					return
				}
				d := sink.first(c.event, named(c.event))
				var env struct {
					CompanyID int64           `json:"company_id"`
					Data      json.RawMessage `json:"data"`
				}
				if err := json.Unmarshal(d.Body, &env); err != nil {
					t.Fatal(err)
				}
				if env.CompanyID != ten.CompanyID {
					t.Errorf("company_id %d, want the caller's %d", env.CompanyID, ten.CompanyID)
				}
				ex, err := eventexamples.Lookup(c.event)
				if err != nil {
					t.Fatal(err)
				}
				if !sameJSON(t, env.Data, ex.Data) {
					t.Errorf("data %s, want the document's example %s", env.Data, ex.Data)
				}
				loggedOK(t, h, ten.Token, created.Data.ID, c.event, d.Header.Get("X-Svc-Delivery"))
			})
		}
	})
}

// logged waits for the delivery log entry of deliveryID.
func loggedOK(t *testing.T, h *apitest.Harness, token string, id int, event, deliveryID string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp := h.Do(apitest.Request{Method: "GET", Path: fmt.Sprintf("/api/channel-webhooks/%d/deliveries?event=%s", id, event), Token: token})
		var page struct {
			Data []struct {
				DeliveryID string `json:"delivery_id"`
				Succeeded  bool   `json:"succeeded"`
			} `json:"data"`
		}
		resp.JSON(t, &page)
		for _, e := range page.Data {
			if e.DeliveryID == deliveryID && e.Succeeded {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful log entry of %s %s: %s", event, deliveryID, resp.Body)
		}
	}
}
