package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/store"
)

// TestAdminSecretsRotate walks an operator's path: credentials stored before
// SECRETS_KEY existed are read as clear, `admin secrets rotate` seals them
// under the key, a new first key re-seals them, and the channel reads the
// same credentials throughout (its webhook verify token derives from them).
func TestAdminSecretsRotate(t *testing.T) {
	dir := t.TempDir()
	keyOf := func(id string, b byte) string {
		return id + ":" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
	}
	admin := func(ring string, args ...string) (map[string]any, error) {
		t.Helper()
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"admin"}, args...), &out, testEnv(dir, map[string]string{"SECRETS_KEY": ring})); err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("%v printed %q: %v", args, out.String(), err)
		}
		return m, nil
	}
	must := func(m map[string]any, err error) map[string]any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	stored := func() []string {
		t.Helper()
		db, err := store.OpenSQLite(context.Background(), filepath.Join(dir, "gateway.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var row struct {
			AccessToken string `bun:"access_token"`
			AppSecret   string `bun:"app_secret"`
		}
		if err := db.Bun.NewSelect().Table("provider_accounts").Column("access_token", "app_secret").Limit(1).Scan(context.Background(), &row); err != nil {
			t.Fatal(err)
		}
		return []string{row.AccessToken, row.AppSecret}
	}
	k1, k2 := keyOf("k1", 1), keyOf("k2", 2)

	must(admin("", "bootstrap", "--company", "Acme", "--email", "a@acme.test"))
	ch := must(admin("", "channel", "register-official", "--company-id", "1", "--name", "Official", "--key", "5511900000001",
		"--business-account-id", "waba", "--phone-number-id", "pn-1", "--access-token", "provider-token",
		"--app-secret", "provider-app-secret", "--base-url", "http://127.0.0.1:1"))
	account := jsonNumber(ch["provider_account_id"])
	info := func(ring string) (map[string]any, error) {
		return admin(ring, "channel", "webhook-info", "--company-id", "1", "--account-id", account)
	}
	want := must(info(""))["verify_token"]
	if s := stored(); s[0] != "provider-token" || s[1] != "provider-app-secret" {
		t.Fatalf("without a key the credentials are stored as %v, want clear", s)
	}

	if _, err := admin("", "secrets", "rotate"); err == nil || !strings.Contains(err.Error(), "SECRETS_KEY is not set") {
		t.Fatalf("rotate without a key: %v", err)
	}
	if got := must(info(k1))["verify_token"]; got != want {
		t.Fatalf("clear credentials under a key ring read as %v, want %v", got, want)
	}
	if res := must(admin(k1, "secrets", "rotate")); res["resealed"] != float64(2) || res["key_id"] != "k1" {
		t.Fatalf("rotate to k1: %v", res)
	}
	for _, v := range stored() {
		if !strings.HasPrefix(v, "enc:v1:k1:") {
			t.Fatalf("after rotate to k1 a credential is stored as %q", v)
		}
	}
	if got := must(info(k1))["verify_token"]; got != want {
		t.Fatalf("sealed credentials read as %v, want %v", got, want)
	}
	if _, err := info(""); err == nil || !strings.Contains(err.Error(), `encrypted with key "k1" but SECRETS_KEY is not set`) {
		t.Fatalf("reading sealed credentials without the key: %v", err)
	}
	if _, err := info(k2); err == nil || !strings.Contains(err.Error(), `which SECRETS_KEY does not contain`) {
		t.Fatalf("reading with a ring that lost k1: %v", err)
	}

	if res := must(admin(k2+","+k1, "secrets", "rotate")); res["resealed"] != float64(2) || res["key_id"] != "k2" {
		t.Fatalf("rotate to k2: %v", res)
	}
	if res := must(admin(k2+","+k1, "secrets", "rotate")); res["resealed"] != float64(0) {
		t.Fatalf("second rotate: %v", res)
	}
	if got := must(info(k2))["verify_token"]; got != want {
		t.Fatalf("after rotating to k2 (k1 retired) the credentials read as %v, want %v", got, want)
	}
}

// testEnv is the environment of a command run by a test: its data dir,
// quiet logs, and vars.
func testEnv(dir string, vars map[string]string) func(string) string {
	return func(k string) string {
		switch k {
		case "DATA_DIR":
			return dir
		case "LOG_LEVEL":
			return "error"
		}
		return vars[k]
	}
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
