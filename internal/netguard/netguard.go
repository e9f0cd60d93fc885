// Package netguard is the SSRF guard of every outbound HTTP request the
// gateway makes to a user-supplied URL (webhook deliveries, template header
// media). The check runs at dial time, on the address DNS actually returned,
// so a hostname that resolves (or re-resolves) to an internal address is
// refused too: loopback, private, link-local (cloud metadata), CGNAT,
// unspecified, multicast and the other special-purpose ranges, unless the
// address is inside an explicitly allowed prefix (OUTBOUND_ALLOW_CIDRS).
// Proxies are never used: a proxy would dial on our behalf, past the check.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// ErrBlocked is wrapped by every refusal of the guard, so callers can tell
// "destination not allowed" from an ordinary network failure.
var ErrBlocked = errors.New("destination address not allowed")

// Guard decides which addresses may be dialled.
type Guard struct {
	allow    []netip.Prefix
	guardian *ssrf.Guardian
}

// New returns a guard that refuses special-purpose addresses except those
// inside allow. Any port is permitted (webhook receivers use custom ports);
// only TCP is.
func New(allow []netip.Prefix) *Guard {
	return &Guard{
		allow:    allow,
		guardian: ssrf.New(ssrf.WithAnyPort(), ssrf.WithNetworks("tcp4", "tcp6")),
	}
}

// CheckAddr reports whether ip may be dialled; the error wraps ErrBlocked.
func (g *Guard) CheckAddr(ip netip.Addr) error {
	// An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is the IPv4 address as
	// far as routing is concerned: judge it as such.
	ip = ip.Unmap()
	for _, p := range g.allow {
		if p.Contains(ip) {
			return nil
		}
	}
	if err := g.guardian.SafeAddr(ip); err != nil {
		return fmt.Errorf("%w: %s", ErrBlocked, ip)
	}
	return nil
}

// RefusedHost reports the host of rawURL when the guard would refuse every
// dial to it whatever DNS says: a literal address it refuses, or localhost
// (and names under .localhost), which RFC 6761 reserves for loopback, when
// loopback is refused. Callers answer such a URL when it is given, instead
// of accepting it and failing each request later. A host name is left to
// the dial-time check, which sees what DNS returns then; ok is false for it
// and for anything that does not parse.
func (g *Guard) RefusedHost(rawURL string) (host string, refused bool) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", false
	}
	host = u.Hostname()
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		v4 := g.CheckAddr(netip.AddrFrom4([4]byte{127, 0, 0, 1}))
		v6 := g.CheckAddr(netip.IPv6Loopback())
		return host, v4 != nil && v6 != nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "", false
	}
	return host, g.CheckAddr(ip.WithZone("")) != nil
}

// Control is a net.Dialer Control hook: it runs after DNS resolution, for
// each address the dialer is about to connect to.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	if network != "tcp4" && network != "tcp6" {
		return fmt.Errorf("%w: network %s", ErrBlocked, network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrBlocked, address)
	}
	return g.CheckAddr(ap.Addr())
}

// ClientOptions shape a guarded client.
type ClientOptions struct {
	// Timeout bounds a whole request, body included (http.Client.Timeout).
	Timeout time.Duration
	// MaxRedirects is how many redirects to follow; 0 follows none and the
	// 3xx answer is returned as it is (webhooks). Every redirect target is
	// dialled through the same guard, so it is re-checked.
	MaxRedirects int
	// MaxIdleConnsPerHost keeps connections to busy receivers warm
	// (default 32).
	MaxIdleConnsPerHost int
	// Lean makes an HTTP/1.1 client whose waiting requests hold their
	// caller's goroutine and their socket only (leanTransport), for many
	// receivers that may be slow or silent. Timeout is then enforced as a
	// deadline on the connection, with no timer goroutine per request.
	Lean bool
}

// NewClient returns an HTTP client whose every connection passes the
// guard. It never uses a proxy.
func (g *Guard) NewClient(opts ClientOptions) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: g.Control}
	idle := opts.MaxIdleConnsPerHost
	if idle <= 0 {
		idle = 32
	}
	var transport http.RoundTripper = &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          idle * 4,
		MaxIdleConnsPerHost:   idle,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	timeout := opts.Timeout
	if opts.Lean {
		transport, timeout = newLeanTransport(dialer, opts.Timeout, idle), 0
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if opts.MaxRedirects <= 0 {
				return http.ErrUseLastResponse
			}
			if len(via) > opts.MaxRedirects {
				return fmt.Errorf("stopped after %d redirects", opts.MaxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("%w: redirect to scheme %q", ErrBlocked, req.URL.Scheme)
			}
			return nil
		},
	}
}

// ValidateURL checks the shape of a user-supplied outbound URL: http or
// https with a host and a valid port. It does not resolve the host; the
// dial-time check does that for every request.
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("scheme must be http or https")
	}
	if u.Hostname() == "" {
		return errors.New("host is missing")
	}
	// "host:" with nothing after the colon parses with an empty port; it is
	// a typo, not "the default port".
	if strings.HasSuffix(u.Host, ":") {
		return errors.New("port is not valid")
	}
	if p := u.Port(); p != "" {
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil || n < 1 || n > 65535 {
			return errors.New("port is not valid")
		}
	}
	return nil
}
