package eventexamples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/eventexamples"
	"github.com/chatmsg/gateway/internal/webhooks"
)

const secret = "whsec_6f1d0c3b5a7e9f2d4c6b8a0e1f3d5c7b9a2e4f6d8c0b1a3e5f7d9c2b4a6e8f0d"

// receiver is a real receiver on 127.0.0.1 built on the subscriber
// library: it verifies every signature (either scheme), decodes the
// envelope and the event's data, and records what it got.
type receiver struct {
	mu  sync.Mutex
	got map[string][]byte // event → data as received
}

func newReceiver(t *testing.T, secret string) (*receiver, string) {
	rc := &receiver{got: map[string][]byte{}}
	h := subscriber.NewHandler(secret)
	for _, info := range events.Catalog {
		h.On(info.Name, func(_ context.Context, d *subscriber.Delivery) error {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			rc.got[d.Event] = append([]byte(nil), d.RawData...)
			return nil
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return rc, srv.URL + "/hooks"
}

func TestSendExamples(t *testing.T) {
	all, err := eventexamples.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(events.Catalog) {
		t.Fatalf("%d examples for %d events", len(all), len(events.Catalog))
	}
	cases := []struct {
		name       string
		scheme     string
		sendSecret string
		wantFailed int
	}{
		{"svc signatures", webhooks.SchemeSvc, secret, 0},
		{"standard webhooks signatures", webhooks.SchemeStandard, secret, 0},
		{"another secret is refused", webhooks.SchemeSvc, secret + "0", len(all)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc, url := newReceiver(t, secret)
			results := eventexamples.SendAll(context.Background(), eventexamples.Target{URL: url, Secret: c.sendSecret, Scheme: c.scheme}, all)
			var out bytes.Buffer
			failed := eventexamples.Report(&out, results)
			if failed != c.wantFailed {
				t.Fatalf("%d failed, want %d:\n%s", failed, c.wantFailed, out.String())
			}
			ids := map[string]bool{}
			for i, r := range results {
				if r.Event != all[i].Event || ids[r.DeliveryID] {
					t.Fatalf("result %d: event %s delivery %s (repeated or out of order)", i, r.Event, r.DeliveryID)
				}
				ids[r.DeliveryID] = true
				if c.wantFailed > 0 {
					if r.Status != http.StatusUnauthorized || !strings.Contains(out.String(), "FAIL "+r.Event) {
						t.Fatalf("%s: HTTP %d, report:\n%s", r.Event, r.Status, out.String())
					}
					continue
				}
				got, ok := rc.got[r.Event]
				if !ok {
					t.Fatalf("the receiver never got %s", r.Event)
				}
				if !jsonEqual(t, got, all[i].Data) {
					t.Fatalf("%s: received data %s, example %s", r.Event, got, all[i].Data)
				}
			}
			if c.wantFailed > 0 && len(rc.got) != 0 {
				t.Fatalf("the receiver accepted %d deliveries signed with another secret", len(rc.got))
			}
			if !strings.Contains(out.String(), "acknowledged with a 2xx within 10s") {
				t.Fatalf("report without the summary:\n%s", out.String())
			}
		})
	}
}

// A receiver that answers 500 fails the report, with its answer shown.
func TestSendExamplesReportsTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database down", http.StatusInternalServerError)
	}))
	defer srv.Close()
	ex, err := eventexamples.Lookup(events.CrmBusinessWon)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res := eventexamples.Send(context.Background(), eventexamples.Target{URL: srv.URL, Secret: secret}, ex)
	if failed := eventexamples.Report(&out, []eventexamples.Result{res}); failed != 1 {
		t.Fatalf("a 500 counted as acknowledged:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "FAIL crm.business.won") || !strings.Contains(out.String(), "HTTP 500 database down") {
		t.Fatalf("report:\n%s", out.String())
	}
}

func TestLookupUnknownEvent(t *testing.T) {
	_, err := eventexamples.Lookup("crm.business.exploded")
	if err == nil || !strings.Contains(err.Error(), eventexamples.MsgUnknownEvent) {
		t.Fatalf("Lookup of an unknown event: %v", err)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
