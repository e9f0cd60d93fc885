package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
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
	for _, args := range [][]string{{}, {"frobnicate"}, {"admin", "nope"}, {"admin", "bootstrap", "--permissions", "root"}} {
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
	}
}
