package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestVersionCommand(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		check func(t *testing.T, out string)
	}{
		{"one line", []string{"version"}, func(t *testing.T, out string) {
			if !strings.HasPrefix(out, "gateway ") || !strings.Contains(out, "revision ") || !strings.Contains(out, "go1.") || strings.Count(out, "\n") != 1 {
				t.Fatalf("version printed %q", out)
			}
		}},
		{"json", []string{"version", "-json"}, func(t *testing.T, out string) {
			var got map[string]any
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%q is not JSON: %v", out, err)
			}
			for _, k := range []string{"version", "revision", "time", "modified", "go_version"} {
				if _, ok := got[k]; !ok {
					t.Errorf("no %q in %s", k, out)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(context.Background(), tc.args, &out, func(string) string { return "" }); err != nil {
				t.Fatal(err)
			}
			tc.check(t, out.String())
		})
	}
}

func TestProbeAddr(t *testing.T) {
	cases := []struct{ listen, want string }{
		{"127.0.0.1:8080", "127.0.0.1:8080"},
		{"0.0.0.0:8080", "127.0.0.1:8080"},
		{":9000", "127.0.0.1:9000"},
		{"[::]:8080", "[::1]:8080"},
		{"gateway.internal:8080", "gateway.internal:8080"},
	}
	for _, tc := range cases {
		t.Run(tc.listen, func(t *testing.T) {
			if got := probeAddr(tc.listen); got != tc.want {
				t.Fatalf("probeAddr(%q) = %q, want %q", tc.listen, got, tc.want)
			}
		})
	}
}

// The healthcheck passes on 200 only, probes the path asked for, and fails
// when nothing listens.
func TestHealthcheckCommand(t *testing.T) {
	var readyStatus = http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.WriteHeader(http.StatusOK)
		case "/readyz":
			w.WriteHeader(readyStatus)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		healthy bool
	}{
		{"live, from LISTEN_ADDR", map[string]string{"LISTEN_ADDR": addr}, nil, true},
		{"not ready", map[string]string{"LISTEN_ADDR": addr}, []string{"-ready"}, false},
		{"explicit address", nil, []string{"-addr", addr}, true},
		{"nothing listens", nil, []string{"-addr", freeAddr(t), "-timeout", "2s"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), append([]string{"healthcheck"}, tc.args...), io.Discard, func(k string) string { return tc.env[k] })
			if tc.healthy && err != nil {
				t.Fatalf("want healthy, got %v", err)
			}
			if !tc.healthy && !errors.Is(err, errUnhealthy) {
				t.Fatalf("want errUnhealthy, got %v", err)
			}
		})
	}
}

// A served gateway passes its own healthcheck, ready included, and
// /metrics (on METRICS_LISTEN) carries gateway_build_info.
func TestServeReportsItsBuild(t *testing.T) {
	public, metrics := freeAddr(t), freeAddr(t)
	env := func(k string) string {
		switch k {
		case "LISTEN_ADDR":
			return public
		case "METRICS_LISTEN":
			return metrics
		}
		return ""
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-data-dir", t.TempDir(), "-log-level", "error"}, io.Discard, env)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for run(ctx, []string{"healthcheck", "-ready"}, io.Discard, env) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the gateway did not become ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	status, body, err := get("http://" + metrics + "/metrics")
	if err != nil || status != 200 {
		t.Fatalf("/metrics: %d %v", status, err)
	}
	var line string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "gateway_build_info{") {
			line = l
		}
	}
	for _, label := range []string{`version="`, `revision="`, `time="`, `go_version="go1.`} {
		if !strings.Contains(line, label) {
			t.Errorf("gateway_build_info lacks %s: %q", label, line)
		}
	}
	if !strings.HasSuffix(line, " 1") {
		t.Errorf("gateway_build_info is not 1: %q", line)
	}
}
