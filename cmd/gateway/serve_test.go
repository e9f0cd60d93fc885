package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestPprofListener runs `gateway serve`: the profiles are never on the
// public listener, and only on their own address when -debug-listen is set;
// the metrics are only on the metrics listener.
func TestPprofListener(t *testing.T) {
	cases := []struct {
		name  string
		debug bool
	}{{"off by default", false}, {"on its own address", true}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			public, debug, metrics := freeAddr(t), freeAddr(t), freeAddr(t)
			args := []string{"serve", "-listen", public, "-data-dir", t.TempDir(), "-log-level", "error", "-metrics-listen", metrics}
			if tc.debug {
				args = append(args, "-debug-listen", debug)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- run(ctx, args, io.Discard, func(string) string { return "" }) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("serve: %v", err)
				}
			}()
			deadline := time.Now().Add(30 * time.Second)
			for {
				if status, _, err := get("http://" + public + "/healthz"); err == nil && status == 200 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the gateway did not start")
				}
				time.Sleep(50 * time.Millisecond)
			}

			if status, _, err := get("http://" + public + "/debug/pprof/"); err != nil || status != 404 {
				t.Fatalf("public /debug/pprof/: status %d, err %v; want 404", status, err)
			}
			// The metrics are on their own listener only (METRICS_LISTEN).
			if status, body, err := get("http://" + public + "/metrics"); err != nil || status != 404 || strings.Contains(body, "gateway_") {
				t.Fatalf("public /metrics: status %d, err %v; want 404", status, err)
			}
			if status, body, err := get("http://" + metrics + "/metrics"); err != nil || status != 200 || !strings.Contains(body, "gateway_http_requests_total") {
				t.Fatalf("metrics listener: status %d, err %v, body %.200s", status, err, body)
			}
			status, body, err := get("http://" + debug + "/debug/pprof/")
			if !tc.debug {
				if err == nil {
					t.Fatalf("something answers on the debug address without -debug-listen: %d", status)
				}
				return
			}
			if err != nil || status != 200 || !strings.Contains(body, "goroutine") {
				t.Fatalf("debug /debug/pprof/: status %d, err %v, body %.200s", status, err, body)
			}
			if status, body, err := get("http://" + debug + "/debug/pprof/heap?debug=1"); err != nil || status != 200 || !strings.Contains(body, "heap profile") {
				t.Fatalf("heap profile: status %d, err %v, body %.100s", status, err, body)
			}
		})
	}
}

// With PostgreSQL, serve refuses to start on a simulator nobody chose.
func TestServeRefusesTheDefaultSimulatorOnPostgres(t *testing.T) {
	env := map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"}
	err := run(context.Background(), []string{"serve", "-listen", freeAddr(t)}, io.Discard, func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "CONNECTOR_DRIVER=simulator") {
		t.Fatalf("serve: %v, want the refusal naming CONNECTOR_DRIVER", err)
	}
}
