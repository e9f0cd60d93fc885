package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sort"
	"sync"
	"testing"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// messageDeliveries returns the deliveries (each once) about message id.
func messageDeliveries(sink *eventSink, id int64) []delivery {
	return sink.matching(func(d delivery) bool {
		return (d.Name == events.OmnichatMessageSent || d.Name == events.OmnichatMessageReceived) && d.Data["id"] == float64(id)
	})
}

// version is the `version` of a delivery's data.
func version(d delivery) int64 {
	v, _ := d.Data["version"].(float64)
	return int64(v)
}

// TestMessageEventSequence follows one message through send, receipts,
// edit and revoke: each change publishes the message's event again with the
// next version, and the last event says what the service stores. The
// sequence is logged (go test -v -run TestMessageEventSequence).
func TestMessageEventSequence(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h, c := startConnections(t, db, apitest.Options{WorkJobs: true})
		sink := newEventSink(t, http.StatusNoContent)
		sink.subscribe(h, c.token, map[string]any{"name": "sink", "events": []string{events.OmnichatMessageSent}})
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		ext := c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": "5511977776666",
			"contact_is_group": false, "text": "Your order ships today"}).Data.ExternalID
		m := c.stored(conn.ID, ext)
		receipts := fmt.Sprintf("/api/chatapp-simulator/%d/receipts", conn.ID)
		c.ok(receipts, map[string]any{"external_id": ext, "status": "delivered"}, nil)
		c.ok(receipts, map[string]any{"external_id": ext, "status": "read"}, nil)
		c.ok(receipts, map[string]any{"external_id": ext, "status": "delivered"}, nil) // stale: no change, no event
		resp := c.post("/api/edit-message", map[string]any{"id": m.ID, "text": "Your order ships tomorrow"})
		if resp.Status != http.StatusOK {
			t.Fatalf("edit: %d %s", resp.Status, resp.Body)
		}
		var edited struct {
			Version int64 `json:"version"`
		}
		resp.JSON(t, &edited)
		if res := c.post("/api/revoke-messages", map[string]any{"ids": []int64{m.ID}, "scope": "all"}); res.Status != http.StatusOK {
			t.Fatalf("revoke: %d %s", res.Status, res.Body)
		}

		type step struct {
			status  int
			edited  bool
			revoked bool
		}
		want := []step{{1, false, false}, {2, false, false}, {3, false, false}, {4, false, false}, {4, true, false}, {4, true, true}}
		got := sink.wait("message events", len(want), func(d delivery) bool { return d.Data["id"] == float64(m.ID) })
		sort.Slice(got, func(i, j int) bool { return version(got[i]) < version(got[j]) })
		for i, d := range got {
			t.Logf("%s version=%v status_id=%v edited=%v text=%q revoked_at=%v", d.Name, d.Data["version"], d.Data["status_id"],
				d.Data["edited"], d.Data["text"], d.Data["revoked_at"])
			if i >= len(want) {
				t.Fatalf("more events than changes: %d", len(got))
			}
			w := want[i]
			if version(d) != int64(i+1) || d.Data["status_id"] != float64(w.status) || d.Data["edited"] != w.edited ||
				(d.Data["revoked_at"] != nil) != w.revoked {
				t.Fatalf("event %d: %s", i, d.Body)
			}
		}
		if edited.Version != 5 {
			t.Fatalf("the edit answer's version is %d, its event's 5", edited.Version)
		}
		if stored := c.stored(conn.ID, ext); stored.Version != 6 {
			t.Fatalf("stored version %d after 6 events", stored.Version)
		}
	})
}

