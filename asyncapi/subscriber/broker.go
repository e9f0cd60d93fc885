package subscriber

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"time"
)

// Broker destinations (extension, issue 27): a subscription whose url is
// nats://… or amqp://… receives the same envelope bytes with the same
// signed headers as message headers. These verify such a message without
// depending on a broker client: pass the message's headers as the client
// gives them.

// ErrMessageID is returned when a message's id is not its delivery id
// (X-Svc-Delivery): the message was not built by the gateway as signed.
var ErrMessageID = errors.New("subscriber: message id is not the delivery id")

// VerifyNATS verifies a JetStream message: header is the message's
// nats.Header (a map[string][]string), data its payload. The signature is
// checked under either scheme (VerifyAny), and Nats-Msg-Id, when present,
// must be the delivery id.
func VerifyNATS(secret string, header map[string][]string, data []byte, now time.Time, tolerance time.Duration) error {
	h := http.Header{}
	for k, v := range header {
		h[textproto.CanonicalMIMEHeaderKey(k)] = v
	}
	if err := VerifyAny(secret, h, data, now, tolerance); err != nil {
		return err
	}
	if id := h.Get("Nats-Msg-Id"); id != "" && id != h.Get(HeaderDelivery) {
		return ErrMessageID
	}
	return nil
}

// VerifyAMQP verifies an AMQP 0-9-1 message: headers is the message's
// header table (amqp091.Table is a map[string]any), messageID its
// message-id property (the delivery id), body its body.
func VerifyAMQP(secret string, headers map[string]any, messageID string, body []byte, now time.Time, tolerance time.Duration) error {
	h := http.Header{}
	for k, v := range headers {
		h.Set(k, fmt.Sprint(v))
	}
	if err := VerifyAny(secret, h, body, now, tolerance); err != nil {
		return err
	}
	if messageID != h.Get(HeaderDelivery) {
		return ErrMessageID
	}
	return nil
}
