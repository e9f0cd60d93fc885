package httpapi_test

import (
	"context"
	"testing"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestOneNumberOneChannel: a number lives on the chat app or on its
// official channel, across companies. A connection (created or renumbered)
// may not take an official channel's number: 509 with the document's
// shape; an official channel may not take a connection's number. The
// database refuses it too, whatever the code checks.
func TestOneNumberOneChannel(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		// Another company, so the rule is seen across companies.
		other := connAPI{t: t, h: e.h, token: e.h.Tenant("Other").Token}
		other.refused("/api/chatapp-create", map[string]any{"name": "x", "key": ofcSenderKey},
			"The number "+ofcSenderKey+" is already used by an official channel")
		conn := other.create("Sales", "5511988887777")
		other.refused("/api/chatapp-update", map[string]any{"key": conn.Key, "new_key": ofcSenderKey},
			"The number "+ofcSenderKey+" is already used by an official channel")

		register := func(key string) error {
			_, err := e.h.App.Channels.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: e.ten.CompanyID, Name: "Second",
				Key: key, BusinessAccountID: "waba-2", PhoneNumberID: "pnid-" + key, AccessToken: "t", AppSecret: "s", BaseURL: "http://127.0.0.1:1"})
			return err
		}
		err := register(conn.Key)
		if fe := fault.As(err); fe.Kind != fault.Rule || fe.Message != "The number 5511988887777 is already used by a chat-app connection; delete the connection first" {
			t.Fatalf("official channel on a connection's number: %v", err)
		}

		// The index, not only the checks: a raw row on a taken number fails.
		_, err = db.Bun.ExecContext(ctx, `INSERT INTO company_channels (company_id, key, name, channel_type_id, created_at, updated_at)
			VALUES (?, ?, 'raw', ?, ?, ?)`, e.ten.CompanyID, conn.Key, int(channels.OfficialChatapp), e.clk.Now(), e.clk.Now())
		if !store.IsUniqueViolation(err) {
			t.Fatalf("raw official row on a connection's number: %v", err)
		}
		// Other channel types are not chat-app numbers.
		_, err = db.Bun.ExecContext(ctx, `INSERT INTO company_channels (company_id, key, name, channel_type_id, created_at, updated_at)
			VALUES (?, ?, 'bot', ?, ?, ?)`, e.ten.CompanyID, conn.Key, int(channels.BotMessenger), e.clk.Now(), e.clk.Now())
		if err != nil {
			t.Fatalf("a bot channel keyed like a number: %v", err)
		}
		if err := register("5511988880000"); err != nil {
			t.Fatalf("a free number: %v", err)
		}
	})
}
