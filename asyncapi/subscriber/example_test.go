package subscriber_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/gen/events"
)

// A receiver of omnichat.message.received: the handler verifies, decodes
// and deduplicates; the function sees typed data. The delivery is sent
// twice, as a retry would; the function runs once.
func ExampleHandle() {
	const secret = "whsec_example"
	h := subscriber.NewHandler(secret)
	subscriber.Handle(h, events.OmnichatMessageReceived,
		func(ctx context.Context, d *subscriber.Delivery, m *events.MessageReceivedPayload) error {
			fmt.Printf("%s from %s: %s\n", d.Event, m.ContactChannelKey, m.Text)
			return nil
		})

	body := `{"event":"omnichat.message.received","delivery_id":"26e3d33d-3ce3-4ad2-a821-c12463b95fef",` +
		`"company_id":1042,"occurred_at":"2025-03-14T10:22:31-03:00","description":"A message arrives from a contact.",` +
		`"data":{"id":884213,"text":"Olá!","message_source_id":2,"contact_channel_key":"5511912345678","a_future_field":true}}`
	for attempt := 1; attempt <= 2; attempt++ {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req := httptest.NewRequest(http.MethodPost, "/hooks/gateway", strings.NewReader(body))
		req.Header.Set(subscriber.HeaderEvent, events.OmnichatMessageReceived)
		req.Header.Set(subscriber.HeaderDelivery, "26e3d33d-3ce3-4ad2-a821-c12463b95fef")
		req.Header.Set(subscriber.HeaderTimestamp, ts)
		req.Header.Set(subscriber.HeaderSignature, subscriber.Sign(secret, ts, []byte(body)))
		req.Header.Set(subscriber.HeaderAttempt, strconv.Itoa(attempt))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println("attempt", attempt, "answered", rec.Code)
	}
	// Output:
	// omnichat.message.received from 5511912345678: Olá!
	// attempt 1 answered 204
	// attempt 2 answered 204
}

// Verify alone, for receivers that do not use Handler.
func ExampleVerify() {
	body := []byte(`{"event":"ping"}`)
	h := http.Header{}
	h.Set(subscriber.HeaderTimestamp, "1741962000")
	h.Set(subscriber.HeaderSignature, subscriber.Sign("whsec_example", "1741962000", body))
	now := time.Unix(1741962000, 0).Add(time.Minute)
	fmt.Println(subscriber.Verify("whsec_example", h, body, now, 0))
	fmt.Println(subscriber.Verify("whsec_other", h, body, now, 0))
	fmt.Println(subscriber.Verify("whsec_example", h, body, now.Add(10*time.Minute), 0))
	// Output:
	// <nil>
	// subscriber: signature does not match
	// subscriber: timestamp outside the tolerance: 1741962000 is 11m0s away from now (tolerance 5m0s)
}

// A receiver that keeps the latest state of each message: the events of
// one message arrive out of order (Lida before Entregue, as under load),
// and the one with the greater version wins.
func ExampleVersions() {
	const secret = "whsec_example"
	messages := subscriber.NewVersions[events.MessagePayload]()
	h := subscriber.NewHandler(secret)
	subscriber.Handle(h, events.OmnichatMessageSent,
		func(ctx context.Context, d *subscriber.Delivery, m *events.MessageSentPayload) error {
			applied := messages.Apply(m.ID, m.Version, events.MessagePayload(*m))
			fmt.Printf("version %d status %d: applied %v\n", m.Version, m.StatusID, applied)
			return nil
		})

	deliver := func(delivery string, version, status int) {
		body := fmt.Sprintf(`{"event":"omnichat.message.sent","delivery_id":%q,"company_id":1042,`+
			`"occurred_at":"2025-03-14T10:24:18-03:00","description":"A message is sent.",`+
			`"data":{"id":884219,"text":"Oi, Maria!","message_source_id":4,"status_id":%d,"version":%d}}`, delivery, status, version)
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req := httptest.NewRequest(http.MethodPost, "/hooks/gateway", strings.NewReader(body))
		req.Header.Set(subscriber.HeaderEvent, events.OmnichatMessageSent)
		req.Header.Set(subscriber.HeaderDelivery, delivery)
		req.Header.Set(subscriber.HeaderTimestamp, ts)
		req.Header.Set(subscriber.HeaderSignature, subscriber.Sign(secret, ts, []byte(body)))
		req.Header.Set(subscriber.HeaderAttempt, "1")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	deliver("0b7f7a52-0001-4000-8000-000000000001", 2, 2) // Enviada
	deliver("0b7f7a52-0001-4000-8000-000000000003", 4, 4) // Lida
	deliver("0b7f7a52-0001-4000-8000-000000000002", 3, 3) // Entregue, late

	m, _ := messages.Get(884219)
	fmt.Printf("held: version %d status %d\n", m.Version, m.Value.StatusID)
	// Output:
	// version 2 status 2: applied true
	// version 4 status 4: applied true
	// version 3 status 3: applied false
	// held: version 4 status 4
}
