package subscriber_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/chatmsg/gateway/asyncapi"
	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/webhooks"
)

const (
	secret   = "whsec_0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"
	delivery = "686122e4-02dd-4afc-87dc-528c50cbbf6c"
)

var t0 = time.Unix(1741962000, 0)

func pingBody(id string) []byte {
	return []byte(`{"event":"ping","delivery_id":"` + id + `","company_id":1042,"occurred_at":"2025-03-14T11:20:00-03:00","description":"Synthetic test event.","data":{}}`)
}

// signed returns the headers the service sends for body at ts.
func signed(event, id string, ts time.Time, body []byte) http.Header {
	h := http.Header{}
	tsText := strconv.FormatInt(ts.Unix(), 10)
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "Svc-Webhooks/1.0")
	h.Set(subscriber.HeaderEvent, event)
	h.Set(subscriber.HeaderDelivery, id)
	h.Set(subscriber.HeaderTimestamp, tsText)
	h.Set(subscriber.HeaderSignature, subscriber.Sign(secret, tsText, body))
	h.Set(subscriber.HeaderAttempt, "1")
	return h
}

func TestVerify(t *testing.T) {
	t.Parallel()
	body := pingBody(delivery)
	good := signed(events.Ping, delivery, t0, body)
	with := func(k, v string) http.Header {
		h := good.Clone()
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
		return h
	}
	sig := good.Get(subscriber.HeaderSignature)
	cases := []struct {
		name      string
		secret    string
		header    http.Header
		body      []byte
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{"authentic", secret, good, body, t0, 0, nil},
		{"4m59s late, default tolerance", secret, good, body, t0.Add(4*time.Minute + 59*time.Second), 0, nil},
		{"5m1s late, default tolerance", secret, good, body, t0.Add(5*time.Minute + time.Second), 0, subscriber.ErrTimestampOutOfTolerance},
		{"5m1s early (receiver clock behind)", secret, good, body, t0.Add(-5*time.Minute - time.Second), 0, subscriber.ErrTimestampOutOfTolerance},
		{"custom tolerance", secret, good, body, t0.Add(30 * time.Second), 10 * time.Second, subscriber.ErrTimestampOutOfTolerance},
		{"wrong secret", "whsec_other", good, body, t0, 0, subscriber.ErrSignatureMismatch},
		{"empty secret", "", good, body, t0, 0, subscriber.ErrSignatureMismatch},
		{"body altered", secret, good, append([]byte(" "), body...), t0, 0, subscriber.ErrSignatureMismatch},
		{"body re-serialised", secret, good, reserialise(t, body), t0, 0, subscriber.ErrSignatureMismatch},
		{"timestamp altered", secret, with(subscriber.HeaderTimestamp, strconv.FormatInt(t0.Unix()+1, 10)), body, t0, 0, subscriber.ErrSignatureMismatch},
		{"old signature replayed with a fresh timestamp", secret, with(subscriber.HeaderTimestamp, strconv.FormatInt(t0.Unix()+600, 10)), body, t0.Add(600 * time.Second), 0, subscriber.ErrSignatureMismatch},
		{"no signature", secret, with(subscriber.HeaderSignature, ""), body, t0, 0, subscriber.ErrMissingSignature},
		{"md5 scheme", secret, with(subscriber.HeaderSignature, "md5="+strings.Repeat("0", 32)), body, t0, 0, subscriber.ErrMissingSignature},
		{"upper-case hex", secret, with(subscriber.HeaderSignature, strings.ToUpper(sig[:7])+strings.ToUpper(sig[7:])), body, t0, 0, subscriber.ErrMissingSignature},
		{"short hex", secret, with(subscriber.HeaderSignature, sig[:len(sig)-2]), body, t0, 0, subscriber.ErrMissingSignature},
		{"non-hex", secret, with(subscriber.HeaderSignature, "sha256="+strings.Repeat("g", 64)), body, t0, 0, subscriber.ErrMissingSignature},
		{"no timestamp", secret, with(subscriber.HeaderTimestamp, ""), body, t0, 0, subscriber.ErrMalformedTimestamp},
		{"signed timestamp", secret, with(subscriber.HeaderTimestamp, "+1741962000"), body, t0, 0, subscriber.ErrMalformedTimestamp},
		{"timestamp in milliseconds overflows", secret, with(subscriber.HeaderTimestamp, "99999999999999999999"), body, t0, 0, subscriber.ErrMalformedTimestamp},
		{"RFC 3339 timestamp", secret, with(subscriber.HeaderTimestamp, "2025-03-14T11:20:00Z"), body, t0, 0, subscriber.ErrMalformedTimestamp},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := subscriber.Verify(tc.secret, tc.header, tc.body, tc.now, tc.tolerance)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), tc.secret) && tc.secret != "" {
				t.Fatalf("error %q reveals the secret", err)
			}
		})
	}
}

