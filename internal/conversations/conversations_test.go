package conversations_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// recorder is a webhooks.Publisher that keeps what it is given after
// validating the data against the event's AsyncAPI schema, as the real
// engine does before queueing.
type recorder struct {
	mu     sync.Mutex
	events []recorded
}

type recorded struct {
	webhooks.Event
	JSON []byte
}

func (r *recorder) Publish(_ context.Context, tx *store.Tx, ev webhooks.Event) error {
	if tx == nil {
		return errors.New("published outside a transaction")
	}
	b, err := json.Marshal(ev.Data)
	if err != nil {
		return err
	}
	if err := eventschema.ValidateData(ev.Name, b); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recorded{Event: ev, JSON: b})
	return nil
}

func (r *recorder) take() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

type bundle struct {
	db        *store.DB
	svc       *conversations.Service
	auth      *auth.Service
	pub       *recorder
	clk       *clock.Manual
	companyID int64
	otherID   int64
	official  int64 // channel ids
	chatapp   int64
	social    int64
}

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func setup(t *testing.T, db *store.DB) *bundle {
	t.Helper()
	ctx := context.Background()
	if err := db.Migrate(ctx, slices.Concat(auth.Migrations, channels.Migrations, conversations.Migrations)); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	clk := clock.NewManual(t0)
	a := auth.NewService(db, clk.Now)
	ch := channels.NewService(db, clk.Now)
	pub := &recorder{}
	b := &bundle{db: db, auth: a, pub: pub, clk: clk,
		svc: conversations.NewService(db, clk.Now, clock.NewFormatter(nil), a, ch, pub)}
	var err error
	if b.companyID, err = a.CreateCompany(ctx, "Acme"); err != nil {
		t.Fatal(err)
	}
	if b.otherID, err = a.CreateCompany(ctx, "Other"); err != nil {
		t.Fatal(err)
	}
	off, err := ch.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: b.companyID, Name: "Official", Key: "5511900000001",
		BusinessAccountID: "waba", PhoneNumberID: "pn-1", AccessToken: "tok", AppSecret: "sec", BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	b.official = off.ID
	b.chatapp = insertChannel(t, db, b.companyID, channels.UnofficialChatapp, "5511900000002")
	b.social = insertChannel(t, db, b.companyID, channels.SocialMessenger, "page-1")
	return b
}

