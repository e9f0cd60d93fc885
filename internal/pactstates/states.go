package pactstates

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/providersim"
)

// The provider states of the committed HTTP pact
// (contracttests/pacts/api-integrator-gateway-api.json); the names are the
// pact's.
const (
	StateCompany          = "a company with an API token"
	StateNoWebhookPerms   = "a company whose token lacks the webhook permissions"
	StateSubscription     = "a company with a webhook subscription"
	StateDeliveredPing    = "a webhook subscription whose receiver got a ping"
	StateFailedPing       = "a webhook subscription whose receiver refused a ping"
	StateConnection       = "a company with a chat-app connection"
	StateLoggedConnection = "a logged-in chat-app connection"
	StateSentMessage      = "a text message sent through a logged-in chat-app connection"
	StateOfficialOpen     = "an official channel whose contact wrote within 24 hours"
	StateOfficialClosed   = "an official channel with an approved template and a contact who never wrote"
)

// Numbers the pact's requests use literally.
const (
	connectionKey = "5511988887777"
	officialKey   = "5511999990001"
	contactKey    = "5511977776666"
	templateName  = "order_update"
)

var states = map[string]func(*scope) map[string]any{
	StateCompany: func(sc *scope) map[string]any {
		sc.company()
		return nil
	},
	StateNoWebhookPerms: func(sc *scope) map[string]any {
		sc.company(auth.PermTemplatesView)
		return nil
	},
	StateSubscription: func(sc *scope) map[string]any {
		sc.company()
		return map[string]any{"subscriptionId": sc.subscribe("https://hooks.example.com/chat-gateway").id}
	},
	StateDeliveredPing: seedDeliveredPing,
	StateFailedPing:    seedFailedPing,
	StateConnection: func(sc *scope) map[string]any {
		sc.company()
		sc.connection()
		return nil
	},
	StateLoggedConnection: func(sc *scope) map[string]any {
		sc.company()
		sc.pair(sc.connection())
		return nil
	},
	StateSentMessage: seedSentMessage,
	StateOfficialOpen: func(sc *scope) map[string]any {
		sc.company()
		o := sc.official()
		o.contactWrites()
		return map[string]any{"channelId": o.ch.ID}
	},
	StateOfficialClosed: func(sc *scope) map[string]any {
		sc.company()
		o := sc.official()
		return map[string]any{"channelId": o.ch.ID, "templateId": o.template()}
	},
}

// company creates the state's own company, a user and a token with perms
// (all when none).
func (sc *scope) company(perms ...string) {
	if len(perms) == 0 {
		perms = auth.AllPermissions
	}
	suffix := randomHex(6)
	res, err := sc.e.deps.Auth.Bootstrap(sc.ctx, CompanyPrefix+suffix, "pact-"+suffix+"@example.test", perms, 0)
	if err != nil {
		sc.fail("create company: %v", err)
	}
	sc.companyID, sc.token = res.CompanyID, res.Token
}

// call sends a request to the public API with the state's token and
// requires status want; it returns the decoded JSON object.
func (sc *scope) call(method, path string, body any, want int) map[string]any {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			sc.fail("encode %s %s: %v", method, path, err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req := httptest.NewRequestWithContext(sc.ctx, method, path, rd)
	req.RemoteAddr = "127.0.0.1:1"
	req.Header.Set("Authorization", "Bearer "+sc.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	sc.e.api.ServeHTTP(rec, req)
	if rec.Code != want {
		sc.fail("seeding: %s %s answered %d, want %d: %s", method, path, rec.Code, want, rec.Body)
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		sc.fail("seeding: %s %s: decode %s: %v", method, path, rec.Body, err)
	}
	return m
}

type subscription struct {
	id     int64
	secret string
}

func (sc *scope) subscribe(url string) subscription {
	m := sc.call(http.MethodPost, "/api/channel-webhooks", map[string]any{"name": "CRM integration", "url": url}, http.StatusCreated)
	data, _ := m["data"].(map[string]any)
	id, _ := data["id"].(float64)
	secret, _ := m["secret"].(string)
	if id == 0 || secret == "" {
		sc.fail("seeding: create subscription answered %v", m)
	}
	return subscription{id: int64(id), secret: secret}
}

// seedDeliveredPing: a subscription whose receiver (the subscriber library
// on 127.0.0.1) accepted a test ping, so the delivery log has an entry.
func seedDeliveredPing(sc *scope) map[string]any {
	sc.company()
	var receiver atomic.Pointer[subscriber.Handler]
	got := make(chan struct{}, 1)
	url := sc.loopback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := receiver.Load(); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	sub := sc.subscribe(url + "/hooks")
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
		sc.fail("seeding: the ping never reached the receiver (is OUTBOUND_ALLOW_CIDRS=127.0.0.1/32 set?)")
	}
	return map[string]any{"subscriptionId": sub.id, "deliveryId": sc.loggedDelivery(sub.id)}
}

// loggedDelivery waits for the first delivery-log entry of subscription id
// (written once the receiver answered) and returns its delivery id.
func (sc *scope) loggedDelivery(id int64) string {
	path := fmt.Sprintf("/api/channel-webhooks/%d/deliveries", id)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		page := sc.call(http.MethodGet, path, nil, http.StatusOK)
		if data, _ := page["data"].([]any); len(data) > 0 {
			if d, _ := data[0].(map[string]any)["delivery_id"].(string); d != "" {
				return d
			}
		}
		if time.Now().After(deadline) {
			sc.fail("seeding: no delivery log entry after the ping")
		}
	}
}

