//go:build contract

package apicontract

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/pact-foundation/pact-go/v2/models"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/providersim"
)

// Provider states. Each interaction names one; the provider builds it on
// a fresh database through the public API (and, where the API has no
// operation for it, the services the admin commands use), so a state is
// exactly what the interaction needs and nothing else.
const (
	stateCompany          = "a company with an API token"
	stateNoWebhookPerms   = "a company whose token lacks the webhook permissions"
	stateSubscription     = "a company with a webhook subscription"
	stateDeliveredPing    = "a webhook subscription whose receiver got a ping"
	stateFailedPing       = "a webhook subscription whose receiver refused a ping"
	stateConnection       = "a company with a chat-app connection"
	stateLoggedConnection = "a logged-in chat-app connection"
	stateSentMessage      = "a text message sent through a logged-in chat-app connection"
	stateOfficialOpen     = "an official channel whose contact wrote within 24 hours"
	stateOfficialClosed   = "an official channel with an approved template and a contact who never wrote"
)

// Numbers the consumer's requests use literally.
const (
	connectionKey = "5511988887777"
	officialKey   = "5511999990001"
	contactKey    = "5511977776666"
	templateName  = "order_update"
)

// state builds one provider state. seed fails through sc.tb.Fatal and
// returns the values the interaction's provider-state generators use.
type state struct {
	// workJobs starts River's workers (the delivered-ping state needs the
	// delivery worker); other states only insert jobs.
	workJobs bool
	seed     func(sc *scope) models.ProviderStateResponse
}

var states = map[string]state{
	stateCompany: {seed: func(sc *scope) models.ProviderStateResponse {
		sc.company()
		return nil
	}},
	stateNoWebhookPerms: {seed: func(sc *scope) models.ProviderStateResponse {
		sc.company(auth.PermTemplatesView)
		return nil
	}},
	stateSubscription: {seed: func(sc *scope) models.ProviderStateResponse {
		sc.company()
		id := sc.subscribe("https://hooks.example.com/chat-gateway").id
		return models.ProviderStateResponse{"subscriptionId": id}
	}},
	stateDeliveredPing: {workJobs: true, seed: seedDeliveredPing},
	stateFailedPing:    {workJobs: true, seed: seedFailedPing},
	stateConnection: {seed: func(sc *scope) models.ProviderStateResponse {
		sc.company()
		sc.connection()
		return nil
	}},
	stateLoggedConnection: {seed: func(sc *scope) models.ProviderStateResponse {
		sc.company()
		sc.pair(sc.connection())
		return nil
	}},
	stateSentMessage: {seed: seedSentMessage},
	stateOfficialOpen: {seed: func(sc *scope) models.ProviderStateResponse {
		sc.company()
		o := sc.official()
		o.contactWrites()
		return models.ProviderStateResponse{"channelId": o.ch.ID}
	}},
	stateOfficialClosed: {seed: func(sc *scope) models.ProviderStateResponse {
		sc.company()
		o := sc.official()
		return models.ProviderStateResponse{"channelId": o.ch.ID, "templateId": o.template()}
	}},
}

func (sc *scope) company(perms ...string) {
	ten := sc.h.Tenant("Acme", perms...)
	sc.token = ten.Token
	sc.companyID = ten.CompanyID
}

// call sends a request with the state's token and requires status want;
// it returns the decoded JSON object.
func (sc *scope) call(method, path string, body any, want int) map[string]any {
	sc.tb.Helper()
	resp := sc.h.Do(apitest.Request{Method: method, Path: path, Token: sc.token, JSON: body})
	if resp.Status != want {
		sc.tb.Fatalf("seeding: %s %s answered %d, want %d: %s", method, path, resp.Status, want, resp.Body)
	}
	return resp.Map(sc.tb)
}

type subscription struct {
	id     int64
	secret string
}

