//go:build contract

// Package apicontract is the HTTP pact between API integrators and the
// gateway.
//
// Consumer: an integrator built on the Go client generated from the OpenAPI
// document (gen/client). Each interaction calls one client method against
// Pact's mock server and checks the typed answer the client decoded; the
// response bodies carry type, regex and date-format matchers, so the pact
// states what integrators rely on, not example values.
//
// Provider: the real gateway (apitest.Start: the real router, app wiring
// and database — SQLite, and PostgreSQL too when TEST_DATABASE_URL is set),
// a fresh app and database per interaction, seeded by the interaction's
// provider state through the same public API and services a user would use
// (official channels through providersim on 127.0.0.1, unofficial ones
// through the simulator connector). Ids the states create reach the
// replayed requests through provider-state generators; the consumer's
// example token is swapped for the state's real token by a request filter.
// Every answer the verifier receives is also validated against the OpenAPI
// document.
package apicontract

import (
	"testing"

	"github.com/chatmsg/gateway/contracttests/pactrun"
)

const (
	consumerName = "api-integrator"
	providerName = "gateway-api"
)

// TestAPIContract runs consumer → provider → broken provider, in that
// order (see pactrun.Steps).
func TestAPIContract(t *testing.T) {
	pactrun.Steps(t,
		pactrun.Step{Name: "consumer writes pact", Run: testConsumer},
		pactrun.Step{Name: "provider verifies pact", Run: func(t *testing.T) { verifyProvider(t, "") }},
		// The way QA verifies a gateway it did not start: a separate
		// process, provider states through its PACT_PROVIDER_STATES endpoint.
		pactrun.Step{Name: "a separately started gateway verifies pact", Run: verifySeparateProcess},
		pactrun.Step{Name: "renamed response field fails", Run: func(t *testing.T) {
			out := pactrun.ExpectFailure(t, "TestBrokenServerChild", breakResponseField,
				"Actual map is missing the following keys: secret", "There were 1 pact failures")
			if testing.Verbose() {
				t.Logf("the broken server was rejected; verifier output:\n%s", out)
			}
		}},
	)
}

// TestBrokenServerChild verifies the pact against a server with one
// deliberate regression (pactrun.Breakage); only TestAPIContract runs it,
// in a child process, and expects it to fail.
func TestBrokenServerChild(t *testing.T) {
	pactrun.SkipUnlessChild(t)
	verifyProvider(t, pactrun.Breakage())
}