func reserialise(t *testing.T, b []byte) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.MarshalIndent(v, "", " ")
	return out
}

// receiver is a Handler on a fixed clock that counts what it dispatches.
type receiver struct {
	h     *subscriber.Handler
	calls atomic.Int32
	last  atomic.Pointer[subscriber.Delivery]
	fail  atomic.Bool
	// entered and block, when set, hold the function until block closes.
	entered chan struct{}
	block   chan struct{}
}

func newReceiver(now func() time.Time, opts ...subscriber.Option) *receiver {
	r := &receiver{}
	r.h = subscriber.NewHandler(secret, append([]subscriber.Option{subscriber.WithClock(now)}, opts...)...)
	r.h.On(events.Ping, func(ctx context.Context, d *subscriber.Delivery) error {
		if r.block != nil {
			r.entered <- struct{}{}
			<-r.block
		}
		r.calls.Add(1)
		r.last.Store(d)
		if r.fail.Load() {
			return errors.New("database down")
		}
		return nil
	})
	return r
}

func (r *receiver) post(method string, h http.Header, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "/hooks", strings.NewReader(string(body)))
	req.Header = h.Clone()
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, req)
	return rec
}

func TestHandlerAnswers(t *testing.T) {
	t.Parallel()
	body := pingBody(delivery)
	cases := []struct {
		name   string
		method string
		header func() http.Header
		body   []byte
		status int
		calls  int32
	}{
		{"authentic ping", http.MethodPost, func() http.Header { return signed(events.Ping, delivery, t0, body) }, body, http.StatusNoContent, 1},
		{"GET", http.MethodGet, func() http.Header { return signed(events.Ping, delivery, t0, body) }, body, http.StatusMethodNotAllowed, 0},
		{"bad signature", http.MethodPost, func() http.Header {
			h := signed(events.Ping, delivery, t0, body)
			h.Set(subscriber.HeaderSignature, subscriber.Sign("whsec_other", h.Get(subscriber.HeaderTimestamp), body))
			return h
		}, body, http.StatusUnauthorized, 0},
		{"stale timestamp", http.MethodPost, func() http.Header { return signed(events.Ping, delivery, t0.Add(-6*time.Minute), body) }, body, http.StatusUnauthorized, 0},
		{"not JSON (signed)", http.MethodPost, func() http.Header { return signed(events.Ping, delivery, t0, []byte("hello")) }, []byte("hello"), http.StatusBadRequest, 0},
		{"X-Svc-Event disagrees with the envelope", http.MethodPost, func() http.Header { return signed(events.CrmBusinessWon, delivery, t0, body) }, body, http.StatusBadRequest, 0},
		{"X-Svc-Delivery disagrees with the envelope", http.MethodPost, func() http.Header {
			return signed(events.Ping, "00000000-0000-4000-8000-000000000000", t0, body)
		}, body, http.StatusBadRequest, 0},
		{"data is not an object", http.MethodPost, func() http.Header {
			return signed(events.Ping, delivery, t0, []byte(strings.Replace(string(body), `"data":{}`, `"data":[]`, 1)))
		}, []byte(strings.Replace(string(body), `"data":{}`, `"data":[]`, 1)), http.StatusBadRequest, 0},
		{"occurred_at without offset", http.MethodPost, func() http.Header {
			return signed(events.Ping, delivery, t0, []byte(strings.Replace(string(body), "-03:00", "", 1)))
		}, []byte(strings.Replace(string(body), "-03:00", "", 1)), http.StatusBadRequest, 0},
		{"body over the limit", http.MethodPost, func() http.Header { return signed(events.Ping, delivery, t0, make([]byte, 2<<20)) }, make([]byte, 2<<20), http.StatusRequestEntityTooLarge, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logged []error
			r := newReceiver(func() time.Time { return t0 }, subscriber.WithErrorLog(func(_ *http.Request, err error) { logged = append(logged, err) }))
			rec := r.post(tc.method, tc.header(), tc.body)
			if rec.Code != tc.status || r.calls.Load() != tc.calls {
				t.Fatalf("answer %d (%q), %d calls; want %d, %d calls", rec.Code, rec.Body, r.calls.Load(), tc.status, tc.calls)
			}
			if tc.status >= 400 && tc.status != http.StatusMethodNotAllowed && len(logged) != 1 {
				t.Fatalf("error log got %v, want the reason", logged)
			}
		})
	}
}

