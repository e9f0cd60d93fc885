package httpapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestOneNumberOneChannel: a number is reserved across companies only once
// ownership is proven (an official channel, registered with the provider;
// a paired connection). An unpaired connection reserves it in its own
// company only, so no company can squat another's number or learn that it
// is registered: other companies get a neutral message, a company's own
// channels the specific ones. The database refuses it too, whatever the
// code checks.
func TestOneNumberOneChannel(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		acme := connAPI{t: t, h: e.h, token: e.ten.Token}
		other := connAPI{t: t, h: e.h, token: e.h.Tenant("Other").Token}
		otherID := func() int64 {
			var id int64
			if err := db.Bun.NewSelect().Table("companies").Column("id").Where("name = ?", "Other").Scan(ctx, &id); err != nil {
				t.Fatal(err)
			}
			return id
		}()
		register := func(companyID int64, key string) error {
			_, err := e.h.App.Channels.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: companyID, Name: "Second",
				Key: key, BusinessAccountID: "waba-2", PhoneNumberID: "pnid-" + key, AccessToken: "t", AppSecret: "s", BaseURL: "http://127.0.0.1:1"})
			return err
		}
		wantRule := func(what string, err error, message string) {
			t.Helper()
			if fe := fault.As(err); fe.Kind != fault.Rule || fe.Message != message {
				t.Errorf("%s: %v, want %q", what, err, message)
			}
		}

		// The company's own official number: the specific message.
		acme.refused("/api/chatapp-create", map[string]any{"name": "x", "key": ofcSenderKey},
			"The number "+ofcSenderKey+" is already used by an official channel")
		mine := acme.create("Mine", "5511988886666")
		acme.refused("/api/chatapp-update", map[string]any{"key": mine.Key, "new_key": ofcSenderKey},
			"The number "+ofcSenderKey+" is already used by an official channel")
		acme.refused("/api/chatapp-create", map[string]any{"name": "twice", "key": mine.Key},
			"The number "+mine.Key+" is already used by another connection")
		wantRule("official channel on the company's own connection", register(e.ten.CompanyID, mine.Key),
			"The number "+mine.Key+" is already used by a chat-app connection; delete the connection first")

		// Another company's official number: creating says nothing (an
		// unpaired connection reserves nothing); pairing is refused
		// neutrally.
		squat := other.create("Squat", ofcSenderKey)
		other.post("/api/chatapp-qrcode", map[string]any{"id": squat.ID, "os": "Linux", "browser": "Firefox"})
		other.refused(fmt.Sprintf("/api/chatapp-simulator/%d/pair", squat.ID), nil, "The number "+ofcSenderKey+" is not available")
		var logged bool
		if err := db.Bun.NewSelect().Table("company_channels").Column("logged").Where("id = ?", squat.ID).Scan(ctx, &logged); err != nil || logged {
			t.Errorf("the refused pairing left logged=%v (%v)", logged, err)
		}

		// An unpaired connection elsewhere blocks nobody's onboarding.
		early := other.create("Early", "5511988880000")
		if err := register(e.ten.CompanyID, early.Key); err != nil {
			t.Fatalf("official channel on a number another company only claimed: %v", err)
		}
		// A paired one proves the number: others get the neutral message.
		paired := other.pair(other.create("Paired", "5511988881111").ID)
		wantRule("official channel on another company's paired number", register(e.ten.CompanyID, paired.Key),
			"The number "+paired.Key+" is not available")
		late := acme.create("Late", paired.Key) // unpaired: allowed, reserves nothing
		acme.post("/api/chatapp-qrcode", map[string]any{"id": late.ID, "os": "Linux", "browser": "Firefox"})
		acme.refused(fmt.Sprintf("/api/chatapp-simulator/%d/pair", late.ID), nil, "The number "+paired.Key+" is not available")

		// The indexes, not only the checks.
		raw := func(companyID int64, key string, typ channels.TypeID, logged bool) error {
			_, err := db.Bun.ExecContext(ctx, `INSERT INTO company_channels (company_id, key, name, channel_type_id, logged, created_at, updated_at)
				VALUES (?, ?, 'raw', ?, ?, ?, ?)`, companyID, key, int(typ), logged, e.clk.Now(), e.clk.Now())
			return err
		}
		for _, tc := range []struct {
			name    string
			company int64
			key     string
			typ     channels.TypeID
			logged  bool
			unique  bool
		}{
			{"official row on a paired number", e.ten.CompanyID, paired.Key, channels.OfficialChatapp, false, true},
			{"paired row on an official number", otherID, ofcSenderKey, channels.UnofficialChatapp, true, true},
			{"second connection of a company on its number", e.ten.CompanyID, mine.Key, channels.UnofficialChatapp, false, true},
			{"unpaired row on another company's number", otherID, mine.Key, channels.UnofficialChatapp, false, false},
			{"bot channel keyed like a number", e.ten.CompanyID, paired.Key, channels.BotMessenger, false, false},
			{"second bot channel of that key", otherID, paired.Key, channels.BotMessenger, false, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := raw(tc.company, tc.key, tc.typ, tc.logged)
				if tc.unique != store.IsUniqueViolation(err) || (!tc.unique && err != nil) {
					t.Errorf("%v, want unique violation %v", err, tc.unique)
				}
			})
		}
	})
}

