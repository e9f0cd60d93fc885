package webhooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"io"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/netguard"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

func TestNewDeliveryRequest(t *testing.T) {
	t.Parallel()
	body := []byte(`{"event":"ping","delivery_id":"7f1c2a34-5b6d-4e8f-9a0b-1c2d3e4f5a6b","company_id":1,"occurred_at":"2026-01-01T00:00:00Z","description":"Synthetic test event; not subscribable; sent only by POST /api/channel-webhooks/{id}/test.","data":{}}`)
	d := webhooks.Delivery{ID: "7f1c2a34-5b6d-4e8f-9a0b-1c2d3e4f5a6b", Event: "ping", Body: body}
	at := time.Unix(1767225600, 0)
	req, err := webhooks.NewDeliveryRequest(context.Background(), "https://example.com/hook", "whsec_test", d, 3, at)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Content-Type":    "application/json",
		"User-Agent":      "Svc-Webhooks/1.0",
		"X-Svc-Event":     "ping",
		"X-Svc-Delivery":  d.ID,
		"X-Svc-Timestamp": "1767225600",
		"X-Svc-Attempt":   "3",
	}
	for k, v := range want {
		if got := req.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if req.Method != http.MethodPost || req.URL.String() != "https://example.com/hook" {
		t.Errorf("request %s %s", req.Method, req.URL)
	}
	sent, _ := io.ReadAll(req.Body)
	if !bytes.Equal(sent, body) {
		t.Errorf("body changed: %s", sent)
	}
	if err := eventschema.ValidateHeaders("ping", req.Header); err != nil {
		t.Error(err)
	}
	if err := eventschema.ValidatePayload("ping", sent); err != nil {
		t.Error(err)
	}

	// The signature, recomputed independently as a subscriber would.
	if got := req.Header.Get("X-Svc-Signature"); got != webhooks.Sign("whsec_test", "1767225600", body) {
		t.Errorf("signature %s", got)
	}
	cases := []struct {
		name   string
		secret string
		body   []byte
		now    time.Time
		want   error
	}{
		{"valid", "whsec_test", body, at.Add(4 * time.Minute), nil},
		{"wrong secret", "whsec_other", body, at, subscriber.ErrSignatureMismatch},
		{"re-serialised body", "whsec_test", append([]byte(" "), body...), at, subscriber.ErrSignatureMismatch},
		{"stale timestamp", "whsec_test", body, at.Add(6 * time.Minute), subscriber.ErrTimestampOutOfTolerance},
		{"future timestamp", "whsec_test", body, at.Add(-6 * time.Minute), subscriber.ErrTimestampOutOfTolerance},
	}
	for _, tc := range cases {
		err := subscriber.Verify(tc.secret, req.Header, tc.body, tc.now, 5*time.Minute)
		if !errors.Is(err, tc.want) && !(err == nil && tc.want == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestNewDelivery: the envelope in the documented field order, occurred_at
// with its offset, ping's data an empty object.
func TestNewDelivery(t *testing.T) {
	t.Parallel()
	sp, err := time.LoadLocation("America/Sao_Paulo")
	if err != nil {
		t.Skip(err)
	}
	at := time.Date(2025, 3, 14, 13, 22, 31, 0, time.UTC)
	d, err := webhooks.NewDelivery(webhooks.Event{Name: events.Ping, CompanyID: 7, OccurredAt: at}, "7f1c2a34-5b6d-4e8f-9a0b-1c2d3e4f5a6b", clock.NewFormatter(sp))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"event":"ping","delivery_id":"7f1c2a34-5b6d-4e8f-9a0b-1c2d3e4f5a6b","company_id":7,"occurred_at":"2025-03-14T10:22:31-03:00","description":` +
		strconv.Quote(mustLookup(events.Ping).Description) + `,"data":{}}`
	if string(d.Body) != want || d.Event != events.Ping || d.ID != "7f1c2a34-5b6d-4e8f-9a0b-1c2d3e4f5a6b" {
		t.Errorf("body\n%s\nwant\n%s", d.Body, want)
	}
	if err := eventschema.ValidatePayload(events.Ping, d.Body); err != nil {
		t.Error(err)
	}
	if _, err := webhooks.NewDelivery(webhooks.Event{Name: "nope"}, "x", clock.Formatter{}); fault.KindOf(err) != fault.Invalid {
		t.Errorf("unknown event: %v", err)
	}
}

func mustLookup(name string) events.Info {
	info, _ := events.Lookup(name)
	return info
}

func TestPublishFanOut(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{})
		data := exampleData(t)
		ch1, ch2 := int64(11), int64(22)
		all, _ := b.subscribe(t, b.p, webhooks.CreateInput{URL: "https://example.com/all"})
		some, _ := b.subscribe(t, b.p, webhooks.CreateInput{URL: "https://example.com/some",
			Events: []string{events.OmnichatMessageReceived, events.CrmBusinessWon}, CompanyChannelIDs: []int64{ch1}})
		onCh2, _ := b.subscribe(t, b.p, webhooks.CreateInput{URL: "https://example.com/ch2", CompanyChannelIDs: []int64{ch2}})
		off := false
		b.subscribe(t, b.p, webhooks.CreateInput{URL: "https://example.com/off", Enabled: &off})
		foreign, _ := b.subscribe(t, b.other, webhooks.CreateInput{URL: "https://example.com/foreign"})

		cases := []struct {
			name    string
			company int64
			event   string
			channel *int64
			want    []int64
		}{
			{"channel event on a filtered channel", b.p.CompanyID, events.OmnichatMessageReceived, &ch1, []int64{all.ID, some.ID}},
			{"channel event on the other channel", b.p.CompanyID, events.OmnichatMessageReceived, &ch2, []int64{all.ID, onCh2.ID}},
			{"channel event on an unlisted channel", b.p.CompanyID, events.OmnichatConversationClosed, ptr(int64(99)), []int64{all.ID}},
			{"event not subscribed", b.p.CompanyID, events.OmnichatMessageSent, &ch1, []int64{all.ID}},
			{"company event ignores channel filters", b.p.CompanyID, events.CrmBusinessWon, nil, []int64{all.ID, some.ID, onCh2.ID}},
			{"company event with a channel id", b.p.CompanyID, events.CrmBusinessWon, &ch2, []int64{all.ID, some.ID, onCh2.ID}},
			{"company event not subscribed", b.p.CompanyID, events.ContactImportCompleted, nil, []int64{all.ID, onCh2.ID}},
			{"other company", b.other.CompanyID, events.OmnichatMessageReceived, &ch1, []int64{foreign.ID}},
			{"company without subscriptions", b.other.CompanyID + 1000, events.OmnichatMessageSent, &ch1, nil},
		}
		occurred := time.Date(2025, 3, 14, 13, 22, 31, 0, time.UTC)
		for _, tc := range cases {
			ev := webhooks.Event{Name: tc.event, CompanyID: tc.company, CompanyChannelID: tc.channel, OccurredAt: occurred,
				Data: data[tc.event]}
			if err := b.publish(t, ev); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var got []int64
			ids := map[string]bool{}
			for _, d := range b.takeDeliveries(t) {
				got = append(got, d.SubscriptionID)
				ids[d.DeliveryID] = true
				var env map[string]any
				if err := json.Unmarshal([]byte(d.Body), &env); err != nil {
					t.Fatal(err)
				}
				info, _ := events.Lookup(tc.event)
				if env["event"] != tc.event || env["delivery_id"] != d.DeliveryID || env["company_id"] != float64(tc.company) ||
					env["occurred_at"] != "2025-03-14T13:22:31+00:00" || env["description"] != info.Description || d.Event != tc.event {
					t.Errorf("%s: envelope %s", tc.name, d.Body)
				}
				if err := eventschema.ValidatePayload(tc.event, []byte(d.Body)); err != nil {
					t.Errorf("%s: %v", tc.name, err)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: delivered to %v, want %v", tc.name, got, tc.want)
			}
			// A publisher that skips its transaction when nobody listens
			// must hear what Publish would do.
			if listens, err := b.svc.Listens(context.Background(), tc.company, tc.event, tc.channel); err != nil || listens != (len(tc.want) > 0) {
				t.Errorf("%s: Listens = %v, %v; want %v", tc.name, listens, err, len(tc.want) > 0)
			}
			if len(ids) != len(got) {
				t.Errorf("%s: delivery ids not unique per subscription", tc.name)
			}
		}
	})
}

func TestPublishRejects(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{})
		b.subscribe(t, b.p, webhooks.CreateInput{URL: "https://example.com/all"})
		data := exampleData(t)
		for _, name := range []string{"nope", events.Ping} {
			err := b.publish(t, webhooks.Event{Name: name, CompanyID: b.p.CompanyID, Data: map[string]any{}})
			if fault.KindOf(err) != fault.Invalid {
				t.Errorf("publish %q: %v, want Invalid", name, err)
			}
		}
		// Data that does not match the event's schema never leaves.
		err := b.publish(t, webhooks.Event{Name: events.ContactImportCompleted, CompanyID: b.p.CompanyID, Data: map[string]any{"import_id": 7}})
		if err == nil {
			t.Error("invalid data published")
		}
		// Outbox: a rolled-back transaction leaves no delivery behind.
		boom := errors.New("caller's change failed")
		err = db.InTx(context.Background(), func(ctx context.Context, tx *store.Tx) error {
			if err := b.svc.Publish(ctx, tx, webhooks.Event{Name: events.ContactImportCompleted, CompanyID: b.p.CompanyID,
				Data: data[events.ContactImportCompleted]}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if n := len(b.takeDeliveries(t)); n != 0 {
			t.Errorf("%d deliveries survived the rollback", n)
		}
	})
}

// TestAttemptOutcomes: the non-retry rule, one case per kind of answer.
func TestAttemptOutcomes(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		guarded := netguard.New(loopback).NewClient(netguard.ClientOptions{Timeout: 300 * time.Millisecond})
		// The service lets 10.0.0.1 be subscribed (as it would a name
		// resolving there); the delivery's guard refuses it.
		allow := append([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, loopback...)
		b := setup(t, db, setupOpts{webhooks: webhooks.Options{Client: guarded, AllowCIDRs: allow}})
		closed, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		deadURL := "http://" + closed.Addr().String() + "/hook"
		closed.Close()

		type want struct {
			status int
			ok     bool
			retry  bool // attempt 2 is scheduled
			cancel bool
		}
		cases := []struct {
			name   string
			answer int
			delay  time.Duration
			url    string
			want   want
		}{
			{"200", 200, 0, "", want{200, true, false, false}},
			{"204", 204, 0, "", want{204, true, false, false}},
			{"500", 500, 0, "", want{500, false, true, false}},
			{"503", 503, 0, "", want{503, false, true, false}},
			{"408 is retried", 408, 0, "", want{408, false, true, false}},
			{"429 is retried", 429, 0, "", want{429, false, true, false}},
			{"302 is not followed, retried", 302, 0, "", want{302, false, true, false}},
			{"400 is not retried", 400, 0, "", want{400, false, false, true}},
			{"401 is not retried", 401, 0, "", want{401, false, false, true}},
			{"404 is not retried", 404, 0, "", want{404, false, false, true}},
			{"410 is not retried", 410, 0, "", want{410, false, false, true}},
			{"timeout is retried", 200, time.Second, "", want{0, false, true, false}},
			{"refused destination is not retried", 0, 0, "http://10.0.0.1:9/hook", want{0, false, false, true}},
			{"connection refused is retried", 0, 0, deadURL, want{0, false, true, false}},
		}
		for _, tc := range cases {
			rcv := newReceiver(t, "", b.clk.Now)
			rcv.delay = tc.delay
			answer := tc.answer
			rcv.setAnswer(func(int) int { return answer })
			url := rcv.URL()
			if tc.url != "" {
				url = tc.url
			}
			sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: url})
			rcv.setSecret(secret)
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: exampleData(t)[events.CrmBusinessWon]}); err != nil {
				t.Fatal(err)
			}
			queued, _ := b.pendingOf(t, sub.ID)
			b.deliver(t, sub.ID)
			mine, retried := b.pendingOf(t, sub.ID)
			log := b.log(t, sub.ID)
			if len(log) != 1 {
				t.Fatalf("%s: %d log entries", tc.name, len(log))
			}
			got := want{ok: log[0].Succeeded, retry: retried, cancel: !log[0].Succeeded && !retried}
			if retried && (mine.Attempts != 1 || !mine.NextAttemptAt.Equal(b.clk.Now().Add(10*time.Second))) {
				t.Errorf("%s: retry scheduled as %+v", tc.name, mine)
			}
			got.status = log[0].StatusCode
			if got != tc.want {
				t.Errorf("%s: got %+v (error %s), want %+v", tc.name, got, deref(log[0].Error), tc.want)
			}
			e := log[0]
			if e.Succeeded != tc.want.ok || (e.Error == nil) != tc.want.ok || (e.DeliveredAt != nil) != tc.want.ok ||
				(e.NextRetryAt != nil) != tc.want.retry || e.Attempt != 1 || e.DeliveryID != queued.DeliveryID || e.Event != events.CrmBusinessWon {
				t.Errorf("%s: log entry %+v (error %v)", tc.name, e, deref(e.Error))
			}
			s := b.subscription(t, b.p, sub.ID)
			switch {
			case tc.want.ok:
				if s.LastSuccessAt == nil || s.FailureCount != 0 {
					t.Errorf("%s: subscription %+v", tc.name, s)
				}
			case tc.want.cancel:
				// A refused event is a failed event (see README).
				if s.LastFailureAt == nil || s.FailureCount != 1 {
					t.Errorf("%s: subscription %+v", tc.name, s)
				}
			default:
				if s.LastFailureAt == nil || s.FailureCount != 0 {
					t.Errorf("%s: subscription %+v", tc.name, s)
				}
			}
		}
	})
}

// TestRetrySchedule drives one delivery through its five attempts: same
// delivery id and body, a fresh timestamp and signature each time, the
// document's delays, and the event counted failed after the fifth.
func TestRetrySchedule(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{})
		rcv := newReceiver(t, "", b.clk.Now)
		rcv.setAnswer(func(int) int { return 503 })
		sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL()})
		rcv.setSecret(secret)
		if err := b.publish(t, webhooks.Event{Name: events.ContactImportCompleted, CompanyID: b.p.CompanyID, Data: exampleData(t)[events.ContactImportCompleted]}); err != nil {
			t.Fatal(err)
		}
		d, _ := b.pendingOf(t, sub.ID)
		delays := []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute}
		for attempt := 1; attempt <= 5; attempt++ {
			b.deliver(t, sub.ID)
			p, queued := b.pendingOf(t, sub.ID)
			if attempt < 5 {
				if want := b.clk.Now().Add(delays[attempt-1]); !queued || p.Attempts != attempt || !p.NextAttemptAt.Equal(want) {
					t.Fatalf("attempt %d: queued %v as %+v, want attempt %d due %v", attempt, queued, p, attempt, want)
				}
				// Not due yet: nothing is sent.
				b.clk.Advance(delays[attempt-1] - time.Second)
				b.deliver(t, sub.ID)
				if n := len(rcv.received()); n != attempt {
					t.Fatalf("attempt %d: %d requests before the retry was due", attempt, n)
				}
				b.clk.Advance(time.Second)
			} else if queued {
				t.Fatalf("attempt 5: still queued %+v (no attempt 6)", p)
			}
		}
		hits := rcv.received()
		if len(hits) != 5 {
			t.Fatalf("%d requests", len(hits))
		}
		for i, h := range hits {
			if h.Header.Get("X-Svc-Attempt") != strconv.Itoa(i+1) || h.Header.Get("X-Svc-Delivery") != d.DeliveryID ||
				!bytes.Equal(h.Body, hits[0].Body) {
				t.Errorf("attempt %d: %v", i+1, h.Header)
			}
			if i > 0 && h.Header.Get("X-Svc-Timestamp") == hits[i-1].Header.Get("X-Svc-Timestamp") {
				t.Errorf("attempt %d reused the timestamp", i+1)
			}
		}
		log := b.log(t, sub.ID) // newest first
		if len(log) != 5 {
			t.Fatalf("%d log entries", len(log))
		}
		for i, e := range log {
			attempt := 5 - i
			if e.Attempt != attempt || e.StatusCode != 503 || e.Succeeded {
				t.Errorf("entry %d: %+v", i, e)
			}
			if attempt == 5 {
				if e.NextRetryAt != nil {
					t.Errorf("last attempt has next_retry_at %v", e.NextRetryAt)
				}
				continue
			}
			if e.NextRetryAt == nil || !e.NextRetryAt.Equal(e.CreatedAt.Add(delays[attempt-1])) {
				t.Errorf("attempt %d: next_retry_at %v, created %v", attempt, e.NextRetryAt, e.CreatedAt)
			}
		}
		if s := b.subscription(t, b.p, sub.ID); s.FailureCount != 1 || !s.Enabled || s.LastFailureAt == nil || !s.LastFailureAt.Equal(b.clk.Now()) {
			t.Errorf("after an exhausted event: %+v", s)
		}
	})
}

// TestAutoDisable: 20 consecutive failed events disable; a success resets
// the count; re-enabling resets it too.
func TestAutoDisable(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{})
		rcv := newReceiver(t, "", b.clk.Now)
		var mu sync.Mutex
		status := 500
		rcv.setAnswer(func(int) int { mu.Lock(); defer mu.Unlock(); return status })
		set := func(s int) { mu.Lock(); status = s; mu.Unlock() }
		sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL()})
		rcv.setSecret(secret)
		data := exampleData(t)[events.CrmBusinessLost]
		failEvent := func() {
			t.Helper()
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessLost, CompanyID: b.p.CompanyID, Data: data}); err != nil {
				t.Fatal(err)
			}
			// The event's last attempt: it fails, and the event with it.
			if _, err := b.db.Bun.NewUpdate().Table("webhook_deliveries").Set("attempts = ?", webhooks.MaxAttempts-1).
				Where("subscription_id = ?", sub.ID).Exec(context.Background()); err != nil {
				t.Fatal(err)
			}
			b.clk.Advance(time.Minute)
			b.deliver(t, sub.ID)
			if p, queued := b.pendingOf(t, sub.ID); queued {
				t.Fatalf("after the last attempt: still queued %+v", p)
			}
		}
		for range 19 {
			failEvent()
		}
		if s := b.subscription(t, b.p, sub.ID); !s.Enabled || s.FailureCount != 19 {
			t.Fatalf("after 19: %+v", s)
		}
		// A success resets the count...
		set(200)
		if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessLost, CompanyID: b.p.CompanyID, Data: data}); err != nil {
			t.Fatal(err)
		}
		b.deliver(t, sub.ID)
		if s := b.subscription(t, b.p, sub.ID); s.FailureCount != 0 || s.LastSuccessAt == nil {
			t.Fatalf("after a success: %+v", s)
		}
		// ...so it takes 20 more.
		set(500)
		for range 19 {
			failEvent()
		}
		if s := b.subscription(t, b.p, sub.ID); !s.Enabled {
			t.Fatal("disabled after 19")
		}
		failEvent()
		s := b.subscription(t, b.p, sub.ID)
		if s.Enabled || s.FailureCount != 20 || s.DisabledReason == nil || *s.DisabledReason != webhooks.DisabledReason ||
			!s.UpdatedAt.Equal(b.clk.Now()) {
			t.Fatalf("after 20: %+v", s)
		}
		// Disabled: nothing new is queued, and scheduled attempts stop.
		if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessLost, CompanyID: b.p.CompanyID, Data: data}); err != nil {
			t.Fatal(err)
		}
		if n := len(b.takeDeliveries(t)); n != 0 {
			t.Errorf("%d deliveries queued to a disabled subscription", n)
		}
		before := len(rcv.received())
		if _, err := b.db.Bun.NewRaw(`INSERT INTO webhook_deliveries (subscription_id, delivery_id, event, body, attempts, next_attempt_at, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, sub.ID, "00000000-0000-4000-8000-000000000000", events.CrmBusinessLost, "{}", 1, b.clk.Now(), b.clk.Now()).
			Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		b.deliver(t, sub.ID)
		if len(rcv.received()) != before {
			t.Error("a disabled subscription was called")
		}
		if p, queued := b.pendingOf(t, sub.ID); queued {
			t.Errorf("a disabled subscription's retry stays queued: %+v", p)
		}
		// Re-enabling resets the count and the reason.
		on := true
		s, err := b.svc.UpdateChannelWebhook(context.Background(), b.p, sub.ID, webhooks.UpdateInput{Enabled: &on})
		if err != nil {
			t.Fatal(err)
		}
		if !s.Enabled || s.FailureCount != 0 || s.DisabledReason != nil {
			t.Fatalf("re-enabled: %+v", s)
		}
		if got := b.subscription(t, b.p, sub.ID); got.FailureCount != 0 || got.DisabledReason != nil || !got.Enabled {
			t.Fatalf("re-enabled, read back: %+v", got)
		}
	})
}

