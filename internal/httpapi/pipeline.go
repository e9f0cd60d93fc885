package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/filestore"
)

// Authenticator resolves a bearer token (auth.Service in production).
type Authenticator interface {
	Authenticate(ctx context.Context, raw string) (auth.Principal, error)
}

type ctxKey int

const (
	requestIDKey ctxKey = iota
	operationKey
)

// operationFrom returns the OpenAPI operation a request was routed to.
func operationFrom(ctx context.Context) *openapi3.Operation {
	op, _ := ctx.Value(operationKey).(*openapi3.Operation)
	return op
}

// requestID returns the request id the pipeline assigned (or received in
// X-Request-Id), so an error's log line joins its request's.
func requestID(ctx context.Context) string {
	s, _ := ctx.Value(requestIDKey).(string)
	return s
}

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_http_requests_total", Help: "HTTP requests by operation and status.",
		}, []string{"operation", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gateway_http_request_duration_seconds", Help: "HTTP request duration by operation.",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// observe assigns the request id, recovers panics as JSON 500s, and logs and
// counts every request by its operation.
// The client address (clientAddrs: the peer, or the client behind a
// trusted proxy) is logged and kept in the context for the in-flight bound.
func observe(logger *slog.Logger, m *metrics, clients clientAddrs, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 64 {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		holder := &opHolder{}
		ctx := context.WithValue(r.Context(), requestIDKey, id)
		ctx = context.WithValue(ctx, opHolderKey{}, holder)
		client := clients.of(r)
		ctx = withClient(ctx, client)
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				logger.ErrorContext(ctx, "panic", "panic", clip(fmt.Sprint(p), maxLogCause), "stack", string(debug.Stack()), "request_id", id)
				if rec.status == 0 {
					writeJSON(rec, http.StatusInternalServerError, map[string]any{"message": "Internal server error."})
				}
			}
			opName := "unmatched"
			if holder.op != nil {
				opName = holder.op.OperationID
			}
			status := strconv.Itoa(rec.status)
			m.requests.WithLabelValues(opName, status).Inc()
			m.duration.WithLabelValues(opName).Observe(time.Since(start).Seconds())
			attrs := []any{"request_id", id, "method", clip(r.Method, 16), "path", clip(r.URL.Path, maxLogValue),
				"operation", opName, "client", clip(client, 64), "status", rec.status, "bytes", rec.bytes, "duration_ms", time.Since(start).Milliseconds()}
			if p := holder.principal; p != nil {
				attrs = append(attrs, "company_id", p.CompanyID, "token_id", p.TokenID)
			}
			logger.InfoContext(ctx, "request", attrs...)
		}()
		next.ServeHTTP(rec, r.WithContext(ctx))
	})
}

// opHolder lets the outer observe middleware learn the operation the inner
// contract middleware routed to, for labels and logs, and who the caller
// was (its company and token ids, never the token).
type opHolder struct {
	op        *openapi3.Operation
	principal *auth.Principal
}
type opHolderKey struct{}

