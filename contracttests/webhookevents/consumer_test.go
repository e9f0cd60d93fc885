//go:build contract

package webhookevents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"testing"
	"time"

	msgv4 "github.com/pact-foundation/pact-go/v2/message/v4"
	"github.com/pact-foundation/pact-go/v2/models"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/contracttests/pactffi"
	"github.com/chatmsg/gateway/contracttests/pactrun"
	"github.com/chatmsg/gateway/gen/events"
)

// Every interaction is given this provider state: the subscription the
// delivery goes to signs with testSecret. The consumer signs its examples
// with it; the provider signs what it produces with it.
const (
	stateSubscription = "a subscription with a known signing secret"
	testSecret        = "whsec_c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
	userAgent         = "Svc-Webhooks/1.0"
)

func testConsumer(t *testing.T) {
	pactrun.Remove(t, consumerName, providerName)
	examples, err := documentExamples()
	if err != nil {
		t.Fatal(err)
	}
	variants, err := messageVariants()
	if err != nil {
		t.Fatal(err)
	}
	examples = append(examples, variants...)
	// One interaction per event. Each gets its own pact object whose Verify
	// merges that one interaction into the file: one pact object verified
	// repeatedly rewrites all its interactions each time, and the FFI's
	// merge then duplicates those that carry provider-state parameters.
	for _, ex := range examples {
		t.Run(ex.description(), func(t *testing.T) {
			pact, err := msgv4.NewAsynchronousPact(msgv4.Config{Consumer: consumerName, Provider: providerName, PactDir: pactrun.Dir()})
			if err != nil {
				t.Fatal(err)
			}
			declare(t, pact, ex, schemeSvc)
		})
		// The signature scheme changes only the headers: one event shows
		// the Standard Webhooks ones (extension).
		if ex.Event == events.OmnichatMessageReceived && ex.Variant == "" {
			t.Run(ex.Event+" standard-webhooks", func(t *testing.T) {
				pact, err := msgv4.NewAsynchronousPact(msgv4.Config{Consumer: consumerName, Provider: providerName, PactDir: pactrun.Dir()})
				if err != nil {
					t.Fatal(err)
				}
				declare(t, pact, ex, schemeStandard)
			})
		}
	}
}

// Signature schemes of a subscription (signature_scheme), a provider-state
// parameter of the interactions.
const (
	schemeSvc      = "svc"
	schemeStandard = "standard-webhooks"
	// standardSignatureRE is "v1," + base64 of a 32-byte HMAC.
	standardSignatureRE = `^v1,[A-Za-z0-9+/]{43}=$`
)

// describe is the interaction's description for an example and scheme.
func describe(ex example, scheme string) string {
	if scheme == schemeStandard {
		return ex.description() + " signed with Standard Webhooks"
	}
	return ex.description()
}

