package httpapi_test

// What several API test files share: a webhook subscriber that checks every
// delivery, waiting for background work, and fixtures.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/eventschema"
)

// waitLimit bounds every wait for background work (River jobs, webhook
// deliveries) in these tests.
const waitLimit = 20 * time.Second

// delivery is one webhook POST an eventSink received.
type delivery struct {
	Name   string // X-Svc-Event
	Header http.Header
	Body   []byte
	// Data is the envelope's data member.
	Data map[string]any
}

// eventSink is a webhook subscriber on 127.0.0.1. It answers every POST
// with its status and checks each delivery the way a subscriber would:
// headers and body against the AsyncAPI document and, once it knows the
// subscription's secret, the signature (computed here, independently of
// the gateway's code). A delivery that fails a check fails the test when
// it ends.
type eventSink struct {
	t      testing.TB
	srv    *httptest.Server
	status int

	mu       sync.Mutex
	secret   string
	received []delivery      // every POST, repeated deliveries included
	events   []delivery      // each delivery id once
	seen     map[string]bool // delivery ids
	problems []string
	notify   chan struct{}
}

func newEventSink(t testing.TB, status int) *eventSink {
	s := &eventSink{t: t, status: status, seen: map[string]bool{}, notify: make(chan struct{}, 1)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, p := range s.problems {
			t.Errorf("webhook delivery: %s", p)
		}
	})
	return s
}

// subscribe creates a subscription (body without its url) that delivers to
// the sink, and keeps its secret to check signatures.
func (s *eventSink) subscribe(h *apitest.Harness, token string, body map[string]any) webhookEnvelope {
	s.t.Helper()
	body["url"] = s.srv.URL + "/hook"
	created := createWebhook(s.t, h, token, body)
	s.mu.Lock()
	s.secret = created.Secret
	s.mu.Unlock()
	return created
}

func (s *eventSink) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	d := delivery{Name: r.Header.Get("X-Svc-Event"), Header: r.Header.Clone(), Body: body}
	var problems []string
	if err != nil {
		problems = append(problems, "read body: "+err.Error())
	}
	if err := eventschema.ValidateHeaders(d.Name, r.Header); err != nil {
		problems = append(problems, err.Error())
	}
	if err := eventschema.ValidatePayload(d.Name, body); err != nil {
		problems = append(problems, fmt.Sprintf("%v\n%s", err, body))
	}
	var env struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		problems = append(problems, "body is not JSON: "+err.Error())
	}
	d.Data = env.Data

	s.mu.Lock()
	if s.secret != "" {
		m := hmac.New(sha256.New, []byte(s.secret))
		m.Write([]byte(r.Header.Get("X-Svc-Timestamp") + "."))
		m.Write(body)
		if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Svc-Signature"))) {
			problems = append(problems, "bad signature on "+d.Name)
		}
	}
	s.problems = append(s.problems, problems...)
	s.received = append(s.received, d)
	if id := r.Header.Get("X-Svc-Delivery"); !s.seen[id] {
		s.seen[id] = true
		s.events = append(s.events, d)
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	w.WriteHeader(s.status)
}

// wait returns the deliveries (each once) that match, as soon as at least
// n do; it fails the test when they do not arrive in time.
func (s *eventSink) wait(what string, n int, match func(delivery) bool) []delivery {
	s.t.Helper()
	deadline := time.After(waitLimit)
	for {
		if got := s.matching(match); len(got) >= n {
			return got
		}
		select {
		case <-s.notify:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			s.mu.Lock()
			defer s.mu.Unlock()
			s.t.Fatalf("fewer than %d %s deliveries arrived; got %d: %+v", n, what, len(s.events), s.events)
		}
	}
}

// first waits for the first delivery that matches.
func (s *eventSink) first(what string, match func(delivery) bool) delivery {
	s.t.Helper()
	return s.wait(what, 1, match)[0]
}

// data waits until n deliveries of event arrived and returns the data of
// every one.
func (s *eventSink) data(event string, n int) []map[string]any {
	s.t.Helper()
	got := s.wait(event, n, named(event))
	out := make([]map[string]any, len(got))
	for i, d := range got {
		out[i] = d.Data
	}
	return out
}

// count reports how many deliveries (each once) that match arrived so far.
func (s *eventSink) count(match func(delivery) bool) int {
	return len(s.matching(match))
}

func (s *eventSink) matching(match func(delivery) bool) []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []delivery
	for _, d := range s.events {
		if match(d) {
			out = append(out, d)
		}
	}
	return out
}

// all returns every POST received so far, repeated deliveries included.
func (s *eventSink) all() []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.received...)
}

// anyDelivery matches every delivery.
func anyDelivery(delivery) bool { return true }

// named matches the deliveries of event.
func named(event string) func(delivery) bool {
	return func(d delivery) bool { return d.Name == event }
}

// messageEvent matches a delivery of name about the message with that
// external id (or internal id; "" for any) and status (0 for any).
func messageEvent(name string, key string, status int) func(delivery) bool {
	return func(d delivery) bool {
		if d.Name != name {
			return false
		}
		if key != "" && d.Data["external_id"] != key && fmt.Sprint(d.Data["id"]) != key {
			return false
		}
		return status == 0 || d.Data["status_id"] == float64(status)
	}
}

// validationAnswer is the body of a validation error: the message and the
// messages of each field.
type validationAnswer struct {
	Message string              `json:"message"`
	Errors  map[string][]string `json:"errors"`
}

// eventually polls cond until it holds, failing the test after waitLimit.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pngImage is a w×h PNG whose first row has distinct colours.
func pngImage(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, 0, color.RGBA{R: uint8(x), A: 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tokenWithout creates a token of the user holding every permission but
// perm, for the 403 of an operation that needs perm.
func tokenWithout(t testing.TB, h *apitest.Harness, userID int64, perm string) string {
	t.Helper()
	var others []string
	for _, p := range auth.AllPermissions {
		if p != perm {
			others = append(others, p)
		}
	}
	token, _, err := h.App.Auth.CreateToken(context.Background(), userID, "without "+perm, others, 0)
	if err != nil {
		t.Fatal(err)
	}
	return token
}
