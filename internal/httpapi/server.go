// Package httpapi is the one HTTP adapter of the gateway: it implements the
// strict server interface generated from openapi/openapi.yaml, converts
// between API and domain types, and answers every error the way the
// document prescribes for that endpoint. Capabilities never import it.
package httpapi

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chatmsg/gateway/asyncapi"
	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/connections"
	"github.com/chatmsg/gateway/internal/console"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/docs"
	"github.com/chatmsg/gateway/internal/eventstream"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/internal/idempotency"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/templates"
	"github.com/chatmsg/gateway/internal/webhooks"
	"github.com/chatmsg/gateway/openapi"
)

// Deps are the services the adapter calls.
type Deps struct {
	// Redis, when the deployment shares limits through Redis, is checked by
	// /readyz.
	Redis    interface{ Ping(context.Context) error }
	Logger   *slog.Logger
	Registry *prometheus.Registry
	HTTP     config.HTTPLimits // in-flight bounds per client, multipart deadlines; zero = none
	Auth     Authenticator
	Channels *channels.Service
	DB       *store.DB
	Times    clock.Formatter
	Webhooks *webhooks.Service

	// Stream is the live event stream (built over Webhooks when nil).
	Stream *eventstream.Service

	Conversations *conversations.Service
	Connections   *connections.Service
	Messaging     *messaging.Service
	Templates     *templates.Service
	Official      *official.Service
	// Idempotency keeps Idempotency-Key answers; nil turns the header off.
	Idempotency *idempotency.Service
	// SimulatorRoutes serves the simulator's control operations; true only
	// when the simulator is the active connector driver.
	SimulatorRoutes bool
	// Spool holds multipart files while a request is checked and handled
	// (the system's temporary directory when zero).
	Spool filestore.Spool
}

// MetricsHandler serves the Prometheus registry. It belongs on its own
// listener (METRICS_LISTEN), never on the API's: the metrics show every
// company's traffic.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// withoutSimulator answers the simulator's control operations (x-simulator)
// as unknown paths: they exist only while the simulator is the active
// connector driver.
func withoutSimulator(c *Contract, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if route, _, err := c.FindRoute(r); err == nil && route.Operation.Extensions["x-simulator"] == true {
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not found."})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Server implements the generated strict server interface.
type Server struct {
	Deps
}

var _ api.StrictServerInterface = (*Server)(nil)

// NewHandler builds the HTTP handler: observability, the contract
// (routing, auth, validation against the embedded document), then the
// generated chi router and strict handlers.
func NewHandler(ctx context.Context, deps Deps) (http.Handler, error) {
	contract, err := LoadContract(ctx, openapi.Document)
	if err != nil {
		return nil, err
	}
	if deps.Stream == nil && deps.Webhooks != nil {
		deps.Stream = eventstream.New(deps.DB, deps.Webhooks, eventstream.Options{Logger: deps.Logger, MaxPerCompany: deps.HTTP.MaxStreamsPerCompany})
		// A publisher that skips events nobody subscribes to asks Listens;
		// a company reading a stream here listens.
		deps.Webhooks.SetStreamAudience(deps.Stream.Listening)
	}
	s := &Server{Deps: deps}
	onError := func(w http.ResponseWriter, r *http.Request, err error) {
		writeError(w, r, deps.Logger, operationFrom(r.Context()), err)
	}
	onBindError := func(w http.ResponseWriter, r *http.Request, err error) {
		// The validator has already accepted the request, so a binding
		// failure is a body the generated binder reads differently (e.g. an
		// unreadable multipart part): still the client's input.
		onError(w, r, fault.Wrap(fault.Invalid, "The request could not be read.", err))
	}
	strict := api.NewStrictHandlerWithOptions(s, nil, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: onBindError, ResponseErrorHandlerFunc: onError,
	})
	apiRouter := chi.NewRouter()
	apiRouter.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not found."})
	})
	apiRouter.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"message": "Method not allowed."})
	})
	api.HandlerWithOptions(strict, api.ChiServerOptions{BaseRouter: apiRouter, ErrorHandlerFunc: onBindError})

	root := chi.NewRouter()
	root.Use(newInFlight(deps.HTTP, deps.Logger).middleware)
	m := newMetrics(deps.Registry)
	contractHandler := enforceContract(contract, deps.Auth, deps.Spool, deps.Logger, idempotent(deps.Idempotency, deps.Logger, apiRouter))
	if !deps.SimulatorRoutes {
		contractHandler = withoutSimulator(contract, contractHandler)
	}
	root.Handle("/*", contractHandler)
	// The docs page, "/" → /docs, and CORS on the two documents; the rest falls through to the API.
	site, err := docs.New()
	if err != nil {
		return nil, err
	}
	site.Routes(root, contractHandler)
	// The operator console at /console, a client of the API above.
	con, err := console.New()
	if err != nil {
		return nil, err
	}
	con.Routes(root, contractHandler)
	// The event stream is routed before the in-flight bound: a stream
	// lasts as long as its reader, and must not hold a request slot.
	outer := chi.NewRouter()
	outer.Method(http.MethodGet, "/api/events/stream", s.streamHandler(contract))
	outer.Handle("/*", root)
	return observe(deps.Logger, m, clientAddrs{trusted: deps.HTTP.TrustedProxies}, outer), nil
}

func (s *Server) GetHealthz(ctx context.Context, _ api.GetHealthzRequestObject) (api.GetHealthzResponseObject, error) {
	return api.GetHealthz200JSONResponse{Status: "ok"}, nil
}

func (s *Server) GetReadyz(ctx context.Context, _ api.GetReadyzRequestObject) (api.GetReadyzResponseObject, error) {
	var r api.Readiness
	r.Status, r.Checks.Database = "ok", "ok"
	if err := s.DB.Ping(ctx); err != nil {
		s.Logger.WarnContext(ctx, "readiness: database", "err", err)
		r.Status, r.Checks.Database = "unavailable", "unavailable"
	}
	if s.Redis != nil {
		st := api.CheckStatus("ok")
		if err := s.Redis.Ping(ctx); err != nil {
			s.Logger.WarnContext(ctx, "readiness: redis", "err", err)
			r.Status, st = "unavailable", "unavailable"
		}
		r.Checks.Redis = &st
	}
	if r.Status != "ok" {
		return api.GetReadyz503JSONResponse(r), nil
	}
	return api.GetReadyz200JSONResponse(r), nil
}

func (s *Server) GetOpenAPIDocument(ctx context.Context, _ api.GetOpenAPIDocumentRequestObject) (api.GetOpenAPIDocumentResponseObject, error) {
	return api.GetOpenAPIDocument200ApplicationyamlResponse{Body: bytes.NewReader(openapi.Document), ContentLength: int64(len(openapi.Document))}, nil
}

func (s *Server) GetAsyncAPIDocument(ctx context.Context, _ api.GetAsyncAPIDocumentRequestObject) (api.GetAsyncAPIDocumentResponseObject, error) {
	return api.GetAsyncAPIDocument200ApplicationyamlResponse{Body: bytes.NewReader(asyncapi.Document), ContentLength: int64(len(asyncapi.Document))}, nil
}