// TestProvenNumbersMigration: migration 0076 lifts UNIQUE (channel_type_id,
// key) on a database holding channels and rows that reference them. On
// SQLite that is a table rebuild: ids, the AUTOINCREMENT sequence and every
// referencing row survive, and foreign keys are enforced again afterwards.
func TestProvenNumbersMigration(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		all := app.Migrations()
		var before []store.Migration
		for _, m := range all {
			if m.ID != "0006_channels_proven_numbers" {
				before = append(before, m)
			}
		}
		if len(before) != len(all)-1 {
			t.Fatal("migration 0006_channels_proven_numbers is not listed")
		}
		if err := db.Migrate(ctx, before); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := db.Bun.ExecContext(ctx, q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		exec(`INSERT INTO companies (name, created_at) VALUES ('A', ?), ('B', ?)`, now, now)
		for i, key := range []string{"5511900000001", "5511900000002", "5511900000003"} {
			exec(`INSERT INTO company_channels (company_id, key, name, channel_type_id, logged, created_at, updated_at) VALUES (1, ?, ?, 2, ?, ?, ?)`,
				key, fmt.Sprint("c", i), i == 0, now, now)
		}
		exec(`INSERT INTO chatapp_sessions (company_channel_id) VALUES (1), (2)`)
		exec(`DELETE FROM company_channels WHERE id = 3`)

		if err := db.Migrate(ctx, all); err != nil {
			t.Fatal(err)
		}
		var ids []int64
		if err := db.Bun.NewSelect().Table("company_channels").Column("id").Order("id").Scan(ctx, &ids); err != nil {
			t.Fatal(err)
		}
		var sessions int
		if err := db.Bun.NewSelect().Table("chatapp_sessions").ColumnExpr("COUNT(*)").Scan(ctx, &sessions); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids) != "[1 2]" || sessions != 2 {
			t.Fatalf("after the migration: channels %v, sessions %d; want [1 2] and 2", ids, sessions)
		}
		// Ids keep growing past the deleted one; the second company may now
		// hold an unpaired connection on company 1's unpaired number.
		var id int64
		if err := db.Bun.NewRaw(`INSERT INTO company_channels (company_id, key, name, channel_type_id, created_at, updated_at) VALUES (2, '5511900000002', 'b', 2, ?, ?) RETURNING id`,
			now, now).Scan(ctx, &id); err != nil {
			t.Fatal(err)
		}
		if id != 4 {
			t.Errorf("new channel id %d, want 4 (ids are never reused)", id)
		}
		// Foreign keys hold again: a session of a missing channel fails.
		if _, err := db.Bun.ExecContext(ctx, `INSERT INTO chatapp_sessions (company_channel_id) VALUES (999)`); err == nil {
			t.Error("a row referencing a missing channel was accepted: foreign keys are off")
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
