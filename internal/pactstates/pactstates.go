// Package pactstates is the provider-states endpoint of contract
// verification against a running gateway (contracttests/apicontract, `make
// contract PROVIDER_URL=…`). It exists only in a gateway started with
// PACT_PROVIDER_STATES=1: it creates companies and tokens on request, which
// no production gateway may offer.
//
// Every setup creates a company of its own (named CompanyPrefix + random)
// and seeds it through the public API, called in-process with that
// company's token, and through the services the admin commands use. The
// answer carries the token and the ids the interaction's provider-state
// generators need. Teardown deletes that company, and with it (every table
// cascades from companies) all the state created, and stops the loopback
// receivers and provider simulator the state started: a staging database is
// left as it was.
//
// Some states need things on 127.0.0.1 in the gateway's process (a webhook
// receiver, the provider simulator of an official channel), so the gateway
// must also be started with OUTBOUND_ALLOW_CIDRS=127.0.0.1/32; the
// chat-app states need CONNECTOR_DRIVER=simulator.
package pactstates

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/templates"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// Path is where Mount serves the endpoint.
const Path = "/_pact/provider-states"

// CompanyPrefix starts the name of every company a state creates; teardown
// deletes no company whose name does not start with it.
const CompanyPrefix = "Pact provider state "

// Deps are the services the states seed through besides the public API.
type Deps struct {
	Auth      *auth.Service
	Channels  *channels.Service
	Templates *templates.Service
	Messaging *messaging.Service
	Webhooks  *webhooks.Service
	Logger    *slog.Logger
}

// Request is the state-change body Pact verifiers send: setup or teardown
// of the named state. Params of a teardown carry the companyId its setup
// answered.
type Request struct {
	State  string         `json:"state"`
	Action string         `json:"action"`
	Params map[string]any `json:"params,omitempty"`
}

// Mount serves the endpoint at Path and everything else with api, which
// the states also call (in-process) to seed through the public API.
func Mount(api http.Handler, d Deps) http.Handler {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	e := &endpoint{api: api, deps: d, open: map[int64]func(){}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != Path {
			api.ServeHTTP(w, r)
			return
		}
		e.ServeHTTP(w, r)
	})
}

type endpoint struct {
	api  http.Handler
	deps Deps

	mu   sync.Mutex
	open map[int64]func() // company id → stops what its state started
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "POST a state change"})
		return
	}
	var req Request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "body: " + err.Error()})
		return
	}
	switch req.Action {
	case "", "setup":
		e.setup(w, r, req)
	case "teardown":
		e.teardown(w, r, req)
	default:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("action %q is not setup or teardown", req.Action)})
	}
}

func (e *endpoint) setup(w http.ResponseWriter, r *http.Request, req Request) {
	seed, ok := states[req.State]
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("unknown provider state %q", req.State), "states": Names()})
		return
	}
	sc := &scope{ctx: r.Context(), e: e, self: selfURL(r)}
	values, err := sc.run(seed)
	if err != nil {
		sc.close()
		e.deps.Logger.ErrorContext(r.Context(), "pact provider state", "state", req.State, "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": fmt.Sprintf("provider state %q: %v", req.State, err)})
		return
	}
	e.mu.Lock()
	e.open[sc.companyID] = sc.stop
	e.mu.Unlock()
	values["token"] = sc.token
	values["companyId"] = sc.companyID
	writeJSON(w, http.StatusOK, values)
}

func (e *endpoint) teardown(w http.ResponseWriter, r *http.Request, req Request) {
	id, ok := companyIDOf(req.Params)
	if !ok {
		// Nothing was set up (or the verifier does not pass the setup's
		// answer back): nothing to remove.
		writeJSON(w, http.StatusOK, map[string]any{})
		return
	}
	e.mu.Lock()
	stop := e.open[id]
	delete(e.open, id)
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
	if err := e.remove(context.WithoutCancel(r.Context()), id); err != nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": id})
}