// TestPendingRetriesFollowChanges: a retry already scheduled uses the
// current secret after rotation, and never happens after deletion or
// disabling.
func TestPendingRetriesFollowChanges(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{})
		ctx := context.Background()
		data := exampleData(t)[events.CrmBusinessArchived]
		start := func() (*receiver, webhooks.Subscription) {
			rcv := newReceiver(t, "", b.clk.Now)
			rcv.setAnswer(func(n int) int {
				if n == 0 {
					return 500
				}
				return 200
			})
			sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL(), Events: []string{events.CrmBusinessArchived}})
			rcv.setSecret(secret)
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessArchived, CompanyID: b.p.CompanyID, Data: data}); err != nil {
				t.Fatal(err)
			}
			b.deliver(t, sub.ID)
			if p, queued := b.pendingOf(t, sub.ID); !queued || p.Attempts != 1 {
				t.Fatalf("attempt 1 not scheduled for a retry: %+v", p)
			}
			return rcv, sub
		}

		t.Run("rotation", func(t *testing.T) {
			rcv, sub := start()
			old := rcv.received()[0]
			_, secret, err := b.svc.RotateChannelWebhookSecret(ctx, b.p, sub.ID)
			if err != nil {
				t.Fatal(err)
			}
			rcv.setSecret(secret) // the subscriber now trusts only the new secret
			b.clk.Advance(10 * time.Second)
			b.deliver(t, sub.ID)
			if len(rcv.received()) != 2 {
				t.Fatalf("%d requests", len(rcv.received()))
			}
			got := rcv.received()[1]
			if err := subscriber.Verify(secret, got.Header, got.Body, b.clk.Now(), time.Minute); err != nil {
				t.Errorf("retry not signed with the new secret: %v", err)
			}
			oldSecretCheck := subscriber.Verify(secret, old.Header, old.Body, b.clk.Now(), time.Minute)
			if !errors.Is(oldSecretCheck, subscriber.ErrSignatureMismatch) {
				t.Errorf("attempt 1 verifies with the new secret: %v", oldSecretCheck)
			}
		})
		t.Run("deletion", func(t *testing.T) {
			rcv, sub := start()
			if err := b.svc.DeleteChannelWebhook(ctx, b.p, sub.ID); err != nil {
				t.Fatal(err)
			}
			b.clk.Advance(10 * time.Second)
			if p, queued := b.pendingOf(t, sub.ID); queued {
				t.Errorf("retry of a deleted subscription still queued: %+v", p)
			}
			b.deliver(t, sub.ID)
			if n := len(rcv.received()); n != 1 {
				t.Errorf("receiver called %d times", n)
			}
			n, err := db.Bun.NewSelect().Table("webhook_delivery_log").Where("subscription_id = ?", sub.ID).Count(ctx)
			if err != nil || n != 0 {
				t.Errorf("delivery log of a deleted subscription: %d %v", n, err)
			}
		})
		t.Run("disabling", func(t *testing.T) {
			rcv, sub := start()
			off := false
			if _, err := b.svc.UpdateChannelWebhook(ctx, b.p, sub.ID, webhooks.UpdateInput{Enabled: &off}); err != nil {
				t.Fatal(err)
			}
			b.clk.Advance(10 * time.Second)
			b.deliver(t, sub.ID)
			if p, queued := b.pendingOf(t, sub.ID); queued {
				t.Errorf("retry of a disabled subscription still queued: %+v", p)
			}
			if n := len(rcv.received()); n != 1 {
				t.Errorf("receiver called %d times", n)
			}
		})
	})
}

