// Package apitest starts the real gateway (the same wiring cmd/gateway
// runs) on a fresh database behind a loopback HTTP server, and validates
// every response it receives against the OpenAPI document: a test that gets
// an answer the document does not describe fails, whatever it asserts.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/httpapi"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/openapi"
)

// Options adjust the harness.
type Options struct {
	// Now is the app's clock; default the real one.
	Now clock.Clock
	// WorkJobs starts River workers (default: jobs are only inserted).
	WorkJobs bool
	// Configure edits the configuration before the app is built.
	Configure func(*config.Config)
	// MessagingOptions adjusts the messaging service (the send queue's
	// lease).
	MessagingOptions func(*messaging.Options)
	// Logs, when set, receives the app's log as JSON lines from level info
	// up (tests that bound what a request may write to the log).
	Logs io.Writer
}

// Harness is a running gateway.
type Harness struct {
	T      testing.TB
	App    *app.App
	Server *httptest.Server
	router routers.Router
}

var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
)

func loadRouter() (routers.Router, error) {
	specOnce.Do(func() {
		doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
		if err != nil {
			specErr = err
			return
		}
		doc.Servers = openapi3.Servers{{URL: "/"}}
		specRouter, specErr = gorillamux.NewRouter(doc)
	})
	return specRouter, specErr
}

// Config is the configuration tests run with: loopback allowed for outbound
// calls, data in a temp dir, and in-flight bounds out of the way (tests
// that fire many requests at once from one address are not floods; the
// edge tests set the bounds they exercise).
func Config(t testing.TB) config.Config {
	cfg, err := config.Parse("test", []string{"-data-dir", t.TempDir(), "-log-level", "warn",
		"-http-max-inflight-per-ip", "100000", "-http-max-inflight-per-token", "100000"}, func(string) string { return "" })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.OutboundAllowCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	return cfg
}

