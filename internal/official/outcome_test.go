package official_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/official"
)

// hangUp reads the whole request, then drops the connection unanswered:
// the provider may have taken the message, the client cannot know.
func hangUp(t *testing.T, w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	_ = conn.Close()
}

// TestSendOutcome: the official Transport tells a send the provider may
// have taken without saying so (messaging.ErrOutcomeUnknown) from one that
// never reached it or that it answered, and calls the provider once.
func TestSendOutcome(t *testing.T) {
	t.Parallel()
	const accepted = `{"messaging_product":"whatsapp","messages":[{"id":"wamid.1"}]}`
	cases := []struct {
		name    string
		handler func(t *testing.T, w http.ResponseWriter, r *http.Request)
		// refused: the connection is refused, nothing reaches a handler.
		refused bool
		kind    fault.Kind // -1: accepted
		unknown bool
	}{
		{name: "accepted", handler: func(_ *testing.T, w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, accepted) }, kind: -1},
		{name: "connection refused", refused: true, kind: fault.Unavailable},
		{name: "refusal", kind: fault.Refused, handler: func(_ *testing.T, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, refusal)
		}},
		{name: "throttled without a body", kind: fault.Unavailable, handler: func(_ *testing.T, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
		}},
		// The provider's document: 500 with its error object, code 2,
		// "Please retry your request", is_transient: not processed.
		{name: "provider's own server error", kind: fault.Unavailable, handler: func(_ *testing.T, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"message":"An unexpected error occurred. Please retry your request","type":"GraphMethodException","code":2,"is_transient":true}}`)
		}},
		{name: "connection closed after the request", kind: fault.Unavailable, unknown: true, handler: hangUp},
		{name: "no answer within the send timeout", kind: fault.Unavailable, unknown: true, handler: func(_ *testing.T, _ http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			<-r.Context().Done() // the client gives up first
		}},
		{name: "gateway error in front of the provider", kind: fault.Unavailable, unknown: true, handler: func(_ *testing.T, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
		}},
		{name: "acceptance cut off", kind: fault.Unavailable, unknown: true, handler: func(_ *testing.T, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "200") // the server closes the connection short of it
			_, _ = io.WriteString(w, accepted[:20])
		}},
		{name: "acceptance unreadable", kind: fault.Unavailable, unknown: true, handler: func(_ *testing.T, w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"messages":[{"id":`)
		}},
		{name: "acceptance without an id", kind: fault.Unavailable, unknown: true, handler: func(_ *testing.T, w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"messaging_product":"whatsapp","messages":[]}`)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "application/json")
				tc.handler(t, w, r)
			}))
			t.Cleanup(srv.Close)
			if tc.refused {
				srv.Close()
			}
			// A short send timeout: the "no answer" case waits for it.
			tr := official.NewTransport(official.NewClient(official.ClientOptions{SendTimeout: 300 * time.Millisecond}))
			ch := channels.Channel{ID: 1, TypeID: channels.OfficialChatapp,
				ProviderAccount: &channels.ProviderAccount{BaseURL: srv.URL, PhoneNumberID: "111", AccessToken: "tok"}}
			res, err := tr.Send(context.Background(), ch, messaging.Outbound{MessageID: 7, ContactKey: "5511977776666", Text: "hi", HandOff: func(context.Context) error { return nil }})
			want := int32(1)
			if tc.refused {
				want = 0
			}
			if calls.Load() != want {
				t.Fatalf("%d calls reached the provider, want %d", calls.Load(), want)
			}
			if tc.kind == -1 {
				if err != nil || res.ExternalID != "wamid.1" {
					t.Fatalf("%+v %v", res, err)
				}
				return
			}
			if fault.KindOf(err) != tc.kind {
				t.Fatalf("kind %v, want %v (%v)", fault.KindOf(err), tc.kind, err)
			}
			if got := errors.Is(err, messaging.ErrOutcomeUnknown); got != tc.unknown {
				t.Fatalf("outcome unknown %v, want %v (%v)", got, tc.unknown, err)
			}
		})
	}
}
