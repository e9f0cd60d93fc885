//go:build contract

package apicontract

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pact-foundation/pact-go/v2/consumer"
	"github.com/pact-foundation/pact-go/v2/matchers"

	"github.com/chatmsg/gateway/contracttests/pactrun"
	"github.com/chatmsg/gateway/gen/client"
)

// exampleToken is the token the consumer sends. The verifier replays it
// literally; the provider's request filter swaps in the state's token.
const (
	exampleToken = "contract-example-token"
	invalidToken = "not-a-valid-token"
)

// descCreateSubscription is named by the negative test.
const descCreateSubscription = "a request to create a webhook subscription"

// interaction is one request an integrator makes with the generated
// client and the answer it relies on.
type interaction struct {
	desc   string
	state  string
	token  string // exampleToken unless set
	method string
	path   matchers.Matcher
	query  map[string]matchers.Matcher
	body   any // expected request body (JSON, may hold matchers); nil for none
	status int
	resp   any // expected response body with matchers
	// call makes the request with the generated client and checks what it
	// decoded.
	call func(ctx context.Context, c *client.ClientWithResponses) error
}

func testConsumer(t *testing.T) {
	pactrun.Remove(t, consumerName, providerName)
	for _, in := range interactions() {
		t.Run(in.desc, func(t *testing.T) {
			pact, err := consumer.NewV4Pact(consumer.MockHTTPProviderConfig{Consumer: consumerName, Provider: providerName, PactDir: pactrun.Dir()})
			if err != nil {
				t.Fatal(err)
			}
			declare(t, pact, in)
		})
	}
}

func declare(t *testing.T, pact *consumer.V4HTTPMockProvider, in interaction) {
	token := in.token
	if token == "" {
		token = exampleToken
	}
	err := pact.AddInteraction().
		Given(in.state).
		UponReceiving(in.desc).
		WithRequestPathMatcher(consumer.Method(in.method), in.path, func(r *consumer.V4RequestBuilder) {
			r.Header("Authorization", matchers.String("Bearer "+token))
			r.Header("Accept", matchers.String("application/json"))
			for k, v := range in.query {
				r.Query(k, v)
			}
			if in.body != nil {
				r.Header("Content-Type", matchers.String("application/json"))
				r.JSONBody(in.body)
			}
		}).
		WillRespondWith(in.status, func(r *consumer.V4ResponseBuilder) {
			r.Header("Content-Type", matchers.Regex("application/json", `^application/json`))
			r.JSONBody(in.resp)
		}).
		ExecuteTest(t, func(cfg consumer.MockServerConfig) error {
			c, err := client.NewClientWithResponses(fmt.Sprintf("http://%s:%d", cfg.Host, cfg.Port),
				client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
					r.Header.Set("Authorization", "Bearer "+token)
					r.Header.Set("Accept", "application/json")
					return nil
				}))
			if err != nil {
				return err
			}
			return in.call(context.Background(), c)
		})
	if err != nil {
		t.Fatal(err)
	}
}

