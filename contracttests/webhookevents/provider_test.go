//go:build contract

package webhookevents

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/chatmsg/gateway/internal/msgtype"
	"io"
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pact-foundation/pact-go/v2/message"
	"github.com/pact-foundation/pact-go/v2/models"
	"github.com/pact-foundation/pact-go/v2/provider"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/contracttests/pactrun"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// Breakages: each stands for a regression of the dispatcher, applied to
// what the real code path produced. TestWebhookEventsContract expects each
// to fail verification, naming what broke.
const (
	// breakHeaderName sends the delivery id as X-Svc-Delivery-Id.
	breakHeaderName = "header-name"
	// breakSignatureMaterial signs the body without "timestamp." in front:
	// the signature keeps its format, so only the subscriber's check sees it.
	breakSignatureMaterial = "signature-material"
	// breakEnvelopeField renames occurred_at (and signs the result, so the
	// envelope is the only thing wrong).
	breakEnvelopeField = "envelope-field"
)

// producerCompany is the company of every produced delivery.
const producerCompany = 1042

func verifyProvider(t *testing.T, breakage string) {
	examples, err := documentExamples()
	if err != nil {
		t.Fatal(err)
	}
	variants, err := messageVariants()
	if err != nil {
		t.Fatal(err)
	}
	world := &conversationWorld{dir: t.TempDir()}
	t.Cleanup(world.close)
	handlers := message.Handlers{}
	for _, ex := range append(examples, variants...) {
		handlers[ex.description()] = producer(t, world, ex, breakage)
		if ex.Variant == "" {
			handlers[describe(ex, schemeStandard)] = producer(t, world, ex, breakage)
		}
	}
	files := []string{pactrun.File(consumerName, providerName)}
	if breakage == "" {
		files = append(files, integratorPacts(t)...)
	}
	req := provider.VerifyRequest{
		Provider:  providerName,
		PactFiles: files,
		StateHandlers: models.StateHandlers{
			// The secret travels to the producer with the state; refuse a
			// pact that lost it. The state also holds the conversation the
			// conversation events describe: seeded through the
			// conversations service on the first setup.
			stateSubscription: func(setup bool, s models.ProviderState) (models.ProviderStateResponse, error) {
				if _, err := stateSecret([]models.ProviderState{s}); err != nil {
					t.Error(err)
					return nil, err
				}
				if setup {
					if err := world.setUp(context.Background()); err != nil {
						t.Error(err)
						return nil, err
					}
				}
				return nil, nil
			},
		},
		MessageHandlers:      handlers,
		DisableColoredOutput: true,
	}
	if breakage != "" {
		// One interaction is enough to show the failure, and keeps its
		// report short.
		req.FilterDescription = "^" + regexp.QuoteMeta(description(events.OmnichatMessageReceived)) + "$"
	}
	if err := provider.NewVerifier().VerifyProvider(t, req); err != nil {
		t.Logf("verification error: %v", err)
	}
}

func stateSecret(states []models.ProviderState) (string, error) {
	for _, s := range states {
		if s.Name == stateSubscription {
			if secret, ok := pactrun.Params(s)["secret"].(string); ok && secret != "" {
				return secret, nil
			}
		}
	}
	return "", fmt.Errorf("provider state %q with a secret parameter is missing", stateSubscription)
}

// stateScheme is the signature_scheme parameter of the state (svc when
// absent).
func stateScheme(states []models.ProviderState) string {
	for _, s := range states {
		if scheme, ok := pactrun.Params(s)["signature_scheme"].(string); ok && s.Name == stateSubscription {
			return scheme
		}
	}
	return schemeSvc
}