// TestLaneFairnessAndBound runs the real River workers (two replicas on
// PostgreSQL): a subscription whose receiver hangs holds at most its bound
// of attempts in flight, across replicas, and a healthy subscription's
// deliveries all arrive meanwhile, not queued behind the hung ones. Every
// delivery ends with a successful log entry once the receiver recovers.
func TestLaneFairnessAndBound(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		const bound, total = 2, 20
		opts := webhooks.Options{Now: time.Now, PerSubscriptionConcurrency: bound}
		b := setup(t, db, setupOpts{work: true, webhooks: opts})
		if db.Dialect == store.Postgres {
			b.replica(t, opts)
		}
		slow := newReceiver(t, "", time.Now)
		slow.hold = make(chan struct{})
		fast := newReceiver(t, "", time.Now)
		slowSub, s1 := b.subscribe(t, b.p, webhooks.CreateInput{URL: slow.URL()})
		fastSub, s2 := b.subscribe(t, b.p, webhooks.CreateInput{URL: fast.URL()})
		slow.setSecret(s1)
		fast.setSecret(s2)
		data := exampleData(t)[events.CrmBusinessCreated]
		for range total {
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessCreated, CompanyID: b.p.CompanyID, Data: data}); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, "the healthy receiver got every delivery", func() bool { return len(fast.received()) == total })
		// A receiver that has never answered gets one attempt at a time
		// (slow start), whatever the bound.
		waitUntil(t, "the hung receiver holds an attempt", func() bool { now, _ := slow.held(); return now == 1 })
		// Nothing reached the hung receiver's answer yet: the healthy
		// deliveries were not queued behind it.
		if n := countSucceeded(b.log(t, slowSub.ID)); n != 0 {
			t.Errorf("%d hung deliveries succeeded before the healthy ones were all in", n)
		}
		close(slow.hold)
		for _, id := range []int64{slowSub.ID, fastSub.ID} {
			waitUntil(t, "every delivery logged as delivered", func() bool { return countSucceeded(b.log(t, id)) == total })
		}
		if _, most := slow.held(); most < 1 || most > bound {
			t.Errorf("%d attempts in flight to one subscription at most, want 1 to its bound %d", most, bound)
		}
	})
}