// declare adds the interaction of one event and runs the subscriber
// library on its example.
func declare(t *testing.T, pact *msgv4.AsynchronousPact, ex example, scheme string) {
	raw, content, headers := received(t, ex)
	rules := []struct{ key, re string }{
		{subscriber.HeaderDelivery, uuidRE},
		{subscriber.HeaderTimestamp, timestampRE},
		{subscriber.HeaderSignature, signatureRE},
		{subscriber.HeaderAttempt, attemptRE},
	}
	if scheme == schemeStandard {
		// The Standard Webhooks headers replace the svc timestamp and
		// signature; the keys are canonical, as the provider's http.Header
		// has them.
		id, ts := headers.Get(subscriber.HeaderDelivery), headers.Get(subscriber.HeaderTimestamp)
		headers.Del(subscriber.HeaderTimestamp)
		headers.Del(subscriber.HeaderSignature)
		headers.Set(subscriber.HeaderWebhookID, id)
		headers.Set(subscriber.HeaderWebhookTimestamp, ts)
		headers.Set(subscriber.HeaderWebhookSignature, subscriber.SignStandard(testSecret, id, ts, raw))
		rules = []struct{ key, re string }{
			{subscriber.HeaderDelivery, uuidRE},
			{http.CanonicalHeaderKey(subscriber.HeaderWebhookID), uuidRE},
			{http.CanonicalHeaderKey(subscriber.HeaderWebhookTimestamp), timestampRE},
			{http.CanonicalHeaderKey(subscriber.HeaderWebhookSignature), standardSignatureRE},
			{subscriber.HeaderAttempt, attemptRE},
		}
	}

	b := pact.AddAsynchronousMessage()
	params := map[string]any{"secret": testSecret}
	if scheme != schemeSvc {
		params["signature_scheme"] = scheme
	}
	b.GivenWithParameter(models.ProviderState{Name: stateSubscription, Parameters: params})
	u := b.ExpectsToReceive(describe(ex, scheme)).
		// Exact values: pact-go's own WithMetadata stores literals.
		WithMetadata(map[string]string{subscriber.HeaderEvent: ex.Event, "User-Agent": userAgent})
	// Headers that change on every delivery need regex rules, which only
	// the FFI call can attach (pact-go issue #217; see pactffi).
	interaction, err := pactffi.InteractionOf(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range rules {
		m, err := pactffi.Regex(h.re, headers.Get(h.key))
		if err != nil {
			t.Fatalf("%s: %v", h.key, err)
		}
		if err := pactffi.WithMetadataMatcher(interaction, h.key, m); err != nil {
			t.Fatal(err)
		}
	}
	// WithJSONContent also sets the metadata contentType application/json.
	err = u.WithJSONContent(content).
		ConsumedBy(func(m msgv4.AsynchronousMessage) error {
			// The handler gets the body, not the metadata: the subscriber
			// sees the example headers declared above.
			return receive(ex, headers, raw, m.Contents)
		}).
		Verify(t)
	if err != nil {
		t.Fatal(err)
	}
}

// receive is the consumer: the subscriber library's Handler, on a clock
// set to the example's timestamp, must verify the signature, decode the
// data into its generated type without losing a field, and answer 204.
func receive(ex example, headers http.Header, signed, got []byte) error {
	if !bytes.Equal(signed, got) {
		return fmt.Errorf("the FFI handed over other bytes than the ones signed:\n signed %s\n    got %s", signed, got)
	}
	ts := headers.Get(subscriber.HeaderTimestamp)
	if ts == "" {
		ts = headers.Get(subscriber.HeaderWebhookTimestamp)
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return err
	}
	h := subscriber.NewHandler(testSecret, subscriber.WithClock(func() time.Time { return time.Unix(unix, 0) }))
	var received *subscriber.Delivery
	h.On(ex.Event, func(_ context.Context, d *subscriber.Delivery) error { received = d; return nil })
	req := httptest.NewRequest(http.MethodPost, "/hooks/gateway", bytes.NewReader(got))
	req.Header = headers.Clone()
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent || received == nil {
		return fmt.Errorf("subscriber answered %d %q to the example", rec.Code, rec.Body)
	}
	return decodedWhole(ex, received)
}

// decodedWhole: the library decoded the example's data into the event's
// generated type, and that type re-encodes to the same data (no field lost
// or changed).
func decodedWhole(ex example, received *subscriber.Delivery) error {
	if want := reflect.TypeOf(events.NewData(ex.Event)); reflect.TypeOf(received.Data) != want {
		return fmt.Errorf("decoded data is %T, want %s", received.Data, want)
	}
	typed, err := json.Marshal(received.Data)
	if err != nil {
		return err
	}
	var fromType, fromWire any
	if err := json.Unmarshal(typed, &fromType); err != nil {
		return err
	}
	if err := json.Unmarshal(received.RawData, &fromWire); err != nil {
		return err
	}
	if !reflect.DeepEqual(fromType, fromWire) {
		return fmt.Errorf("the generated type loses or changes fields of the example:\n typed %s\n  wire %s", typed, received.RawData)
	}
	return nil
}