// producer returns the message handler of one event: the delivery the
// dispatcher would send now, as headers (metadata) and raw body.
func producer(t *testing.T, world *conversationWorld, ex example, breakage string) message.Handler {
	return func(states []models.ProviderState) (message.Body, message.Metadata, error) {
		secret, err := stateSecret(states)
		if err != nil {
			t.Error(err)
			return nil, nil, err
		}
		scheme := stateScheme(states)
		now := time.Now()
		ev, err := event(world, ex, now.Add(-time.Second))
		if err != nil {
			t.Errorf("%s: %v", ex.Event, err)
			return nil, nil, err
		}
		// The real code path: the envelope exactly as Publish builds it, and
		// the request the delivery worker sends (first attempt, fresh id).
		d, err := webhooks.NewDelivery(ev, uuid.NewString(), clock.NewFormatter(nil))
		if err != nil {
			t.Errorf("%s: NewDelivery: %v", ex.Event, err)
			return nil, nil, err
		}
		req, err := webhooks.NewSignedDeliveryRequest(context.Background(), "https://receiver.example/hooks", secret, scheme, d, 1, now)
		if err != nil {
			t.Errorf("%s: NewDeliveryRequest: %v", ex.Event, err)
			return nil, nil, err
		}
		raw, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, nil, err
		}
		header := req.Header
		if breakage != "" {
			if raw, err = breakDelivery(breakage, secret, header, raw); err != nil {
				t.Error(err)
				return nil, nil, err
			}
		}
		// Pact checks the signature's format; the subscriber library checks
		// that it is the HMAC of these very bytes under the state's secret.
		if err := subscriber.VerifyAny(secret, header, raw, now, 0); err != nil {
			err = fmt.Errorf("%s: the dispatcher's delivery fails the subscriber library's check: %w", ex.Event, err)
			t.Error(err)
			return nil, nil, err
		}
		md := message.Metadata{"contentType": header.Get("Content-Type")}
		for k := range header {
			md[k] = header.Get(k)
		}
		// []byte, so the verifier compares exactly the signed bytes.
		return raw, md, nil
	}
}

// event is what a capability publishes: data from the real payload
// builders (messaging's for the two message events; conversations' for the
// three conversation events, over the conversation seeded in the provider
// state), otherwise the document's example data (CRM and contact imports
// have no producer in the gateway yet; ping is the engine's own).
func event(world *conversationWorld, ex example, at time.Time) (webhooks.Event, error) {
	if slices.Contains(conversationEvents, ex.Event) {
		return world.event(ex.Event, at)
	}
	ev := webhooks.Event{Name: ex.Event, CompanyID: producerCompany, OccurredAt: at}
	info, _ := events.Lookup(ex.Event)
	if info.Scope == events.ScopeChannel {
		ch := int64(12)
		ev.CompanyChannelID = &ch
	}
	switch ex.Event {
	case events.OmnichatMessageReceived, events.OmnichatMessageSent:
		svc := messaging.NewService(messaging.Deps{Times: clock.NewFormatter(nil)}, messaging.Options{})
		ch, m, err := messageOf(ex, at)
		if err != nil {
			return ev, err
		}
		if ex.Event == events.OmnichatMessageReceived {
			// A photo: its file's URL as publish mints it for the event.
			m.TypeID, m.Text = msgtype.Image, "Foto do produto que chegou quebrado"
			m.MediaPath, m.MediaContentType, m.MediaSize = "1042/0c1d/file.jpg", "image/jpeg", 48213
			m.MediaLink = &messaging.MediaLink{URL: "https://gateway.example.com" + messaging.MediaURLPath + "dG9rZW4/file.jpg",
				FileName: "file.jpg", ContentType: "image/jpeg", Size: 48213, ExpiresAt: at.Add(messaging.DefaultMediaURLLifetime)}
			ev.Data = events.MessageReceivedPayload(svc.Payload(ch, m))
		} else {
			ev.Data = events.MessageSentPayload(svc.Payload(ch, m))
		}
		// Pact checks types (an integer version); the schema checks values
		// too (a version is at least 1), as the service's own tests do.
		data, err := json.Marshal(ev.Data)
		if err != nil {
			return ev, err
		}
		return ev, eventschema.ValidateData(ex.Event, data)
	}
	data, err := json.Marshal(ex.Payload["data"])
	if err != nil {
		return ev, err
	}
	ev.Data = json.RawMessage(data)
	return ev, nil
}

