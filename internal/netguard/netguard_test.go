package netguard_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/netguard"
)

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	deny := netguard.New(nil)
	allowLoopback := netguard.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	tests := []struct {
		name    string
		guard   *netguard.Guard
		addr    string
		blocked bool
	}{
		{"public v4", deny, "93.184.216.34", false},
		{"public v6", deny, "2606:2800:220:1:248:1893:25c8:1946", false},
		{"loopback", deny, "127.0.0.1", true},
		{"loopback v6", deny, "::1", true},
		{"mapped loopback", deny, "::ffff:127.0.0.1", true},
		{"private 10/8", deny, "10.1.2.3", true},
		{"private 172.16/12", deny, "172.20.0.1", true},
		{"private 192.168/16", deny, "192.168.1.1", true},
		{"link-local metadata", deny, "169.254.169.254", true},
		{"cgnat", deny, "100.100.100.200", true},
		{"unspecified", deny, "0.0.0.0", true},
		{"unspecified v6", deny, "::", true},
		{"multicast", deny, "224.0.0.1", true},
		{"multicast v6", deny, "ff02::1", true},
		{"link-local v6", deny, "fe80::1", true},
		{"ula metadata v6", deny, "fd00:ec2::254", true},
		{"allowed loopback", allowLoopback, "127.0.0.1", false},
		{"allowed mapped loopback", allowLoopback, "::ffff:127.0.0.1", false},
		{"allow list is not a blanket", allowLoopback, "10.0.0.1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.guard.CheckAddr(netip.MustParseAddr(tt.addr))
			if got := err != nil; got != tt.blocked {
				t.Fatalf("CheckAddr(%s) = %v, want blocked=%v", tt.addr, err, tt.blocked)
			}
			if err != nil && !errors.Is(err, netguard.ErrBlocked) {
				t.Fatalf("error %v does not wrap ErrBlocked", err)
			}
		})
	}
}

func TestValidateURL(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{
		"https://hooks.example.com/x":  true,
		"http://127.0.0.1:8080/hook":   true,
		"HTTPS://EXAMPLE.COM":          true,
		"ftp://example.com":            false,
		"https://":                     false,
		"https:///path":                false,
		"example.com/hook":             false,
		"https://example.com:0/x":      false,
		"http://127.0.0.1:/e":          false,
		"https://example.com:99999/x":  false,
		"https://exa mple.com/x":       false,
		"javascript:alert(1)":          false,
		"https://user:pw@example.com/": true,
	} {
		if err := netguard.ValidateURL(raw); (err == nil) != ok {
			t.Errorf("ValidateURL(%q) = %v, want ok=%v", raw, err, ok)
		}
	}
}

// TestClientDialTime checks the guard where it matters: on the address the
// dialer connects to, after DNS ("localhost" resolves to loopback).
func TestClientDialTime(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	for _, lean := range []bool{false, true} {
		t.Run(map[bool]string{false: "net/http", true: "lean"}[lean], func(t *testing.T) {
			blocked := netguard.New(nil).NewClient(netguard.ClientOptions{Timeout: 5 * time.Second, Lean: lean})
			for _, u := range []string{srv.URL, "http://localhost:" + strconv.Itoa(port)} {
				_, err := blocked.Get(u)
				if !errors.Is(err, netguard.ErrBlocked) {
					t.Fatalf("GET %s without allow-list: err = %v, want ErrBlocked", u, err)
				}
			}

			allowed := netguard.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}).NewClient(netguard.ClientOptions{Timeout: 5 * time.Second, Lean: lean})
			resp, err := allowed.Get(srv.URL)
			if err != nil {
				t.Fatalf("GET with allow-list: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("status %d", resp.StatusCode)
			}
		})
	}
}

// TestRedirects: webhook clients never follow; media clients follow and
// every hop is re-checked at dial time.
func TestRedirects(t *testing.T) {
	t.Parallel()
	// The target listens on 127.0.0.2, outside the allow-list below.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("secret")) }))
	target.Listener = ln
	target.Start()
	t.Cleanup(target.Close)
	var ok *httptest.Server
	ok = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-blocked":
			http.Redirect(w, r, target.URL, http.StatusFound)
		case "/to-self":
			http.Redirect(w, r, ok.URL+"/final", http.StatusFound)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
	t.Cleanup(ok.Close)
	guard := netguard.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})

	for _, lean := range []bool{false, true} {
		webhook := guard.NewClient(netguard.ClientOptions{Timeout: 5 * time.Second, Lean: lean})
		resp, err := webhook.Get(ok.URL + "/to-self")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound {
			t.Fatalf("webhook client (lean %v) followed a redirect: status %d", lean, resp.StatusCode)
		}
	}

	media := guard.NewClient(netguard.ClientOptions{Timeout: 5 * time.Second, MaxRedirects: 3})
	resp, err := media.Get(ok.URL + "/to-self")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("media client: status %d", resp.StatusCode)
	}
	_, err = media.Get(ok.URL + "/to-blocked")
	if !errors.Is(err, netguard.ErrBlocked) || !strings.Contains(err.Error(), "127.0.0.2") {
		t.Fatalf("redirect to a blocked address: err = %v, want ErrBlocked", err)
	}
}

// RefusedHost names the hosts every dial would refuse, so a URL to one can
// be answered when it is given; names are left to the dial-time check.
func TestRefusedHost(t *testing.T) {
	t.Parallel()
	deny := netguard.New(nil)
	allowV4 := netguard.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	tests := []struct {
		name    string
		guard   *netguard.Guard
		url     string
		host    string
		refused bool
	}{
		{"loopback", deny, "http://127.0.0.1:9999/hook", "127.0.0.1", true},
		{"private", deny, "https://10.0.0.1/hook", "10.0.0.1", true},
		{"metadata", deny, "http://169.254.169.254/latest", "169.254.169.254", true},
		{"v6 loopback", deny, "http://[::1]:8080/", "::1", true},
		{"v4-mapped v6", deny, "http://[::ffff:10.0.0.1]/", "::ffff:10.0.0.1", true},
		{"v6 link-local with zone", deny, "http://[fe80::1%25eth0]/", "fe80::1%eth0", true},
		{"localhost", deny, "http://localhost:9999/hook", "localhost", true},
		{"localhost any case, trailing dot", deny, "http://LocalHost.:9/", "LocalHost.", true},
		{"name under .localhost", deny, "http://api.localhost/", "api.localhost", true},
		{"public address", deny, "https://93.184.216.34/hook", "93.184.216.34", false},
		{"name", deny, "https://hooks.example.com/x", "", false},
		{"allowed loopback", allowV4, "http://127.0.0.1:9/", "127.0.0.1", false},
		{"localhost with v4 loopback allowed", allowV4, "http://localhost:9/", "localhost", false},
		{"private still refused", allowV4, "http://192.168.1.1/", "192.168.1.1", true},
		{"not a URL", deny, "http://[::1", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			host, refused := tc.guard.RefusedHost(tc.url)
			if refused != tc.refused || (tc.host != "" && host != tc.host) {
				t.Fatalf("RefusedHost(%q) = %q, %v; want %q, %v", tc.url, host, refused, tc.host, tc.refused)
			}
		})
	}
}
