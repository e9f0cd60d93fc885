package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/config"
)

// The bootstrap output is a promise to scripts: exactly these three keys.
func TestAdminBootstrapPrintsTheDocumentedJSON(t *testing.T) {
	dir := t.TempDir()
	env := func(k string) string {
		if k == "DATA_DIR" {
			return dir
		}
		if k == "LOG_LEVEL" {
			return "error"
		}
		return ""
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"admin", "bootstrap", "--company", "Acme", "--email", "admin@acme.test", "--permissions", "all"}, &out, env)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output %q is not JSON: %v", out.String(), err)
	}
	if len(got) != 3 || got["company_id"] != float64(1) || got["user_id"] != float64(1) || !strings.HasPrefix(got["token"].(string), "gw_") {
		t.Fatalf("bootstrap printed %s", out.String())
	}

	// The token works for the admin token listing of that company.
	out.Reset()
	if err := run(context.Background(), []string{"admin", "token", "list", "--company-id", "1"}, &out, env); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"permissions":["connections_view"`) {
		t.Fatalf("token list: %s", out.String())
	}
	if _, err := os.Stat(dir + "/gateway.db"); err != nil {
		t.Fatalf("no SQLite file in the data dir: %v", err)
	}
}

func TestUnknownCommandsFail(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no command", []string{}},
		{"unknown command", []string{"frobnicate"}},
		{"unknown admin command", []string{"admin", "nope"}},
		{"unknown permission", []string{"admin", "bootstrap", "--permissions", "root"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			dir := t.TempDir()
			err := run(context.Background(), args, &bytes.Buffer{}, func(k string) string {
				if k == "DATA_DIR" {
					return dir
				}
				return ""
			})
			if err == nil {
				t.Errorf("%v: no error", args)
			}
		})
	}
}

// MEMORY_LIMIT becomes the runtime's soft limit of a serving process;
// "off" restores the runtime's default, and an explicit GOMEMLIMIT (the
// runtime's own setting, applied before main) is left alone. Not parallel:
// the limit is process-wide.
func TestApplyMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const preset = 200 << 20
	cases := []struct {
		name       string
		limit      string
		gomemlimit string
		want       int64
	}{
		{name: "default", limit: config.DefaultMemoryLimit, want: 256 << 20},
		{name: "configured", limit: "1GiB", want: 1 << 30},
		{name: "off", limit: "off", want: math.MaxInt64},
		{name: "GOMEMLIMIT wins", limit: "1GiB", gomemlimit: "200MiB", want: preset},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(preset)
			cfg, err := config.Parse("serve", []string{"-memory-limit", tc.limit}, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			applyMemoryLimit(cfg, func(k string) string {
				if k == "GOMEMLIMIT" {
					return tc.gomemlimit
				}
				return ""
			})
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("memory limit = %d, want %d", got, tc.want)
			}
		})
	}
}
