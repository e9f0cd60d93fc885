package httpapi_test

// Fuzz targets, one per decoding boundary of the public listener. Their
// seeds (f.Add below and testdata/fuzz/<Target>/) run as ordinary tests in
// `make test`; `make fuzz` runs each target for FUZZTIME. Every input must
// get a status the document describes for the operation (the harness
// validates each answer), never 500 or a panic, and write only short log
// lines.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/openapi"
)

// fuzzGateway is one gateway (SQLite, jobs only inserted) that a fuzz
// target sends every input to.
type fuzzGateway struct {
	h    *apitest.Harness
	logs *logTap
	ten  apitest.Tenant
}

func startFuzzGateway(f *testing.F) *fuzzGateway {
	logs := &logTap{}
	h := apitest.Start(f, storetest.SQLite(f), apitest.Options{Logs: logs})
	return &fuzzGateway{h: h, logs: logs, ten: h.Tenant("Acme")}
}

// do sends req and checks the invariants: an answer the document describes
// (checked by the harness), no 500 (an undocumented failure or a recovered
// panic), no other 5xx than 509 and those allowed, no long log line.
func (g *fuzzGateway) do(t *testing.T, req apitest.Request, allowed5xx ...int) *apitest.Response {
	t.Helper()
	h := *g.h
	h.T = t
	g.logs.mu.Lock()
	g.logs.longest = 0
	g.logs.mu.Unlock()
	resp := h.Do(req)
	// 509 is the document's business-error status, not a server failure.
	if resp.Status >= 500 && resp.Status != 509 && !containsInt(allowed5xx, resp.Status) {
		t.Fatalf("%s %.200s answered %d: %.300s", req.Method, req.Path, resp.Status, resp.Body)
	}
	g.logs.check(t, req.Method+" "+req.Path)
	return resp
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// jsonOperations are the operations with a JSON body, in a fixed order
// (a fuzz input picks one by index), with their path parameters filled.
func jsonOperations(t testing.TB) []apitest.Request {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	var out []apitest.Request
	for _, path := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(path).Operations() {
			if op.RequestBody == nil || op.RequestBody.Value.Content.Get("application/json") == nil ||
				op.RequestBody.Value.Content["application/*"] != nil {
				continue
			}
			out = append(out, apitest.Request{Method: method, Path: param.ReplaceAllString(path, "1")})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Method+out[i].Path < out[j].Method+out[j].Path })
	return out
}

// FuzzRequestBody sends arbitrary bytes as the JSON body of any operation
// that takes one, through the real router, validator and handlers.
func FuzzRequestBody(f *testing.F) {
	seeds := []string{`{}`, `null`, `[]`, `{"name":"n","url":"http://127.0.0.1:1/h"}`, nested(100), `{"a":` + nested(63) + `}`,
		`{"text":"a\u0000b"}`, "{\"text\":\"a\xffb\"}", `{"platform":"chatapp","sender_key":"5511988887777","contact_key":"5511977776666","contact_is_group":false,"text":"x"}`,
		`{"ids":[1,2,3],"scope":"all"}`, `{"id":1,"key":"5511988887777"}`, `{"event":"x","data":{}}`, `{"status_id":1,"user_id":null}`}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	g := startFuzzGateway(f)
	ops := jsonOperations(f)
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		req := ops[int(which)%len(ops)]
		req.Token, req.JSON = g.ten.Token, body
		g.do(t, req)
	})
}

