package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// A subscription URL whose host every delivery would refuse answers 422 at
// create and update, naming the setting that allows it; a host name is
// still accepted (DNS decides at each delivery), and so is an address the
// operator allowed.
func TestSubscriptionURLGuard(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{Configure: func(c *config.Config) {
			c.OutboundAllowCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		}})
		ten := h.Tenant("Acme")
		existing := createWebhook(t, h, ten.Token, map[string]any{"name": "ok", "url": "https://hooks.example.com/x"}).Data
		cases := []struct {
			name string
			url  string
			host string // "" = accepted
		}{
			{"private address", "http://10.0.0.1:9999/hook", "10.0.0.1"},
			{"metadata address", "http://169.254.169.254/latest", "169.254.169.254"},
			{"v6 loopback not allowed", "http://[::1]:9/hook", "::1"},
			{"v4-mapped private", "http://[::ffff:192.168.1.1]/hook", "::ffff:192.168.1.1"},
			{"allowed loopback", "http://127.0.0.1:9/hook", ""},
			{"localhost reaches allowed loopback", "http://localhost:9/hook", ""},
			{"host name", "https://hooks.example.org/hook", ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				create := h.Do(apitest.Request{Method: "POST", Path: "/api/channel-webhooks", Token: ten.Token,
					JSON: map[string]any{"name": tc.name, "url": tc.url}})
				update := h.Do(apitest.Request{Method: "PUT", Path: fmt.Sprintf("/api/channel-webhooks/%d", existing.ID), Token: ten.Token,
					JSON: map[string]any{"url": tc.url}})
				if tc.host == "" {
					if create.Status != http.StatusCreated || update.Status != http.StatusOK {
						t.Fatalf("create %d %s, update %d %s", create.Status, create.Body, update.Status, update.Body)
					}
					return
				}
				want := fmt.Sprintf("Url host %s is an address the service may not reach; an operator can allow it with OUTBOUND_ALLOW_CIDRS", tc.host)
				for what, resp := range map[string]*apitest.Response{"create": create, "update": update} {
					var body struct {
						Message string              `json:"message"`
						Errors  map[string][]string `json:"errors"`
					}
					resp.JSON(t, &body)
					if resp.Status != http.StatusUnprocessableEntity || body.Message != want || len(body.Errors["url"]) != 1 || body.Errors["url"][0] != want {
						t.Errorf("%s: %d %s, want 422 %q", what, resp.Status, resp.Body, want)
					}
				}
			})
		}
		// Without an allowance, localhost is refused too.
		strict := apitest.Start(t, db, apitest.Options{Configure: func(c *config.Config) { c.OutboundAllowCIDRs = nil }})
		resp := strict.Do(apitest.Request{Method: "POST", Path: "/api/channel-webhooks", Token: ten.Token,
			JSON: map[string]any{"name": "local", "url": "http://localhost:9999/hook"}})
		if resp.Status != http.StatusUnprocessableEntity || !strings.Contains(string(resp.Body), "OUTBOUND_ALLOW_CIDRS") {
			t.Errorf("localhost without allowance: %d %s", resp.Status, resp.Body)
		}
	})
}

// GET /api/channel-webhooks/{id} (an extension) reads one subscription of
// the company, never its secret; another company's id reads as missing;
// the permission is channel_webhooks_view.
func TestGetChannelWebhook(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		acme, globex := h.Tenant("Acme"), h.Tenant("Globex")
		created := createWebhook(t, h, acme.Token, map[string]any{"name": "CRM", "url": "https://hooks.example.com/crm",
			"events": []string{"omnichat.message.received"}})
		path := fmt.Sprintf("/api/channel-webhooks/%d", created.Data.ID)
		cases := []struct {
			name    string
			token   string
			path    string
			status  int
			message string
		}{
			{"own subscription", acme.Token, path, http.StatusOK, "Webhook subscription retrieved"},
			{"another company's", globex.Token, path, 509, "Webhook not found."},
			{"missing", acme.Token, "/api/channel-webhooks/999999", 509, "Webhook not found."},
			{"without channel_webhooks_view", tokenWithout(t, h, acme.UserID, auth.PermWebhooksView), path, http.StatusForbidden, "This action is unauthorized."},
			{"no token", "", path, http.StatusUnauthorized, "Unauthenticated."},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := h.Do(apitest.Request{Method: "GET", Path: tc.path, Token: tc.token})
				m := resp.Map(t)
				if resp.Status != tc.status || m["message"] != tc.message {
					t.Fatalf("%d %s, want %d %q", resp.Status, resp.Body, tc.status, tc.message)
				}
				if strings.Contains(string(resp.Body), created.Secret) || strings.Contains(string(resp.Body), "whsec_") {
					t.Fatalf("the secret leaked: %s", resp.Body)
				}
				if tc.status != http.StatusOK {
					return
				}
				var got webhookEnvelope
				resp.JSON(t, &got)
				if got.Data.ID != created.Data.ID || got.Data.URL != created.Data.URL || got.Data.Name != "CRM" || got.Secret != "" {
					t.Errorf("got %+v, want %+v", got.Data, created.Data)
				}
			})
		}
	})
}

