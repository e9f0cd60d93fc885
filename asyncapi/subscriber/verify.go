package subscriber

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a delivery (AsyncAPI components/schemas/WebhookHeaders).
const (
	HeaderEvent     = "X-Svc-Event"
	HeaderDelivery  = "X-Svc-Delivery"
	HeaderTimestamp = "X-Svc-Timestamp"
	HeaderSignature = "X-Svc-Signature"
	HeaderAttempt   = "X-Svc-Attempt"
)

// DefaultTolerance is how far X-Svc-Timestamp may be from the receiver's
// clock, in either direction, when no tolerance is given. The API document
// suggests 5 minutes: wide enough for ordinary clock skew and a slow
// network, narrow enough that a captured request cannot be replayed later.
const DefaultTolerance = 5 * time.Minute

// signaturePrefix names the only scheme the service signs with.
const signaturePrefix = "sha256="

// Errors of Verify. Use errors.Is: the returned errors wrap them with
// detail (never with the secret or the expected signature).
var (
	// ErrMissingSignature: X-Svc-Signature is absent or not "sha256=" + 64
	// lowercase hex digits.
	ErrMissingSignature = errors.New("subscriber: missing or malformed " + HeaderSignature)
	// ErrMalformedTimestamp: X-Svc-Timestamp is absent or not a Unix time in
	// decimal seconds.
	ErrMalformedTimestamp = errors.New("subscriber: missing or malformed " + HeaderTimestamp)
	// ErrSignatureMismatch: the signature is not the HMAC of this body and
	// timestamp under the secret (wrong secret, altered or re-serialised
	// body, altered timestamp).
	ErrSignatureMismatch = errors.New("subscriber: signature does not match")
	// ErrTimestampOutOfTolerance: the signature is authentic but the
	// timestamp is too far from now (a replay, or a skewed clock).
	ErrTimestampOutOfTolerance = errors.New("subscriber: timestamp outside the tolerance")
)

// Sign returns the X-Svc-Signature value of body sent at timestamp (the
// X-Svc-Timestamp text): "sha256=" + hex(HMAC_SHA256(secret, timestamp +
// "." + body)). Receivers need only Verify; Sign is for tests that play the
// service's part.
func Sign(secret, timestamp string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks that a delivery comes from the service: X-Svc-Signature in
// header must be the HMAC-SHA256 under secret of X-Svc-Timestamp + "." +
// rawBody, and X-Svc-Timestamp must be within tolerance of now (zero or
// negative tolerance means DefaultTolerance).
//
// rawBody must be the exact bytes received: decoding and re-encoding the
// JSON changes them. The comparison is constant time. The signature is
// checked before the timestamp, so a forged request reports
// ErrSignatureMismatch and an authentic but old one ErrTimestampOutOfTolerance.
func Verify(secret string, header http.Header, rawBody []byte, now time.Time, tolerance time.Duration) error {
	tsText := header.Get(HeaderTimestamp)
	ts, err := parseTimestamp(tsText)
	if err != nil {
		return err
	}
	got, err := parseSignature(header.Get(HeaderSignature))
	if err != nil {
		return err
	}
	if secret == "" || !hmac.Equal(got, mac(secret, tsText, rawBody)) {
		return ErrSignatureMismatch
	}
	return fresh(ts, tsText, now, tolerance)
}

// fresh checks a signed timestamp against now, after the signature (both
// schemes): an authentic but old delivery reports
// ErrTimestampOutOfTolerance. Zero or negative tolerance means
// DefaultTolerance.
func fresh(ts int64, tsText string, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if skew := now.Sub(time.Unix(ts, 0)); skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w: %s is %s away from now (tolerance %s)", ErrTimestampOutOfTolerance, tsText, skew.Round(time.Second), tolerance)
	}
	return nil
}

// parseTimestamp accepts decimal digits only: strconv would also take a
// sign, and the signed text must be exactly what the service sent.
func parseTimestamp(s string) (int64, error) {
	if s == "" || len(s) > 19 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%w: %q", ErrMalformedTimestamp, s)
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrMalformedTimestamp, s)
	}
	return ts, nil
}

// parseSignature returns the MAC bytes of "sha256=<64 lowercase hex>".
func parseSignature(s string) ([]byte, error) {
	hexPart, ok := strings.CutPrefix(s, signaturePrefix)
	if !ok || len(hexPart) != 2*sha256.Size || strings.ToLower(hexPart) != hexPart {
		return nil, ErrMissingSignature
	}
	b, err := hex.DecodeString(hexPart)
	if err != nil {
		return nil, ErrMissingSignature
	}
	return b, nil
}