// TestRetriesGoFirst: the lane of a failing endpoint (one attempt in
// flight) sends a retry that has come due before first attempts that came
// due earlier: the retry has a documented time (within 10% of its delay), a
// first attempt none.
func TestRetriesGoFirst(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{webhooks: webhooks.Options{PerSubscriptionConcurrency: 1}})
		rcv := newReceiver(t, "", b.clk.Now)
		var answered atomic.Int32
		rcv.setAnswer(func(int) int {
			if answered.Add(1) == 1 {
				return 503
			}
			return 200
		})
		sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL()})
		rcv.setSecret(secret)
		publish := func() string {
			t.Helper()
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: exampleData(t)[events.CrmBusinessWon]}); err != nil {
				t.Fatal(err)
			}
			ps := b.pending(t) // fans the event out now, due now
			return ps[len(ps)-1].DeliveryID
		}
		retry := publish()
		b.deliver(t, sub.ID) // attempt 1 fails: attempt 2 is due in 10 s
		b.clk.Advance(time.Second)
		later := []string{publish(), publish()} // due 9 s before the retry
		b.clk.Advance(9 * time.Second)
		b.svc.DeliverDueFailing(context.Background(), sub.ID)
		var got []string
		for _, h := range rcv.received()[1:] {
			got = append(got, h.Header.Get("X-Svc-Delivery")+"#"+h.Header.Get("X-Svc-Attempt"))
		}
		want := []string{retry + "#2", later[0] + "#1", later[1] + "#1"}
		if !slices.Equal(got, want) {
			t.Errorf("sent %v, want the retry first: %v", got, want)
		}
	})
}

