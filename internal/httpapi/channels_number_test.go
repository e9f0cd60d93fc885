package httpapi_test

import (
	"context"
	"testing"
	"time"

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

// TestChannelLookupCache: lookups by key and by id are served from memory
// for channels.CacheTTL (on the injected clock): a change made elsewhere
// (another replica: here a direct UPDATE) shows once the TTL has passed;
// changes made through this process show at once; a cached channel is
// still only its own company's.
func TestChannelLookupCache(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		svc := e.h.App.Channels
		name := func(t channels.TypeID, key string) string {
			ch, err := svc.FindByKey(ctx, e.ten.CompanyID, t, key)
			if fault.KindOf(err) == fault.NotFound {
				return "not found"
			}
			if err != nil {
				e.t.Fatal(err)
			}
			return ch.Name
		}
		if got := name(channels.OfficialChatapp, ofcSenderKey); got != "Official" {
			t.Fatalf("first lookup: %q", got)
		}
		if _, err := db.Bun.ExecContext(ctx, "UPDATE company_channels SET name = 'Renamed elsewhere' WHERE id = ?", e.ch.ID); err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(channels.CacheTTL - time.Millisecond)
		if got := name(channels.OfficialChatapp, ofcSenderKey); got != "Official" {
			t.Fatalf("within the TTL: %q", got)
		}
		if ch, err := svc.Get(ctx, e.ten.CompanyID, e.ch.ID); err != nil || ch.Name != "Official" {
			t.Fatalf("by id within the TTL: %+v %v", ch, err)
		}
		other := e.h.Tenant("Other")
		if _, err := svc.Get(ctx, other.CompanyID, e.ch.ID); fault.KindOf(err) != fault.NotFound {
			t.Fatalf("another company's cached channel: %v", err)
		}
		e.clk.Advance(time.Millisecond)
		if got := name(channels.OfficialChatapp, ofcSenderKey); got != "Renamed elsewhere" {
			t.Fatalf("after the TTL: %q", got)
		}

		conn, err := svc.CreateUnofficial(ctx, e.ten.CompanyID, "Sales", "5511988887777")
		if err != nil {
			t.Fatal(err)
		}
		if got := name(channels.UnofficialChatapp, conn.Key); got != "Sales" {
			t.Fatalf("new connection: %q", got)
		}
		renamed := "Sales (SP)"
		if _, err := svc.UpdateUnofficial(ctx, e.ten.CompanyID, conn.ID, channels.UnofficialChange{Name: &renamed}); err != nil {
			t.Fatal(err)
		}
		if got := name(channels.UnofficialChatapp, conn.Key); got != renamed {
			t.Fatalf("after an update in this process: %q", got)
		}
		var forget func()
		if err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			var err error
			forget, err = svc.DeleteUnofficial(ctx, tx, e.ten.CompanyID, conn.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		forget()
		if got := name(channels.UnofficialChatapp, conn.Key); got != "not found" {
			t.Fatalf("after a delete in this process: %q", got)
		}
	})
}
