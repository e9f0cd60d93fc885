package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/openapi"
)

type allowAll struct{}

func (allowAll) Authenticate(context.Context, string) (auth.Principal, error) {
	return auth.Principal{CompanyID: 1, UserID: 1, TokenID: 1, Permissions: auth.AllPermissions}, nil
}

// BenchmarkContract measures what the contract middleware (routing, the
// edge checks, kin-openapi validation) costs per request, without the
// handler or the database: the cost every request pays before its work.
func BenchmarkContract(b *testing.B) {
	c, err := LoadContract(context.Background(), openapi.Document)
	if err != nil {
		b.Fatal(err)
	}
	h := enforceContract(c, allowAll{}, filestore.Spool{Dir: b.TempDir()}, slog.New(slog.DiscardHandler), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	text := strings.Repeat("Olá, tudo bem? ", 20)
	cases := []struct{ name, method, target, body string }{
		{"send JSON", "POST", "/api/api-send-message",
			`{"platform":"chatapp","sender_key":"5511988887777","contact_key":"5511977776666","contact_is_group":false,"text":"` + text + `"}`},
		{"create webhook", "POST", "/api/channel-webhooks", `{"name":"n","url":"https://example.com/hook","events":["omnichat.message.received"],"company_channel_ids":null}`},
		{"list conversations", "GET", "/api/contact-channels?filter=maria&perPage=50&created_at=%5B%222026-11-01%22%2C%222026-11-22%22%5D&status_ids=%5B1%2C2%5D", ""},
		{"publish event", "POST", "/api/events", `{"event":"crm.business.won","data":{"order":{"id":1,"items":[{"sku":"a","qty":2},{"sku":"b","qty":1}]}}}`},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var body io.Reader
				if tc.body != "" {
					body = strings.NewReader(tc.body)
				}
				req := httptest.NewRequest(tc.method, tc.target, body)
				req.Header.Set("Authorization", "Bearer x")
				if tc.body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusNoContent {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