// TestHandlerIdempotency: X-Svc-Delivery is the idempotency key. A retry
// of a processed delivery is acknowledged without a second call; a failed
// processing is released so the retry runs it; a concurrent duplicate is
// asked to come back later.
func TestHandlerIdempotency(t *testing.T) {
	t.Parallel()
	t.Run("retry after success is acknowledged once", func(t *testing.T) {
		r := newReceiver(func() time.Time { return t0 })
		body := pingBody(delivery)
		for attempt := range 3 {
			h := signed(events.Ping, delivery, t0.Add(time.Duration(attempt)*time.Second), body)
			if rec := r.post(http.MethodPost, h, body); rec.Code != http.StatusNoContent {
				t.Fatalf("attempt %d: %d", attempt+1, rec.Code)
			}
		}
		if n := r.calls.Load(); n != 1 {
			t.Fatalf("%d calls, want 1", n)
		}
		other := pingBody("7f1c2a34-5b6d-4e8f-9a0b-1c2d3e4f5a6b")
		r.post(http.MethodPost, signed(events.Ping, "7f1c2a34-5b6d-4e8f-9a0b-1c2d3e4f5a6b", t0, other), other)
		if n := r.calls.Load(); n != 2 {
			t.Fatalf("another delivery: %d calls, want 2", n)
		}
	})
	t.Run("failure answers 500 and the retry runs again", func(t *testing.T) {
		r := newReceiver(func() time.Time { return t0 })
		body := pingBody(delivery)
		r.fail.Store(true)
		rec := r.post(http.MethodPost, signed(events.Ping, delivery, t0, body), body)
		if rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "database") {
			t.Fatalf("failed processing answered %d %q", rec.Code, rec.Body)
		}
		r.fail.Store(false)
		if rec := r.post(http.MethodPost, signed(events.Ping, delivery, t0, body), body); rec.Code != http.StatusNoContent {
			t.Fatalf("retry answered %d", rec.Code)
		}
		if n := r.calls.Load(); n != 2 {
			t.Fatalf("%d calls, want 2", n)
		}
	})
	t.Run("concurrent duplicate answers 503", func(t *testing.T) {
		r := newReceiver(func() time.Time { return t0 })
		r.entered, r.block = make(chan struct{}), make(chan struct{})
		body := pingBody(delivery)
		first := make(chan int)
		go func() { first <- r.post(http.MethodPost, signed(events.Ping, delivery, t0, body), body).Code }()
		<-r.entered // the first request holds the claim
		dup := r.post(http.MethodPost, signed(events.Ping, delivery, t0, body), body)
		close(r.block)
		if dup.Code != http.StatusServiceUnavailable || dup.Header().Get("Retry-After") == "" {
			t.Fatalf("duplicate answered %d, Retry-After %q", dup.Code, dup.Header().Get("Retry-After"))
		}
		if code := <-first; code != http.StatusNoContent {
			t.Fatalf("first answered %d", code)
		}
	})
}

func TestMemorySeen(t *testing.T) {
	t.Parallel()
	now := t0
	s := subscriber.NewMemorySeen(time.Hour, func() time.Time { return now })
	ctx := context.Background()
	steps := []struct {
		name    string
		advance time.Duration
		op      string // claim, complete, release
		id      string
		want    subscriber.Claim
	}{
		{"first claim", 0, "claim", "a", subscriber.Claimed},
		{"claim while in progress", time.Second, "claim", "a", subscriber.InProgress},
		{"hung claim is taken over", 2 * time.Minute, "claim", "a", subscriber.Claimed},
		{"complete", 0, "complete", "a", 0},
		{"done is remembered", 30 * time.Minute, "claim", "a", subscriber.AlreadyDone},
		{"other id", 0, "claim", "b", subscriber.Claimed},
		{"release", 0, "release", "b", 0},
		{"released id is claimable", 0, "claim", "b", subscriber.Claimed},
		{"forgotten after the TTL", time.Hour, "claim", "a", subscriber.Claimed},
	}
	for _, st := range steps {
		now = now.Add(st.advance)
		switch st.op {
		case "claim":
			got, err := s.Claim(ctx, st.id)
			if err != nil || got != st.want {
				t.Fatalf("%s: Claim = %v, %v; want %v", st.name, got, err, st.want)
			}
		case "complete":
			_ = s.Complete(ctx, st.id)
		case "release":
			_ = s.Release(ctx, st.id)
		}
	}
	// Both old entries expired and were pruned; only the new claim is kept.
	if s.Len() != 1 {
		t.Fatalf("Len = %d, want 1", s.Len())
	}
}