// answered checks the status the client got and that it decoded the
// typed body of that status.
func answered(got int, body []byte, want int, decoded bool) error {
	if got != want {
		return fmt.Errorf("status %d, want %d: %s", got, want, body)
	}
	if !decoded {
		return fmt.Errorf("the generated client did not decode the %d body: %s", got, body)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// jsonOf is the JSON the generated client sends for v, as the expected
// request body.
func jsonOf(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	return m
}

func interactions() []interaction {
	var list []interaction
	list = append(list, webhookInteractions()...)
	list = append(list, errorInteractions()...)
	list = append(list, connectionInteractions()...)
	list = append(list, officialInteractions()...)
	list = append(list, chatappMessageInteractions()...)
	return list
}

const subscriptionPath = "/api/channel-webhooks/${subscriptionId}"

// exampleDeliveryID is the consumer's delivery id; the provider state
// supplies the real one (${deliveryId}).
const exampleDeliveryID = "0b8f3c2e-5d1a-4f7b-9c6e-2a4d8e1f3b57"

// standardShape is a subscription answer after switching to Standard
// Webhooks signatures.
func standardShape() map[string]any {
	s := subscriptionShape()
	s["enabled"] = matchers.Like(true)
	s["signature_scheme"] = "standard-webhooks"
	return s
}

func subscriptionPathOf(suffix string) matchers.Matcher {
	return pathFromState(subscriptionPath+suffix, "/api/channel-webhooks/21"+suffix)
}

func webhookInteractions() []interaction {
	create := client.WebhookSubscriptionCreate{Name: "CRM integration", Url: "https://hooks.example.com/chat-gateway",
		Events: &client.WebhookEvents{"omnichat.message.received", "omnichat.message.sent"}}
	update := client.WebhookSubscriptionUpdate{Enabled: ptr(false)}
	standard := client.WebhookSubscriptionUpdate{SignatureScheme: ptr(client.WebhookSignatureSchemeStandardWebhooks)}
	// Any time before the provider state's failed ping.
	recoverSince := client.WebhookRecover{Since: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
	return []interaction{
		{
			desc: descCreateSubscription, state: stateCompany,
			method: http.MethodPost, path: matchers.String("/api/channel-webhooks"), body: jsonOf(create),
			status: http.StatusCreated, resp: withSecret(),
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.CreateChannelWebhookWithResponse(ctx, nil, create)
				if err != nil {
					return err
				}
				if err := answered(r.StatusCode(), r.Body, http.StatusCreated, r.JSON201 != nil); err != nil {
					return err
				}
				if r.JSON201.Secret == "" || r.JSON201.Data.Id == 0 || len(r.JSON201.Data.Events) == 0 {
					return fmt.Errorf("created %+v", r.JSON201)
				}
				return nil
			},
		},
		{
			desc: "a request to list webhook subscriptions", state: stateSubscription,
			method: http.MethodGet, path: matchers.String("/api/channel-webhooks"),
			status: http.StatusOK, resp: page(subscriptionShape()),
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.ListChannelWebhooksWithResponse(ctx, nil)
				if err != nil {
					return err
				}
				if err := answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil); err != nil {
					return err
				}
				if len(r.JSON200.Data) != 1 || r.JSON200.Data[0].Name == "" {
					return fmt.Errorf("listed %+v", r.JSON200)
				}
				return nil
			},
		},
		{
			desc: "a request to list the subscribable events", state: stateCompany,
			method: http.MethodGet, path: matchers.String("/api/channel-webhooks-available-events"),
			status: http.StatusOK,
			resp: map[string]any{"success": true, "data": matchers.EachLike(map[string]any{
				"event": matchers.Like("omnichat.message.received"), "description": matchers.Like("A message arrives from a contact")}, 1)},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.ListAvailableWebhookEventsWithResponse(ctx)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil && len(r.JSON200.Data) > 0)
			},
		},
		{
			desc: "a request to disable a webhook subscription", state: stateSubscription,
			method: http.MethodPut, path: subscriptionPathOf(""), body: jsonOf(update),
			status: http.StatusOK,
			resp:   map[string]any{"success": true, "data": subscriptionShape(), "message": matchers.Like("Webhook subscription updated")},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.UpdateChannelWebhookWithResponse(ctx, 21, update)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil)
			},
		},
		{
			desc: "a request to send a test ping to a webhook subscription", state: stateSubscription,
			method: http.MethodPost, path: subscriptionPathOf("/test"),
			status: http.StatusOK,
			resp:   map[string]any{"success": true, "queued": matchers.Integer(1), "message": matchers.Like("Test event queued")},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				// No body: the document's ping.
				r, err := c.TestChannelWebhookWithBodyWithResponse(ctx, 21, nil, "application/json", nil)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil && r.JSON200.Queued == 1)
			},
		},
		{
			desc: "a request to send an event's example to a webhook subscription", state: stateSubscription,
			method: http.MethodPost, path: subscriptionPathOf("/test"),
			body:   jsonOf(client.TestChannelWebhookJSONRequestBody{Event: ptr("crm.business.won")}),
			status: http.StatusOK,
			resp:   map[string]any{"success": true, "queued": matchers.Integer(1), "message": matchers.Like("Test event queued")},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.TestChannelWebhookWithResponse(ctx, 21, nil, client.TestChannelWebhookJSONRequestBody{Event: ptr("crm.business.won")})
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil && r.JSON200.Queued == 1)
			},
		},
		{
			desc: "a request to rotate the secret of a webhook subscription", state: stateSubscription,
			method: http.MethodPost, path: subscriptionPathOf("/rotate-secret"),
			status: http.StatusOK, resp: withSecret(),
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.RotateChannelWebhookSecretWithResponse(ctx, 21)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil && r.JSON200.Secret != "")
			},
		},
		{
			desc: "a request to delete a webhook subscription", state: stateSubscription,
			method: http.MethodDelete, path: subscriptionPathOf(""),
			status: http.StatusOK,
			resp:   map[string]any{"success": true, "message": matchers.Like("Webhook subscription deleted")},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.DeleteChannelWebhookWithResponse(ctx, 21)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil)
			},
		},
		{
			desc: "a request to switch a webhook subscription to Standard Webhooks signatures", state: stateSubscription,
			method: http.MethodPut, path: subscriptionPathOf(""), body: jsonOf(standard),
			status: http.StatusOK,
			resp:   map[string]any{"success": true, "data": standardShape(), "message": matchers.Like("Webhook subscription updated")},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.UpdateChannelWebhookWithResponse(ctx, 21, standard)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK,
					r.JSON200 != nil && r.JSON200.Data.SignatureScheme == client.WebhookSignatureSchemeStandardWebhooks)
			},
		},
		{
			desc: "a request to redeliver a delivered event", state: stateDeliveredPing,
			method: http.MethodPost, path: pathFromState(subscriptionPath+"/deliveries/${deliveryId}/redeliver",
				"/api/channel-webhooks/21/deliveries/"+exampleDeliveryID+"/redeliver"),
			status: http.StatusOK,
			resp:   map[string]any{"success": true, "queued": matchers.Integer(1), "message": matchers.Like("Delivery queued again")},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.RedeliverChannelWebhookDeliveryWithResponse(ctx, 21, uuid.MustParse(exampleDeliveryID), nil)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil && r.JSON200.Queued == 1)
			},
		},
		{
			desc: "a request to recover the failed deliveries of a webhook subscription", state: stateFailedPing,
			method: http.MethodPost, path: subscriptionPathOf("/recover"), body: jsonOf(recoverSince),
			status: http.StatusOK,
			resp:   map[string]any{"success": true, "queued": matchers.Integer(1), "message": matchers.Like("Failed deliveries queued again")},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.RecoverChannelWebhookDeliveriesWithResponse(ctx, 21, nil, recoverSince)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil && r.JSON200.Queued == 1)
			},
		},
		{
			desc: "a request to read the delivery log of a webhook subscription", state: stateDeliveredPing,
			method: http.MethodGet, path: subscriptionPathOf("/deliveries"),
			query:  map[string]matchers.Matcher{"event": matchers.String("ping")},
			status: http.StatusOK, resp: page(deliveryShape()),
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.ListChannelWebhookDeliveriesWithResponse(ctx, 21, &client.ListChannelWebhookDeliveriesParams{Event: ptr("ping")})
				if err != nil {
					return err
				}
				if err := answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil); err != nil {
					return err
				}
				if d := r.JSON200.Data; len(d) != 1 || !d[0].Succeeded || d[0].DeliveredAt == nil {
					return fmt.Errorf("delivery log %+v", r.JSON200)
				}
				return nil
			},
		},
	}
}

