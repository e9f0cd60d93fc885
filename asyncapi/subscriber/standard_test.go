package subscriber_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
)

// The example of the Standard Webhooks specification's README (secret,
// id, timestamp, payload and the signature it gives): an independent vector.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = "1614265330"
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func standardHeader(id, ts, sig string) http.Header {
	h := http.Header{}
	h.Set(subscriber.HeaderWebhookID, id)
	h.Set(subscriber.HeaderWebhookTimestamp, ts)
	h.Set(subscriber.HeaderWebhookSignature, sig)
	return h
}

func TestSignStandardMatchesSpecificationExample(t *testing.T) {
	if got := subscriber.SignStandard(specSecret, specID, specTimestamp, []byte(specBody)); got != specSignature {
		t.Fatalf("SignStandard = %q, want %q", got, specSignature)
	}
}

func TestVerifyStandard(t *testing.T) {
	at := time.Unix(1614265330, 0)
	otherSig := subscriber.SignStandard("whsec_"+"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", specID, specTimestamp, []byte(specBody))
	tests := []struct {
		name   string
		header http.Header
		body   string
		now    time.Time
		want   error
	}{
		{"valid", standardHeader(specID, specTimestamp, specSignature), specBody, at, nil},
		{"valid among several signatures and versions", standardHeader(specID, specTimestamp, "v1a,xyz "+otherSig+" "+specSignature), specBody, at, nil},
		{"four minutes late", standardHeader(specID, specTimestamp, specSignature), specBody, at.Add(4 * time.Minute), nil},
		{"other secret's signature", standardHeader(specID, specTimestamp, otherSig), specBody, at, subscriber.ErrSignatureMismatch},
		{"altered body", standardHeader(specID, specTimestamp, specSignature), `{"test": 2432232315}`, at, subscriber.ErrSignatureMismatch},
		{"altered id", standardHeader("msg_other", specTimestamp, specSignature), specBody, at, subscriber.ErrSignatureMismatch},
		{"altered timestamp", standardHeader(specID, "1614265331", specSignature), specBody, at, subscriber.ErrSignatureMismatch},
		{"too old", standardHeader(specID, specTimestamp, specSignature), specBody, at.Add(6 * time.Minute), subscriber.ErrTimestampOutOfTolerance},
		{"from the future", standardHeader(specID, specTimestamp, specSignature), specBody, at.Add(-6 * time.Minute), subscriber.ErrTimestampOutOfTolerance},
		{"no v1 signature", standardHeader(specID, specTimestamp, "v2,abc"), specBody, at, subscriber.ErrMissingSignature},
		{"no id", standardHeader("", specTimestamp, specSignature), specBody, at, subscriber.ErrMissingSignature},
		{"signed timestamp", standardHeader(specID, "+1614265330", specSignature), specBody, at, subscriber.ErrMalformedTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := subscriber.VerifyStandard(specSecret, tt.header, []byte(tt.body), tt.now, 0)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("VerifyStandard = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyAnyPicksTheScheme(t *testing.T) {
	const secret = "whsec_4b7e1d9a6c3f0825e8b1a4d7c0f3962e5a8d1b4c7f0e3a6d9b2c5f8e1a4d7b0c"
	body := []byte(`{"event":"ping"}`)
	now := time.Unix(1741958551, 0)
	svc := http.Header{}
	svc.Set(subscriber.HeaderTimestamp, "1741958551")
	svc.Set(subscriber.HeaderSignature, subscriber.Sign(secret, "1741958551", body))
	std := standardHeader("26e3d33d-3ce3-4ad2-a821-c12463b95fef", "1741958551",
		subscriber.SignStandard(secret, "26e3d33d-3ce3-4ad2-a821-c12463b95fef", "1741958551", body))
	for name, h := range map[string]http.Header{"svc": svc, "standard": std} {
		if err := subscriber.VerifyAny(secret, h, body, now, 0); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := subscriber.VerifyAny(secret, h, []byte(`{"event":"pong"}`), now, 0); !errors.Is(err, subscriber.ErrSignatureMismatch) {
			t.Errorf("%s with another body: %v", name, err)
		}
	}
}
