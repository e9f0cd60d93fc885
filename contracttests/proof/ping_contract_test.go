//go:build contract

// Package proof shows that the contract-test tooling works end to end: a
// message pact for the webhook `ping` event whose metadata (the X-Svc-*
// headers) carries real regex matchers, written by the consumer side and
// verified against a producer. The producer here is a stand-in written in
// the test; the real dispatcher's contract tests will follow this pattern.
//
// Run (repo root):
//
//	contracttests/tools/fetch-pact-ffi.sh
//	source contracttests/tools/env.sh
//	go test -tags contract -count=1 ./contracttests/...
package proof

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pact-foundation/pact-go/v2/matchers"
	"github.com/pact-foundation/pact-go/v2/message"
	msgv4 "github.com/pact-foundation/pact-go/v2/message/v4"
	"github.com/pact-foundation/pact-go/v2/models"
	"github.com/pact-foundation/pact-go/v2/provider"

	"github.com/chatmsg/gateway/contracttests/pactffi"
)

const (
	// Names are proof-specific so this pact never merges with the real
	// subscriber/dispatcher pact.
	consumerName = "proof-webhook-subscriber"
	providerName = "proof-webhook-dispatcher"
	description  = "a ping event"

	// Pact checks the signature's format, not its value. To keep the example
	// itself honest, the consumer signs it with a known secret and a fixed
	// clock and checks it the way a subscriber would.
	secret           = "whsec_contract_proof_only"
	exampleTimestamp = "1767225600" // 2026-01-01T00:00:00Z
	exampleDelivery  = "7f1c2a34-5b6d-4e8f-9a0b-1c2d3e4f5a6b"
	exampleOccurred  = "2026-01-01T00:00:00Z"
	exampleDesc      = "Test event sent from the webhook settings"
	userAgent        = "Svc-Webhooks/1.0"

	uuidRE      = `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`
	timestampRE = `^[0-9]+$`
	signatureRE = `^sha256=[0-9a-f]{64}$`
	attemptRE   = `^[1-5]$`
	// ISO 8601 with an offset (Z or ±hh:mm), optional fractional seconds.
	occurredAtRE = `^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`

	// childEnv makes TestMD5SignatureChild run; only the negative subtest sets it.
	childEnv = "CONTRACT_PROOF_MD5_CHILD"
)

// pactFile is in contracttests/pacts (go test runs in the package dir).
// PactDir is always explicit: pact-go's default is ./pacts of the package.
var (
	pactDir  = mustAbs("../pacts")
	pactFile = filepath.Join(pactDir, consumerName+"-"+providerName+".json")
)

// TestWebhookPingContract runs the steps in the one order that works:
// consumer (writes the pact) → provider (verifies it) → provider that must
// fail. Subtests run sequentially; a failed step stops the later ones.
func TestWebhookPingContract(t *testing.T) {
	steps := []struct {
		name string
		run  func(*testing.T)
	}{
		{"consumer writes pact", testConsumer},
		{"provider verifies pact", func(t *testing.T) { verifyProducer(t, signSHA256) }},
		{"provider with md5 signature is rejected", testMD5Rejected},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			t.Fatalf("step %q failed; later steps skipped", s.name)
		}
	}
}

// --- consumer side ---------------------------------------------------------

