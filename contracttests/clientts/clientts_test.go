//go:build clientts

package clientts_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/openapi"
)

// The simulated world: the company's official number, a second company's (whose plan quota is
// spent), the contact who wrote to the official number (window open) and one who never did.
const (
	phoneNumberID      = "109876543210987"
	businessAccountID  = "102938475610293"
	officialKey        = "5511999990001"
	brokePhoneNumberID = "109876543210988"
	brokeBusinessID    = "102938475610294"
	brokeKey           = "5511999990002"
	contactKey         = "5511977776666"
	strangerKey        = "5511955554444"
)

// families are the operations the suite must call and see validated: every operation of the
// API's families (connections and their simulator, sends, edit/revoke, contact channels, company
// channels, templates and uploads, every webhook operation).
var families = []string{"Connections", "Chat-app simulator", "Messages", "Conversations", "Channels", "Templates", "Webhooks"}

// exchange is one request the TypeScript client made, as the validating proxy saw it.
type exchange struct {
	operation   string
	contentType string
	status      int
}

// TestTypeScriptClient generates a TypeScript client from openapi/openapi.yaml with
// openapi-typescript + openapi-fetch, typechecks src/suite.ts with `tsc --noEmit` (strict, no
// casts, no any), then runs it against a live gateway with the provider simulator and the
// chat-app simulator. Every request passes through a proxy that validates the answer against its
// operation in the document; the test fails on an answer the document does not describe, and on
// an operation of the families above the suite did not call. `make test-clients` runs it (build
// tag clientts: it needs node and the pinned npm packages of this folder).
func TestTypeScriptClient(t *testing.T) {
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	run(t, dir, "bash", "npm-ci.sh")
	checkNoEscapes(t, filepath.Join(dir, "src"))
	run(t, dir, "node", "generate.mjs")
	run(t, dir, "node_modules/.bin/tsc", "--noEmit", "-p", ".")
	checkRejects(t, dir)
	run(t, dir, "node_modules/.bin/tsc", "-p", ".")

	h := apitest.Start(t, storetest.SQLite(t), apitest.Options{WorkJobs: true})
	ctx := t.Context()
	sim := providersim.New(providersim.Options{Logger: slog.New(slog.DiscardHandler)})
	simSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(simSrv.Close)

	acme := h.Tenant("Acme")
	acmeChannel := official(t, h, sim, simSrv.URL, acme.CompanyID, phoneNumberID, businessAccountID, officialKey)
	broke := h.Tenant("Broke")
	official(t, h, sim, simSrv.URL, broke.CompanyID, brokePhoneNumberID, brokeBusinessID, brokeKey)
	zero := int64(0)
	if _, err := h.App.Messaging.SetQuota(ctx, broke.CompanyID, &zero); err != nil {
		t.Fatal(err)
	}
	// The contact writes first: the provider simulator posts its signed webhook, which opens the
	// 24-hour window for free text on the official channel.
	if _, err := (providersim.Control{URL: simSrv.URL}).Inbound(ctx, providersim.InboundRequest{
		PhoneNumberID: phoneNumberID, From: contactKey, Name: "Maria", Text: "Olá!"}); err != nil {
		t.Fatalf("inbound: %v", err)
	}
	proxy := newValidatingProxy(t, h.Server.URL)
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	runCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(runCtx, "node", "build/src/suite.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GW="+front.URL,
		"TOKEN="+acme.Token,
		"BROKE_TOKEN="+broke.Token,
		"OFFICIAL_KEY="+officialKey,
		"BROKE_KEY="+brokeKey,
		fmt.Sprintf("COMPANY_CHANNEL_ID=%d", acmeChannel.ID),
		"CONTACT_KEY="+contactKey,
		"STRANGER_KEY="+strangerKey,
	)
	out, err := cmd.CombinedOutput()
	t.Logf("suite.js:\n%s", out)
	if err != nil {
		t.Fatalf("the TypeScript suite failed: %v", err)
	}

	seen := proxy.exchanges()
	ops := map[string]bool{}
	for _, x := range seen {
		ops[x.operation] = true
	}
	var missing []string
	for _, op := range familyOperations(t) {
		if !ops[op] {
			missing = append(missing, op)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the suite never called %v", missing)
	}
	want := []struct {
		what   string
		status int
		ctype  string
	}{
		{"synchronous or queued send", 200, "application/json"},
		{"send outside the 24-hour window", 409, "application/json"},
		{"send over the plan quota", 402, "application/json"},
		{"multipart send", 200, "multipart/form-data"},
	}
	for _, w := range want {
		if !slices.ContainsFunc(seen, func(x exchange) bool {
			return x.operation == "sendMessage" && x.status == w.status && x.contentType == w.ctype
		}) {
			t.Errorf("no %s (%d, %s) among the sends", w.what, w.status, w.ctype)
		}
	}
	t.Logf("%d responses validated, %d operations", len(seen), len(ops))
}

// official registers an official channel at the provider simulator and in the gateway, with the
// simulator's demo templates synced.
func official(t *testing.T, h *apitest.Harness, sim *providersim.Server, simURL string, companyID int64, phoneID, businessID, key string) channels.Channel {
	t.Helper()
	ctx := t.Context()
	sim.AddAccount(providersim.Account{PhoneNumberID: phoneID, BusinessAccountID: businessID, AccessToken: "sim-token",
		AppSecret: "sim-secret", DisplayPhoneNumber: key, WebhookURL: h.Server.URL + "/provider-webhooks/" + phoneID})
	sim.SeedTemplates(businessID, providersim.DemoTemplates())
	ch, err := h.App.Channels.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: companyID, Name: "Loja " + key, Key: key,
		BusinessAccountID: businessID, PhoneNumberID: phoneID, AccessToken: "sim-token", AppSecret: "sim-secret", BaseURL: simURL})
	if err != nil {
		t.Fatalf("register official channel: %v", err)
	}
	account, err := h.App.Templates.AccountChannel(ctx, companyID, ch.ProviderAccount.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.App.Templates.Sync(ctx, account); err != nil {
		t.Fatalf("sync templates: %v", err)
	}
	return ch
}

