package subscriber

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Header names of a delivery signed with the Standard Webhooks scheme
// (signature_scheme "standard-webhooks", an extension of the API).
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// StandardKey is the HMAC key the Standard Webhooks specification derives
// from a secret: the base64 decoding of what follows "whsec_". The
// gateway's secrets ("whsec_" + 64 hex digits) decode to 48 bytes; a
// string without the prefix or that does not decode is used as its bytes,
// as the gateway does.
func StandardKey(secret string) []byte {
	rest, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return []byte(secret)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return []byte(secret)
	}
	return key
}

// SignStandard returns the webhook-signature value of body sent with
// webhook-id id at timestamp: "v1," + base64(HMAC_SHA256(StandardKey(secret),
// id + "." + timestamp + "." + body)). For tests that play the service.
func SignStandard(secret, id, timestamp string, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(standardMAC(secret, id, timestamp, body))
}

func standardMAC(secret, id, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, StandardKey(secret))
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// VerifyStandard checks a delivery signed with the Standard Webhooks
// scheme: one of the space-separated "v1,<base64>" signatures of
// webhook-signature must be the HMAC-SHA256 under StandardKey(secret) of
// webhook-id + "." + webhook-timestamp + "." + rawBody (other versions are
// ignored, as the specification says), and webhook-timestamp must be within
// tolerance of now (zero or negative: DefaultTolerance). It returns the
// errors of Verify (ErrMissingSignature, ErrMalformedTimestamp,
// ErrSignatureMismatch, ErrTimestampOutOfTolerance), naming the
// webhook-* header.
func VerifyStandard(secret string, header http.Header, rawBody []byte, now time.Time, tolerance time.Duration) error {
	id := header.Get(HeaderWebhookID)
	if id == "" {
		return fmt.Errorf("%w: %s is missing", ErrMissingSignature, HeaderWebhookID)
	}
	tsText := header.Get(HeaderWebhookTimestamp)
	ts, err := parseTimestamp(tsText)
	if err != nil {
		return fmt.Errorf("%w (%s)", err, HeaderWebhookTimestamp)
	}
	var candidates [][]byte
	for _, part := range strings.Fields(header.Get(HeaderWebhookSignature)) {
		b64, ok := strings.CutPrefix(part, "v1,")
		if !ok {
			continue
		}
		if sig, err := base64.StdEncoding.DecodeString(b64); err == nil && len(sig) == sha256.Size {
			candidates = append(candidates, sig)
		}
	}
	if len(candidates) == 0 {
		return fmt.Errorf("%w: no v1 signature in %s", ErrMissingSignature, HeaderWebhookSignature)
	}
	if secret == "" {
		return ErrSignatureMismatch
	}
	want := standardMAC(secret, id, tsText, rawBody)
	match := false
	for _, sig := range candidates {
		// No early exit: every candidate is compared in constant time.
		if hmac.Equal(sig, want) {
			match = true
		}
	}
	if !match {
		return ErrSignatureMismatch
	}
	return fresh(ts, tsText, now, tolerance)
}

// VerifyAny verifies a delivery of either scheme: VerifyStandard when it
// carries webhook-signature, Verify otherwise. A receiver that does not
// know its subscription's signature_scheme (or is switching it) uses this.
func VerifyAny(secret string, header http.Header, rawBody []byte, now time.Time, tolerance time.Duration) error {
	if header.Get(HeaderWebhookSignature) != "" {
		return VerifyStandard(secret, header, rawBody, now, tolerance)
	}
	return Verify(secret, header, rawBody, now, tolerance)
}
