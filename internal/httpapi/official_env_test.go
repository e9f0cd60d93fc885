package httpapi_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/messaging"
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
	clk  *clock.Manual
	sim  *providersim.Server
	ctl  providersim.Control
	ten  apitest.Tenant
	ch   channels.Channel
	pnid string
	sink *eventSink
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
	// sendLease shortens the send queue's lease.
	sendLease time.Duration
	// sendShare is the send queue's share of one sender (default: the
	// production default).
	sendShare int
	// unheard leaves the company without a webhook subscription (e.sink
	// is nil), so no message event is published.
	unheard bool
	// configure edits the app's configuration (the media store).
	configure func(*config.Config)
}

func newOfficialEnv(t testing.TB, db *store.DB, o ofcEnvOptions) *officialEnv {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewManual(time.Now().UTC().Truncate(time.Second))
	h := apitest.Start(t, db, apitest.Options{Now: clk.Now, WorkJobs: !o.noWorkers, Configure: o.configure, MessagingOptions: func(mo *messaging.Options) {
		mo.SendLease = o.sendLease
		mo.SendShare = o.sendShare
	}})
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
	if !o.unheard {
		e.sink = newEventSink(t, http.StatusNoContent)
		e.sink.subscribe(h, e.ten.Token, map[string]any{"name": "all events"})
	}
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
	return e.h.Do(e.sendRequest(body))
}

// sendRequest is the request e.send makes: body over the official
// sender and contact.
func (e *officialEnv) sendRequest(body map[string]any) apitest.Request {
	b := map[string]any{"platform": "ofc_chatapp", "sender_key": ofcSenderKey, "contact_key": ofcContactKey}
	for k, v := range body {
		b[k] = v
	}
	return apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: e.ten.Token, JSON: b}
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