func TestPreviousSecret(t *testing.T) {
	t.Parallel()
	body := pingBody(delivery)
	cases := []struct {
		name    string
		signing string
		status  int
	}{
		{"new secret", secret, http.StatusNoContent},
		{"previous secret", "whsec_previous", http.StatusNoContent},
		{"unknown secret", "whsec_unknown", http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := subscriber.NewHandler(secret, subscriber.WithPreviousSecret("whsec_previous"), subscriber.WithClock(func() time.Time { return t0 }))
			h.On(events.Ping, func(context.Context, *subscriber.Delivery) error { return nil })
			hdr := signed(events.Ping, delivery, t0, body)
			hdr.Set(subscriber.HeaderSignature, subscriber.Sign(tc.signing, hdr.Get(subscriber.HeaderTimestamp), body))
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(body)))
			req.Header = hdr
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("answered %d, want %d", rec.Code, tc.status)
			}
		})
	}
}

// TestDecodeDocumentExamples decodes the example of every message of the
// AsyncAPI document into its generated type and checks nothing is lost:
// re-encoding the typed value gives the example's data back.
func TestDecodeDocumentExamples(t *testing.T) {
	t.Parallel()
	examples := documentExamples(t)
	if len(examples) != len(events.Catalog) {
		t.Fatalf("%d examples for %d events", len(examples), len(events.Catalog))
	}
	for _, info := range events.Catalog {
		t.Run(info.Name, func(t *testing.T) {
			ex, ok := examples[info.Name]
			if !ok {
				t.Fatalf("no example for %s", info.Name)
			}
			raw, _ := json.Marshal(ex.Payload)
			d, err := subscriber.Decode(ex.header(), raw)
			if err != nil {
				t.Fatal(err)
			}
			if reflect.TypeOf(d.Data) != reflect.TypeOf(events.NewData(info.Name)) || d.CompanyID == 0 || d.OccurredAt.IsZero() || d.Attempt < 1 {
				t.Fatalf("decoded %+v", d)
			}
			again, _ := json.Marshal(d.Data)
			var got, want any
			_ = json.Unmarshal(again, &got)
			_ = json.Unmarshal(d.RawData, &want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("typed data loses or changes fields:\n got %s\nwant %s", again, d.RawData)
			}
		})
	}
}

// TestUnknownFieldsAndEvents: receivers ignore what they do not know.
func TestUnknownFieldsAndEvents(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		event string
		body  string
		check func(t *testing.T, d *subscriber.Delivery)
	}{
		{"new envelope and data fields", events.ContactImportCompleted,
			`{"event":"contact.import.completed","delivery_id":"` + delivery + `","company_id":7,"occurred_at":"2025-03-14T11:00:00Z","description":"x","trace":"abc",` +
				`"data":{"import_id":"imp-1","total_contacts":3,"imported_contacts":3,"skipped_contacts":0,"failed_contacts":0,"started_by_user_id":5,"completed_at":"2025-03-14T11:00:00Z","source":"csv"}}`,
			func(t *testing.T, d *subscriber.Delivery) {
				p, ok := d.Data.(*events.ContactImportCompletedPayload)
				if !ok || p.ImportID != "imp-1" || p.TotalContacts != 3 || d.CompanyID != 7 {
					t.Fatalf("decoded %+v %+v", d, d.Data)
				}
			}},
		{"event added to the catalog later", "crm.business.reopened",
			`{"event":"crm.business.reopened","delivery_id":"` + delivery + `","company_id":7,"occurred_at":"2025-03-14T11:00:00+00:00","description":"x","data":{"id":1}}`,
			func(t *testing.T, d *subscriber.Delivery) {
				if d.Data != nil || string(d.RawData) != `{"id":1}` {
					t.Fatalf("decoded %+v", d)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := signed(tc.event, delivery, t0, []byte(tc.body))
			d, err := subscriber.Decode(h, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, d)
			// The Handler acknowledges an event it has no function for.
			r := newReceiver(func() time.Time { return t0 })
			if rec := r.post(http.MethodPost, h, []byte(tc.body)); rec.Code != http.StatusNoContent || r.calls.Load() != 0 {
				t.Fatalf("answered %d with %d calls", rec.Code, r.calls.Load())
			}
		})
	}
}

func TestHandleTypeMismatchPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("Handle with the wrong type did not panic")
		}
	}()
	subscriber.Handle(subscriber.NewHandler(secret), events.OmnichatMessageSent,
		func(context.Context, *subscriber.Delivery, *events.MessageReceivedPayload) error { return nil })
}

// TestGatewayDeliveries: what the gateway's dispatcher builds
// (webhooks.NewDelivery + NewDeliveryRequest, the worker's code path) is
// accepted and decoded, for every event with its document example data.
func TestGatewayDeliveries(t *testing.T) {
	t.Parallel()
	examples := documentExamples(t)
	for _, info := range events.Catalog {
		t.Run(info.Name, func(t *testing.T) {
			ex := examples[info.Name]
			data, _ := json.Marshal(ex.Payload["data"])
			d, err := webhooks.NewDelivery(webhooks.Event{Name: info.Name, CompanyID: 1042, OccurredAt: t0, Data: json.RawMessage(data)},
				"2f6e6bad-ae41-4a14-a6f2-12aee56c5e9b", clock.NewFormatter(time.FixedZone("-03", -3*3600)))
			if err != nil {
				t.Fatal(err)
			}
			req, err := webhooks.NewDeliveryRequest(context.Background(), "http://127.0.0.1/hooks", secret, d, 3, t0.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			var got *subscriber.Delivery
			h := subscriber.NewHandler(secret, subscriber.WithClock(func() time.Time { return t0.Add(time.Minute) }))
			h.On(info.Name, func(_ context.Context, d *subscriber.Delivery) error { got = d; return nil })
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusNoContent || got == nil || got.Attempt != 3 || !got.OccurredAt.Equal(t0) || got.CompanyID != 1042 {
				t.Fatalf("answered %d %q, delivery %+v", rec.Code, rec.Body, got)
			}
		})
	}
}

type example struct {
	Headers map[string]string `yaml:"headers"`
	Payload map[string]any    `yaml:"payload"`
}

func (e example) header() http.Header {
	h := http.Header{}
	for k, v := range e.Headers {
		h.Set(k, v)
	}
	return h
}

// documentExamples returns the first example of each message of the
// AsyncAPI document, by event name.
func documentExamples(t *testing.T) map[string]example {
	t.Helper()
	var doc struct {
		Components struct {
			Messages map[string]struct {
				Name     string    `yaml:"name"`
				Examples []example `yaml:"examples"`
			} `yaml:"messages"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(asyncapi.Document, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]example{}
	for _, m := range doc.Components.Messages {
		if len(m.Examples) > 0 {
			out[m.Name] = m.Examples[0]
		}
	}
	return out
}

// BenchmarkHandler: one omnichat.message.received delivery (the document's
// example) through ServeHTTP: verify, decode, claim, dispatch. Each
// iteration has its own delivery id, so none is a duplicate.
func BenchmarkHandler(b *testing.B) {
	var doc struct {
		Components struct {
			Messages map[string]struct {
				Examples []example `yaml:"examples"`
			} `yaml:"messages"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(asyncapi.Document, &doc); err != nil {
		b.Fatal(err)
	}
	payload := doc.Components.Messages["OmnichatMessageReceived"].Examples[0].Payload
	h := subscriber.NewHandler(secret, subscriber.WithClock(func() time.Time { return t0 }))
	subscriber.Handle(h, events.OmnichatMessageReceived,
		func(context.Context, *subscriber.Delivery, *events.MessageReceivedPayload) error { return nil })
	bodies := make([][]byte, 1024)
	headers := make([]http.Header, len(bodies))
	for i := range bodies {
		id := fmt.Sprintf("26e3d33d-3ce3-4ad2-a821-%012d", i)
		payload["delivery_id"] = id
		bodies[i], _ = json.Marshal(payload)
		headers[i] = signed(events.OmnichatMessageReceived, id, t0, bodies[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%len(bodies) == 0 && i > 0 {
			b.StopTimer()
			h = subscriber.NewHandler(secret, subscriber.WithClock(func() time.Time { return t0 }))
			subscriber.Handle(h, events.OmnichatMessageReceived,
				func(context.Context, *subscriber.Delivery, *events.MessageReceivedPayload) error { return nil })
			b.StartTimer()
		}
		n := i % len(bodies)
		req := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(bodies[n]))
		req.Header = headers[n]
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent {
			b.Fatalf("answered %d %s", rec.Code, rec.Body)
		}
	}
}
