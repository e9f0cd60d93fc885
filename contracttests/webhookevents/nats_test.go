//go:build contract

package webhookevents

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/pact-foundation/pact-go/v2/message"
	msgv4 "github.com/pact-foundation/pact-go/v2/message/v4"
	"github.com/pact-foundation/pact-go/v2/models"
	"github.com/pact-foundation/pact-go/v2/provider"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/contracttests/pactffi"
	"github.com/chatmsg/gateway/contracttests/pactrun"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// The broker pact: one NATS JetStream delivery, as a subscriber of a
// nats:// subscription reads it off its stream. Its own consumer name, so
// it has a pact file of its own beside the HTTP deliveries'; the provider
// is the same dispatcher.
const (
	brokerConsumerName = "broker-subscriber"
	// stateNATSSubscription: a subscription whose url is
	// nats://host/<subject>, signing with the svc scheme under secret.
	stateNATSSubscription = "a NATS subscription with a known signing secret"
	natsSubject           = "gateway.events"
	// metaSubject is the one metadata key that is not a message header:
	// the subject the message was published to. Every other key is a NATS
	// header, except Pact's own contentType.
	metaSubject = "subject"
)

// Breakages of the NATS transport (see pactrun.Breakage).
const (
	// breakNoMsgID publishes without Nats-Msg-Id: the stream can no longer
	// store a retried attempt once. The subscriber library accepts such a
	// message (the header is optional to it), so only the pact sees it.
	breakNoMsgID = "nats-msg-id-missing"
	// breakOtherMsgID sets Nats-Msg-Id to a fresh UUID: the format holds, so
	// only the subscriber library's check sees that it is not the delivery
	// id.
	breakOtherMsgID = "nats-msg-id-other"
)

// TestNATSDeliveryContract runs consumer → provider → broken transports.
func TestNATSDeliveryContract(t *testing.T) {
	pactrun.Steps(t,
		pactrun.Step{Name: "consumer writes pact", Run: testNATSConsumer},
		pactrun.Step{Name: "provider verifies pact", Run: func(t *testing.T) { verifyNATSProvider(t, "") }},
		pactrun.Step{Name: "message without Nats-Msg-Id fails", Run: func(t *testing.T) {
			out := pactrun.ExpectFailure(t, "TestBrokenNATSTransportChild", breakNoMsgID,
				"Expected message metadata 'Nats-Msg-Id' but was missing", "There were 1 pact failures")
			logTail(t, out)
		}},
		pactrun.Step{Name: "Nats-Msg-Id other than the delivery id fails", Run: func(t *testing.T) {
			out := pactrun.ExpectFailure(t, "TestBrokenNATSTransportChild", breakOtherMsgID,
				"fails the subscriber library's NATS check: subscriber: message id is not the delivery id")
			logTail(t, out)
		}},
	)
}

// TestBrokenNATSTransportChild verifies the broker pact against a NATS
// transport with one deliberate regression; only the steps above run it.
func TestBrokenNATSTransportChild(t *testing.T) {
	pactrun.SkipUnlessChild(t)
	verifyNATSProvider(t, pactrun.Breakage())
}

// natsExample is the event of the broker pact: the first example of
// omnichat.message.received, whose data the provider builds with the real
// message payload builder.
func natsExample() (example, error) {
	examples, err := documentExamples()
	if err != nil {
		return example{}, err
	}
	for _, ex := range examples {
		if ex.Event == events.OmnichatMessageReceived {
			return ex, nil
		}
	}
	return example{}, errors.New("the AsyncAPI document has no example of " + events.OmnichatMessageReceived)
}

func natsDescription(ex example) string { return "a NATS delivery of " + ex.Event }

