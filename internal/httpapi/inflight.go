package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/fault"
)

// NewHTTPServer is the public listener's server: every phase of a request
// has a deadline, so a client that drips its body or never reads the answer
// is cut off instead of holding a connection. Multipart requests get
// UploadTimeout instead (see extendDeadlines).
func NewHTTPServer(h http.Handler, l config.HTTPLimits) *http.Server {
	headerTimeout := 10 * time.Second
	if l.ReadTimeout > 0 && l.ReadTimeout < headerTimeout {
		headerTimeout = l.ReadTimeout
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: headerTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		// Beyond this Go answers 431 in plain text, outside the document;
		// below it the edge answers an over-long query string (capped far
		// lower) with the operation's JSON error.
		MaxHeaderBytes: 256 << 10,
	}
}

type limitsKey struct{}

// inFlight bounds the requests in progress per client address and per
// bearer token. It counts before authentication, so a flood costs no
// database lookup; the token is the raw header value. Provider webhooks
// are counted per provider account (the path's phone number id) instead
// of per address: the provider posts every company's from the same few
// addresses, and one company's inbound flood must fill its own bound, not
// the one all companies share.
type inFlight struct {
	limits config.HTTPLimits
	logger *slog.Logger

	mu      sync.Mutex
	byIP    map[string]int
	byToken map[string]int
}

func newInFlight(l config.HTTPLimits, logger *slog.Logger) *inFlight {
	return &inFlight{limits: l, logger: logger, byIP: map[string]int{}, byToken: map[string]int{}}
}

// middleware answers 429 with Retry-After when the client already has its
// bound of requests in progress, and hands the limits to the contract
// middleware for the per-route deadlines.
func (f *inFlight) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip := clientFrom(r) // behind a trusted proxy, the client it names
		token := bearerToken(r)
		limit := f.limits.MaxPerIP
		if account, ok := providerAccount(r.URL.Path); ok {
			ip, token, limit = "provider-account "+account, "", f.limits.MaxPerProviderAccount
		}
		if !f.acquire(ip, limit, token) {
			// The operation is not routed yet: the answer is the generic
			// 429 the document's Limits section describes.
			writeError(w, r, f.logger, nil, &fault.Error{Kind: fault.RateLimited,
				Message: "Too many requests in progress; retry shortly.", RetryAfterSeconds: 1})
			return
		}
		defer f.release(ip, token)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), limitsKey{}, f.limits)))
	})
}

// providerAccount is the account of a provider webhook's path
// (/provider-webhooks/{phone_number_id}).
func providerAccount(path string) (string, bool) {
	account, ok := strings.CutPrefix(path, "/provider-webhooks/")
	if !ok || account == "" || strings.Contains(account, "/") {
		return "", false
	}
	return account, true
}

// acquire counts a request of client (an address, or a provider account)
// against limit, and of token against MaxPerToken.
func (f *inFlight) acquire(ip string, limit int, token string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if limit > 0 && f.byIP[ip] >= limit {
		return false
	}
	if token != "" && f.limits.MaxPerToken > 0 && f.byToken[token] >= f.limits.MaxPerToken {
		return false
	}
	f.byIP[ip]++
	if token != "" {
		f.byToken[token]++
	}
	return true
}

func (f *inFlight) release(ip, token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Entries go when their count does, so the maps hold only clients with
	// requests in progress.
	if f.byIP[ip]--; f.byIP[ip] <= 0 {
		delete(f.byIP, ip)
	}
	if token != "" {
		if f.byToken[token]--; f.byToken[token] <= 0 {
			delete(f.byToken, token)
		}
	}
}

// extendDeadlines gives a multipart request on an operation that takes
// multipart the upload timeout for reading its body and writing its answer,
// in place of the server's shorter ones.
func extendDeadlines(w http.ResponseWriter, r *http.Request, op *openapi3.Operation) {
	l, ok := r.Context().Value(limitsKey{}).(config.HTTPLimits)
	if !ok || l.UploadTimeout <= 0 || op.RequestBody == nil || op.RequestBody.Value == nil ||
		op.RequestBody.Value.Content.Get("multipart/form-data") == nil ||
		mediaType(r.Header.Get("Content-Type")) != "multipart/form-data" {
		return
	}
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(l.UploadTimeout)
	// Errors mean the connection cannot take deadlines (a test recorder):
	// the server's own timeouts still apply.
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline)
}
