package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/chatmsg/gateway/internal/config"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
	lb := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	cases := []struct {
		name    string
		trusted []netip.Prefix
		peer    string
		xff     []string
		want    string
	}{
		{"no trusted proxies: the peer, header ignored", nil, "10.1.1.1:5000", []string{"203.0.113.9"}, "10.1.1.1"},
		{"untrusted peer: its own address, header ignored", lb, "198.51.100.7:5000", []string{"203.0.113.9"}, "198.51.100.7"},
		{"trusted peer: the client it names", lb, "10.1.1.1:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"a forged entry left of the real one is ignored", lb, "10.1.1.1:5000", []string{"1.2.3.4, 203.0.113.9"}, "203.0.113.9"},
		{"trusted hops are skipped", lb, "10.1.1.1:5000", []string{"203.0.113.9, 10.2.2.2", "10.3.3.3"}, "203.0.113.9"},
		{"only trusted hops: the leftmost", lb, "10.1.1.1:5000", []string{"10.9.9.9, 10.2.2.2"}, "10.9.9.9"},
		{"trusted peer without the header", lb, "10.1.1.1:5000", nil, "10.1.1.1"},
		{"garbage beyond the last trusted hop: that hop", lb, "10.1.1.1:5000", []string{"not-an-ip, 10.2.2.2"}, "10.2.2.2"},
		{"IPv6 balancer", lb, "[fd00::1]:443", []string{"2001:db8::5"}, "2001:db8::5"},
		{"IPv4-mapped peer", lb, "[::ffff:10.1.1.1]:80", []string{"203.0.113.9"}, "203.0.113.9"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
			r.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := (clientAddrs{trusted: tc.trusted}).of(r); got != tc.want {
				t.Fatalf("client %q, want %q", got, tc.want)
			}
		})
	}
}

// TestInFlightPerForwardedClient: behind a trusted balancer, the bound of
// requests in progress applies to each client it names, not to the
// balancer's one address.
func TestInFlightPerForwardedClient(t *testing.T) {
	t.Parallel()
	slow, held, release := holdingHandler()
	limits := config.HTTPLimits{MaxPerIP: 1, MaxPerToken: 100, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	clients := clientAddrs{trusted: limits.TrustedProxies}
	inner := newInFlight(limits, slog.New(slog.DiscardHandler)).middleware(slow)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r.WithContext(withClient(r.Context(), clients.of(r))))
	})
	do := func(peer, xff string, hold bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.RemoteAddr = peer
		if hold {
			r.Header.Set("X-Hold", "1")
		}
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := make(chan int)
	go func() { first <- do("127.0.0.1:1000", "203.0.113.1", true).Code }()
	<-held // the first client holds its one slot

	cases := []struct {
		name, peer, xff string
		want            int
	}{
		{"the same client again", "127.0.0.1:1001", "203.0.113.1", http.StatusTooManyRequests},
		{"an untrusted peer claiming that client is itself", "192.0.2.50:1000", "203.0.113.1", http.StatusNoContent},
		{"another client behind the balancer", "127.0.0.1:1002", "203.0.113.2", http.StatusNoContent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := do(tc.peer, tc.xff, false).Code; got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
		})
	}
	close(release)
	if got := <-first; got != http.StatusNoContent {
		t.Fatalf("first request: %d", got)
	}
}

// TestInFlightPerProviderAccount: provider webhooks come from the
// provider's few addresses for every company, so they are bounded per
// account: one account at its bound leaves the others, and the address's
// own bound, alone.
func TestInFlightPerProviderAccount(t *testing.T) {
	t.Parallel()
	slow, held, release := holdingHandler()
	h := newInFlight(config.HTTPLimits{MaxPerIP: 1, MaxPerToken: 100, MaxPerProviderAccount: 1}, slog.New(slog.DiscardHandler)).middleware(slow)
	do := func(path string, hold bool) int {
		r := httptest.NewRequest(http.MethodPost, path, nil)
		r.RemoteAddr = "198.51.100.7:443" // the provider's one address
		if hold {
			r.Header.Set("X-Hold", "1")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	first := make(chan int)
	go func() { first <- do("/provider-webhooks/111", true) }()
	<-held // account 111 holds its one slot

	cases := []struct {
		name, path string
		want       int
	}{
		{"the same account again", "/provider-webhooks/111", http.StatusTooManyRequests},
		{"another account from the same address", "/provider-webhooks/222", http.StatusNoContent},
		{"an API request from the same address", "/api/contact-channels", http.StatusNoContent},
		{"a path that only starts like a webhook", "/provider-webhooks/111/x", http.StatusNoContent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := do(tc.path, false); got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
		})
	}
	close(release)
	if got := <-first; got != http.StatusNoContent {
		t.Fatalf("first request: %d", got)
	}
}

// holdingHandler answers 204 at once, except the one request marked X-Hold,
// which closes held and then holds its slot until release is closed.
func holdingHandler() (h http.Handler, held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			close(held)
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return h, held, release
}