func testNATSConsumer(t *testing.T) {
	pactrun.Remove(t, brokerConsumerName, providerName)
	ex, err := natsExample()
	if err != nil {
		t.Fatal(err)
	}
	// The document's example headers as NATS message headers, signed for
	// real at the example's timestamp, plus the id JetStream deduplicates
	// on. Fixed values all: the pact file comes out the same every run.
	raw, content, signed := received(t, ex)
	header := nats.Header(signed)
	header.Set(jetstream.MsgIDHeader, header.Get(subscriber.HeaderDelivery))
	if header.Get("Content-Type") != "application/json" {
		t.Fatalf("example headers %v disagree with the content type", header)
	}

	pact, err := msgv4.NewAsynchronousPact(msgv4.Config{Consumer: brokerConsumerName, Provider: providerName, PactDir: pactrun.Dir()})
	if err != nil {
		t.Fatal(err)
	}
	b := pact.AddAsynchronousMessage()
	b.GivenWithParameter(models.ProviderState{Name: stateNATSSubscription,
		Parameters: map[string]any{"secret": testSecret, "subject": natsSubject}})
	// NATS headers are metadata: a message pact has no headers of its own.
	// Each header has one value, so a string per key loses nothing.
	u := b.ExpectsToReceive(natsDescription(ex)).
		WithMetadata(map[string]string{
			metaSubject:            natsSubject,
			subscriber.HeaderEvent: ex.Event,
			"User-Agent":           userAgent,
			"Content-Type":         "application/json",
		})
	interaction, err := pactffi.InteractionOf(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct{ key, re string }{
		{subscriber.HeaderDelivery, uuidRE},
		{subscriber.HeaderTimestamp, timestampRE},
		{subscriber.HeaderSignature, signatureRE},
		{subscriber.HeaderAttempt, attemptRE},
		// Equal to X-Svc-Delivery: no Pact rule says so; the subscriber
		// library checks it on both sides.
		{jetstream.MsgIDHeader, uuidRE},
	} {
		m, err := pactffi.Regex(h.re, header.Get(h.key))
		if err != nil {
			t.Fatalf("%s: %v", h.key, err)
		}
		if err := pactffi.WithMetadataMatcher(interaction, h.key, m); err != nil {
			t.Fatal(err)
		}
	}
	err = u.WithJSONContent(content).
		ConsumedBy(func(m msgv4.AsynchronousMessage) error {
			return receiveNATS(ex, &nats.Msg{Subject: natsSubject, Header: header, Data: m.Contents}, raw)
		}).
		Verify(t)
	if err != nil {
		t.Fatal(err)
	}
}

// receiveNATS is the consumer: what a JetStream subscriber does with a
// message, on a clock set to the example's timestamp. The library's broker
// check (signature, and Nats-Msg-Id = X-Svc-Delivery), then its decoding
// into the generated type, which must keep every field.
func receiveNATS(ex example, msg *nats.Msg, signed []byte) error {
	if !bytes.Equal(signed, msg.Data) {
		return fmt.Errorf("the FFI handed over other bytes than the ones signed:\n signed %s\n    got %s", signed, msg.Data)
	}
	unix, err := strconv.ParseInt(msg.Header.Get(subscriber.HeaderTimestamp), 10, 64)
	if err != nil {
		return err
	}
	if err := subscriber.VerifyNATS(testSecret, msg.Header, msg.Data, time.Unix(unix, 0), 0); err != nil {
		return err
	}
	d, err := subscriber.Decode(http.Header(msg.Header), msg.Data)
	if err != nil {
		return err
	}
	if d.Event != ex.Event || d.ID != msg.Header.Get(jetstream.MsgIDHeader) {
		return fmt.Errorf("decoded %s %s from a message with id %s", d.Event, d.ID, msg.Header.Get(jetstream.MsgIDHeader))
	}
	return decodedWhole(ex, d)
}

func verifyNATSProvider(t *testing.T, breakage string) {
	ex, err := natsExample()
	if err != nil {
		t.Fatal(err)
	}
	req := provider.VerifyRequest{
		Provider:  providerName,
		PactFiles: []string{pactrun.File(brokerConsumerName, providerName)},
		StateHandlers: models.StateHandlers{
			stateNATSSubscription: func(_ bool, s models.ProviderState) (models.ProviderStateResponse, error) {
				if _, _, err := natsState([]models.ProviderState{s}); err != nil {
					t.Error(err)
					return nil, err
				}
				return nil, nil
			},
		},
		MessageHandlers:      message.Handlers{natsDescription(ex): natsProducer(t, ex, breakage)},
		DisableColoredOutput: true,
	}
	if err := provider.NewVerifier().VerifyProvider(t, req); err != nil {
		t.Logf("verification error: %v", err)
	}
}

// natsState is the secret and subject of the state's subscription.
func natsState(states []models.ProviderState) (secret, subject string, err error) {
	for _, s := range states {
		if s.Name != stateNATSSubscription {
			continue
		}
		p := pactrun.Params(s)
		secret, _ = p["secret"].(string)
		subject, _ = p["subject"].(string)
		if secret != "" && subject != "" {
			return secret, subject, nil
		}
	}
	return "", "", fmt.Errorf("provider state %q with secret and subject parameters is missing", stateNATSSubscription)
}

// natsProducer answers the message the NATS transport publishes for the
// first attempt of a fresh delivery of ex now: the envelope as Publish
// builds it (NewDelivery) and the message as deliver builds it
// (webhooks.NATSMessage), its headers as metadata.
func natsProducer(t *testing.T, ex example, breakage string) message.Handler {
	return func(states []models.ProviderState) (message.Body, message.Metadata, error) {
		fail := func(err error) (message.Body, message.Metadata, error) {
			t.Error(err)
			return nil, nil, err
		}
		secret, subject, err := natsState(states)
		if err != nil {
			return fail(err)
		}
		now := time.Now()
		// A message event needs no conversation world.
		ev, err := event(nil, ex, now.Add(-time.Second))
		if err != nil {
			return fail(fmt.Errorf("%s: %w", ex.Event, err))
		}
		d, err := webhooks.NewDelivery(ev, uuid.NewString(), clock.NewFormatter(nil))
		if err != nil {
			return fail(fmt.Errorf("%s: NewDelivery: %w", ex.Event, err))
		}
		m := webhooks.NATSMessage(subject, secret, webhooks.SchemeSvc, d, 1, now)
		switch breakage {
		case "":
		case breakNoMsgID:
			m.Header.Del(jetstream.MsgIDHeader)
		case breakOtherMsgID:
			m.Header.Set(jetstream.MsgIDHeader, uuid.NewString())
		default:
			return fail(errors.New("unknown breakage " + breakage))
		}
		// Pact checks formats; the library checks the signature's value and
		// that the message id is the delivery id.
		if err := subscriber.VerifyNATS(secret, m.Header, m.Data, now, 0); err != nil {
			return fail(fmt.Errorf("%s: the NATS message fails the subscriber library's NATS check: %w", ex.Event, err))
		}
		md := message.Metadata{"contentType": m.Header.Get("Content-Type"), metaSubject: m.Subject}
		for k, v := range m.Header {
			// Metadata holds one value per key; a repeated header would
			// lose values here, so it is an error rather than a silent pass.
			if len(v) != 1 {
				return fail(fmt.Errorf("NATS header %s has %d values, the contract knows one", k, len(v)))
			}
			md[k] = v[0]
		}
		// []byte, so the verifier compares exactly the signed bytes.
		return m.Data, md, nil
	}
}