// enforceContract routes a request to its OpenAPI operation, authenticates
// it when the operation is secured, applies the edge limits, and validates
// it against the document. Nothing reaches a handler that the document does
// not allow.
func enforceContract(c *Contract, authn Authenticator, spool filestore.Spool, logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, params, err := c.FindRoute(r)
		if err != nil {
			if errors.Is(err, routers.ErrMethodNotAllowed) {
				writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"message": "Method not allowed."})
				return
			}
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not found."})
			return
		}
		op := route.Operation
		ctx := context.WithValue(r.Context(), operationKey, op)
		if h, ok := ctx.Value(opHolderKey{}).(*opHolder); ok {
			h.op = op
		}
		r = r.WithContext(ctx)

		if secured(c.Doc, op) {
			p, err := authn.Authenticate(ctx, bearerToken(r))
			if err != nil {
				if fault.KindOf(err) == fault.Unauthenticated {
					w.Header().Set("WWW-Authenticate", bearerChallenge(err))
				}
				writeError(w, r, logger, op, err) // logs the reason
				return
			}
			if h, ok := ctx.Value(opHolderKey{}).(*opHolder); ok {
				h.principal = &p
			}
			if err := authorize(op, p); err != nil {
				writeError(w, r, logger, op, err)
				return
			}
			ctx = auth.WithPrincipal(ctx, p)
			r = r.WithContext(ctx)
		}

		// Limits: every check here costs a scan over the request's bytes at
		// most, and runs before the validator decodes anything.
		extendDeadlines(w, r, op)
		if ferr := checkParameters(r, route, params); ferr != nil {
			writeError(w, r, logger, op, ferr)
			return
		}
		limit, human := bodyLimit(op, r)
		if r.ContentLength > limit {
			writeError(w, r, logger, op, tooLarge(human))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		multipartBody := strings.HasPrefix(mediaType(r.Header.Get("Content-Type")), "multipart/")
		var form *form
		if multipartBody && limit == multipartBodyLimit {
			form, err = readForm(r, op, spool, human)
			defer form.remove(logger)
			if err != nil {
				writeError(w, r, logger, op, err)
				return
			}
			r = form.install(r)
		}
		if op.RequestBody != nil && op.RequestBody.Value != nil && !multipartBody && r.Body != http.NoBody {
			nulls, ferr, err := readJSONBody(r, op)
			if err != nil {
				writeError(w, r, logger, op, bodyReadFault(err, human))
				return
			}
			if ferr != nil {
				writeError(w, r, logger, op, ferr)
				return
			}
			if len(nulls) > 0 && mediaType(r.Header.Get("Content-Type")) == "application/json" {
				r = r.WithContext(context.WithValue(r.Context(), explicitNullsKey{}, nulls))
			}
		}

		input := &openapi3filter.RequestValidationInput{
			Request: r, PathParams: params, Route: route, Options: validationOptions,
		}
		if form != nil && form.unreadable {
			input.Options = parametersOnly
		}
		if err := openapi3filter.ValidateRequest(r.Context(), input); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, r, logger, op, tooLarge(human))
				return
			}
			writeError(w, r, logger, op, validationFault(r, op, err))
			return
		}
		if form != nil && form.unreadable {
			writeError(w, r, logger, op, edgeFault(issue{field: "body", message: "The multipart body could not be read."}, "multipart body unreadable"))
			return
		}
		if form != nil && form.problem != nil {
			writeError(w, r, logger, op, form.problem)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// validationOptions are the same for every request: built once. The
// pipeline has authenticated the request already, so the validator's
// security check is a no-op.
var validationOptions = &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}

// parametersOnly validates all but the body: for a multipart body that
// is not a form, whose refusal the edge gives once the parameters pass.
var parametersOnly = &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: true}

// bodyReadFault answers a body that could not be read: over its limit, or
// cut off (a client that stopped sending, or a read deadline).
func bodyReadFault(err error, human string) *fault.Error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return tooLarge(human)
	}
	return fault.Wrap(fault.Invalid, "The request body could not be read.", err)
}

type explicitNullsKey struct{}

// sentAsNull reports whether the request's JSON body had member: null. The
// generated body types read null and absent alike (nil), but a partial
// update must tell "set to null" from "leave unchanged"; the edge scan of
// the body records them.
func sentAsNull(ctx context.Context, member string) bool {
	m, _ := ctx.Value(explicitNullsKey{}).(map[string]bool)
	return m[member]
}

// secured reports whether op requires a bearer token: its own security
// list when it has one (an empty list means public), else the document's.
func secured(doc *openapi3.T, op *openapi3.Operation) bool {
	if op.Security != nil {
		return len(*op.Security) > 0
	}
	return len(doc.Security) > 0
}

// bearerChallenge is the WWW-Authenticate answer to a refused token
// (RFC 6750 §3): no error code when the request carried no Bearer
// credential, invalid_request for one that is not a token at all,
// invalid_token for a token that is unknown, revoked or expired. Which of
// these it was goes to the log only.
func bearerChallenge(err error) string {
	const challenge = `Bearer realm="gateway"`
	switch {
	case errors.Is(err, auth.ErrTokenMissing):
		return challenge
	case errors.Is(err, auth.ErrTokenMalformed):
		return challenge + `, error="invalid_request"`
	default:
		return challenge + `, error="invalid_token"`
	}
}

func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return ""
	}
	return strings.TrimSpace(h[len(prefix):])
}