// remove deletes a state's company. Its subscriptions go first, through
// the webhooks service: their delivery log, lanes and finished deliveries
// are keyed by subscription, not company, so the company's cascade does not
// reach them.
func (e *endpoint) remove(ctx context.Context, companyID int64) error {
	if err := e.deps.Auth.DeleteCompany(ctx, companyID, CompanyPrefix, func(ctx context.Context) error {
		if err := e.deleteSubscriptions(ctx, companyID); err != nil {
			return err
		}
		return e.deps.Webhooks.ForgetCompanyEvents(ctx, companyID)
	}); err != nil {
		return err
	}
	return nil
}

func (e *endpoint) deleteSubscriptions(ctx context.Context, companyID int64) error {
	// A principal of its own (TokenID is the rate limiter's key; no real
	// token has a negative id), holding what deleting needs.
	p := auth.Principal{CompanyID: companyID, TokenID: -companyID, Permissions: []string{auth.PermWebhooksView, auth.PermWebhooksDelete}}
	for {
		subs, _, err := e.deps.Webhooks.ListChannelWebhooks(ctx, p, webhooks.ListFilter{Page: store.Page{Number: 1, PerPage: 100}})
		if err != nil {
			return fmt.Errorf("list subscriptions: %w", err)
		}
		if len(subs) == 0 {
			return nil
		}
		for _, sub := range subs {
			if err := e.deps.Webhooks.DeleteChannelWebhook(ctx, p, sub.ID); err != nil {
				return fmt.Errorf("delete subscription %d: %w", sub.ID, err)
			}
		}
	}
}

func companyIDOf(params map[string]any) (int64, bool) {
	// pact-go nests the parameters once more; accept both shapes.
	if inner, ok := params["params"].(map[string]any); ok {
		params = inner
	}
	switch v := params["companyId"].(type) {
	case float64:
		return int64(v), v > 0
	case json.Number:
		n, err := v.Int64()
		return n, err == nil && n > 0
	}
	return 0, false
}

// selfURL is this replica's own listener, which the provider simulator
// posts inbound webhooks to: behind a balancer the state and the channel
// it registers live in this process.
func selfURL(r *http.Request) string {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		return "http://" + a.String()
	}
	return "http://" + r.Host
}

// Names lists the provider states, sorted.
func Names() []string {
	out := make([]string, 0, len(states))
	for n := range states {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// scope is one state being set up: its company, token and what to stop at
// teardown.
type scope struct {
	ctx       context.Context
	e         *endpoint
	self      string
	token     string
	companyID int64

	stops []func()
}

type failure struct{ err error }

// run seeds the state; fail inside seed aborts it with an error.
func (sc *scope) run(seed func(*scope) map[string]any) (values map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	values = seed(sc)
	if values == nil {
		values = map[string]any{}
	}
	return values, nil
}

func (sc *scope) fail(format string, args ...any) {
	panic(failure{fmt.Errorf(format, args...)})
}

func (sc *scope) onStop(f func()) { sc.stops = append(sc.stops, f) }

// stop stops what the state started, last first.
func (sc *scope) stop() {
	for i := len(sc.stops) - 1; i >= 0; i-- {
		sc.stops[i]()
	}
}

// close undoes a failed setup: its receivers and its company.
func (sc *scope) close() {
	sc.stop()
	if sc.companyID != 0 {
		if err := sc.e.remove(context.WithoutCancel(sc.ctx), sc.companyID); err != nil {
			sc.e.deps.Logger.Error("pact provider state: delete company", "company_id", sc.companyID, "err", err)
		}
	}
}

// loopback serves h on 127.0.0.1 until the state is torn down.
func (sc *scope) loopback(h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sc.fail("listen on 127.0.0.1: %v", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			sc.e.deps.Logger.Error("pact provider state: loopback server", "err", err)
		}
	}()
	sc.onStop(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
