package official_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/official"
)

// provider answers each request with the next scripted status and body.
func provider(t *testing.T, answers ...struct {
	status int
	body   string
}) (*channels.ProviderAccount, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("request without the access token")
		}
		i := int(calls.Add(1)) - 1
		if i >= len(answers) {
			i = len(answers) - 1
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(answers[i].status)
		_, _ = w.Write([]byte(answers[i].body))
	}))
	t.Cleanup(srv.Close)
	return &channels.ProviderAccount{BaseURL: srv.URL, PhoneNumberID: "111", BusinessAccountID: "222", AccessToken: "tok"}, &calls
}

type answer = struct {
	status int
	body   string
}

const refusal = `{"error":{"message":"(#131026) Message undeliverable","type":"OAuthException","code":131026,"error_data":{"messaging_product":"whatsapp","details":"The recipient has no chat-app account"}}}`

// TestSendIsNeverRetried: a send is not idempotent at the provider, so the
// client makes exactly one call and classifies the outcome.
func TestSendIsNeverRetried(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		answer  answer
		kind    fault.Kind
		details map[string]any
	}{
		{"accepted", answer{200, `{"messaging_product":"whatsapp","messages":[{"id":"wamid.1"}]}`}, -1, nil},
		{"refused", answer{400, refusal}, fault.Refused, map[string]any{"code": 131026, "title": "(#131026) Message undeliverable", "reason": "The recipient has no chat-app account"}},
		{"server error", answer{500, `{"error":{"message":"Something went wrong","code":131000}}`}, fault.Unavailable, nil},
		{"throttled", answer{429, `{"error":{"message":"Rate limit hit","code":130429}}`}, fault.Unavailable, nil},
		{"throttling code on a 400", answer{400, `{"error":{"message":"Too many calls","code":4}}`}, fault.Unavailable, nil},
		{"error without a body", answer{403, ``}, fault.Refused, map[string]any{"code": 0, "title": "Forbidden", "reason": "Forbidden"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			acc, calls := provider(t, tc.answer)
			c := official.NewClient(official.ClientOptions{Backoff: time.Millisecond})
			resp, raw, err := c.SendMessage(context.Background(), acc, official.SendRequest{To: "5511977776666", Type: "text", Text: &official.TextBody{Body: "hi"}})
			if calls.Load() != 1 {
				t.Fatalf("%d calls, want 1", calls.Load())
			}
			if tc.kind == -1 {
				if err != nil || resp.Messages[0].ID != "wamid.1" || raw["messaging_product"] != "whatsapp" {
					t.Fatalf("%+v %v %v", resp, raw, err)
				}
				return
			}
			if fault.KindOf(err) != tc.kind {
				t.Fatalf("kind %v, want %v (%v)", fault.KindOf(err), tc.kind, err)
			}
			if tc.details != nil {
				got := fault.As(err).Details
				for k, v := range tc.details {
					if got[k] != v {
						t.Fatalf("details %v, want %v", got, tc.details)
					}
				}
			}
		})
	}
}

// TestReadsAreRetried: template listing is idempotent, so server errors and
// throttling are retried (up to the attempts), refusals are not.
func TestReadsAreRetried(t *testing.T) {
	t.Parallel()
	page := `{"data":[{"id":"9","name":"t","language":"pt_BR","status":"APPROVED","category":"UTILITY","components":[{"type":"BODY","text":"x"}]}],"paging":{"cursors":{}}}`
	cases := []struct {
		name    string
		answers []answer
		calls   int32
		kind    fault.Kind
	}{
		{"recovers after two failures", []answer{{502, ``}, {429, `{"error":{"code":130429}}`}, {200, page}}, 3, -1},
		{"gives up after three", []answer{{500, ``}, {500, ``}, {500, ``}, {200, page}}, 3, fault.Unavailable},
		{"refusal is not retried", []answer{{401, `{"error":{"message":"Invalid OAuth access token","code":190}}`}, {200, page}}, 1, fault.Refused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			acc, calls := provider(t, tc.answers...)
			c := official.NewClient(official.ClientOptions{Backoff: time.Millisecond})
			list, err := c.ListTemplates(context.Background(), acc)
			if calls.Load() != tc.calls {
				t.Fatalf("%d calls, want %d", calls.Load(), tc.calls)
			}
			if tc.kind == -1 {
				if err != nil || len(list) != 1 || list[0].Name != "t" {
					t.Fatalf("%+v %v", list, err)
				}
				return
			}
			if fault.KindOf(err) != tc.kind {
				t.Fatalf("kind %v, want %v (%v)", fault.KindOf(err), tc.kind, err)
			}
		})
	}
}

// TestUnreachableProvider: a network failure is Unavailable.
func TestUnreachableProvider(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := official.NewClient(official.ClientOptions{SendTimeout: time.Second})
	_, _, err := c.SendMessage(context.Background(), &channels.ProviderAccount{BaseURL: url, PhoneNumberID: "1", AccessToken: "tok"},
		official.SendRequest{To: "1", Type: "text", Text: &official.TextBody{Body: "x"}})
	if fault.KindOf(err) != fault.Unavailable {
		t.Fatalf("kind %v (%v)", fault.KindOf(err), err)
	}
}

// TestSignAndVerifyToken pins the signature format and that the verify
// token depends on the secret and the number.
func TestSignAndVerifyToken(t *testing.T) {
	t.Parallel()
	// HMAC-SHA256("secret", "body"), computed independently.
	if got := official.Sign("secret", []byte("body")); got != "sha256=dc46983557fea127b43af721467eb9b3fde2338fe3e14f51952aa8478c13d355" {
		t.Fatalf("signature %s", got)
	}
	a := official.VerifyToken(&channels.ProviderAccount{AppSecret: "s1", PhoneNumberID: "1"})
	b := official.VerifyToken(&channels.ProviderAccount{AppSecret: "s2", PhoneNumberID: "1"})
	c := official.VerifyToken(&channels.ProviderAccount{AppSecret: "s1", PhoneNumberID: "2"})
	if len(a) != 32 || a == b || a == c {
		t.Fatalf("verify tokens %s %s %s", a, b, c)
	}
}
