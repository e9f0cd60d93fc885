package loadtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
)

// TestReceiverCounts: the receiver counts an event once per endpoint,
// counts a re-sent delivery as a duplicate, refuses a bad signature, and
// reports what was accepted but never arrived.
func TestReceiverCounts(t *testing.T) {
	r, err := StartReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Register("a", "secret-a")
	r.Register("b", "secret-b")
	post := func(t *testing.T, endpoint, secret, deliveryID, importID string) int {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"event": "contact.import.completed", "delivery_id": deliveryID, "company_id": 1,
			"occurred_at": time.Now().Format(time.RFC3339), "description": "d", "data": importData(importID)})
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req, _ := http.NewRequest("POST", r.HookURL(endpoint), bytes.NewReader(body))
		req.Header.Set(subscriber.HeaderTimestamp, ts)
		req.Header.Set(subscriber.HeaderSignature, subscriber.Sign(secret, ts, body))
		req.Header.Set(subscriber.HeaderEvent, "contact.import.completed")
		req.Header.Set(subscriber.HeaderDelivery, deliveryID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	r.Due("i1", time.Now())
	// The steps build the tally checked below, so a failed step stops the rest.
	steps := []struct {
		name                                 string
		endpoint, secret, delivery, importID string
		status                               int
	}{
		{"first delivery at a", "a", "secret-a", "d1", "i1", 204},
		{"first delivery at b", "b", "secret-b", "d2", "i1", 204},
		{"same delivery again is a duplicate", "a", "secret-a", "d1", "i1", 204},
		{"signed with another subscription's secret", "a", "secret-b", "d3", "i2", 401},
		{"event the tally does not ask about", "a", "secret-a", "d4", "i3", 204},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) {
			if got := post(t, s.endpoint, s.secret, s.delivery, s.importID); got != s.status {
				t.Fatalf("status %d, want %d", got, s.status)
			}
		}) {
			t.FailNow()
		}
	}
	got := r.Tally([]string{"a", "b"}, []string{"i1", "i2"})
	want := EventTally{Expected: 4, Received: 2, Lost: 2, Duplicates: 1, Rejected: 1}
	if got != want {
		t.Errorf("tally %+v, want %+v", got, want)
	}
	if ids := r.DeliveryIDs("a"); fmt.Sprint(ids) != "map[d1:2 d4:1]" {
		t.Errorf("delivery ids of a: %v", ids)
	}
	if n := len(r.Latencies()); n != 2 {
		t.Errorf("%d latencies, want 2 (first receipt of i1 at a and at b)", n)
	}
}
