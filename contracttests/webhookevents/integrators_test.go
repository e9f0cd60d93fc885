//go:build contract

package webhookevents

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// EnvIntegratorPacts lists further pact files of integrators
// (path-list-separated) for the provider to verify, besides the committed
// ones in contracttests/integrators/pacts: a team checks its own pact
// against the gateway with INTEGRATOR_PACTS=/path/to/its.json make contract.
const EnvIntegratorPacts = "INTEGRATOR_PACTS"

// integratorPacts are the consumer pacts of integrators whose provider is
// gateway-webhooks: contracttests/integrators/pacts (written by the Go and
// TypeScript examples there) and INTEGRATOR_PACTS. Their messages are named
// "a delivery of <event>" and given the state of this suite, so the same
// producers answer them.
func integratorPacts(t *testing.T) []string {
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(self), "..", "integrators", "pacts")
	files, err := filepath.Glob(filepath.Join(dir, "*-"+providerName+".json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range filepath.SplitList(os.Getenv(EnvIntegratorPacts)) {
		if f = strings.TrimSpace(f); f != "" {
			files = append(files, f)
		}
	}
	return files
}