// insertChannel adds a company channel of a type channels has no
// constructor for yet (a fixture: only the channel's id, type and key
// matter here).
func insertChannel(t testing.TB, db *store.DB, companyID int64, typ channels.TypeID, key string) int64 {
	t.Helper()
	var id int64
	now := time.Now().UTC()
	err := db.Bun.NewRaw(`INSERT INTO company_channels (company_id, key, name, channel_type_id, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, companyID, key, fmt.Sprintf("%s %s", typ.Name(), key), int(typ), now, now).
		Scan(context.Background(), &id)
	if err != nil {
		t.Fatalf("insert channel: %v", err)
	}
	return id
}

func (b *bundle) ensure(t *testing.T, in conversations.EnsureInput) conversations.Ref {
	t.Helper()
	var ref conversations.Ref
	err := b.db.InTx(context.Background(), func(ctx context.Context, tx *store.Tx) error {
		var err error
		ref, err = b.svc.Ensure(ctx, tx, in)
		return err
	})
	if err != nil {
		t.Fatalf("ensure %+v: %v", in, err)
	}
	return ref
}

func (b *bundle) record(t *testing.T, id int64, at time.Time, inbound bool) {
	t.Helper()
	err := b.db.InTx(context.Background(), func(ctx context.Context, tx *store.Tx) error {
		return b.svc.RecordMessage(ctx, tx, id, at, inbound)
	})
	if err != nil {
		t.Fatalf("record message: %v", err)
	}
}

func decode[T any](t *testing.T, r recorded) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.JSON, &v); err != nil {
		t.Fatalf("decode %s: %v", r.JSON, err)
	}
	return v
}

func TestEnsure(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		in := conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.official, ChannelTypeID: channels.OfficialChatapp,
			ContactKey: "5511977776666", ContactName: "Ana Souza", OriginID: 1}
		ref := b.ensure(t, in)
		if ref.ID == 0 || ref.ContactID == 0 || ref.Name != "Ana Souza" || ref.Key != "5511977776666" || ref.IsGroup {
			t.Fatalf("ref %+v", ref)
		}
		evs := b.pub.take()
		if len(evs) != 1 || evs[0].Name != events.OmnichatConversationCreated {
			t.Fatalf("events %+v", evs)
		}
		if evs[0].CompanyID != b.companyID || evs[0].CompanyChannelID == nil || *evs[0].CompanyChannelID != b.official {
			t.Fatalf("event scope %+v", evs[0].Event)
		}
		var raw map[string]any
		if err := json.Unmarshal(evs[0].JSON, &raw); err != nil {
			t.Fatal(err)
		}
		if _, ok := raw["change_context"]; ok {
			t.Fatalf("created carries change_context: %s", evs[0].JSON)
		}
		p := decode[events.ConversationPayload](t, evs[0])
		phone := "5511977776666"
		want := events.ConversationPayload{ID: ref.ID, Name: "Ana Souza", Key: "5511977776666", Phone: &phone,
			StatusID: 1, CompanyChannelID: b.official, ChannelTypeID: 3, ChannelType: "Official chat app", Platform: "ofc_chatapp",
			OriginID: 1, Contact: events.ConversationContact{ID: ref.ContactID, Name: "Ana Souza", Email: nil},
			CreatedAt: "2026-11-22T12:00:00+00:00", LastMessageAt: "2026-11-22T12:00:00+00:00", Version: 1}
		if !reflect.DeepEqual(p, want) {
			t.Fatalf("payload\n got %+v\nwant %+v", p, want)
		}

		// Found again: same conversation, no second event.
		if again := b.ensure(t, in); again != ref {
			t.Fatalf("second ensure %+v, want %+v", again, ref)
		}
		if evs := b.pub.take(); len(evs) != 0 {
			t.Fatalf("second ensure published %d events", len(evs))
		}

		// The same number on the unofficial channel is another conversation
		// of the same contact; a group with that key is another contact.
		other := b.ensure(t, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.chatapp, ChannelTypeID: channels.UnofficialChatapp,
			ContactKey: "5511977776666", OriginID: 2})
		if other.ID == ref.ID || other.ContactID != ref.ContactID || other.Name != "Ana Souza" {
			t.Fatalf("unofficial conversation %+v (official %+v)", other, ref)
		}
		group := b.ensure(t, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.chatapp, ChannelTypeID: channels.UnofficialChatapp,
			ContactKey: "5511977776666", ContactName: "Family", IsGroup: true, OriginID: 1})
		if group.ID == other.ID || group.ContactID == ref.ContactID || !group.IsGroup {
			t.Fatalf("group %+v", group)
		}
		evs = b.pub.take()
		if len(evs) != 2 {
			t.Fatalf("%d events, want 2", len(evs))
		}
		gp := decode[events.ConversationPayload](t, evs[1])
		if gp.Phone != nil || !gp.IsGroup || gp.ChannelType != "Unofficial chat app" || gp.Platform != "chatapp" || gp.Contact.Name != "Family" {
			t.Fatalf("group payload %+v", gp)
		}

		// A conversation created by a company-initiated message knows only
		// the number; the contact's first message names it and its contact,
		// and a later nameless conversation of that contact takes the name.
		nameless := b.ensure(t, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.official, ChannelTypeID: channels.OfficialChatapp,
			ContactKey: "5511944443333", ContactName: "5511944443333", OriginID: 2})
		named := b.ensure(t, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.official, ChannelTypeID: channels.OfficialChatapp,
			ContactKey: "5511944443333", ContactName: "Rita", OriginID: 1})
		if nameless.Name != "5511944443333" || named.ID != nameless.ID || named.Name != "Rita" {
			t.Fatalf("naming: %+v then %+v", nameless, named)
		}
		later := b.ensure(t, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.chatapp, ChannelTypeID: channels.UnofficialChatapp,
			ContactKey: "5511944443333", OriginID: 2})
		if later.Name != "Rita" || later.ContactID != named.ContactID {
			t.Fatalf("second channel: %+v", later)
		}
		list, err := b.svc.ListContactChannels(ctx, b.companyID, conversations.ListFilter{Page: store.Page{Number: 1, PerPage: 20}, Text: "RITA", With: conversations.Relations{Contact: true}})
		found := list.Data
		if err != nil || len(found) != 2 || found[0].Contact.Name != "Rita" {
			t.Fatalf("filter by the learnt name: %+v %v", found, err)
		}
		b.pub.take()

		// Nothing is kept when the caller's transaction rolls back.
		boom := errors.New("boom")
		err = db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			if _, err := b.svc.Ensure(ctx, tx, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.social,
				ChannelTypeID: channels.SocialMessenger, ContactKey: "psid-9", OriginID: 1}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("rollback: %v", err)
		}
		if list, err := b.svc.ListContactChannels(ctx, b.companyID, conversations.ListFilter{Page: store.Page{Number: 1, PerPage: 20},
			ChannelTypeIDs: []channels.TypeID{channels.SocialMessenger}}); err != nil || list.Total != 0 {
			t.Fatalf("after rollback: %d conversations, %v", list.Total, err)
		}

		for _, bad := range []conversations.EnsureInput{
			{CompanyID: b.companyID, CompanyChannelID: b.official, ChannelTypeID: 3, ContactKey: " ", OriginID: 1},
			{CompanyID: b.companyID, CompanyChannelID: b.official, ChannelTypeID: 9, ContactKey: "1", OriginID: 1},
			{CompanyID: b.companyID, CompanyChannelID: b.official, ChannelTypeID: 3, ContactKey: "1", OriginID: 0},
			{CompanyID: b.companyID, ChannelTypeID: 3, ContactKey: "1", OriginID: 1},
		} {
			err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
				_, err := b.svc.Ensure(ctx, tx, bad)
				return err
			})
			if fault.KindOf(err) != fault.Invalid {
				t.Errorf("ensure %+v: %v, want invalid", bad, err)
			}
		}
	})
}

func TestEnsureConcurrent(t *testing.T) {
	t.Parallel()
	// PostgreSQL only: SQLite serialises every transaction.
	db := storetest.Postgres(t)
	b := setup(t, db)
	in := conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.official, ChannelTypeID: channels.OfficialChatapp,
		ContactKey: "5511955554444", ContactName: "Race", OriginID: 1}
	const n = 8
	refs := make([]conversations.Ref, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			err := db.InTx(context.Background(), func(ctx context.Context, tx *store.Tx) error {
				var err error
				refs[i], err = b.svc.Ensure(ctx, tx, in)
				return err
			})
			if err != nil {
				t.Errorf("ensure %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, r := range refs[1:] {
		if r != refs[0] {
			t.Fatalf("concurrent ensures disagree: %+v vs %+v", r, refs[0])
		}
	}
	if evs := b.pub.take(); len(evs) != 1 {
		t.Fatalf("%d created events, want 1", len(evs))
	}
}

func TestRecordMessageAndWindow(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		ref := b.ensure(t, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.official,
			ChannelTypeID: channels.OfficialChatapp, ContactKey: "5511977776666", OriginID: 2})

		w, err := b.svc.WindowFor(ctx, b.official, "5511977776666", t0)
		if err != nil || w.Open || w.ExpiresAt != nil {
			t.Fatalf("window before any inbound: %+v %v", w, err)
		}
		b.record(t, ref.ID, t0.Add(-30*time.Minute), false)
		inbound := t0.Add(-10 * time.Minute)
		b.record(t, ref.ID, inbound, true)
		b.record(t, ref.ID, t0.Add(-20*time.Minute), true) // late arrival of an older message

		c, err := b.svc.Get(ctx, b.companyID, ref.ID, conversations.AllRelations)
		if err != nil {
			t.Fatal(err)
		}
		if c.UnreadCount != 2 || !c.LastMessageAt.Equal(inbound) || !c.LastInboundAt.Equal(inbound) ||
			c.FirstResponseAt == nil || !c.FirstResponseAt.Equal(t0.Add(-30*time.Minute)) {
			t.Fatalf("after messages: %+v", c)
		}
		if c.Window == nil || !c.Window.Open || !c.Window.ExpiresAt.Equal(inbound.Add(24*time.Hour)) || c.WindowRemainingMinutes != 24*60-10 {
			t.Fatalf("window relation %+v, %d min", c.Window, c.WindowRemainingMinutes)
		}

		for _, tc := range []struct {
			name string
			at   time.Time
			open bool
		}{
			{"a second before 24 hours", inbound.Add(24*time.Hour - time.Second), true},
			{"at 24 hours", inbound.Add(24 * time.Hour), false},
			{"at 48 hours", inbound.Add(48 * time.Hour), false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				w, err := b.svc.WindowFor(ctx, b.official, "5511977776666", tc.at)
				if err != nil || w.Open != tc.open || w.ExpiresAt == nil || !w.ExpiresAt.Equal(inbound.Add(24*time.Hour)) {
					t.Errorf("%+v %v, want open=%v", w, err, tc.open)
				}
			})
		}
		if w, err := b.svc.WindowFor(ctx, b.official, "5511000000000", t0); err != nil || w.Open {
			t.Errorf("unknown contact: %+v %v", w, err)
		}

		// A closed conversation reopens when the contact writes again.
		st := conversations.StatusResolved
		if _, err := b.svc.UpdateContactChannel(ctx, b.companyID, ref.ID, conversations.Update{StatusID: &st}); err != nil {
			t.Fatal(err)
		}
		b.record(t, ref.ID, t0.Add(time.Hour), true)
		if c, _ := b.svc.Get(ctx, b.companyID, ref.ID, conversations.Relations{}); c.StatusID != conversations.StatusOpen {
			t.Fatalf("status after inbound on a resolved conversation: %d", c.StatusID)
		}

		err = db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error { return b.svc.RecordMessage(ctx, tx, 999999, t0, true) })
		if fault.KindOf(err) != fault.NotFound {
			t.Fatalf("unknown conversation: %v", err)
		}
	})
}

func TestUpdateLifecycle(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		ana, _ := b.auth.CreateUser(ctx, b.companyID, "Ana Lima", "ana@acme.test")
		bia, _ := b.auth.CreateUser(ctx, b.companyID, "Bia Reis", "bia@acme.test")
		stranger, _ := b.auth.CreateUser(ctx, b.otherID, "Stranger", "x@other.test")
		support, err := b.svc.CreateSector(ctx, b.companyID, "Suporte")
		if err != nil {
			t.Fatal(err)
		}
		foreignSector, _ := b.svc.CreateSector(ctx, b.otherID, "Vendas")
		ref := b.ensure(t, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.official,
			ChannelTypeID: channels.OfficialChatapp, ContactKey: "5511977776666", ContactName: "Maria", OriginID: 1})
		b.record(t, ref.ID, t0, true)
		b.pub.take()

		ptr := func(v int64) *int64 { return &v }
		status := func(s conversations.StatusID) *conversations.StatusID { return &s }
		type want struct {
			event    string
			change   string // JSON of change_context
			statusID int
			userID   int64
			sector   bool
		}
		steps := []struct {
			name   string
			update conversations.Update
			kind   fault.Kind // expected error kind, Internal = none
			field  string
			events []want
			// unchanged: the update changes nothing, so the version stays
			// (a refused update changes nothing either).
			unchanged bool
		}{
			{name: "first assignment", update: conversations.Update{UserID: ptr(ana)},
				events: []want{{event: events.OmnichatConversationAssigned, change: fmt.Sprintf(`{"previous_user_id":null,"assigned_user_id":%d}`, ana), statusID: 1, userID: ana}}},
			{name: "same assignee again", update: conversations.Update{UserID: ptr(ana)}, unchanged: true},
			{name: "transfer with sector and status", update: conversations.Update{UserID: ptr(bia), SectorID: ptr(support.ID), StatusID: status(conversations.StatusInProgress)},
				events: []want{{event: events.OmnichatConversationAssigned, change: fmt.Sprintf(`{"previous_user_id":%d,"assigned_user_id":%d}`, ana, bia), statusID: 3, userID: bia, sector: true}}},
			{name: "user of another company", update: conversations.Update{UserID: ptr(stranger)}, kind: fault.Invalid, field: "user_id"},
			{name: "unknown user", update: conversations.Update{UserID: ptr(987654)}, kind: fault.Invalid, field: "user_id"},
			{name: "sector of another company", update: conversations.Update{SectorID: ptr(foreignSector.ID)}, kind: fault.Invalid, field: "sector_id"},
			{name: "resolve", update: conversations.Update{StatusID: status(conversations.StatusResolved), MarkRead: true},
				events: []want{{event: events.OmnichatConversationClosed, change: `{"previous_status_id":3,"status_id":4}`, statusID: 4, userID: bia, sector: true}}},
			{name: "resolved to cancelled", update: conversations.Update{StatusID: status(conversations.StatusCancelled)}},
			{name: "reopen", update: conversations.Update{StatusID: status(conversations.StatusOpen)}},
			{name: "unassign, clear sector, assign and close at once", update: conversations.Update{Unassign: true, ClearSector: true}},
			{name: "assign and cancel", update: conversations.Update{UserID: ptr(ana), StatusID: status(conversations.StatusCancelled)},
				events: []want{
					{event: events.OmnichatConversationAssigned, change: fmt.Sprintf(`{"previous_user_id":null,"assigned_user_id":%d}`, ana), statusID: 5, userID: ana},
					{event: events.OmnichatConversationClosed, change: `{"previous_status_id":1,"status_id":5}`, statusID: 5, userID: ana},
				}},
		}
		// Ensure created it (version 1) and RecordMessage changed it (2).
		version := int64(2)
		for _, st := range steps {
			if !t.Run(st.name, func(t *testing.T) {
				conv, err := b.svc.UpdateContactChannel(ctx, b.companyID, ref.ID, st.update)
				if st.kind != fault.Internal {
					var fe *fault.Error
					if !errors.As(err, &fe) || fe.Kind != st.kind || len(fe.Fields[st.field]) == 0 {
						t.Fatalf("%v, want %s on %s", err, st.kind, st.field)
					}
				} else if err != nil {
					t.Fatal(err)
				} else {
					if !st.unchanged {
						version++
					}
					if conv.Version != version {
						t.Fatalf("version %d, want %d", conv.Version, version)
					}
				}
				got := b.pub.take()
				if len(got) != len(st.events) {
					t.Fatalf("%d events, want %d", len(got), len(st.events))
				}
				for i, w := range st.events {
					ev := got[i]
					var data struct {
						events.ConversationPayload
						ChangeContext json.RawMessage `json:"change_context"`
					}
					if err := json.Unmarshal(ev.JSON, &data); err != nil {
						t.Fatal(err)
					}
					if ev.Name != w.event || string(data.ChangeContext) != w.change || int(data.StatusID) != w.statusID ||
						data.AssignedUser == nil || data.AssignedUser.ID != w.userID || (data.Sector != nil) != w.sector ||
						*ev.CompanyChannelID != b.official || data.Contact.Name != "Maria" || data.Version != version {
						t.Fatalf("event %d %s %s", i, ev.Name, ev.JSON)
					}
				}
			}) {
				t.FailNow()
			}
		}
		c, err := b.svc.Get(ctx, b.companyID, ref.ID, conversations.AllRelations)
		if err != nil {
			t.Fatal(err)
		}
		if c.StatusID != conversations.StatusCancelled || c.User == nil || c.User.ID != ana || c.Sector != nil || c.UnreadCount != 0 {
			t.Fatalf("final state %+v", c)
		}

		// Another company's conversation is not found, and unchanged.
		if _, err := b.svc.UpdateContactChannel(ctx, b.otherID, ref.ID, conversations.Update{Unassign: true}); fault.KindOf(err) != fault.NotFound {
			t.Fatalf("other company: %v", err)
		}
	})
}

func TestPublishEvent(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		valid := json.RawMessage(`{"import_id":"imp-1","total_contacts":3,"imported_contacts":2,"skipped_contacts":1,"failed_contacts":0,"started_by_user_id":5,"completed_at":"2026-11-22T09:00:00-03:00"}`)
		at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
		if err := b.svc.PublishEvent(ctx, b.companyID, conversations.PublishInput{Event: events.ContactImportCompleted, Data: valid, OccurredAt: at}); err != nil {
			t.Fatal(err)
		}
		got := b.pub.take()
		if len(got) != 1 || got[0].Name != events.ContactImportCompleted || got[0].CompanyID != b.companyID ||
			got[0].CompanyChannelID != nil || !got[0].OccurredAt.Equal(at) || string(got[0].JSON) != string(valid) {
			t.Fatalf("published %+v", got)
		}

		for _, tc := range []struct {
			name, event, data, field string
		}{
			{"channel-scope event", events.OmnichatConversationCreated, `{}`, "event"},
			{"ping", events.Ping, `{}`, "event"},
			{"unknown event", "crm.business.exploded", `{}`, "event"},
			{"missing property", events.ContactImportCompleted, `{"total_contacts":3}`, "data"},
			{"wrong type", events.ContactImportCompleted, `{"import_id":"x","total_contacts":"three","imported_contacts":2,"skipped_contacts":1,"failed_contacts":0,"started_by_user_id":5,"completed_at":"2026-11-22T09:00:00-03:00"}`, "data.total_contacts"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := b.svc.PublishEvent(ctx, b.companyID, conversations.PublishInput{Event: tc.event, Data: json.RawMessage(tc.data)})
				var fe *fault.Error
				if !errors.As(err, &fe) || fe.Kind != fault.Invalid || len(fe.Fields[tc.field]) == 0 || fe.Message == "" {
					t.Errorf("%v (fields %v), want invalid on %s", err, fe, tc.field)
				}
			})
		}
		if got := b.pub.take(); len(got) != 0 {
			t.Fatalf("invalid events were published: %+v", got)
		}
	})
}

// TestEnsureAdoptsName: a conversation first created by an outbound send
// knows only its key (the number, or the group's id); the first message
// that carries a name names it, for groups as for contacts, and the group's
// contact with it. A message without a name (its key again) leaves a
// learnt name alone, and a named conversation is never renamed by Ensure.
func TestEnsureAdoptsName(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		cases := []struct {
			name    string
			channel int64
			typ     channels.TypeID
			key     string
			group   bool
		}{
			{"contact on the unofficial chat app", b.chatapp, channels.UnofficialChatapp, "5511933332222", false},
			{"group on the unofficial chat app", b.chatapp, channels.UnofficialChatapp, "120363041234567890", true},
			{"group on the social messenger", b.social, channels.SocialMessenger, "thread-77", true},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				in := conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: tc.channel, ChannelTypeID: tc.typ,
					ContactKey: tc.key, ContactName: tc.key, IsGroup: tc.group, OriginID: int(conversations.OriginAPI)}
				sent := b.ensure(t, in)
				if sent.Name != tc.key {
					t.Fatalf("created by a send: name %q, want the key %q", sent.Name, tc.key)
				}
				// A message that still brings no name changes nothing.
				if again := b.ensure(t, in); again != sent {
					t.Fatalf("nameless message: %+v, want %+v", again, sent)
				}
				in.ContactName, in.OriginID = "  Família Souza ", int(conversations.OriginContactInitiated)
				got := b.ensure(t, in)
				if got.ID != sent.ID || got.ContactID != sent.ContactID || got.Name != "Família Souza" || got.IsGroup != tc.group {
					t.Fatalf("named message: %+v (created %+v)", got, sent)
				}
				conv, err := b.svc.Get(ctx, b.companyID, sent.ID, conversations.Relations{Contact: true})
				if err != nil {
					t.Fatal(err)
				}
				if conv.Name != "Família Souza" || conv.Contact == nil || conv.Contact.Name != "Família Souza" {
					t.Fatalf("stored: conversation %q, contact %+v", conv.Name, conv.Contact)
				}
				// The learnt name is searchable, accents folded.
				list, err := b.svc.ListContactChannels(ctx, b.companyID, conversations.ListFilter{
					Page: store.Page{Number: 1, PerPage: 20}, Text: "familia souza"})
				found, n := list.Data, list.Total
				if err != nil || n == 0 || !slices.ContainsFunc(found, func(c conversations.Conversation) bool { return c.ID == sent.ID }) {
					t.Fatalf("text filter: %d found, %v", n, err)
				}
				// Later messages: the key again, or another name, keep it.
				for _, name := range []string{tc.key, "Outro Nome"} {
					in.ContactName = name
					if later := b.ensure(t, in); later.Name != "Família Souza" {
						t.Fatalf("message named %q renamed it to %q", name, later.Name)
					}
				}
				b.pub.take()
			})
		}

		// A group is one contact on both chat apps: sent to on the official
		// channel first (named by its id), then named by a message on the
		// unofficial one. The next send on the official channel brings only
		// the id again, and the conversation adopts the group's name.
		const group = "120363049999999999"
		send := conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.official, ChannelTypeID: channels.OfficialChatapp,
			ContactKey: group, ContactName: group, IsGroup: true, OriginID: int(conversations.OriginAPI)}
		first := b.ensure(t, send)
		named := b.ensure(t, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.chatapp, ChannelTypeID: channels.UnofficialChatapp,
			ContactKey: group, ContactName: "Equipe Vendas", IsGroup: true, OriginID: int(conversations.OriginContactInitiated)})
		if named.ContactID != first.ContactID || named.Name != "Equipe Vendas" || first.Name != group {
			t.Fatalf("group on two channels: %+v then %+v", first, named)
		}
		if again := b.ensure(t, send); again.ID != first.ID || again.Name != "Equipe Vendas" {
			t.Fatalf("the official conversation did not adopt the group's name: %+v", again)
		}
		if evs := b.pub.take(); len(evs) != 2 {
			t.Fatalf("%d events, want the two created (naming publishes none)", len(evs))
		}
	})
}

// TestRecordOutbound: the send path's one-statement Ensure + RecordMessage
// behaves as the two: a new conversation is created (and published), an
// existing one has its times moved (never back) and its first response set
// once, and a key-named one adopts a name learnt on another channel.
func TestRecordOutbound(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		record := func(t *testing.T, in conversations.EnsureInput, at time.Time) conversations.Ref {
			t.Helper()
			var ref conversations.Ref
			if err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
				var err error
				ref, err = b.svc.RecordOutbound(ctx, tx, in, at)
				return err
			}); err != nil {
				t.Fatalf("record outbound %+v: %v", in, err)
			}
			return ref
		}
		get := func(t *testing.T, id int64) conversations.Conversation {
			t.Helper()
			c, err := b.svc.Get(ctx, b.companyID, id, conversations.Relations{})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		send := conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.official, ChannelTypeID: channels.OfficialChatapp,
			ContactKey: "5511977776666", ContactName: "5511977776666", OriginID: int(conversations.OriginAPI)}
		first := record(t, send, t0)
		if evs := b.pub.take(); len(evs) != 1 || first.Name != send.ContactKey {
			t.Fatalf("new conversation: %+v, %d events", first, len(evs))
		}
		steps := []struct {
			name                  string
			at                    time.Time
			wantLast, wantFirstAt time.Time
		}{
			{"a later message moves the last message time", t0.Add(time.Minute), t0.Add(time.Minute), t0},
			{"an older message moves nothing back", t0.Add(-time.Hour), t0.Add(time.Minute), t0},
			{"a still later message", t0.Add(time.Hour), t0.Add(time.Hour), t0},
		}
		for _, s := range steps {
			if !t.Run(s.name, func(t *testing.T) {
				if ref := record(t, send, s.at); ref != first {
					t.Fatalf("%+v, want %+v", ref, first)
				}
				c := get(t, first.ID)
				if !c.LastMessageAt.Equal(s.wantLast) || c.FirstResponseAt == nil || !c.FirstResponseAt.Equal(s.wantFirstAt) || c.UnreadCount != 0 {
					t.Fatalf("last %v first %v unread %d", c.LastMessageAt, c.FirstResponseAt, c.UnreadCount)
				}
			}) {
				t.FailNow()
			}
		}
		// The contact writes on the unofficial channel with a name: the
		// official conversation, still named by its key, adopts it on the
		// next send.
		b.ensure(t, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.chatapp, ChannelTypeID: channels.UnofficialChatapp,
			ContactKey: send.ContactKey, ContactName: "Maria Souza", OriginID: int(conversations.OriginContactInitiated)})
		if got := record(t, send, t0.Add(2*time.Hour)); got.ID != first.ID || got.Name != "Maria Souza" {
			t.Fatalf("after the contact was named elsewhere: %+v", got)
		}
		if evs := b.pub.take(); len(evs) != 1 {
			t.Fatalf("%d events, want the unofficial conversation's creation only (naming publishes none)", len(evs))
		}
	})
}

// TestSearchTextMigrates upgrades a database whose conversations carry
// their search text on their own row (before 0075): the text filter finds
// them afterwards, in their company only, and a rename rewrites the moved
// text.
func TestSearchTextMigrates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		all := slices.Concat(auth.Migrations, channels.Migrations, conversations.Migrations)
		before := slices.IndexFunc(all, func(m store.Migration) bool { return m.ID == "0011_conversations_search" })
		if before < 0 {
			t.Fatal("migration 0011_conversations_search not found")
		}
		if err := db.Migrate(ctx, all[:before]); err != nil {
			t.Fatalf("migrate to 0074: %v", err)
		}
		a := auth.NewService(db, func() time.Time { return t0 })
		var companies [2]int64
		for i, name := range []string{"Acme", "Other"} {
			id, err := a.CreateCompany(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			companies[i] = id
			chID := insertChannel(t, db, id, channels.SocialMessenger, fmt.Sprintf("page-%d", i))
			var contactID int64
			if err := db.Bun.NewRaw(`INSERT INTO contacts (company_id, identity, name, created_at, updated_at)
				VALUES (?, 'key:rita', 'Rita Araújo', ?, ?) RETURNING id`, id, t0, t0).Scan(ctx, &contactID); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Bun.NewRaw(`INSERT INTO contact_channels (company_id, contact_id, company_channel_id, channel_type_id, key, name,
				status_id, origin_id, search_text, created_at, updated_at) VALUES (?, ?, ?, ?, 'rita', 'Rita Araújo', 1, 1, ?, ?, ?)`,
				id, contactID, chID, int(channels.SocialMessenger), "rita araujo\x1frita\x1frita araujo", t0, t0).Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Migrate(ctx, all); err != nil {
			t.Fatalf("migrate from 0074: %v", err)
		}
		svc := conversations.NewService(db, func() time.Time { return t0 }, clock.NewFormatter(nil), a, channels.NewService(db, nil), &recorder{})
		list := func(text string) []conversations.Conversation {
			t.Helper()
			list, err := svc.ListContactChannels(ctx, companies[0], conversations.ListFilter{Page: store.Page{Number: 1, PerPage: 20}, Text: text})
			if err != nil {
				t.Fatalf("list %q: %v", text, err)
			}
			return list.Data
		}
		found := list("ARAUJO")
		if len(found) != 1 || found[0].CompanyID != companies[0] {
			t.Fatalf("filter after the upgrade found %+v, want the one conversation of company %d", found, companies[0])
		}
		if _, err := svc.UpdateContact(ctx, companies[0], found[0].ContactID, "Rita Souza", nil); err != nil {
			t.Fatalf("rename contact: %v", err)
		}
		if got := list("souza"); len(got) != 1 {
			t.Fatalf("filter by the new name found %d conversations, want 1", len(got))
		}
		if got := list("araujo"); len(got) != 1 {
			t.Fatalf("filter by the conversation's own name found %d conversations, want 1 (it keeps its name)", len(got))
		}
	})
}
