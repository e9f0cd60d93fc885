package auth_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestLegacyTokensKeepWhatTheyCouldDo: a database whose tokens predate
// per-operation permissions is migrated so each token reaches exactly what
// it reached before, and no more.
func TestLegacyTokensKeepWhatTheyCouldDo(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if err := db.Migrate(ctx, auth.Migrations[:1]); err != nil {
			t.Fatal(err)
		}
		svc := auth.NewService(db, clock.System)
		legacy := map[string]string{"none": "", "webhooks": "channel_webhooks_view", "templates": "provider_templates_view,events_publish"}
		res, err := svc.Bootstrap(ctx, "Acme", "a@acme.test", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for name, perms := range legacy {
			if _, err := db.Bun.ExecContext(ctx, "INSERT INTO access_tokens (company_id, user_id, name, token_hash, permissions, created_at) VALUES (?, ?, ?, ?, ?, ?)",
				res.CompanyID, res.UserID, name, "hash-"+name, perms, time.Now().UTC()); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Migrate(ctx, auth.Migrations); err != nil {
			t.Fatal(err)
		}
		tokens, err := svc.ListTokens(ctx, res.CompanyID)
		if err != nil {
			t.Fatal(err)
		}
		formerlyOpen := []string{auth.PermConnectionsView, auth.PermConnectionsManage, auth.PermMessagesSend, auth.PermMessagesManage,
			auth.PermConversationsView, auth.PermConversationsUpdate, auth.PermCompanyChannelsView}
		want := map[string][]string{
			"bootstrap": formerlyOpen,
			"none":      formerlyOpen,
			"webhooks":  append([]string{auth.PermWebhooksView}, formerlyOpen...),
			"templates": append([]string{auth.PermTemplatesView, auth.PermEventsPublish, auth.PermTemplatesUpload}, formerlyOpen...),
		}
		for _, tok := range tokens {
			got, exp := slices.Sorted(slices.Values(tok.Permissions)), slices.Sorted(slices.Values(want[tok.Name]))
			if !slices.Equal(got, exp) {
				t.Errorf("token %s: permissions %v, want %v", tok.Name, got, exp)
			}
		}
	})
}

func TestParsePermissions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   string
		want []string
		bad  bool
	}{
		{name: "all", in: "all", want: auth.AllPermissions},
		{name: "list with spaces and a repeat", in: "messages_send, connections_view,messages_send", want: []string{"messages_send", "connections_view"}},
		{name: "empty", in: "", want: nil},
		{name: "unknown permission", in: "messages_send,root", bad: true},
		{name: "short form of provider_templates_view", in: "templates_view", bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := auth.ParsePermissions(tc.in)
			if tc.bad {
				if fault.KindOf(err) != fault.Invalid {
					t.Errorf("ParsePermissions(%q): err %v, want invalid", tc.in, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("ParsePermissions(%q): %v %v, want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestTokenCacheBoundsRevoke: a revoke made through the same service applies
// at once; one made by another replica (another Service on the database)
// applies no later than TokenCacheTTL, measured on the injected clock.
func TestTokenCacheBoundsRevoke(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if err := db.Migrate(ctx, auth.Migrations); err != nil {
			t.Fatal(err)
		}
		clk := clock.NewManual(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
		replicaA, replicaB := auth.NewService(db, clk.Now), auth.NewService(db, clk.Now)
		res, err := replicaA.Bootstrap(ctx, "Acme", "a@acme.test", auth.AllPermissions, 0)
		if err != nil {
			t.Fatal(err)
		}
		authenticated := func(svc *auth.Service, raw string) bool {
			t.Helper()
			_, err := svc.Authenticate(ctx, raw)
			if err != nil && fault.KindOf(err) != fault.Unauthenticated {
				t.Fatal(err)
			}
			return err == nil
		}
		remote, remoteTok, err := replicaA.CreateToken(ctx, res.UserID, "remote", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		local, localTok, err := replicaA.CreateToken(ctx, res.UserID, "local", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		expiring, _, err := replicaA.CreateToken(ctx, res.UserID, "expiring", nil, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range []string{res.Token, remote, local, expiring} {
			if !authenticated(replicaA, raw) {
				t.Fatalf("fresh token refused")
			}
		}

		if err := replicaA.RevokeToken(ctx, localTok.ID); err != nil {
			t.Fatal(err)
		}
		if authenticated(replicaA, local) {
			t.Error("in-process revoke did not apply at once")
		}

		if err := replicaB.RevokeToken(ctx, remoteTok.ID); err != nil {
			t.Fatal(err)
		}
		clk.Advance(auth.TokenCacheTTL - time.Millisecond)
		if authenticated(replicaA, expiring) {
			t.Error("a cached token outlived its expiry")
		}
		if !authenticated(replicaA, remote) {
			t.Error("the cache was not used within its bound (replica A looked the revoked token up again)")
		}
		clk.Advance(time.Millisecond)
		if authenticated(replicaA, remote) {
			t.Errorf("a revoke on another replica still not applied after %s", auth.TokenCacheTTL)
		}
		if !authenticated(replicaA, res.Token) {
			t.Error("a valid token is refused after its cache entry expired")
		}
	})
}
