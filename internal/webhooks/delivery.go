package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Delivery is what every attempt of one delivery sends: the same body
// bytes under the same delivery id.
type Delivery struct {
	// ID is the delivery_id (X-Svc-Delivery), identical across attempts.
	ID    string
	Event string
	// Body is the envelope JSON, built once at publish time.
	Body []byte
}

// Header names of a delivery.
const (
	HeaderEvent     = "X-Svc-Event"
	HeaderDelivery  = "X-Svc-Delivery"
	HeaderTimestamp = "X-Svc-Timestamp"
	HeaderSignature = "X-Svc-Signature"
	HeaderAttempt   = "X-Svc-Attempt"
	// The Standard Webhooks headers (signature scheme standard-webhooks).
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// Signature schemes of a subscription (signature_scheme, an extension).
const (
	// SchemeSvc is the API document's X-Svc-Timestamp / X-Svc-Signature.
	SchemeSvc = "svc"
	// SchemeStandard is the Standard Webhooks specification's webhook-id /
	// webhook-timestamp / webhook-signature.
	SchemeStandard = "standard-webhooks"
)

// NewDeliveryRequest builds attempt number attempt of d to url at time now,
// signed with the svc scheme (see NewSignedDeliveryRequest).
func NewDeliveryRequest(ctx context.Context, url, secret string, d Delivery, attempt int, now time.Time) (*http.Request, error) {
	return NewSignedDeliveryRequest(ctx, url, secret, SchemeSvc, d, attempt, now)
}

// NewSignedDeliveryRequest builds attempt number attempt of d to url at
// time now: POST of the exact body with a fresh timestamp and its signature
// in the headers of scheme (SchemeSvc when empty). The worker sends exactly
// this request; the contract tests verify it.
func NewSignedDeliveryRequest(ctx context.Context, url, secret, scheme string, d Delivery, attempt int, now time.Time) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(d.Body))
	if err != nil {
		return nil, err
	}
	req.Header = SignedHeaders(secret, scheme, d, attempt, now)
	return req, nil
}

// SignedHeaders are the headers of attempt number attempt of d at time now,
// signed with scheme (SchemeSvc when empty). HTTP deliveries send them as
// request headers and broker deliveries as message headers, so one
// subscriber library verifies both.
func SignedHeaders(secret, scheme string, d Delivery, attempt int, now time.Time) http.Header {
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", UserAgent)
	h.Set(HeaderEvent, d.Event)
	h.Set(HeaderDelivery, d.ID)
	if scheme == SchemeStandard {
		h.Set(HeaderWebhookID, d.ID)
		h.Set(HeaderWebhookTimestamp, ts)
		h.Set(HeaderWebhookSignature, SignStandard(secret, d.ID, ts, d.Body))
	} else {
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, Sign(secret, ts, d.Body))
	}
	h.Set(HeaderAttempt, strconv.Itoa(attempt))
	return h
}

// Sign returns "sha256=" + hex(HMAC_SHA256(secret, timestamp + "." + body)).
func Sign(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// SignStandard returns the Standard Webhooks signature "v1," +
// base64(HMAC_SHA256(key, id + "." + timestamp + "." + body)).
func SignStandard(secret, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, StandardKey(secret))
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// StandardKey is the HMAC key the Standard Webhooks specification derives
// from a secret: the base64 decoding of what follows "whsec_". Our secrets
// are "whsec_" + 64 hex digits, valid base64 for 48 bytes, so the string a
// client holds works unchanged with every Standard Webhooks library. A
// secret without the prefix or that does not decode (none of ours) is used
// as its bytes rather than failing the delivery.
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