// errorInteractions: the error shapes integrators handle.
func errorInteractions() []interaction {
	noName := client.WebhookSubscriptionCreate{Name: "", Url: "https://hooks.example.com/chat-gateway"}
	enable := client.WebhookSubscriptionUpdate{Enabled: ptr(true)}
	return []interaction{
		{
			desc: "a request with an invalid token", state: stateCompany, token: invalidToken,
			method: http.MethodGet, path: matchers.String("/api/channel-webhooks"),
			status: http.StatusUnauthorized, resp: map[string]any{"message": "Unauthenticated."},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.ListChannelWebhooksWithResponse(ctx, nil)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusUnauthorized, r.JSON401 != nil && r.JSON401.Message == "Unauthenticated.")
			},
		},
		{
			desc: "a request to list webhook subscriptions without the permission", state: stateNoWebhookPerms,
			method: http.MethodGet, path: matchers.String("/api/channel-webhooks"),
			status: http.StatusForbidden, resp: map[string]any{"message": matchers.Like("This action is unauthorized.")},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.ListChannelWebhooksWithResponse(ctx, nil)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusForbidden, r.JSON403 != nil && r.JSON403.Message != "")
			},
		},
		{
			desc: "a request to create a webhook subscription without a name", state: stateCompany,
			method: http.MethodPost, path: matchers.String("/api/channel-webhooks"), body: jsonOf(noName),
			status: 422,
			resp: map[string]any{"message": matchers.Like("Name is required"),
				"errors": map[string]any{"name": matchers.EachLike(matchers.Like("Name is required"), 1)}},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.CreateChannelWebhookWithResponse(ctx, nil, noName)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, 422, r.JSON422 != nil && len(r.JSON422.Errors["name"]) > 0)
			},
		},
		{
			desc: "a request to update a webhook subscription that does not exist", state: stateCompany,
			method: http.MethodPut, path: matchers.String("/api/channel-webhooks/999999"), body: jsonOf(enable),
			status: 509, resp: map[string]any{"success": false, "message": matchers.Like("Webhook not found.")},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.UpdateChannelWebhookWithResponse(ctx, 999999, enable)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, 509, r.JSON509 != nil && r.JSON509.Message != "")
			},
		},
	}
}

