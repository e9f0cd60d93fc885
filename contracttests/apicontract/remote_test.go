//go:build contract

package apicontract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pact-foundation/pact-go/v2/models"
	"github.com/pact-foundation/pact-go/v2/provider"

	"github.com/chatmsg/gateway/contracttests/pactrun"
	"github.com/chatmsg/gateway/internal/pactstates"
)

// EnvProviderURL names a running gateway to verify the committed pact
// against (`make contract PROVIDER_URL=…`). It must have been started with
// PACT_PROVIDER_STATES=1 (and OUTBOUND_ALLOW_CIDRS=127.0.0.1/32,
// CONNECTOR_DRIVER=simulator for the states that need them).
const EnvProviderURL = "PROVIDER_URL"

// TestDeployedGateway verifies the committed pact file against the gateway
// at PROVIDER_URL, a gateway this test did not start; it leaves the pact
// file alone. Without PROVIDER_URL there is nothing to verify
// (TestAPIContract verifies a gateway it starts itself).
func TestDeployedGateway(t *testing.T) {
	base := os.Getenv(EnvProviderURL)
	if base == "" {
		t.Skip(EnvProviderURL + " not set")
	}
	verifyRunning(t, base)
}

// verifyRunning replays the pact against the running gateway at base. Its
// provider states are set through the gateway's own provider-states
// endpoint (internal/pactstates), each in a company of its own that the
// teardown deletes; every answer is also checked against the OpenAPI
// document on its way to the verifier.
func verifyRunning(t *testing.T, base string) {
	router, err := openAPIRouter()
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || target.Host == "" {
		t.Fatalf("%s %q is not a URL", EnvProviderURL, base)
	}
	rm := &running{t: t, base: target.String(), client: &http.Client{Timeout: 2 * time.Minute}}
	check := &gateway{t: t, router: router}
	proxy := httputil.NewSingleHostReverseProxy(target)
	direct := proxy.Director
	proxy.Director = func(r *http.Request) {
		direct(r)
		r.Host = target.Host // a gateway behind a virtual host answers to its own name
	}
	proxy.ModifyResponse = func(resp *http.Response) error {
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		check.validate(resp.Request, resp.StatusCode, resp.Header, body)
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()

	handlers := models.StateHandlers{}
	for _, name := range pactstates.Names() {
		handlers[name] = rm.stateHandler(name)
	}
	req := provider.VerifyRequest{
		Provider:             providerName,
		ProviderBaseURL:      front.URL,
		PactFiles:            []string{pactrun.File(consumerName, providerName)},
		StateHandlers:        handlers,
		RequestFilter:        rm.injectToken,
		DisableColoredOutput: true,
	}
	defer rm.teardown()
	if err := provider.NewVerifier().VerifyProvider(t, req); err != nil {
		t.Logf("verification error: %v", err)
	}
}

// running is the state of the running gateway under verification: the
// token and company of the current provider state.
type running struct {
	t      *testing.T
	base   string
	client *http.Client

	mu        sync.Mutex
	token     string
	companyID float64
}

func (rm *running) stateHandler(name string) models.StateHandler {
	return func(setup bool, _ models.ProviderState) (models.ProviderStateResponse, error) {
		rm.teardown()
		if !setup {
			return nil, nil
		}
		values, err := rm.change(pactstates.Request{State: name, Action: "setup"})
		if err != nil {
			rm.t.Error(err)
			return nil, err
		}
		token, _ := values["token"].(string)
		id, _ := values["companyId"].(float64)
		rm.mu.Lock()
		rm.token, rm.companyID = token, id
		rm.mu.Unlock()
		delete(values, "token")
		delete(values, "companyId")
		return values, nil
	}
}

// teardown deletes the current state's company, if any.
func (rm *running) teardown() {
	rm.mu.Lock()
	id := rm.companyID
	rm.token, rm.companyID = "", 0
	rm.mu.Unlock()
	if id == 0 {
		return
	}
	if _, err := rm.change(pactstates.Request{Action: "teardown", Params: map[string]any{"companyId": id}}); err != nil {
		rm.t.Error(err)
	}
}

func (rm *running) change(req pactstates.Request) (map[string]any, error) {
	b, _ := json.Marshal(req)
	resp, err := rm.client.Post(rm.base+pactstates.Path, "application/json", bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("provider state %q %s: %w", req.State, req.Action, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound && req.Action == "setup" {
		return nil, fmt.Errorf("%s%s answered 404: start the gateway with %s=1", rm.base, pactstates.Path, "PACT_PROVIDER_STATES")
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("provider state %q %s answered %d: %s", req.State, req.Action, resp.StatusCode, body)
	}
	var values map[string]any
	if err := json.Unmarshal(body, &values); err != nil {
		return nil, fmt.Errorf("provider state %q: %s: %w", req.State, body, err)
	}
	return values, nil
}

// injectToken swaps the consumer's example token for the state's token.
func (rm *running) injectToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+exampleToken {
			rm.mu.Lock()
			token := rm.token
			rm.mu.Unlock()
			if token != "" {
				r.Header.Set("Authorization", "Bearer "+token)
			}
		}
		next.ServeHTTP(w, r)
	})
}