func (sc *scope) subscribe(url string) subscription {
	m := sc.call(http.MethodPost, "/api/channel-webhooks", map[string]any{"name": "CRM integration", "url": url}, http.StatusCreated)
	return subscription{id: int64(m["data"].(map[string]any)["id"].(float64)), secret: m["secret"].(string)}
}

// seedDeliveredPing: a subscription whose receiver (the subscriber library
// on 127.0.0.1) accepted a test ping, so the delivery log has an entry.
func seedDeliveredPing(sc *scope) models.ProviderStateResponse {
	sc.company()
	var receiver atomic.Pointer[subscriber.Handler]
	got := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := receiver.Load(); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	sc.tb.Cleanup(srv.Close)
	sub := sc.subscribe(srv.URL + "/hooks")
	h := subscriber.NewHandler(sub.secret)
	h.On(events.Ping, func(context.Context, *subscriber.Delivery) error {
		select {
		case got <- struct{}{}:
		default:
		}
		return nil
	})
	receiver.Store(h)
	sc.call(http.MethodPost, fmt.Sprintf("/api/channel-webhooks/%d/test", sub.id), nil, http.StatusOK)
	select {
	case <-got:
	case <-time.After(20 * time.Second):
		sc.tb.Fatalf("seeding: the ping never reached the receiver")
	}
	return models.ProviderStateResponse{"subscriptionId": sub.id, "deliveryId": sc.loggedDelivery(sub.id)}
}

// loggedDelivery waits for the first delivery-log entry of subscription id
// (written after the receiver answered, with the end of the delivery, so
// the delivery can be redelivered from then on) and returns its delivery id.
func (sc *scope) loggedDelivery(id int64) string {
	path := fmt.Sprintf("/api/channel-webhooks/%d/deliveries", id)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		page := sc.call(http.MethodGet, path, nil, http.StatusOK)
		if data, _ := page["data"].([]any); len(data) > 0 {
			return data[0].(map[string]any)["delivery_id"].(string)
		}
		if time.Now().After(deadline) {
			sc.tb.Fatalf("seeding: no delivery log entry after the ping")
		}
	}
}