// FuzzProviderWebhook sends arbitrary bodies, signed with the channel's app
// secret or not, to the unauthenticated provider webhook of a real official
// channel whose provider is the simulator.
func FuzzProviderWebhook(f *testing.F) {
	const pnid, secret = "109876543210987", "fuzz-app-secret"
	seeds := []string{
		`{"object":"whatsapp_business_account","entry":[{"id":"w","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"` + pnid + `"},"contacts":[{"profile":{"name":"Maria"},"wa_id":"5511977776666"}],"messages":[{"from":"5511977776666","id":"wamid.f1","timestamp":"1764770000","type":"text","text":{"body":"Olá"}}]}}]}]}`,
		`{"object":"whatsapp_business_account","entry":[{"id":"w","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"` + pnid + `"},"statuses":[{"id":"wamid.x","status":"delivered","timestamp":"1764770000","recipient_id":"5511977776666"}]}}]}]}`,
		`{}`, `[]`, `null`, nested(200), `{"entry":[{"changes":[{"value":{"messages":[{"type":"image","image":{"id":"m1"}}]}}]}]}`,
		"{\"entry\":\"\xff\"}", `{"entry":[{"changes":[{"value":{"messages":[{"from":"a\u0000b"}]}}]}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	g := startFuzzGateway(f)
	sim := providersim.New(providersim.Options{Logger: slog.New(slog.DiscardHandler)})
	simSrv := httptest.NewServer(sim.Handler())
	f.Cleanup(simSrv.Close)
	if _, err := g.h.App.Channels.RegisterOfficial(context.Background(), channels.OfficialInput{CompanyID: g.ten.CompanyID, Name: "Official",
		Key: "5511999990001", BusinessAccountID: "waba-1", PhoneNumberID: pnid, AccessToken: "fuzz-token", AppSecret: secret, BaseURL: simSrv.URL}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, signed bool) {
		header := http.Header{"Content-Type": {"application/json"}}
		if signed {
			m := hmac.New(sha256.New, []byte(secret))
			m.Write(body)
			header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
		}
		// 503 is the documented answer when a contact's media cannot be
		// fetched from the provider (it retries the delivery).
		g.do(t, apitest.Request{Method: "POST", Path: "/provider-webhooks/" + pnid, JSON: body, Header: header}, http.StatusServiceUnavailable)
	})
}

// FuzzMultipartSend sends arbitrary multipart bodies to the send endpoint.
func FuzzMultipartSend(f *testing.F) {
	part := func(name, value string) string {
		return "--b\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + value + "\r\n"
	}
	valid := part("platform", "chatapp") + part("sender_key", "5511988887777") + part("contact_key", "5511977776666") +
		part("contact_is_group", "false") + part("text", "hello")
	seeds := []string{
		valid + "--b--\r\n",
		valid + "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.pdf\"\r\nContent-Type: application/pdf\r\n\r\n%PDF-1.4\r\n--b--\r\n",
		part("platform", "ofc_chatapp") + part("provider_template_id", "x") + part("named_variable_values", "{") + "--b--\r\n",
		part("text", "a\x00b") + "--b--\r\n", part("te\xffxt", "a") + "--b--\r\n", "--b\r\n\r\n--b--", "", "--b--\r\n",
		valid + "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\xff.pdf\"\r\n\r\nx\r\n--b--\r\n",
	}
	for _, s := range seeds {
		f.Add("multipart/form-data; boundary=b", []byte(s))
	}
	f.Add("multipart/form-data", []byte(valid))
	f.Add("multipart/mixed; boundary=b", []byte(valid))
	g := startFuzzGateway(f)
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		if !strings.HasPrefix(contentType, "multipart/") {
			contentType = "multipart/form-data; boundary=b"
		}
		g.do(t, apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: g.ten.Token, JSON: body,
			Header: http.Header{"Content-Type": {contentType}}})
	})
}

// FuzzContactChannelQuery sends arbitrary query strings to the
// conversation list, whose filters reach SQL.
func FuzzContactChannelQuery(f *testing.F) {
	for _, q := range []string{"", "filter=maria", "filter=%25_%5C", "filter=%00", "filter=%FF", "tags_ids=%7B%22contactTags%22%3A%5B1%5D%7D",
		"created_at=%5B%222026-11-01%22%2C%222026-11-22%22%5D", "created_at=" + nested(100), "status_ids=1,2&orderBy=id&orderMode=DESC",
		"perPage=500&page=2", "perPage=0", "page=-1", "with=tags", "channel_key=5511&company_channel_id=1", "ofc_window_min_minutes=10",
		"last_message_at=%5B%5D", "filter=" + strings.Repeat("%C3%A9", 200), "tags_operation=XOR&tags_ids=%7B%7D"} {
		f.Add(q)
	}
	g := startFuzzGateway(f)
	f.Fuzz(func(t *testing.T, query string) {
		g.do(t, apitest.Request{Method: "GET", Path: "/api/contact-channels?" + sendableQuery(query), Token: g.ten.Token})
	})
}

// sendableQuery escapes the bytes a client cannot put in a request line
// (spaces, controls, non-ASCII, '#'), and leaves everything else, broken
// escapes included, as the fuzzer wrote it: a request line Go's server
// refuses before any handler runs tests nothing of the gateway.
func sendableQuery(q string) string {
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		if c := q[i]; c <= ' ' || c >= 0x7f || c == '#' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}
