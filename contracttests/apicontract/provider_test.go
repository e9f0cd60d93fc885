//go:build contract

package apicontract

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/pact-foundation/pact-go/v2/models"
	"github.com/pact-foundation/pact-go/v2/provider"

	"github.com/chatmsg/gateway/contracttests/pactrun"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/openapi"
)

// breakResponseField renames `secret` in the answer to
// POST /api/channel-webhooks (a regression an integrator would notice only
// when it lost the secret).
const breakResponseField = "response-field"

// verifyProvider replays the pact against the real server, on SQLite and,
// with TEST_DATABASE_URL, on PostgreSQL.
func verifyProvider(t *testing.T, breakage string) {
	engines := []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}}
	if os.Getenv(storetest.EnvPostgres) != "" && breakage == "" {
		engines = append(engines, struct {
			name string
			open func(testing.TB) *store.DB
		}{"postgres", storetest.Postgres})
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { verifyOn(t, e.open, breakage) })
	}
}

func verifyOn(t *testing.T, open func(testing.TB) *store.DB, breakage string) {
	router, err := openAPIRouter()
	if err != nil {
		t.Fatal(err)
	}
	p := &gateway{t: t, open: open, breakage: breakage, router: router}
	defer p.closeScope()
	// The verifier needs one base URL for the whole run; each interaction
	// gets its own app behind it.
	front := httptest.NewServer(p)
	defer front.Close()

	handlers := models.StateHandlers{}
	for name, s := range states {
		handlers[name] = p.stateHandler(name, s)
	}
	req := provider.VerifyRequest{
		Provider:             providerName,
		ProviderBaseURL:      front.URL,
		PactFiles:            []string{pactrun.File(consumerName, providerName)},
		StateHandlers:        handlers,
		RequestFilter:        p.injectToken,
		DisableColoredOutput: true,
	}
	if breakage != "" {
		// A regex; anchored so it picks this one interaction only.
		req.FilterDescription = "^" + regexp.QuoteMeta(descCreateSubscription) + "$"
	}
	if err := provider.NewVerifier().VerifyProvider(t, req); err != nil {
		t.Logf("verification error: %v", err)
	}
}

// gateway is the provider under verification: the app of the current
// provider state behind one stable address.
type gateway struct {
	t        *testing.T
	open     func(testing.TB) *store.DB
	breakage string
	router   routers.Router

	mu  sync.Mutex
	cur *scope
}

func (p *gateway) current() *scope {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

func (p *gateway) closeScope() {
	p.mu.Lock()
	cur := p.cur
	p.cur = nil
	p.mu.Unlock()
	if cur != nil {
		cur.tb.close()
	}
}

// stateHandler sets up a fresh app and database seeded for the state on
// setup, and shuts it down on teardown. The values it returns fill the
// provider-state generators of the interaction (ids in paths and bodies).
func (p *gateway) stateHandler(name string, s state) models.StateHandler {
	return func(setup bool, _ models.ProviderState) (models.ProviderStateResponse, error) {
		p.closeScope()
		if !setup {
			return nil, nil
		}
		sc := &scope{tb: &stateTB{TB: p.t}}
		var values models.ProviderStateResponse
		err := sc.tb.catch(func() {
			sc.h = apitest.Start(sc.tb, p.open(sc.tb), apitest.Options{WorkJobs: s.workJobs})
			values = s.seed(sc)
		})
		if err != nil {
			sc.tb.close()
			err = fmt.Errorf("provider state %q: %w", name, err)
			p.t.Error(err)
			return nil, err
		}
		p.mu.Lock()
		p.cur = sc
		p.mu.Unlock()
		return values, nil
	}
}

// injectToken is the verifier's request filter: the consumer sent the
// example token (pact replays it literally); the state's real token
// replaces it. Any other Authorization value (the 401 interaction's bad
// token) passes unchanged.
func (p *gateway) injectToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+exampleToken {
			if sc := p.current(); sc != nil && sc.token != "" {
				r.Header.Set("Authorization", "Bearer "+sc.token)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP hands the request to the current state's app and checks its
// answer against the OpenAPI document before the verifier sees it.
func (p *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sc := p.current()
	if sc == nil {
		http.Error(w, "no provider state is set up for this interaction", http.StatusServiceUnavailable)
		return
	}
	rec := httptest.NewRecorder()
	sc.h.App.Handler.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	switch {
	case p.breakage == breakResponseField && r.Method == http.MethodPost && r.URL.Path == "/api/channel-webhooks":
		// The OpenAPI check would catch this too; skipping it shows what
		// Pact alone says.
		body = bytes.Replace(body, []byte(`"secret":`), []byte(`"signing_secret":`), 1)
	default:
		p.validate(r, rec.Code, rec.Header(), body)
	}
	for k, vs := range rec.Header() {
		if k != "Content-Length" {
			w.Header()[k] = slices.Clone(vs)
		}
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
}

func (p *gateway) validate(r *http.Request, status int, header http.Header, body []byte) {
	route, params, err := p.router.FindRoute(r)
	if err != nil {
		return // not an API route; nothing to validate against
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		p.t.Errorf("%s %s answered %d with a response the OpenAPI document does not describe: %v\nbody: %s",
			r.Method, r.URL.RequestURI(), status, err, body)
	}
}

func openAPIRouter() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
	if err != nil {
		return nil, err
	}
	doc.Servers = openapi3.Servers{{URL: "/"}}
	return gorillamux.NewRouter(doc)
}

// scope is one interaction's provider: an app on its own database, and the
// token the request filter injects.
type scope struct {
	tb        *stateTB
	h         *apitest.Harness
	token     string
	companyID int64
}

// stateTB is the testing.TB a state's app runs with. Its cleanups run when
// the interaction ends, not when the whole verification does; and state
// setup runs on pact-go's proxy goroutine, where FailNow must not be
// called, so Fatal aborts the setup with an error instead.
type stateTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

type fatal struct{ msg string }

func (s *stateTB) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *stateTB) Fatal(args ...any)                 { panic(fatal{fmt.Sprint(args...)}) }
func (s *stateTB) Fatalf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }
func (s *stateTB) FailNow()                          { panic(fatal{"FailNow"}) }
func (s *stateTB) Skip(args ...any)                  { panic(fatal{"skip: " + fmt.Sprint(args...)}) }
func (s *stateTB) Skipf(format string, args ...any) {
	panic(fatal{"skip: " + fmt.Sprintf(format, args...)})
}
func (s *stateTB) SkipNow() { panic(fatal{"SkipNow"}) }

// catch runs f, turning a Fatal inside it into an error.
func (s *stateTB) catch(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			ft, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%s", ft.msg)
		}
	}()
	f()
	return nil
}

// close runs the cleanups, last registered first (as testing does).
func (s *stateTB) close() {
	s.mu.Lock()
	fs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