func countSucceeded(log []webhooks.LogEntry) int {
	n := 0
	for _, e := range log {
		if e.Succeeded {
			n++
		}
	}
	return n
}

func TestRetention(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{})
		rcv := newReceiver(t, "", b.clk.Now)
		var mu sync.Mutex
		status := 200
		rcv.setAnswer(func(int) int { mu.Lock(); defer mu.Unlock(); return status })
		sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL()})
		rcv.setSecret(secret)
		day := 24 * time.Hour
		// Entries written at these ages (relative to the prune time).
		entries := []struct {
			age  time.Duration
			code int
			kept bool
		}{
			{31 * day, 500, false},
			{29 * day, 500, true},
			{8 * day, 200, false},
			{7*day + time.Minute, 200, false},
			{7*day - time.Minute, 200, true},
			{8 * day, 404, true},
			{time.Hour, 200, true},
		}
		pruneAt := t0.Add(40 * day)
		for _, e := range entries {
			b.clk.Set(pruneAt.Add(-e.age))
			mu.Lock()
			status = e.code
			mu.Unlock()
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: exampleData(t)[events.CrmBusinessWon]}); err != nil {
				t.Fatal(err)
			}
			b.deliver(t, sub.ID)
			b.takeDeliveries(t) // retries are not part of this test
		}
		b.clk.Set(pruneAt)
		n, err := b.svc.PruneDeliveryLog(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var want []int
		for i := len(entries) - 1; i >= 0; i-- { // the log is newest first
			if entries[i].kept {
				want = append(want, entries[i].code)
			}
		}
		var got []int
		for _, e := range b.log(t, sub.ID) {
			got = append(got, e.StatusCode)
		}
		if !slices.Equal(got, want) || int(n) != len(entries)-len(want) {
			t.Errorf("kept %v (pruned %d), want %v", got, n, want)
		}
	})
}

