package subscriber_test

import (
	"errors"
	"testing"
	"time"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
)

// TestVerifyBrokerMessages: a broker message's headers, as the NATS and
// AMQP clients give them, verify under the secret, and a changed body, a
// wrong secret or a message id that is not the delivery id do not.
func TestVerifyBrokerMessages(t *testing.T) {
	const secret = "whsec_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"event":"crm.business.won"}`)
	ts := "1800000000"
	id := "26e3d33d-3ce3-4ad2-a821-c12463b95fef"
	sig := subscriber.Sign(secret, ts, body)
	natsHeader := map[string][]string{"X-Svc-Event": {"crm.business.won"}, "X-Svc-Delivery": {id}, "X-Svc-Timestamp": {ts},
		"X-Svc-Signature": {sig}, "X-Svc-Attempt": {"1"}, "Nats-Msg-Id": {id}}
	amqpHeaders := map[string]any{"X-Svc-Event": "crm.business.won", "X-Svc-Delivery": id, "X-Svc-Timestamp": ts,
		"X-Svc-Signature": sig, "X-Svc-Attempt": "1"}
	cases := []struct {
		name string
		err  error
		want error // nil: valid; otherwise any error, or this one
	}{
		{"nats", subscriber.VerifyNATS(secret, natsHeader, body, now, 5*time.Minute), nil},
		{"amqp", subscriber.VerifyAMQP(secret, amqpHeaders, id, body, now, 5*time.Minute), nil},
		{"nats other body", subscriber.VerifyNATS(secret, natsHeader, []byte(`{}`), now, 5*time.Minute), errAny},
		{"amqp wrong secret", subscriber.VerifyAMQP(secret+"0", amqpHeaders, id, body, now, 5*time.Minute), errAny},
		{"amqp other message id", subscriber.VerifyAMQP(secret, amqpHeaders, "x", body, now, 5*time.Minute), subscriber.ErrMessageID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			switch {
			case tc.want == nil && tc.err != nil:
				t.Errorf("valid message refused: %v", tc.err)
			case tc.want != nil && tc.err == nil:
				t.Error("invalid message accepted")
			case tc.want != nil && tc.want != errAny && !errors.Is(tc.err, tc.want):
				t.Errorf("error %v, want %v", tc.err, tc.want)
			}
		})
	}
}

var errAny = errors.New("any error")
