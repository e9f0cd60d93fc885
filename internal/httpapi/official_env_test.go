package httpapi_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store"
)

// officialEnv is a gateway with one company and one official channel whose
// provider is providersim over HTTP on 127.0.0.1, plus a webhook
// subscription delivering every event to a receiver that checks each one
// against the AsyncAPI document and its signature.
type officialEnv struct {
	t    testing.TB
	h    *apitest.Harness
	clk  *apitest.Clock
	sim  *providersim.Server
	ctl  providersim.Control
	ten  apitest.Tenant
	ch   channels.Channel
	pnid string
	sink *ofcSink
}

const (
	ofcSenderKey   = "5511999990001"
	ofcContactKey  = "5511977776666"
	ofcAppSecret   = "sim-app-secret"
	ofcAccessToken = "sim-access-token"
)

type ofcEnvOptions struct {
	// noWorkers leaves River's workers stopped (jobs are only inserted).
	noWorkers bool
}

func newOfficialEnv(t testing.TB, db *store.DB, o ofcEnvOptions) *officialEnv {
	t.Helper()
	ctx := context.Background()
	clk := apitest.NewClock(time.Now().UTC().Truncate(time.Second))
	h := apitest.Start(t, db, apitest.Options{Now: clk.Now, WorkJobs: !o.noWorkers})
	sim := providersim.New(providersim.Options{Now: clk.Now, Logger: slog.New(slog.DiscardHandler)})
	simSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(simSrv.Close)
	ctl := providersim.Control{URL: simSrv.URL, HTTP: simSrv.Client()}

	e := &officialEnv{t: t, h: h, clk: clk, sim: sim, ctl: ctl, ten: h.Tenant("Acme")}
	e.pnid = "1098" + ofcDigits(8)
	ch, err := h.App.Channels.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: e.ten.CompanyID, Name: "Official",
		Key: ofcSenderKey, BusinessAccountID: "waba-" + e.pnid, PhoneNumberID: e.pnid, AccessToken: ofcAccessToken,
		AppSecret: ofcAppSecret, BaseURL: simSrv.URL})
	if err != nil {
		t.Fatalf("register official channel: %v", err)
	}
	e.ch = ch
	if err := ctl.AddAccount(ctx, providersim.Account{PhoneNumberID: e.pnid, BusinessAccountID: "waba-" + e.pnid,
		AccessToken: ofcAccessToken, AppSecret: ofcAppSecret, DisplayPhoneNumber: ofcSenderKey,
		WebhookURL: h.Server.URL + "/provider-webhooks/" + e.pnid}); err != nil {
		t.Fatal(err)
	}
	e.sink = newOfcSink(t)
	resp := h.Do(apitest.Request{Method: "POST", Path: "/api/channel-webhooks", Token: e.ten.Token,
		JSON: map[string]any{"name": "all events", "url": e.sink.srv.URL}})
	if resp.Status != http.StatusCreated {
		t.Fatalf("subscribe: %d %s", resp.Status, resp.Body)
	}
	e.sink.secret = resp.Map(t)["secret"].(string)
	return e
}

func ofcDigits(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	out := make([]byte, n)
	for i := range b {
		out[i] = '0' + b[i]%10
	}
	return string(out)
}

// contactWrites makes the contact send text through the simulator; the
// gateway must accept the signed webhook.
func (e *officialEnv) contactWrites(from, text string) string {
	e.t.Helper()
	res, err := e.ctl.Inbound(context.Background(), providersim.InboundRequest{PhoneNumberID: e.pnid, From: from, Name: "Maria Souza", Text: text})
	if err != nil {
		e.t.Fatalf("inbound: %v", err)
	}
	if res.WebhookStatus != http.StatusOK {
		e.t.Fatalf("gateway answered the inbound webhook %d: %s", res.WebhookStatus, res.WebhookBody)
	}
	return res.MessageID
}

// send posts a JSON send with the tenant's token.
func (e *officialEnv) send(body map[string]any) *apitest.Response {
	e.t.Helper()
	b := map[string]any{"platform": "ofc_chatapp", "sender_key": ofcSenderKey, "contact_key": ofcContactKey}
	for k, v := range body {
		b[k] = v
	}
	return e.h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: e.ten.Token, JSON: b})
}

// sent lists what the simulator received from the gateway.
func (e *officialEnv) sent() []providersim.SentMessage {
	e.t.Helper()
	list, err := e.ctl.Messages(context.Background(), e.pnid)
	if err != nil {
		e.t.Fatal(err)
	}
	return list
}

// ofcEvent is one delivery the receiver accepted.
type ofcEvent struct {
	Name string
	Data map[string]any
}

// ofcSink is a subscriber: it verifies the signature and validates each
// delivery's headers and body against the AsyncAPI document.
type ofcSink struct {
	t      testing.TB
	srv    *httptest.Server
	secret string

	mu     sync.Mutex
	events []ofcEvent
	seen   map[string]bool
	errs   []string
	notify chan struct{}
}

func newOfcSink(t testing.TB) *ofcSink {
	s := &ofcSink{t: t, seen: map[string]bool{}, notify: make(chan struct{}, 1)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.errs {
			t.Errorf("webhook delivery: %s", e)
		}
	})
	return s
}

func (s *ofcSink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	event := r.Header.Get("X-Svc-Event")
	var problems []string
	if err := eventschema.ValidateHeaders(event, r.Header); err != nil {
		problems = append(problems, err.Error())
	}
	if err := eventschema.ValidatePayload(event, body); err != nil {
		problems = append(problems, err.Error())
	}
	s.mu.Lock()
	secret := s.secret
	s.mu.Unlock()
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(r.Header.Get("X-Svc-Timestamp") + "."))
	m.Write(body)
	if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); secret != "" && !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Svc-Signature"))) {
		problems = append(problems, "bad signature on "+event)
	}
	var env struct {
		Event string         `json:"event"`
		Data  map[string]any `json:"data"`
	}
	_ = json.Unmarshal(body, &env)
	s.mu.Lock()
	s.errs = append(s.errs, problems...)
	if id := r.Header.Get("X-Svc-Delivery"); !s.seen[id] {
		s.seen[id] = true
		s.events = append(s.events, ofcEvent{Name: env.Event, Data: env.Data})
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// wait returns the first event matching match, failing after a timeout.
func (s *ofcSink) wait(what string, match func(ofcEvent) bool) ofcEvent {
	s.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		for _, ev := range s.events {
			if match(ev) {
				s.mu.Unlock()
				return ev
			}
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			s.mu.Lock()
			defer s.mu.Unlock()
			s.t.Fatalf("no %s event arrived; got %d events: %+v", what, len(s.events), s.events)
		}
	}
}

// count reports the events matching match received so far.
func (s *ofcSink) count(match func(ofcEvent) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ev := range s.events {
		if match(ev) {
			n++
		}
	}
	return n
}

// ofcMessageEvent matches an event of name about the message with that
// external id (or internal id) and status.
func ofcMessageEvent(name string, key string, status int) func(ofcEvent) bool {
	return func(ev ofcEvent) bool {
		if ev.Name != name {
			return false
		}
		if key != "" && ev.Data["external_id"] != key && fmt.Sprint(ev.Data["id"]) != key {
			return false
		}
		return status == 0 || ev.Data["status_id"] == float64(status)
	}
}

// ofcEventually polls cond until it holds.
func ofcEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
