//go:build contract

// Package webhookevents is the message pact between webhook subscribers and
// the gateway's dispatcher.
//
// Consumer: the subscriber library (asyncapi/subscriber). One interaction
// per event of the AsyncAPI catalog (the 12 subscribable events and ping):
// the headers as metadata with matchers, the envelope and the event's data
// with type and format matchers derived from the document's own example
// and the Go types generated from it. The consumer signs the example with a
// known secret at the example's timestamp and hands it to the library's
// Handler, which verifies the signature for real and decodes it.
//
// Provider: the real dispatcher code path, webhooks.NewDelivery (the
// envelope exactly as Publish builds it) and webhooks.NewDeliveryRequest
// (the request the delivery worker sends), signed with the provider state's
// secret; message data from the real payload builders where the gateway
// produces the event (messaging.Service.Payload for the two message events;
// the conversations service's CreatedPayload, AssignedPayload and
// ClosedPayload for the three conversation events, over a conversation the
// provider state seeds through Ensure and UpdateContactChannel) and from
// the document's examples otherwise. Each produced delivery is checked with the
// subscriber library before Pact compares it: Pact checks the signature's
// format, the library checks its value.
//
// A second pact (nats_test.go, consumer broker-subscriber) covers one NATS
// JetStream delivery: its headers as message metadata, checked with
// subscriber.VerifyNATS by the consumer and on what webhooks.NATSMessage,
// the NATS transport's own constructor, produces.
package webhookevents

import (
	"testing"

	"github.com/chatmsg/gateway/contracttests/pactrun"
)

const (
	consumerName = "webhook-subscriber"
	providerName = "gateway-webhooks"
)

// TestWebhookEventsContract runs consumer → provider → broken providers,
// in that order (see pactrun.Steps).
func TestWebhookEventsContract(t *testing.T) {
	pactrun.Steps(t,
		pactrun.Step{Name: "consumer writes pact", Run: testConsumer},
		pactrun.Step{Name: "provider verifies pact", Run: func(t *testing.T) { verifyProvider(t, "") }},
		pactrun.Step{Name: "renamed header fails", Run: func(t *testing.T) {
			out := pactrun.ExpectFailure(t, "TestBrokenDispatcherChild", breakHeaderName,
				"Expected message metadata 'X-Svc-Delivery' but was missing", "There were 1 pact failures")
			logTail(t, out)
		}},
		pactrun.Step{Name: "signature over the body only fails", Run: func(t *testing.T) {
			out := pactrun.ExpectFailure(t, "TestBrokenDispatcherChild", breakSignatureMaterial,
				"fails the subscriber library's check: subscriber: signature does not match")
			logTail(t, out)
		}},
		pactrun.Step{Name: "renamed envelope field fails", Run: func(t *testing.T) {
			out := pactrun.ExpectFailure(t, "TestBrokenDispatcherChild", breakEnvelopeField,
				"Actual map is missing the following keys: occurred_at", "There were 1 pact failures")
			logTail(t, out)
		}},
	)
}

// TestBrokenDispatcherChild verifies the pact against a dispatcher with
// one deliberate regression (pactrun.Breakage); only the steps above run
// it, in a child process, and expect it to fail.
func TestBrokenDispatcherChild(t *testing.T) {
	pactrun.SkipUnlessChild(t)
	verifyProvider(t, pactrun.Breakage())
}

func logTail(t *testing.T, out string) {
	t.Helper()
	if testing.Verbose() {
		t.Logf("the broken dispatcher was rejected; verifier output:\n%s", out)
	}
}