// seedFailedPing: a subscription whose receiver answered a test ping with
// 410, which ends the delivery as failed (a 4xx other than 408/429 is not
// retried); the receiver accepts everything after that, so recover has
// something to queue.
func seedFailedPing(sc *scope) models.ProviderStateResponse {
	sc.company()
	var refused atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refused.CompareAndSwap(false, true) {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	sc.tb.Cleanup(srv.Close)
	sub := sc.subscribe(srv.URL + "/hooks")
	sc.call(http.MethodPost, fmt.Sprintf("/api/channel-webhooks/%d/test", sub.id), nil, http.StatusOK)
	return models.ProviderStateResponse{"subscriptionId": sub.id, "deliveryId": sc.loggedDelivery(sub.id)}
}

// connection creates the unofficial connection connectionKey.
func (sc *scope) connection() int64 {
	m := sc.call(http.MethodPost, "/api/chatapp-create", map[string]any{"name": "Sales team", "key": connectionKey}, http.StatusOK)
	return int64(m["data"].(map[string]any)["id"].(float64))
}

// pair logs the connection in through the simulator connector, as a phone
// scanning the QR code would.
func (sc *scope) pair(id int64) {
	sc.call(http.MethodPost, "/api/chatapp-qrcode", map[string]any{"id": id, "os": "Linux", "browser": "Firefox"}, http.StatusOK)
	sc.call(http.MethodPost, fmt.Sprintf("/api/chatapp-simulator/%d/pair", id), nil, http.StatusOK)
}

// seedSentMessage: a logged-in connection and a text it sent (so the
// message has an external id and can be edited and revoked).
func seedSentMessage(sc *scope) models.ProviderStateResponse {
	sc.company()
	conn := sc.connection()
	sc.pair(conn)
	m := sc.call(http.MethodPost, "/api/api-send-message", map[string]any{"platform": "chatapp", "sender_key": connectionKey,
		"contact_key": contactKey, "contact_is_group": false, "text": "Seu pedido saiu para entrega.", "enqueue": false}, http.StatusOK)
	ext, _ := m["Data"].(map[string]any)["ExternalID"].(string)
	msg, err := sc.h.App.Messaging.FindByExternalID(context.Background(), conn, ext)
	if err != nil {
		sc.tb.Fatalf("seeding: sent message %q: %v", ext, err)
	}
	return models.ProviderStateResponse{"messageId": msg.ID}
}

// officialChannel is an official channel whose provider is providersim on
// 127.0.0.1 (the real HTTP client talks to it).
type officialChannel struct {
	sc   *scope
	ch   channels.Channel
	pnid string
	ctl  providersim.Control
}

const (
	simAccessToken = "sim-access-token"
	simAppSecret   = "sim-app-secret"
)

// official registers officialKey as the company's official channel, the
// way `gateway admin` does, with providersim as its provider.
func (sc *scope) official() officialChannel {
	sim := providersim.New(providersim.Options{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(sim.Handler())
	sc.tb.Cleanup(srv.Close)
	o := officialChannel{sc: sc, pnid: "109876543210987", ctl: providersim.Control{URL: srv.URL, HTTP: srv.Client()}}
	ch, err := sc.h.App.Channels.RegisterOfficial(context.Background(), channels.OfficialInput{CompanyID: sc.companyID,
		Name: "Official - Store", Key: officialKey, BusinessAccountID: "waba-" + o.pnid, PhoneNumberID: o.pnid,
		AccessToken: simAccessToken, AppSecret: simAppSecret, BaseURL: srv.URL})
	if err != nil {
		sc.tb.Fatalf("seeding: register official channel: %v", err)
	}
	o.ch = ch
	sim.AddAccount(providersim.Account{PhoneNumberID: o.pnid, BusinessAccountID: "waba-" + o.pnid, AccessToken: simAccessToken,
		AppSecret: simAppSecret, DisplayPhoneNumber: officialKey, WebhookURL: sc.h.Server.URL + "/provider-webhooks/" + o.pnid})
	return o
}

// contactWrites makes the contact write to the channel through the
// provider's signed webhook, which opens the 24-hour window.
func (o officialChannel) contactWrites() {
	res, err := o.ctl.Inbound(context.Background(), providersim.InboundRequest{PhoneNumberID: o.pnid, From: contactKey, Name: "Ana Souza", Text: "Olá, meu pedido chegou?"})
	if err != nil || res.WebhookStatus != http.StatusOK {
		o.sc.tb.Fatalf("seeding: inbound message: %v %+v", err, res)
	}
}

// template approves templateName at the provider, syncs it (as the
// periodic sync and `gateway admin` do) and returns its id from the API.
func (o officialChannel) template() int64 {
	ctx := context.Background()
	_, err := o.ctl.SeedTemplates(ctx, providersim.TemplatesRequest{BusinessAccountID: "waba-" + o.pnid, Templates: []providersim.Template{{
		Name: templateName, Language: "pt_BR", Category: "UTILITY", ParameterFormat: "POSITIONAL",
		Components: []providersim.TemplateDefComponent{
			{Type: "BODY", Text: "Olá {{1}}, o pedido {{2}} saiu para entrega."},
			{Type: "FOOTER", Text: "Loja Exemplo"},
		}}}})
	if err != nil {
		o.sc.tb.Fatalf("seeding: templates: %v", err)
	}
	if _, err := o.sc.h.App.Templates.Sync(ctx, o.ch); err != nil {
		o.sc.tb.Fatalf("seeding: template sync: %v", err)
	}
	list := o.sc.call(http.MethodGet, "/api/provider-templates/for-channel?company_channel_id="+strconv.FormatInt(o.ch.ID, 10), nil, http.StatusOK)
	for _, t := range list["templates"].([]any) {
		if t := t.(map[string]any); t["name"] == templateName {
			return int64(t["id"].(float64))
		}
	}
	o.sc.tb.Fatalf("seeding: template %s not listed", templateName)
	return 0
}
