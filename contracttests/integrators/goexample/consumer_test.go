//go:build contract

// Package goexample is the consumer pact an integrator team writes for the
// webhook events it uses, in Go: a CRM sync that reacts to
// crm.business.won and omnichat.message.received. It is the example
// contracttests/README.md shows; copy it into your own repository.
//
// The rules that make our provider able to verify your pact:
//   - provider name "gateway-webhooks";
//   - each message described as "a delivery of <event>";
//   - provider state "a subscription with a known signing secret" with
//     parameter "secret" (any whsec_ value: the provider signs with it);
//   - match by type and format, not by value: the provider sends a fresh
//     delivery, not the document's example.
package goexample

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/pact-foundation/pact-go/v2/matchers"
	msgv4 "github.com/pact-foundation/pact-go/v2/message/v4"
	"github.com/pact-foundation/pact-go/v2/models"
)

const (
	consumer = "example-crm-sync-go"
	provider = "gateway-webhooks"
	state    = "a subscription with a known signing secret"
	secret   = "whsec_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// pactDir is contracttests/integrators/pacts, which the gateway's provider
// verification reads (in your repository: wherever you publish pacts).
func pactDir() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "pacts")
}

// wonDeal is what the integrator's code reads from crm.business.won: only
// the fields it uses, which is all its pact asks the gateway to keep.
type wonDeal struct {
	Event     string `json:"event"`
	CompanyID int64  `json:"company_id"`
	Data      struct {
		ID    int64  `json:"id"`
		Title string `json:"title"`
	} `json:"data"`
}

// handleWon is the integrator's handler under test.
func handleWon(body []byte) (wonDeal, error) {
	var d wonDeal
	if err := json.Unmarshal(body, &d); err != nil {
		return d, err
	}
	if d.Event != "crm.business.won" || d.Data.ID == 0 {
		return d, fmt.Errorf("not a won deal: %s", body)
	}
	return d, nil
}

type inbound struct {
	Event string `json:"event"`
	Data  struct {
		Text              string `json:"text"`
		ContactChannelKey string `json:"contact_channel_key"`
	} `json:"data"`
}

func handleInbound(body []byte) (inbound, error) {
	var m inbound
	if err := json.Unmarshal(body, &m); err != nil {
		return m, err
	}
	if m.Data.ContactChannelKey == "" {
		return m, fmt.Errorf("no contact key: %s", body)
	}
	return m, nil
}

func TestIntegratorConsumerPact(t *testing.T) {
	// A pact file merges with what is on disk: start from nothing, so a
	// removed interaction cannot survive.
	if err := os.Remove(filepath.Join(pactDir(), consumer+"-"+provider+".json")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	cases := []struct {
		event  string
		body   map[string]any
		handle func([]byte) error
	}{
		{"crm.business.won", map[string]any{
			"event":       matchers.String("crm.business.won"),
			"delivery_id": matchers.UUID(),
			"company_id":  matchers.Integer(1042),
			"occurred_at": matchers.Regex("2025-03-14T10:23:01-03:00", `^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)$`),
			"data": map[string]any{
				"id":    matchers.Integer(5531),
				"title": matchers.String("Plano Empresarial - Souza Transportes"),
			},
		}, func(b []byte) error { _, err := handleWon(b); return err }},
		{"omnichat.message.received", map[string]any{
			"event":       matchers.String("omnichat.message.received"),
			"delivery_id": matchers.UUID(),
			"data": map[string]any{
				"text":                matchers.String("Foto do produto que chegou quebrado"),
				"contact_channel_key": matchers.Regex("5511912345678", `^[0-9]{8,15}$`),
			},
		}, func(b []byte) error { _, err := handleInbound(b); return err }},
	}
	for _, c := range cases {
		t.Run(c.event, func(t *testing.T) {
			// One pact object per interaction (see contracttests/README.md, Pitfalls).
			p, err := msgv4.NewAsynchronousPact(msgv4.Config{Consumer: consumer, Provider: provider, PactDir: pactDir()})
			if err != nil {
				t.Fatal(err)
			}
			err = p.AddAsynchronousMessage().
				GivenWithParameter(models.ProviderState{Name: state, Parameters: map[string]any{"secret": secret}}).
				ExpectsToReceive("a delivery of " + c.event).
				WithMetadata(map[string]string{"X-Svc-Event": c.event}).
				WithJSONContent(c.body).
				// The handler gets the body as the provider would send it.
				ConsumedBy(func(m msgv4.AsynchronousMessage) error { return c.handle(m.Contents) }).
				Verify(t)
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
