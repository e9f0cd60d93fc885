package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
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
)

// NewDeliveryRequest builds attempt number attempt of d to url at time now:
// POST of the exact body with a fresh timestamp and its signature. The
// worker sends exactly this request; the contract tests verify it.
func NewDeliveryRequest(ctx context.Context, url, secret string, d Delivery, attempt int, now time.Time) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(d.Body))
	if err != nil {
		return nil, err
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", UserAgent)
	h.Set(HeaderEvent, d.Event)
	h.Set(HeaderDelivery, d.ID)
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, Sign(secret, ts, d.Body))
	h.Set(HeaderAttempt, strconv.Itoa(attempt))
	return req, nil
}

// Sign returns "sha256=" + hex(HMAC_SHA256(secret, timestamp + "." + body)).
func Sign(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