// TestRetentionIsPeriodic: River's leader runs the pruning on start (and
// hourly after).
func TestRetentionIsPeriodic(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		setup(t, db, setupOpts{work: true})
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, err := db.Bun.NewSelect().Table("river_job").Where("kind = ?", webhooks.RetentionArgs{}.Kind()).
				Where("state = ?", "completed").Count(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the retention job did not run")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// TestRiverRetries runs the real River workers with short delays: the
// schedule, MaxAttempts and the non-retry rule as River applies them.
func TestRiverRetries(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		short := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 40 * time.Millisecond}
		b := setup(t, db, setupOpts{work: true, webhooks: webhooks.Options{RetryDelays: short, Now: time.Now}})
		cases := []struct {
			name     string
			answer   func(n int) int
			attempts int
			failures int
		}{
			{"succeeds on the third attempt", func(n int) int {
				if n < 2 {
					return 500
				}
				return 200
			}, 3, 0},
			{"never succeeds", func(int) int { return 502 }, 5, 1},
			{"refused", func(int) int { return 422 }, 1, 1},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				rcv := newReceiver(t, "", time.Now)
				rcv.setAnswer(tc.answer)
				sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL(), Events: []string{events.CrmBusinessWon}})
				rcv.setSecret(secret)
				if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: exampleData(t)[events.CrmBusinessWon]}); err != nil {
					t.Fatal(err)
				}
				// A finished delivery (sent, refused or given up) leaves the
				// queue in the transaction that logs its last attempt: after
				// that no attempt can come, so counting then is exact.
				waitUntil(t, "the delivery finished", func() bool {
					_, queued := b.pendingOf(t, sub.ID)
					return !queued && len(b.log(t, sub.ID)) > 0
				})
				log := b.log(t, sub.ID)
				if len(rcv.received()) != tc.attempts || len(log) != tc.attempts {
					t.Fatalf("%d requests, %d log entries, want %d", len(rcv.received()), len(log), tc.attempts)
				}
				for i, h := range rcv.received() {
					if h.Header.Get("X-Svc-Attempt") != strconv.Itoa(i+1) {
						t.Errorf("request %d has attempt %s", i, h.Header.Get("X-Svc-Attempt"))
					}
				}
				if s := b.subscription(t, b.p, sub.ID); s.FailureCount != tc.failures {
					t.Errorf("failure_count %d, want %d", s.FailureCount, tc.failures)
				}
			})
		}
	})
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestNeutralDestinationErrors: the delivery log never shows our resolver
// or an internal address, and a refused destination reads exactly like a
// name that does not resolve (issue 10.10).
func TestNeutralDestinationErrors(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		// Delivery dials through a guard that allows nothing, while the
		// service's own settings let these URLs be subscribed, as a name
		// resolving to such an address would be (a literal refused address
		// is answered 422 at create: TestSubscriptionURLGuard).
		guarded := netguard.New(nil).NewClient(netguard.ClientOptions{Timeout: 2 * time.Second})
		allow := append([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16")}, loopback...)
		b := setup(t, db, setupOpts{webhooks: webhooks.Options{Client: guarded, AllowCIDRs: allow}})
		cases := []struct {
			name  string
			url   string
			exact bool // the refusal text, not merely a neutral one
		}{
			{"private address", "http://10.0.0.1:9/hook", true},
			{"metadata address", "http://169.254.169.254/latest", true},
			{"name resolving inside", "http://localhost:9/hook", true},
			{"name that does not resolve", "http://no-such-host.invalid/hook", false},
		}
		leaks := regexp.MustCompile(`lookup|:53\b|\d+\.\d+\.\d+\.\d+|localhost|no-such-host|dial`)
		for _, tc := range cases {
			sub, _ := b.subscribe(t, b.p, webhooks.CreateInput{URL: tc.url, Events: []string{events.CrmBusinessWon}})
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: exampleData(t)[events.CrmBusinessWon]}); err != nil {
				t.Fatal(err)
			}
			b.deliver(t, sub.ID)
			log := b.log(t, sub.ID)
			if len(log) != 1 || log[0].Error == nil {
				t.Fatalf("%s: log %+v", tc.name, log)
			}
			msg := *log[0].Error
			if leaks.MatchString(msg) || (tc.exact && msg != webhooks.MsgDestinationRefused) {
				t.Errorf("%s: error %q, want %q", tc.name, msg, webhooks.MsgDestinationRefused)
			}
			if _, retried := b.pendingOf(t, sub.ID); tc.exact && retried {
				t.Errorf("%s: a refused destination is retried", tc.name)
			}
		}
	})
}