// messageOf is the message, in the state each example of a message event
// shows, whose payload the producer builds with messaging's builder (the
// one every publish uses): a contact's photo with its file (version 2), a
// contact's text message (version 1), an attendant's
// reply once the provider took it (version 2), a group member's message, a
// message its author revoked, one edited after it was read (version 5),
// and a group send refused for lack of authorization (status 6, version 1).
func messageOf(ex example, at time.Time) (channels.Channel, messaging.Message, error) {
	official := channels.Channel{ID: 12, CompanyID: producerCompany, Key: "5511987650000", Name: "Atendimento", TypeID: channels.OfficialChatapp}
	chatapp := channels.Channel{ID: 14, CompanyID: producerCompany, Key: "5511988887777", Name: "Vendas", TypeID: channels.UnofficialChatapp}
	m := messaging.Message{ID: 884213, UUID: uuid.NewString(), ExternalID: "wamid.HBgNNTUxMTkxMjM0NTY3OBUCABIYIDNB",
		CompanyID: producerCompany, CompanyChannelID: official.ID, ContactChannelID: 3471, ContactKey: "5511912345678",
		ConversationName: "Maria Souza", Text: "Olá! Gostaria de saber o status do meu pedido.", TypeID: msgtype.Text,
		SourceID: messaging.SourceContact, StatusID: messaging.StatusDelivered,
		PlatformAt: at.Add(-time.Second), ReceivedAt: at, CreatedAt: at, UpdatedAt: at, Version: 1}
	onChatapp := func(conversation int64, key, name string, group bool) {
		m.CompanyChannelID, m.ContactChannelID, m.ContactKey, m.ConversationName, m.IsGroup = chatapp.ID, conversation, key, name, group
		m.ExternalID = "3A5F0C8E2B7D4A1F9E6C"
	}
	switch ex.Event + "/" + ex.Variant {
	case events.OmnichatMessageReceived + "/":
		// A photo, published again once its file was fetched: its file's URL
		// as publish mints it for the event.
		m.TypeID, m.Text, m.Version = msgtype.Image, "Foto do produto que chegou quebrado", 2
		m.MediaPath, m.MediaContentType, m.MediaSize = "1042/0c1d/file.jpg", "image/jpeg", 48213
		m.MediaLink = &messaging.MediaLink{URL: "https://gateway.example.com" + messaging.MediaURLPath + "dG9rZW4/file.jpg",
			FileName: "file.jpg", ContentType: "image/jpeg", Size: 48213, ExpiresAt: at.Add(messaging.DefaultMediaURLLifetime)}
		return official, m, nil
	case events.OmnichatMessageReceived + "/textFromContact":
		return official, m, nil
	case events.OmnichatMessageSent + "/":
		// An attendant's reply to that message.
		user, replied := int64(57), m.ID
		m.ID, m.UUID, m.Text = 884219, uuid.NewString(), "Oi, Maria! O pedido saiu para entrega."
		m.SourceID, m.StatusID, m.UserID, m.RepliedMessageID = messaging.SourceAttendant, messaging.StatusSent, &user, &replied
		m.Version = 2
		return official, m, nil
	case events.OmnichatMessageReceived + "/textFromGroupMember":
		onChatapp(3480, "120363025246125486", "Equipe de vendas", true)
		m.SenderKey, m.SenderName, m.Text = "5511912345678", "Maria Souza", "Bom dia a todos!"
		return chatapp, m, nil
	case events.OmnichatMessageReceived + "/revokedByContact":
		onChatapp(3481, "5511912345678", "Maria Souza", false)
		revoked := at.Add(-2 * time.Second)
		m.RevokedAt, m.Version = &revoked, 2
		return chatapp, m, nil
	case events.OmnichatMessageSent + "/editedByAttendant":
		onChatapp(3482, "5511912345678", "Maria Souza", false)
		m.SourceID, m.StatusID, m.Edited, m.Text, m.Version = messaging.SourceAPI, messaging.StatusRead, true, "O pedido sai amanhã.", 5
		return chatapp, m, nil
	case events.OmnichatMessageSent + "/groupSendRefused":
		onChatapp(3480, "120363025246125486", "Equipe de vendas", true)
		m.SourceID, m.StatusID, m.ExternalID, m.Text = messaging.SourceAPI, messaging.StatusUnauthorized, "", "Reunião às 15h."
		return chatapp, m, nil
	}
	return channels.Channel{}, messaging.Message{}, fmt.Errorf("no producer for the %s example %q", ex.Event, ex.Variant)
}

// breakDelivery applies a breakage to a produced delivery.
func breakDelivery(breakage, secret string, header http.Header, raw []byte) ([]byte, error) {
	switch breakage {
	case breakHeaderName:
		header.Set(subscriber.HeaderDelivery+"-Id", header.Get(subscriber.HeaderDelivery))
		header.Del(subscriber.HeaderDelivery)
	case breakSignatureMaterial:
		m := hmac.New(sha256.New, []byte(secret))
		m.Write(raw)
		header.Set(subscriber.HeaderSignature, "sha256="+hex.EncodeToString(m.Sum(nil)))
	case breakEnvelopeField:
		raw = bytes.Replace(raw, []byte(`"occurred_at":`), []byte(`"occurredAt":`), 1)
		header.Set(subscriber.HeaderSignature, subscriber.Sign(secret, header.Get(subscriber.HeaderTimestamp), raw))
	default:
		return nil, errors.New("unknown breakage " + breakage)
	}
	return raw, nil
}