// Files served by token go out with hardened headers on both routes: a PDF
// is an attachment, an SVG declared in any case with parameters too, and
// pictures stay inline; always nosniff and a sandboxing CSP.
func TestFileResponseHeaders(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		acct := strconv.FormatInt(e.ch.ProviderAccount.ID, 10)
		pdf := []byte("%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")
		check := func(t *testing.T, r *apitest.Response, disposition string) {
			t.Helper()
			if r.Status != http.StatusOK || r.Header.Get("Content-Disposition") != disposition ||
				r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("Content-Security-Policy") != "sandbox; default-src 'none'" {
				t.Fatalf("%d %v, want Content-Disposition %q", r.Status, r.Header, disposition)
			}
		}
		for _, tc := range []struct {
			name, file  string
			content     []byte
			disposition string
		}{
			{"pdf", "invoice.pdf", pdf, "attachment; filename=invoice.pdf"},
			{"png", "banner.png", pngImage(t, 3, 3), "inline; filename=banner.png"},
		} {
			t.Run("header media "+tc.name, func(t *testing.T) {
				resp := e.h.Do(apitest.Request{Method: "POST", Path: "/api/provider-templates/upload-send-media", Token: e.ten.Token,
					Form: map[string]string{"provider_account_id": acct}, FileField: "file", FileName: tc.file, FileType: "application/octet-stream", FileContent: tc.content})
				var up uploadAnswer
				resp.JSON(t, &up)
				u, err := url.Parse(up.Data.URL)
				if resp.Status != http.StatusOK || err != nil {
					t.Fatalf("upload: %d %s", resp.Status, resp.Body)
				}
				check(t, e.h.Do(apitest.Request{Method: "GET", Path: u.EscapedPath()}), tc.disposition)
			})
		}

		h, c := startConnections(t, db, apitest.Options{WorkJobs: true})
		sink := newEventSink(t, http.StatusNoContent)
		sink.subscribe(h, c.token, map[string]any{"name": "sink", "events": []string{events.OmnichatMessageReceived}})
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.domain)</script></svg>`)
		for _, tc := range []struct {
			name, contentType, file string
			content                 []byte
			disposition             string
		}{
			{"svg with odd case and parameters", "image/SVG+xml; charset=utf-8", "x.svg", svg, "attachment; filename=x.svg"},
			{"html", "text/html", "page.html", []byte("<html><script>alert(1)</script></html>"), "attachment; filename=page.html"},
			{"png", "image/png", "foto.png", pngImage(t, 2, 2), "inline; filename=foto.png"},
		} {
			t.Run("message media "+tc.name, func(t *testing.T) {
				ext := c.inbound(conn.ID, map[string]any{"from": "5511977776666", "name": "Ana",
					"file": map[string]any{"name": tc.file, "content_type": tc.contentType, "data": base64.StdEncoding.EncodeToString(tc.content)}})
				d := sink.first(tc.name, messageEvent(events.OmnichatMessageReceived, ext, 0))
				m, _ := d.Data["media"].(map[string]any)
				u, err := url.Parse(fmt.Sprint(m["url"]))
				if err != nil || m == nil {
					t.Fatalf("media %v", d.Data["media"])
				}
				r := getMedia(h, u.EscapedPath())
				check(t, r, strings.Replace(tc.disposition, tc.file, fmt.Sprint(m["filename"]), 1))
				if ct := r.Header.Get("Content-Type"); ct != strings.ToLower(ct) {
					t.Errorf("Content-Type %q is not in the form it was judged in", ct)
				}
			})
		}
	})
}

// A refused token answers 401 with the document's body and an RFC 6750
// challenge; why it was refused is in the log only. Request lines carry
// the company and token ids, never a bearer or media token.
func TestUnauthenticatedSignalsAndRequestLog(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		var logs syncLog
		h := apitest.Start(t, db, apitest.Options{Logs: &logs})
		ten := h.Tenant("Acme")
		ctx := context.Background()
		expired, _, err := h.App.Auth.CreateToken(ctx, ten.UserID, "short", auth.AllPermissions, time.Nanosecond)
		if err != nil {
			t.Fatal(err)
		}
		revoked, rtok, err := h.App.Auth.CreateToken(ctx, ten.UserID, "gone", auth.AllPermissions, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.App.Auth.RevokeToken(ctx, rtok.ID); err != nil {
			t.Fatal(err)
		}
		const unknown = "gw_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
		cases := []struct {
			name      string
			header    string
			challenge string
			reason    string
		}{
			{"no credentials", "", `Bearer realm="gateway"`, "no bearer token"},
			{"another scheme", "Basic dXNlcjpwYXNz", `Bearer realm="gateway"`, "no bearer token"},
			{"malformed", "Bearer not a token!", `Bearer realm="gateway", error="invalid_request"`, "bearer token malformed"},
			{"unknown", "Bearer " + unknown, `Bearer realm="gateway", error="invalid_token"`, "bearer token unknown"},
			{"revoked", "Bearer " + revoked, `Bearer realm="gateway", error="invalid_token"`, "bearer token revoked"},
			{"expired", "Bearer " + expired, `Bearer realm="gateway", error="invalid_token"`, "bearer token expired"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				id := "auth-" + strings.ReplaceAll(tc.name, " ", "-")
				hdr := http.Header{"X-Request-Id": {id}}
				if tc.header != "" {
					hdr.Set("Authorization", tc.header)
				}
				resp := h.Do(apitest.Request{Method: "GET", Path: "/api/channel-webhooks", Header: hdr})
				if resp.Status != http.StatusUnauthorized || strings.TrimSpace(string(resp.Body)) != `{"message":"Unauthenticated."}` ||
					resp.Header.Get("WWW-Authenticate") != tc.challenge {
					t.Fatalf("%d %q %s", resp.Status, resp.Header.Get("WWW-Authenticate"), resp.Body)
				}
				if strings.Contains(string(resp.Body), "revoked") || strings.Contains(string(resp.Body), "expired") {
					t.Fatalf("the reason reached the client: %s", resp.Body)
				}
				refused := logs.find(t, id, "request refused")
				if refused["err"] != tc.reason || refused["kind"] != "unauthenticated" {
					t.Errorf("log %v, want reason %q", refused, tc.reason)
				}
			})
		}

		// An authenticated request's line names the company and the token.
		resp := h.Do(apitest.Request{Method: "GET", Path: "/api/channel-webhooks", Token: ten.Token, Header: http.Header{"X-Request-Id": {"who"}}})
		if resp.Status != http.StatusOK {
			t.Fatalf("%d %s", resp.Status, resp.Body)
		}
		line := logs.find(t, "who", "request")
		toks, err := h.App.Auth.ListTokens(ctx, ten.CompanyID)
		if err != nil {
			t.Fatal(err)
		}
		bootstrap := toks[len(toks)-1].ID
		if line["company_id"] != float64(ten.CompanyID) || line["token_id"] != float64(bootstrap) {
			t.Errorf("request line %v, want company_id %d token_id %d", line, ten.CompanyID, bootstrap)
		}

		// Media tokens are redacted, found or not.
		const mediaToken = "kq3v0yH5c8sWm2mG0aZb4Xv9J1u7T6pLr2fQe8dNcYs"
		for _, p := range []string{"/media/" + mediaToken + "/a.pdf", "/message-media/" + mediaToken + "/a.jpg"} {
			h.Do(apitest.Request{Method: "GET", Path: p, Header: http.Header{"X-Request-Id": {"media"}}})
		}
		all := logs.String()
		for _, secret := range []string{ten.Token, expired, revoked, unknown, mediaToken} {
			if strings.Contains(all, secret) {
				t.Errorf("the log holds a token: %s", secret)
			}
		}
		if !strings.Contains(all, `"path":"/media/[redacted]/a.pdf"`) || !strings.Contains(all, `"path":"/message-media/[redacted]/a.jpg"`) {
			t.Errorf("media request lines missing or not redacted:\n%s", all)
		}
	})
}

// syncLog collects the app's JSON log lines.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// find returns the line of the request with msg.
func (l *syncLog) find(t *testing.T, requestID, msg string) map[string]any {
	t.Helper()
	for _, raw := range strings.Split(l.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(raw), &m) == nil && m["request_id"] == requestID && m["msg"] == msg {
			return m
		}
	}
	t.Fatalf("no %q line of request %s in:\n%s", msg, requestID, l.String())
	return nil
}

// scrape reads /metrics from the app's metrics handler (the handler of the
// METRICS_LISTEN listener).
func scrape(t testing.TB, h *apitest.Harness) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.App.MetricsHandler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

// /metrics is not on the API listener: it answers like any unknown path
// there, and only the metrics listener's handler serves it.
func TestMetricsOffTheAPIListener(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		ten := h.Tenant("Acme")
		for _, token := range []string{"", ten.Token} {
			resp, err := http.Get(h.Server.URL + "/metrics")
			if token != "" {
				req, _ := http.NewRequest(http.MethodGet, h.Server.URL+"/metrics", nil)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err = http.DefaultClient.Do(req)
			}
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "gateway_") {
				t.Errorf("API listener /metrics (token %v): %d %s", token != "", resp.StatusCode, body)
			}
		}
		if !strings.Contains(scrape(t, h), "gateway_http_requests_total") {
			t.Error("the metrics handler lacks the request counter")
		}
	})
}

// The simulator's control operations exist only while the simulator is
// the connector driver: with another they answer as unknown paths.
func TestSimulatorRoutesOnlyWithTheSimulator(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		for _, tc := range []struct {
			driver string
			status int
		}{
			{config.ConnectorWhatsmeow, http.StatusNotFound},
			{config.ConnectorSimulator, 509}, // the route exists: connection 999 does not
		} {
			t.Run(tc.driver, func(t *testing.T) {
				h := apitest.Start(t, db, apitest.Options{Configure: func(c *config.Config) { c.ConnectorDriver = tc.driver }})
				ten := h.Tenant("Acme " + tc.driver)
				for _, path := range []string{"/api/chatapp-simulator/999/pair", "/api/chatapp-simulator/999/inbound"} {
					resp := h.Do(apitest.Request{Method: "POST", Path: path, Token: ten.Token, JSON: map[string]any{"from": "5511977776666", "text": "hi"}})
					if resp.Status != tc.status {
						t.Errorf("%s: %d %s, want %d", path, resp.Status, resp.Body, tc.status)
					}
					if tc.status == http.StatusNotFound && resp.Map(t)["message"] != "Not found." {
						t.Errorf("%s: %s", path, resp.Body)
					}
				}
				messages := h.Do(apitest.Request{Method: "GET", Path: "/api/chatapp-simulator/999/messages", Token: ten.Token})
				if messages.Status != tc.status {
					t.Errorf("messages: %d %s", messages.Status, messages.Body)
				}
			})
		}
	})
}

// In simulator mode each company has its own view of the chat app: numbers
// one company's contacts put "on the chat app" are not on it for another,
// and one company's simulator message log is not another's.
func TestSimulatorScopedToTheCompany(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h, acme := startConnections(t, db, apitest.Options{})
		other := connAPI{t: t, h: h, token: h.Tenant("Other").Token}
		mine := acme.pair(acme.create("Mine", "5511988887777").ID)
		theirs := other.pair(other.create("Theirs", "5511988886666").ID)
		acme.ok(fmt.Sprintf("/api/chatapp-simulator/%d/contacts", mine.ID), map[string]any{"contacts": []map[string]any{
			{"key": "5511977776666", "name": "Ana"}}}, nil)
		check := func(c connAPI, id int) bool {
			var checks []struct {
				Exists bool `json:"exists"`
			}
			c.ok("/api/chatapp-check-on-chatapp", map[string]any{"id": id, "numbers": []string{"5511977776666"}}, &checks)
			return len(checks) == 1 && checks[0].Exists
		}
		if !check(acme, mine.ID) {
			t.Error("the company's own contact is not on the chat app for it")
		}
		if check(other, theirs.ID) {
			t.Error("another company's contact is on the chat app for this one")
		}
		resp := other.h.Do(apitest.Request{Method: "GET", Path: fmt.Sprintf("/api/chatapp-simulator/%d/messages", mine.ID), Token: other.token})
		if resp.Status != 509 || resp.Map(t)["message"] != "Connection not found" {
			t.Errorf("another company's simulator log: %d %s", resp.Status, resp.Body)
		}
	})
}