// statements counts the bun statements run on a database, by kind.
type statements struct {
	mu   sync.Mutex
	seen []string
}

func (s *statements) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (s *statements) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	if op := e.Operation(); op == "BEGIN" || op == "COMMIT" || op == "ROLLBACK" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, e.Operation())
}

func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.seen
	s.seen = nil
	return out
}

// TestPublishCost: publishing on the send hot path costs one single-row
// INSERT in the caller's transaction once the company's subscriptions are
// cached, whatever their number, and a subscription change made here
// applies to the very next publish.
func TestPublishCost(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{})
		for range 3 {
			b.subscribe(t, b.p, webhooks.CreateInput{URL: "https://example.com/hook"})
		}
		hook := &statements{}
		db.Bun.AddQueryHook(hook)
		ev := webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: exampleData(t)[events.CrmBusinessWon]}
		publish := func() []string {
			t.Helper()
			hook.take()
			if err := b.publishUnfanned(t, ev); err != nil {
				t.Fatal(err)
			}
			return hook.take()
		}
		if got := publish(); !slices.Equal(got, []string{"SELECT", "INSERT"}) {
			t.Errorf("first publish ran %v, want the subscriptions read and one INSERT", got)
		}
		// The one INSERT is the event, once: its deliveries are made after
		// commit, whatever the number of subscriptions.
		for table, want := range map[string]int64{"webhook_events": 1, "webhook_deliveries": 0} {
			if n, err := db.Bun.NewSelect().Table(table).Count(context.Background()); err != nil || n != want {
				t.Errorf("%s holds %d rows (%v) after one publish, want %d", table, n, err, want)
			}
		}
		if got := publish(); !slices.Equal(got, []string{"INSERT"}) {
			t.Errorf("cached publish ran %v, want one INSERT", got)
		}
		if n := len(b.takeDeliveries(t)); n != 6 {
			t.Errorf("%d deliveries queued, want 6", n)
		}
		// A change through this process drops the cache at once.
		added, _ := b.subscribe(t, b.p, webhooks.CreateInput{URL: "https://example.com/new"})
		publish()
		if _, ok := b.pendingOf(t, added.ID); !ok {
			t.Error("a new subscription missed the next event")
		}
		off := false
		if _, err := b.svc.UpdateChannelWebhook(context.Background(), b.p, added.ID, webhooks.UpdateInput{Enabled: &off}); err != nil {
			t.Fatal(err)
		}
		b.takeDeliveries(t)
		publish()
		if _, ok := b.pendingOf(t, added.ID); ok {
			t.Error("a disabled subscription got the next event")
		}
	})
}

