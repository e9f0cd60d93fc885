package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/providersim"
)

// TestAdminOfficialCommands runs the official channel's admin commands the
// way an operator does: register a channel backed by providersim, print its
// webhook settings, sync its templates, set and clear the quota.
func TestAdminOfficialCommands(t *testing.T) {
	dir := t.TempDir()
	sim := providersim.New(providersim.Options{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	sim.AddAccount(providersim.Account{PhoneNumberID: "109876543210987", BusinessAccountID: "102938475610293", AccessToken: "tok", AppSecret: "sec"})
	sim.SeedTemplates("102938475610293", providersim.DemoTemplates())
	env := testEnv(dir, map[string]string{"PUBLIC_BASE_URL": "https://gw.example.com"})
	adminT := func(t *testing.T, args ...string) map[string]any {
		t.Helper()
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"admin"}, args...), &out, env); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("%v printed %q", args, out.String())
		}
		return m
	}
	admin := func(args ...string) map[string]any {
		t.Helper()
		return adminT(t, args...)
	}
	admin("bootstrap", "--company", "Acme", "--email", "a@acme.test")
	admin("channel", "register-official", "--company-id", "1", "--name", "Loja", "--key", "5511999990001",
		"--business-account-id", "102938475610293", "--phone-number-id", "109876543210987", "--access-token", "tok",
		"--app-secret", "sec", "--base-url", srv.URL+"/v23.0")
	// Without --base-url: the provider's real Graph API, at the document's
	// version or the one asked for.
	for i, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"the document's version", nil, "https://graph.facebook.com/v23.0"},
		{"the version asked for", []string{"--api-version", "v24.0"}, "https://graph.facebook.com/v24.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := fmt.Sprint(i + 2)
			out := adminT(t, append([]string{"channel", "register-official", "--company-id", "1", "--name", "Real " + n, "--key", "551199999000" + n,
				"--business-account-id", "w" + n, "--phone-number-id", "p" + n, "--access-token", "tok", "--app-secret", "sec"}, tc.args...)...)
			if out["base_url"] != tc.want {
				t.Fatalf("register-official %v: %v, want base_url %s", tc.args, out, tc.want)
			}
		})
	}

	info := admin("channel", "webhook-info", "--company-id", "1", "--account-id", "1")
	want := official.VerifyToken(&channels.ProviderAccount{AppSecret: "sec", PhoneNumberID: "109876543210987"})
	if info["callback_url"] != "https://gw.example.com/provider-webhooks/109876543210987" || info["verify_token"] != want {
		t.Fatalf("webhook-info: %v", info)
	}
	synced := admin("template", "sync", "--company-id", "1", "--account-id", "1")
	if synced["added"] != float64(len(providersim.DemoTemplates())) {
		t.Fatalf("template sync: %v", synced)
	}
	q := admin("company", "set-quota", "--company-id", "1", "--monthly-messages", "1000")
	if q["monthly_limit"] != float64(1000) || q["used"] != float64(0) {
		t.Fatalf("set-quota: %v", q)
	}
	q = admin("company", "set-quota", "--company-id", "1", "--monthly-messages", "-1")
	if q["monthly_limit"] != nil {
		t.Fatalf("unlimited: %v", q)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"admin", "template", "sync", "--company-id", "2", "--account-id", "1"}, &out, env); err == nil {
		t.Fatal("syncing another company's account succeeded")
	}
}