// familyOperations lists the operationIds of the document tagged with one of families.
func familyOperations(t *testing.T) []string {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if slices.ContainsFunc(op.Tags, func(tag string) bool { return slices.Contains(families, tag) }) {
				ops = append(ops, op.OperationID)
			}
		}
	}
	sort.Strings(ops)
	if len(ops) == 0 {
		t.Fatal("no operation in the families")
	}
	return ops
}

// checkNoEscapes fails when the suite's sources leave the generated types: a type assertion
// (`as T`, except `as const`), `any`, or a ts-ignore/ts-expect-error comment.
func checkNoEscapes(t *testing.T, dir string) {
	t.Helper()
	escape := regexp.MustCompile(`\bas\s+(?:[A-Za-z_{(\[])|\bany\b|@ts-(?:ignore|expect-error|nocheck)|<\s*unknown\s*>`)
	literal := regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	files, err := filepath.Glob(filepath.Join(dir, "*.ts"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sources in %s: %v", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code := literal.ReplaceAllString(line, `""`)
			code, _, _ = strings.Cut(code, "//")
			if m := escape.FindString(strings.ReplaceAll(code, "as const", "")); m != "" {
				t.Errorf("%s:%d leaves the generated types (%q): %s", filepath.Base(f), i+1, m, strings.TrimSpace(line))
			}
		}
	}
}

// checkRejects typechecks rejects/rejects.ts, requests the document forbids: tsc must report an
// error on every line marked "// rejects" and on no other line.
func checkRejects(t *testing.T, dir string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, "rejects", "rejects.ts"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]bool{}
	for i, line := range strings.Split(string(src), "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), "// rejects") {
			want[i+1] = true
		}
	}
	cmd := exec.CommandContext(t.Context(), "node_modules/.bin/tsc", "--noEmit", "-p", "rejects")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("tsc accepted every request of rejects/rejects.ts:\n%s", out)
	}
	got := map[int]bool{}
	for _, m := range regexp.MustCompile(`rejects\.ts\((\d+),`).FindAllStringSubmatch(string(out), -1) {
		var n int
		fmt.Sscan(m[1], &n)
		got[n] = true
	}
	for n := range want {
		if !got[n] {
			t.Errorf("rejects.ts:%d typechecks, but the document forbids it", n)
		}
	}
	for n := range got {
		if !want[n] {
			t.Errorf("rejects.ts:%d fails to typecheck, but the document allows it:\n%s", n, out)
		}
	}
	if len(want) == 0 {
		t.Fatal("rejects.ts marks no line")
	}
}

// run runs a command in dir and fails the test with its output when it fails.
func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// validatingProxy forwards the suite's requests to the gateway and validates every answer
// against its operation in the OpenAPI document (status, headers, body), as the Go API tests do.
type validatingProxy struct {
	t       *testing.T
	target  string
	router  routers.Router
	mu      sync.Mutex
	records []exchange
}

func newValidatingProxy(t *testing.T, target string) *validatingProxy {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = openapi3.Servers{{URL: "/"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &validatingProxy{t: t, target: target, router: router}
}

func (p *validatingProxy) exchanges() []exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.records)
}

func (p *validatingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}

	// Validate against the route the document gives this request.
	probe := r.Clone(r.Context())
	probe.URL.Scheme, probe.URL.Host = "", ""
	probe.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := p.router.FindRoute(probe)
	if err != nil {
		p.t.Errorf("%s %s is not an operation of the document: %v", r.Method, r.URL.Path, err)
	} else {
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: probe, PathParams: params, Route: route},
			Status:                 resp.StatusCode,
			Header:                 resp.Header,
			Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		}
		in.SetBodyBytes(answer)
		if err := openapi3filter.ValidateResponse(r.Context(), in); err != nil {
			p.t.Errorf("%s %.300s (%s) answered %d with a response the document does not describe: %.2000v\nbody: %.2000s",
				r.Method, r.URL.RequestURI(), route.Operation.OperationID, resp.StatusCode, err, answer)
		}
		ctype, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		p.mu.Lock()
		p.records = append(p.records, exchange{operation: route.Operation.OperationID, contentType: ctype, status: resp.StatusCode})
		p.mu.Unlock()
	}

	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}