// Start builds the app over db and serves it on a loopback port.
func Start(t testing.TB, db *store.DB, opts Options) *Harness {
	t.Helper()
	router, err := loadRouter()
	if err != nil {
		t.Fatalf("load openapi: %v", err)
	}
	cfg := Config(t)
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(slog.NewTextHandler(newTestWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if opts.Logs != nil {
		logger = slog.New(slog.NewJSONHandler(opts.Logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	a, err := app.New(ctx, cfg, app.Options{DB: db, Now: opts.Now, Logger: logger, InsertOnlyJobs: !opts.WorkJobs,
		MessagingOptions: opts.MessagingOptions})
	if err != nil {
		cancel()
		t.Fatalf("app: %v", err)
	}
	if opts.WorkJobs {
		if err := a.StartWork(ctx); err != nil {
			cancel()
			t.Fatalf("%v", err)
		}
	}
	// The production server settings (timeouts, header limit) on a loopback
	// port.
	srv := httptest.NewUnstartedServer(a.Handler)
	srv.Config = httpapi.NewHTTPServer(a.Handler, cfg.HTTP)
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		stopCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		if opts.WorkJobs {
			if err := a.StopWork(stopCtx); err != nil {
				t.Logf("stop work: %v", err)
			}
		}
		cancel()
		a.Close()
	})
	return &Harness{T: t, App: a, Server: srv, router: router}
}

// Tenant is a bootstrapped company with a token.
type Tenant struct {
	CompanyID int64
	UserID    int64
	Token     string
}

// Tenant creates a company, a user and a token with perms (all when none).
func (h *Harness) Tenant(name string, perms ...string) Tenant {
	h.T.Helper()
	if len(perms) == 0 {
		perms = auth.AllPermissions
	}
	res, err := h.App.Auth.Bootstrap(context.Background(), name, strings.ToLower(strings.ReplaceAll(name, " ", ""))+"@example.test", perms, 0)
	if err != nil {
		h.T.Fatalf("bootstrap %s: %v", name, err)
	}
	return Tenant{CompanyID: res.CompanyID, UserID: res.UserID, Token: res.Token}
}

// Response is an answer that matched the document.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test on error.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// Map decodes the body as a JSON object.
func (r *Response) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// Request describes one call.
type Request struct {
	Method string
	Path   string // with query string
	Token  string
	// JSON is marshalled as the body unless it is a string or []byte,
	// which are sent as they are (malformed bodies), or an io.Reader, which
	// is sent chunked.
	JSON any
	// Multipart fields; a File part is sent when FileName is set.
	Form        map[string]string
	FileField   string
	FileName    string
	FileType    string
	FileContent []byte
	Header      http.Header
}

// Do sends req and validates the answer against the OpenAPI document.
func (h *Harness) Do(req Request) *Response {
	h.T.Helper()
	var body io.Reader
	ctype := ""
	switch {
	case req.Form != nil || req.FileName != "":
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		var errs []error
		for k, v := range req.Form {
			errs = append(errs, mw.WriteField(k, v))
		}
		if req.FileName != "" {
			hdr := make(map[string][]string)
			hdr["Content-Disposition"] = []string{`form-data; name="` + req.FileField + `"; filename="` + req.FileName + `"`}
			hdr["Content-Type"] = []string{req.FileType}
			w, err := mw.CreatePart(hdr)
			if err == nil {
				_, err = w.Write(req.FileContent)
			}
			errs = append(errs, err)
		}
		if err := errors.Join(append(errs, mw.Close())...); err != nil {
			h.T.Fatalf("multipart body: %v", err)
		}
		body, ctype = &buf, mw.FormDataContentType()
	case req.JSON != nil:
		switch v := req.JSON.(type) {
		case string:
			body = strings.NewReader(v)
		case []byte:
			body = bytes.NewReader(v)
		case io.Reader:
			body = v // no length known: sent chunked
		default:
			b, err := json.Marshal(v)
			if err != nil {
				h.T.Fatalf("marshal: %v", err)
			}
			body = bytes.NewReader(b)
		}
		ctype = "application/json"
	}
	hr, err := http.NewRequest(req.Method, h.Server.URL+req.Path, body)
	if err != nil {
		h.T.Fatalf("request: %v", err)
	}
	for k, vs := range req.Header {
		hr.Header[k] = vs
	}
	if ctype != "" && hr.Header.Get("Content-Type") == "" {
		hr.Header.Set("Content-Type", ctype)
	}
	hr.Header.Set("Accept", "application/json")
	if req.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+req.Token)
	}
	resp, err := h.Server.Client().Do(hr)
	if err != nil {
		h.T.Fatalf("%s %s: %v", req.Method, req.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.T.Fatalf("read body: %v", err)
	}
	out := &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	h.validate(hr, out)
	return out
}

// validate fails the test when the answer is not one the document
// describes for the operation (status, headers, body schema).
func (h *Harness) validate(hr *http.Request, resp *Response) {
	h.T.Helper()
	route, params, err := h.router.FindRoute(hr)
	if err != nil {
		return // not an API route (404/405 answers); nothing to validate against
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: hr, PathParams: params, Route: route},
		Status:                 resp.Status,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(resp.Body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		h.T.Errorf("%s %.300s answered %d with a response the OpenAPI document does not describe: %.2000v\nbody: %.2000s",
			hr.Method, hr.URL.RequestURI(), resp.Status, err, resp.Body)
	}
}

// testWriter sends log lines to the test log until the test ends; lines
// from background work that outlives the test are dropped rather than
// panicking the test binary.
type testWriter struct {
	t    testing.TB
	mu   *sync.Mutex
	done *bool
}

func newTestWriter(t testing.TB) testWriter {
	w := testWriter{t: t, mu: &sync.Mutex{}, done: new(bool)}
	t.Cleanup(func() { w.mu.Lock(); *w.done = true; w.mu.Unlock() })
	return w
}

func (w testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !*w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