func connectionInteractions() []interaction {
	create := client.ChatappCreateRequest{Name: "Sales team", Key: connectionKey}
	return []interaction{
		{
			desc: "a request to list chat-app connections", state: stateConnection,
			method: http.MethodGet, path: matchers.String("/api/chatapps"),
			status: http.StatusOK, resp: page(chatappShape()),
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.ListChatappsWithResponse(ctx, nil)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil && len(r.JSON200.Data) == 1)
			},
		},
		{
			desc: "a request to create a chat-app connection", state: stateCompany,
			method: http.MethodPost, path: matchers.String("/api/chatapp-create"), body: jsonOf(create),
			status: http.StatusOK,
			resp:   map[string]any{"success": true, "data": chatappShape(), "message": matchers.Like("Connection created")},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.ChatappCreateWithResponse(ctx, nil, create)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil && r.JSON200.Data.Id != 0)
			},
		},
	}
}

// officialInteractions: company channels, conversations with their window,
// templates, and sends on the official channel.
func officialInteractions() []interaction {
	official := client.ChannelTypeId(3)
	with := []client.ContactChannelRelation{"contact", "providerOpenedWindow"}
	template := func(enqueue bool) client.SendMessageRequest {
		return client.SendMessageRequest{Platform: "ofc_chatapp", SenderKey: officialKey, ContactKey: contactKey,
			ProviderTemplateId: ptr(client.SendProviderTemplateId(31)), VariableValues: &client.SendVariableValues{"Ana", "#48213"},
			Enqueue: ptr(client.SendEnqueue(enqueue))}
	}
	// The template id comes from the provider state.
	templateBody := func(enqueue bool) map[string]any {
		b := jsonOf(template(enqueue))
		b["provider_template_id"] = fromState("${templateId}", 31)
		return b
	}
	text := func(enqueue bool) client.SendMessageRequest {
		return client.SendMessageRequest{Platform: "ofc_chatapp", SenderKey: officialKey, ContactKey: contactKey,
			Text: ptr(client.SendText("Seu pedido saiu para entrega.")), Enqueue: ptr(client.SendEnqueue(enqueue))}
	}
	return []interaction{
		{
			desc: "a request to list the official channels of the company", state: stateOfficialOpen,
			method: http.MethodGet, path: matchers.String("/api/company-channels"),
			query:  map[string]matchers.Matcher{"channel_type_id": matchers.String("3")},
			status: http.StatusOK, resp: page(officialChannelShape()),
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.ListCompanyChannelsWithResponse(ctx, &client.ListCompanyChannelsParams{ChannelTypeId: &official})
				if err != nil {
					return err
				}
				if err := answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil); err != nil {
					return err
				}
				if d := r.JSON200.Data; len(d) != 1 || d[0].ProviderAccount == nil {
					return fmt.Errorf("channels %+v", d)
				}
				return nil
			},
		},
		{
			desc: "a request to list conversations with their contact and official window", state: stateOfficialOpen,
			method: http.MethodGet, path: matchers.String("/api/contact-channels"),
			// A regex, not a plain string: the FFI would parse a literal that
			// looks like JSON as a JSON array of values.
			query:  map[string]matchers.Matcher{"with": matchers.Regex(`["contact","providerOpenedWindow"]`, `^\["contact","providerOpenedWindow"\]$`)},
			status: http.StatusOK, resp: page(conversationShape()),
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.ListContactChannelsWithResponse(ctx, &client.ListContactChannelsParams{With: &with})
				if err != nil {
					return err
				}
				if err := answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil); err != nil {
					return err
				}
				d := r.JSON200.Data
				if len(d) != 1 || d[0].Contact == nil || d[0].ProviderOpenedWindow == nil || !d[0].ProviderOpenedWindow.Open ||
					d[0].ProviderOpenedWindow.ExpiresAt == nil {
					return fmt.Errorf("conversations %s", r.Body)
				}
				return nil
			},
		},
		{
			desc: "a request to list the templates of an official channel", state: stateOfficialClosed,
			method: http.MethodGet, path: matchers.String("/api/provider-templates/for-channel"),
			query:  map[string]matchers.Matcher{"company_channel_id": matchers.FromProviderState("${channelId}", "12")},
			status: http.StatusOK,
			resp:   map[string]any{"official": true, "templates": matchers.EachLike(templateShape(), 1)},
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.ListProviderTemplatesForChannelWithResponse(ctx, &client.ListProviderTemplatesForChannelParams{CompanyChannelId: 12})
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil && len(r.JSON200.Templates) == 1)
			},
		},
		sendInteraction("a request to send a template synchronously on the official channel", stateOfficialClosed,
			template(false), templateBody(false), http.StatusOK, sendSync("wamid.HBgNNTUxMTk3Nzc3NjY2NhUCABEYEjQ1QzU2RDc4OUFCQ0RFRjAxAA==")),
		sendInteraction("a request to queue a template on the official channel", stateOfficialClosed,
			template(true), templateBody(true), http.StatusOK, sendQueued()),
		sendInteraction("a request to send text synchronously on the official channel", stateOfficialOpen,
			text(false), nil, http.StatusOK, sendSync("wamid.HBgNNTUxMTk3Nzc3NjY2NhUCABEYEjQ1QzU2RDc4OUFCQ0RFRjAxAA==")),
		sendInteraction("a request to queue text on the official channel", stateOfficialOpen,
			text(true), nil, http.StatusOK, sendQueued()),
		sendInteraction("a request to send text on the official channel while the window is closed", stateOfficialClosed,
			text(false), nil, http.StatusConflict,
			map[string]any{"status": false, "message": matchers.Like("A janela de atendimento de 24 horas está fechada. Envie um template para iniciar a conversa.")}),
	}
}