// TestLegacyDeliveryJobs: a delivery job of the previous design, still
// queued at the upgrade, is delivered with its attempt count and logged.
func TestLegacyDeliveryJobs(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{work: true, webhooks: webhooks.Options{Now: time.Now}})
		rcv := newReceiver(t, "", time.Now)
		sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL()})
		rcv.setSecret(secret)
		d, err := webhooks.NewDelivery(webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID,
			Data: exampleData(t)[events.CrmBusinessWon]}, "3b0c8a52-1d1e-4c39-9a51-2f1f7d6f0b11", clock.Formatter{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.InTx(context.Background(), func(ctx context.Context, tx *store.Tx) error {
			return b.jobs.Insert(ctx, tx, webhooks.DeliveryArgs{SubscriptionID: sub.ID, DeliveryID: d.ID, Event: d.Event, Body: string(d.Body)},
				&river.InsertOpts{Queue: webhooks.QueueName, MaxAttempts: webhooks.MaxAttempts})
		}); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the queued job delivered and logged", func() bool { return len(b.log(t, sub.ID)) == 1 })
		h := rcv.received()
		if len(h) != 1 || h[0].Header.Get(webhooks.HeaderDelivery) != d.ID || h[0].Header.Get(webhooks.HeaderAttempt) != "1" ||
			!bytes.Equal(h[0].Body, d.Body) {
			t.Errorf("received %+v", h)
		}
	})
}

// TestLaneHandover: a lane that reaches the end of its run releases its
// lease and is claimed again; across the runs every event arrives exactly
// once (no two runs of one subscription's lane ever overlapped) and is
// logged.
func TestLaneHandover(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		const total = 200
		b := setup(t, db, setupOpts{work: true, webhooks: webhooks.Options{Now: time.Now, LaneRunFor: 50 * time.Millisecond}})
		rcv := newReceiver(t, "", time.Now)
		rcv.delay = 2 * time.Millisecond
		sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL()})
		rcv.setSecret(secret)
		data := exampleData(t)[events.CrmBusinessWon]
		for range total {
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: data}); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, "every delivery logged", func() bool { return countSucceeded(b.log(t, sub.ID)) == total })
		seen := map[string]int{}
		for _, h := range rcv.received() {
			seen[h.Header.Get(webhooks.HeaderDelivery)]++
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("delivery %s sent %d times", id, n)
			}
		}
		lanes := b.svc.LaneRuns()
		if len(seen) != total || lanes < 2 {
			t.Errorf("%d deliveries by %d lane runs, want %d by several", len(seen), lanes, total)
		}
	})
}
