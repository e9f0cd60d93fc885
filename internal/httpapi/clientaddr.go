package httpapi

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// clientAddrs finds a request's client address: the peer's, unless the
// peer is a trusted proxy (TRUSTED_PROXIES), in which case it is the
// rightmost address of X-Forwarded-For that is not itself a trusted
// proxy. Entries left of that one were written by the client and are
// never believed, so a client cannot pick its own address (and with it
// its in-flight bound) by sending the header itself.
type clientAddrs struct {
	trusted []netip.Prefix
}

type clientKey struct{}

// maxForwardedHops bounds the X-Forwarded-For entries looked at.
const maxForwardedHops = 32

func (c clientAddrs) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// of returns r's client address as text.
func (c clientAddrs) of(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || len(c.trusted) == 0 || !c.isTrusted(peer.Unmap()) {
		return host
	}
	client := peer.Unmap()
	hops := 0
	values := r.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		parts := strings.Split(values[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			if hops++; hops > maxForwardedHops {
				return client.String()
			}
			a, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				// Garbage from beyond the last trusted hop: the hop that
				// handed it over is the client as far as anyone can tell.
				return client.String()
			}
			client = a.Unmap()
			if !c.isTrusted(client) {
				return client.String()
			}
		}
	}
	return client.String()
}

// withClient stores r's client address in its context for the in-flight
// bound and the logs.
func withClient(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientKey{}, addr)
}

// clientFrom returns the client address observe stored, or the peer's.
func clientFrom(r *http.Request) string {
	if s, ok := r.Context().Value(clientKey{}).(string); ok {
		return s
	}
	return clientAddrs{}.of(r)
}