// sendInteraction is one POST /api/api-send-message. body is the expected
// request body when it differs from req's JSON (provider-state ids).
func sendInteraction(desc, state string, req client.SendMessageRequest, body map[string]any, status int, resp map[string]any) interaction {
	if body == nil {
		body = jsonOf(req)
	}
	return interaction{
		desc: desc, state: state,
		method: http.MethodPost, path: matchers.String("/api/api-send-message"), body: body,
		status: status, resp: resp,
		call: func(ctx context.Context, c *client.ClientWithResponses) error {
			r, err := c.SendMessageWithResponse(ctx, nil, req)
			if err != nil {
				return err
			}
			switch status {
			case http.StatusConflict:
				return answered(r.StatusCode(), r.Body, status, r.JSON409 != nil && !bool(r.JSON409.Status))
			case 509:
				return answered(r.StatusCode(), r.Body, status, r.JSON509 != nil && r.JSON509.Message != "")
			}
			if err := answered(r.StatusCode(), r.Body, status, r.JSON200 != nil); err != nil {
				return err
			}
			if _, queued := resp["message"]; queued {
				q, err := r.JSON200.AsSendQueued()
				if err != nil || q.Message == "" {
					return fmt.Errorf("queued answer %s: %v", r.Body, err)
				}
				return nil
			}
			s, err := r.JSON200.AsSendAcceptedSync()
			if err != nil || !s.Status || s.Data.ExternalID == "" {
				return fmt.Errorf("synchronous answer %s: %v", r.Body, err)
			}
			return nil
		},
	}
}

