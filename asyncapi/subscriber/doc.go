// Package subscriber is what a receiver of the gateway's webhooks imports:
// it checks that a delivery comes from the gateway and turns it into the Go
// types generated from the AsyncAPI document (package gen/events).
//
// Every delivery is a POST whose body is the envelope
// {event, delivery_id, company_id, occurred_at, description, data}, signed
// with the subscription's secret:
//
//	X-Svc-Signature = "sha256=" + hex(HMAC_SHA256(secret, X-Svc-Timestamp + "." + raw_body))
//
// Verify checks that signature in constant time over the exact bytes
// received, and that X-Svc-Timestamp is within a tolerance of the
// receiver's clock (DefaultTolerance, 5 minutes). Handler does the whole
// job as an http.Handler: verify, decode (fields it does not know are
// ignored, as the service may add fields at any time), skip deliveries it
// already processed — delivery is at least once and X-Svc-Delivery is the
// idempotency key (Seen; in memory by default) — and dispatch per event
// name.
//
// A subscription created with signature_scheme "standard-webhooks" (an
// extension) is signed as the Standard Webhooks specification defines
// (webhook-id, webhook-timestamp, webhook-signature "v1,<base64>", keyed
// with the base64 decoding of the secret after "whsec_"): VerifyStandard
// checks it, VerifyAny either scheme, and Handler accepts both.
//
// A receiver:
//
//	h := subscriber.NewHandler(os.Getenv("WEBHOOK_SECRET"))
//	subscriber.Handle(h, events.OmnichatMessageReceived,
//		func(ctx context.Context, d *subscriber.Delivery, m *events.MessageReceivedPayload) error {
//			return inbox.Store(ctx, d.ID, m.ContactChannelKey, m.Text) // quick: the service waits 10 s
//		})
//	http.Handle("POST /hooks/gateway", h)
//
// Events about one message or conversation can arrive out of order; each
// carries the record's version (an extension of the API document), and
// Versions keeps, per record, the state with the greatest version seen.
//
// The gateway's contract tests (contracttests/, Pact) use this package as
// the consumer of every event, so what it accepts is what the gateway is
// verified to send.
package subscriber
