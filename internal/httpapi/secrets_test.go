package httpapi_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// storedColumn reads one text column of one row as the database holds it.
func storedColumn(t *testing.T, db *store.DB, table, column string, id int64) string {
	t.Helper()
	var v string
	if err := db.Bun.NewSelect().Table(table).Column(column).Where("id = ?", id).Scan(context.Background(), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSecretsAtRestEndToEnd: with SECRETS_KEY set, webhook secrets and
// provider credentials are stored sealed, and what uses them still works:
// deliveries carry signatures a subscriber verifies with the secret the API
// returned, before and after a rotation, and the channel reads back the
// credentials it was given.
func TestSecretsAtRestEndToEnd(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ring := "k1:" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
		h := apitest.Start(t, db, apitest.Options{WorkJobs: true, Configure: func(c *config.Config) { c.SecretsKey = ring }})
		ten := h.Tenant("Acme")
		sink := newEventSink(t, http.StatusNoContent)
		// ping is sent whatever the events list; the list must name a subscribable event.
		sub := sink.subscribe(h, ten.Token, map[string]any{"name": "pings", "events": []string{"contact.import.completed"}})
		id := int64(sub.Data.ID)

		sealedSecret := func() string {
			v := storedColumn(t, db, "webhook_subscriptions", "secret", id)
			if !strings.HasPrefix(v, "enc:v1:k1:") || strings.Contains(v, sub.Secret) {
				t.Fatalf("stored secret %q is not sealed", v)
			}
			return v
		}
		first := sealedSecret()
		ping := func(n int) {
			t.Helper()
			resp := h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/test", id), Token: ten.Token})
			if resp.Status != http.StatusOK {
				t.Fatalf("test ping: %d %s", resp.Status, resp.Body)
			}
			sink.wait("ping", n, named("ping")) // the sink checks each signature with its secret
		}
		ping(1)

		resp := h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/rotate-secret", id), Token: ten.Token})
		var rotated webhookEnvelope
		resp.JSON(t, &rotated)
		if resp.Status != http.StatusOK || rotated.Secret == "" {
			t.Fatalf("rotate: %d %s", resp.Status, resp.Body)
		}
		sink.mu.Lock()
		sink.secret = rotated.Secret
		sink.mu.Unlock()
		sub.Secret = rotated.Secret
		if sealedSecret() == first {
			t.Fatal("rotation kept the stored secret")
		}
		ping(2)

		ch, err := h.App.Channels.RegisterOfficial(context.Background(), channels.OfficialInput{CompanyID: ten.CompanyID, Name: "Official",
			Key: "5511900000001", BusinessAccountID: "waba", PhoneNumberID: "pn-sealed", AccessToken: "provider-token",
			AppSecret: "provider-app-secret", BaseURL: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		for column, plain := range map[string]string{"access_token": "provider-token", "app_secret": "provider-app-secret"} {
			if v := storedColumn(t, db, "provider_accounts", column, ch.ProviderAccount.ID); !strings.HasPrefix(v, "enc:v1:k1:") || strings.Contains(v, plain) {
				t.Errorf("stored %s %q is not sealed", column, v)
			}
		}
		got, err := h.App.Channels.FindByPhoneNumberID(context.Background(), "pn-sealed")
		if err != nil || got.ProviderAccount.AccessToken != "provider-token" || got.ProviderAccount.AppSecret != "provider-app-secret" {
			t.Fatalf("read back: %+v %v", got.ProviderAccount, err)
		}
	})
}