// chatappMessageInteractions: sends, edit and revoke on an unofficial
// connection, and the 509 send error.
func chatappMessageInteractions() []interaction {
	text := func(enqueue *bool) client.SendMessageRequest {
		r := client.SendMessageRequest{Platform: "chatapp", SenderKey: connectionKey, ContactKey: contactKey,
			ContactIsGroup: ptr(client.SendContactIsGroup(false)), Text: ptr(client.SendText("Seu pedido saiu para entrega."))}
		if enqueue != nil {
			r.Enqueue = ptr(client.SendEnqueue(*enqueue))
		}
		return r
	}
	templateOnChatapp := client.SendMessageRequest{Platform: "chatapp", SenderKey: connectionKey, ContactKey: contactKey,
		ContactIsGroup: ptr(client.SendContactIsGroup(false)), ProviderTemplateId: ptr(client.SendProviderTemplateId(31))}
	edit := client.EditMessageRequest{Id: 90412, Text: "Seu pedido saiu para entrega (rastreio BR123456789)."}
	editBody := jsonOf(edit)
	editBody["id"] = fromState("${messageId}", 90412)
	revoke := client.RevokeMessagesRequest{Ids: []int{90412}, Scope: ptr(client.RevokeMessagesRequestScope("all"))}
	revokeBody := jsonOf(revoke)
	revokeBody["ids"] = []any{fromState("${messageId}", 90412)}
	return []interaction{
		// enqueue omitted: the chatapp default is to queue.
		sendInteraction("a request to queue text on a chat-app connection", stateLoggedConnection,
			text(nil), nil, http.StatusOK, sendQueued()),
		sendInteraction("a request to send text synchronously on a chat-app connection", stateLoggedConnection,
			text(ptr(false)), nil, http.StatusOK, sendSync("3EB0C431C26A1916F5A2")),
		sendInteraction("a request to send a template on a chat-app connection", stateLoggedConnection,
			templateOnChatapp, nil, 509, map[string]any{"message": matchers.Like("provider_template_id is only accepted with platform ofc_chatapp")}),
		{
			desc: "a request to edit a sent message", state: stateSentMessage,
			method: http.MethodPost, path: matchers.String("/api/edit-message"), body: editBody,
			status: http.StatusOK, resp: editedShape(),
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.EditMessageWithResponse(ctx, edit)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil && r.JSON200.Edited && r.JSON200.Text == edit.Text)
			},
		},
		{
			desc: "a request to revoke a sent message for everyone", state: stateSentMessage,
			method: http.MethodPost, path: matchers.String("/api/revoke-messages"), body: revokeBody,
			status: http.StatusOK,
			resp:   matchers.EachLike(map[string]any{"Status": matchers.Like(true), "Message": matchers.Like("Message revoked for everyone")}, 1),
			call: func(ctx context.Context, c *client.ClientWithResponses) error {
				r, err := c.RevokeMessagesWithResponse(ctx, revoke)
				if err != nil {
					return err
				}
				return answered(r.StatusCode(), r.Body, http.StatusOK, r.JSON200 != nil && len(*r.JSON200) == 1)
			},
		},
	}
}