// TestEventsConvergeUnderConcurrentChanges: many receipts, an edit through
// the API, an edit from the phone and a revoke race for one message; a subscriber that applies its events with
// subscriber.Versions, in the order they arrived and in any other order,
// ends with exactly the message the service stores, and a conversation's
// event carries the version its REST representation shows.
func TestEventsConvergeUnderConcurrentChanges(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h, c := startConnections(t, db, apitest.Options{WorkJobs: true})
		ctx := context.Background()
		sink := newEventSink(t, http.StatusNoContent)
		sink.subscribe(h, c.token, map[string]any{"name": "sink",
			"events": []string{events.OmnichatMessageSent, events.OmnichatMessageReceived, events.OmnichatConversationClosed}})
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		ext := c.sendSync(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_key": "5511977776666",
			"contact_is_group": false, "text": "first"}).Data.ExternalID
		m := c.stored(conn.ID, ext)

		const receipts = 24
		var wg sync.WaitGroup
		errs := make(chan string, receipts+3)
		do := func(path string, body map[string]any, ok func(*apitest.Response) bool) {
			defer wg.Done()
			if r := c.h.Do(apitest.Request{Method: "POST", Path: path, Token: c.token, JSON: body}); !ok(r) {
				errs <- fmt.Sprintf("%s: %d %s", path, r.Status, r.Body)
			}
		}
		is200 := func(r *apitest.Response) bool { return r.Status == http.StatusOK }
		for i := range receipts {
			status := []string{"delivered", "read"}[i%2]
			wg.Add(1)
			go do(fmt.Sprintf("/api/chatapp-simulator/%d/receipts", conn.ID), map[string]any{"external_id": ext, "status": status}, is200)
		}
		wg.Add(3)
		// An edit may come after the revoke, which refuses it (509); the
		// phone's edit (applied as an inbound change) is then ignored.
		go do("/api/edit-message", map[string]any{"id": m.ID, "text": "second"}, func(r *apitest.Response) bool {
			return r.Status == http.StatusOK || r.Status == 509
		})
		go do(fmt.Sprintf("/api/chatapp-simulator/%d/inbound", conn.ID),
			map[string]any{"from": "5511977776666", "from_me": true, "edit_of": ext, "text": "third"}, func(r *apitest.Response) bool {
				return r.Status == http.StatusOK || r.Status == 509
			})
		go do("/api/revoke-messages", map[string]any{"ids": []int64{m.ID}, "scope": "all"}, is200)
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}

		// Once the read receipt is applied every change is made (a late
		// "delivered" changes nothing); then its event must arrive.
		eventually(t, "the read receipt applied", func() bool { return c.stored(conn.ID, ext).StatusID == 4 })
		final := c.stored(conn.ID, ext)
		sink.first("the last state's event", func(d delivery) bool { return d.Data["id"] == float64(m.ID) && version(d) == final.Version })
		eventually(t, "the outbox drained", func() bool {
			unfanned, err := db.Bun.NewSelect().Table("webhook_events").Where("seq IS NULL").Count(ctx)
			if err != nil || unfanned != 0 {
				return false
			}
			n, err := db.Bun.NewSelect().Table("webhook_deliveries").Count(ctx)
			return err == nil && n == 0
		})
		got := messageDeliveries(sink, m.ID)

		// One event per version: no two states share one.
		byVersion := map[int64]string{}
		for _, d := range got {
			v := version(d)
			if prev, dup := byVersion[v]; dup && prev != string(mustJSON(t, d.Data)) {
				t.Fatalf("two different events with version %d", v)
			}
			byVersion[v] = string(mustJSON(t, d.Data))
		}
		// What the subscriber must hold: the service's own payload of the
		// stored message.
		want := mustJSON(t, h.App.Messaging.Payload(channels.Channel{ID: int64(conn.ID), Key: conn.Key}, final))
		orders := map[string][]delivery{"arrival": got, "reversed": reversed(got)}
		for i := range 3 {
			sh := append([]delivery(nil), got...)
			r := rand.New(rand.NewPCG(uint64(i), 14))
			r.Shuffle(len(sh), func(a, b int) { sh[a], sh[b] = sh[b], sh[a] })
			orders[fmt.Sprintf("shuffled %d", i)] = sh
		}
		for name, order := range orders {
			held := subscriber.NewVersions[json.RawMessage]()
			var wg sync.WaitGroup
			for _, d := range order { // concurrently, as parallel deliveries are handled
				wg.Add(1)
				go func() {
					defer wg.Done()
					var p events.MessagePayload
					if err := json.Unmarshal(d.Body, &struct {
						Data *events.MessagePayload `json:"data"`
					}{&p}); err != nil {
						t.Error(err)
						return
					}
					held.Apply(p.ID, p.Version, mustJSON(t, d.Data))
				}()
			}
			wg.Wait()
			cur, _ := held.Get(m.ID)
			if cur.Version != final.Version || !sameJSON(t, cur.Value, want) {
				t.Fatalf("%s order: subscriber holds version %d\n%s\nthe service stores version %d\n%s", name, cur.Version, cur.Value, final.Version, want)
			}
		}
		t.Logf("%d receipts, two edits and a revoke: %d events, final version %d (status %d, edited %v, revoked %v)",
			receipts, len(got), final.Version, final.StatusID, final.Edited, final.RevokedAt != nil)

		// The conversation: the REST answer of a change and its event carry
		// the same version, and the listing shows it too.
		resp := c.h.Do(apitest.Request{Method: "PATCH", Path: fmt.Sprintf("/api/contact-channels/%d", m.ContactChannelID), Token: c.token,
			JSON: map[string]any{"status_id": 4}})
		if resp.Status != http.StatusOK {
			t.Fatalf("close: %d %s", resp.Status, resp.Body)
		}
		var answer struct {
			Data struct {
				Version int64 `json:"version"`
			} `json:"data"`
		}
		resp.JSON(t, &answer)
		closed := sink.first("conversation closed", named(events.OmnichatConversationClosed))
		list := c.h.Do(apitest.Request{Method: "GET", Path: "/api/contact-channels?include_closed=true", Token: c.token})
		var page struct {
			Data []struct {
				ID      int64 `json:"id"`
				Version int64 `json:"version"`
			} `json:"data"`
		}
		list.JSON(t, &page)
		if len(page.Data) != 1 || page.Data[0].ID != m.ContactChannelID || version(closed) != answer.Data.Version ||
			page.Data[0].Version != answer.Data.Version || answer.Data.Version < 2 {
			t.Fatalf("conversation versions: answer %d, event %d, listing %s", answer.Data.Version, version(closed), list.Body)
		}
	})
}

func reversed(in []delivery) []delivery {
	out := make([]delivery, len(in))
	for i, d := range in {
		out[len(in)-1-i] = d
	}
	return out
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameJSON compares two JSON documents by value.
func sameJSON(t testing.TB, a, b json.RawMessage) bool {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}