// seedFailedPing: a subscription whose receiver answered a test ping with
// 410, which ends the delivery as failed; the receiver accepts everything
// after that, so recover has something to queue.
func seedFailedPing(sc *scope) map[string]any {
	sc.company()
	var refused atomic.Bool
	url := sc.loopback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refused.CompareAndSwap(false, true) {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	sub := sc.subscribe(url + "/hooks")
	sc.call(http.MethodPost, fmt.Sprintf("/api/channel-webhooks/%d/test", sub.id), nil, http.StatusOK)
	return map[string]any{"subscriptionId": sub.id, "deliveryId": sc.loggedDelivery(sub.id)}
}

// connection creates the unofficial connection connectionKey.
func (sc *scope) connection() int64 {
	m := sc.call(http.MethodPost, "/api/chatapp-create", map[string]any{"name": "Sales team", "key": connectionKey}, http.StatusOK)
	data, _ := m["data"].(map[string]any)
	id, _ := data["id"].(float64)
	if id == 0 {
		sc.fail("seeding: create connection answered %v", m)
	}
	return int64(id)
}

// pair logs the connection in through the simulator connector (needs
// CONNECTOR_DRIVER=simulator), as a phone scanning the QR code would.
func (sc *scope) pair(id int64) {
	sc.call(http.MethodPost, "/api/chatapp-qrcode", map[string]any{"id": id, "os": "Linux", "browser": "Firefox"}, http.StatusOK)
	sc.call(http.MethodPost, fmt.Sprintf("/api/chatapp-simulator/%d/pair", id), nil, http.StatusOK)
}

// seedSentMessage: a logged-in connection and a text it sent (so the
// message has an external id and can be edited and revoked).
func seedSentMessage(sc *scope) map[string]any {
	sc.company()
	conn := sc.connection()
	sc.pair(conn)
	m := sc.call(http.MethodPost, "/api/api-send-message", map[string]any{"platform": "chatapp", "sender_key": connectionKey,
		"contact_key": contactKey, "contact_is_group": false, "text": "Seu pedido saiu para entrega.", "enqueue": false}, http.StatusOK)
	data, _ := m["Data"].(map[string]any)
	ext, _ := data["ExternalID"].(string)
	msg, err := sc.e.deps.Messaging.FindByExternalID(sc.ctx, conn, ext)
	if err != nil {
		sc.fail("seeding: sent message %q: %v", ext, err)
	}
	return map[string]any{"messageId": msg.ID}
}

// officialChannel is an official channel whose provider is providersim on
// 127.0.0.1 in this process.
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
// way `gateway admin` does, with providersim as its provider; the
// simulator posts the contact's messages to this replica's own listener.
func (sc *scope) official() officialChannel {
	sim := providersim.New(providersim.Options{Logger: slog.New(slog.DiscardHandler)})
	url := sc.loopback(sim.Handler())
	o := officialChannel{sc: sc, pnid: "1098" + strconv.FormatInt(time.Now().UnixNano()%1e11, 10),
		ctl: providersim.Control{URL: url, HTTP: &http.Client{Timeout: 30 * time.Second}}}
	ch, err := sc.e.deps.Channels.RegisterOfficial(sc.ctx, channels.OfficialInput{CompanyID: sc.companyID,
		Name: "Official - Store", Key: officialKey, BusinessAccountID: "waba-" + o.pnid, PhoneNumberID: o.pnid,
		AccessToken: simAccessToken, AppSecret: simAppSecret, BaseURL: url})
	if err != nil {
		sc.fail("seeding: register official channel: %v", err)
	}
	o.ch = ch
	sim.AddAccount(providersim.Account{PhoneNumberID: o.pnid, BusinessAccountID: "waba-" + o.pnid, AccessToken: simAccessToken,
		AppSecret: simAppSecret, DisplayPhoneNumber: officialKey, WebhookURL: sc.self + "/provider-webhooks/" + o.pnid})
	return o
}

// contactWrites makes the contact write to the channel through the
// provider's signed webhook, which opens the 24-hour window.
func (o officialChannel) contactWrites() {
	res, err := o.ctl.Inbound(o.sc.ctx, providersim.InboundRequest{PhoneNumberID: o.pnid, From: contactKey, Name: "Ana Souza", Text: "Olá, meu pedido chegou?"})
	if err != nil || res.WebhookStatus != http.StatusOK {
		o.sc.fail("seeding: inbound message: %v %+v", err, res)
	}
}

// template approves templateName at the provider, syncs it (as the
// periodic sync and `gateway admin` do) and returns its id from the API.
func (o officialChannel) template() int64 {
	_, err := o.ctl.SeedTemplates(o.sc.ctx, providersim.TemplatesRequest{BusinessAccountID: "waba-" + o.pnid, Templates: []providersim.Template{{
		Name: templateName, Language: "pt_BR", Category: "UTILITY", ParameterFormat: "POSITIONAL",
		Components: []providersim.TemplateDefComponent{
			{Type: "BODY", Text: "Olá {{1}}, o pedido {{2}} saiu para entrega."},
			{Type: "FOOTER", Text: "Loja Exemplo"},
		}}}})
	if err != nil {
		o.sc.fail("seeding: templates: %v", err)
	}
	if _, err := o.sc.e.deps.Templates.Sync(o.sc.ctx, o.ch); err != nil {
		o.sc.fail("seeding: template sync: %v", err)
	}
	list := o.sc.call(http.MethodGet, "/api/provider-templates/for-channel?company_channel_id="+strconv.FormatInt(o.ch.ID, 10), nil, http.StatusOK)
	ts, _ := list["templates"].([]any)
	for _, t := range ts {
		if t, _ := t.(map[string]any); t["name"] == templateName {
			id, _ := t["id"].(float64)
			return int64(id)
		}
	}
	o.sc.fail("seeding: template %s not listed", templateName)
	return 0
}