func testConsumer(t *testing.T) {
	// Pact files merge with what is on disk: start from nothing so a stale or
	// removed interaction cannot survive.
	if err := os.Remove(pactFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}

	pact, err := msgv4.NewAsynchronousPact(msgv4.Config{
		Consumer: consumerName,
		Provider: providerName,
		PactDir:  pactDir,
	})
	if err != nil {
		t.Fatal(err)
	}

	// The example body, signed below. Every matcher here is a plain
	// type/regex matcher without generators, so the bytes the consumer gets
	// are these examples (keys sorted, compact) — the bytes we signed.
	exampleBody := map[string]any{
		"event":       "ping",
		"delivery_id": exampleDelivery,
		"company_id":  1,
		"occurred_at": exampleOccurred,
		"description": exampleDesc,
		"data":        map[string]any{},
	}
	raw, err := json.Marshal(exampleBody)
	if err != nil {
		t.Fatal(err)
	}
	exampleSignature := signSHA256(secret, exampleTimestamp, raw)

	b := pact.AddAsynchronousMessage()
	u := b.ExpectsToReceive(description).
		// Exact values: pact-go's own WithMetadata is fine for literals.
		WithMetadata(map[string]string{"X-Svc-Event": "ping", "User-Agent": userAgent})

	// Regex values need the FFI directly (pact-go issue #217).
	interaction, err := pactffi.InteractionOf(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []struct{ key, re, example string }{
		{"X-Svc-Delivery", uuidRE, exampleDelivery},
		{"X-Svc-Timestamp", timestampRE, exampleTimestamp},
		{"X-Svc-Signature", signatureRE, exampleSignature},
		{"X-Svc-Attempt", attemptRE, "1"},
	} {
		m, err := pactffi.Regex(h.re, h.example)
		if err != nil {
			t.Fatal(err)
		}
		if err := pactffi.WithMetadataMatcher(interaction, h.key, m); err != nil {
			t.Fatal(err)
		}
	}

	// WithJSONContent also sets the metadata key contentType.
	err = u.WithJSONContent(map[string]any{
		"event":       "ping",
		"delivery_id": matchers.Regex(exampleDelivery, uuidRE),
		"company_id":  matchers.Integer(1),
		"occurred_at": matchers.Regex(exampleOccurred, occurredAtRE),
		"description": matchers.Like(exampleDesc),
		"data":        matchers.Like(map[string]any{}),
	}).
		ConsumedBy(func(m msgv4.AsynchronousMessage) error {
			// The handler gets the body but not the metadata; give the
			// subscriber the example headers we declared.
			return subscriberHandle(map[string]string{
				"X-Svc-Event":     "ping",
				"X-Svc-Delivery":  exampleDelivery,
				"X-Svc-Timestamp": exampleTimestamp,
				"X-Svc-Signature": exampleSignature,
				"X-Svc-Attempt":   "1",
				"User-Agent":      userAgent,
			}, m.Contents)
		}).
		Verify(t)
	if err != nil {
		t.Fatal(err)
	}
}

// subscriberHandle is what a subscriber does with a delivery: check the
// signature over the raw bytes, then read the envelope.
func subscriberHandle(headers map[string]string, body []byte) error {
	want := signSHA256(secret, headers["X-Svc-Timestamp"], body)
	if !hmac.Equal([]byte(want), []byte(headers["X-Svc-Signature"])) {
		return fmt.Errorf("signature mismatch over body %s", body)
	}
	var env struct {
		Event      string          `json:"event"`
		DeliveryID string          `json:"delivery_id"`
		Data       json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return err
	}
	if env.Event != headers["X-Svc-Event"] || env.DeliveryID != headers["X-Svc-Delivery"] {
		return fmt.Errorf("envelope %+v disagrees with headers %v", env, headers)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(env.Data), []byte("{")) {
		return fmt.Errorf("data is not an object: %s", env.Data)
	}
	return nil
}

// --- provider side ---------------------------------------------------------

type signer func(secret, timestamp string, body []byte) string

func signSHA256(secret, ts string, body []byte) string {
	return "sha256=" + mac(sha256.New, secret, ts, body)
}

// signMD5 is the deliberately wrong producer for the negative test.
func signMD5(secret, ts string, body []byte) string { return "md5=" + mac(md5.New, secret, ts, body) }

func mac(h func() hash.Hash, secret, ts string, body []byte) string {
	m := hmac.New(h, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// producePing is the stand-in producer: a fresh delivery id, the current
// clock, a signature over timestamp + "." + body.
func producePing(sign signer) ([]byte, map[string]string, error) {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, nil, err
	}
	id[6], id[8] = id[6]&0x0f|0x40, id[8]&0x3f|0x80 // version 4, RFC 4122 variant
	x := hex.EncodeToString(id)
	delivery := x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]

	now := time.Now()
	body, err := json.Marshal(map[string]any{
		"event":       "ping",
		"delivery_id": delivery,
		"company_id":  42,
		"occurred_at": now.Format(time.RFC3339),
		"description": "Webhook test",
		"data":        map[string]any{},
	})
	if err != nil {
		return nil, nil, err
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	return body, map[string]string{
		"X-Svc-Event":     "ping",
		"X-Svc-Delivery":  delivery,
		"X-Svc-Timestamp": ts,
		"X-Svc-Signature": sign(secret, ts, body),
		"X-Svc-Attempt":   "1",
		"User-Agent":      userAgent,
	}, nil
}

// verifyProducer replays the pact against producePing. Must run after the
// consumer step (it reads the pact file that step wrote).
func verifyProducer(t *testing.T, sign signer) {
	handler := func([]models.ProviderState) (message.Body, message.Metadata, error) {
		body, headers, err := producePing(sign)
		if err != nil {
			return nil, nil, err
		}
		md := message.Metadata{"contentType": "application/json"}
		for k, v := range headers {
			md[k] = v
		}
		// Returned as []byte so the verifier sees exactly the signed bytes.
		return body, md, nil
	}
	err := provider.NewVerifier().VerifyProvider(t, provider.VerifyRequest{
		Provider:             providerName,
		PactFiles:            []string{pactFile},
		MessageHandlers:      message.Handlers{description: handler},
		DisableColoredOutput: true,
	})
	if err != nil {
		t.Logf("verification error: %v", err)
	}
}

// testMD5Rejected proves the regex matchers are enforced: a producer that
// signs with "md5=…" must fail verification. VerifyProvider reports failure
// through t.Error and offers no way to expect it, so the failing run happens
// in a child process (this test binary, running only TestMD5SignatureChild)
// and we assert on its exit status and output.
func testMD5Rejected(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestMD5SignatureChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("expected the md5 verification to fail, got err=%v; output:\n%s", err, out)
	}
	// Exactly one failure, and it is the signature's format: the fresh
	// delivery id and timestamp in the same message passed their regexes.
	for _, want := range []string{
		"Expected metadata key 'X-Svc-Signature'",
		"to match '" + signatureRE + "'",
		"There were 1 pact failures",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("failure output does not mention %q; output:\n%s", want, out)
		}
	}
	t.Logf("md5 producer rejected as expected; verifier output:\n%s", out)
}

// TestMD5SignatureChild is the failing half of testMD5Rejected; on its own it
// is skipped.
func TestMD5SignatureChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("negative case; run by TestWebhookPingContract")
	}
	verifyProducer(t, signMD5)
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}
