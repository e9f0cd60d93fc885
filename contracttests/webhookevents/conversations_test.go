//go:build contract

package webhookevents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// conversationEvents are the events whose data the provider takes from a
// conversation seeded through the conversations service.
var conversationEvents = []string{
	events.OmnichatConversationCreated, events.OmnichatConversationAssigned, events.OmnichatConversationClosed,
}

// conversationWorld is the provider state behind the three conversation
// events: a real conversations service on a SQLite database of its own, in
// which the state handler seeds one conversation through the service's own
// API (Ensure, then UpdateContactChannel to assign and to close it). The
// event data comes from the service's exported payload builders over the
// conversation as stored after each step.
type conversationWorld struct {
	dir string // database directory (the test's TempDir)

	mu sync.Mutex
	db *store.DB
	// events is each conversation event as built after its step; nil until
	// the state was set up.
	events map[string]webhooks.Event
}

// setUp seeds the conversation the first time it is called (every
// interaction is given the same provider state, and the conversation's
// events do not change once built); later calls keep it.
func (w *conversationWorld) setUp(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.events != nil {
		return nil
	}
	db, err := store.OpenSQLite(ctx, filepath.Join(w.dir, "provider.db"))
	if err != nil {
		return err
	}
	w.db = db
	evs, err := seedConversation(ctx, db)
	if err != nil {
		return fmt.Errorf("seed the conversation of the provider state: %w", err)
	}
	w.events = evs
	return nil
}

// event returns the seeded event name, occurring at `at`.
func (w *conversationWorld) event(name string, at time.Time) (webhooks.Event, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ev, ok := w.events[name]
	if !ok {
		return webhooks.Event{}, fmt.Errorf("%s: the provider state was not set up (no conversation seeded)", name)
	}
	ev.OccurredAt = at
	return ev, nil
}

func (w *conversationWorld) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.db != nil {
		_ = w.db.Bun.Close()
	}
}

// published keeps what the service publishes, so that the builders'
// output can be checked against it.
type published struct {
	mu     sync.Mutex
	events []webhooks.Event
}

func (p *published) Publish(_ context.Context, _ *store.Tx, ev webhooks.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, ev)
	return nil
}

// seedConversation runs the conversation's life through the service: a
// contact writes to an official channel (created), an attendant of the
// Suporte sector takes it (assigned), and resolves it (closed). Each
// event's data is the exported builder applied to the conversation read
// back after the step. It must equal, byte for byte, what the service
// published during the step (the builder is the service's own, not a copy)
// and validate against the AsyncAPI schema; otherwise seeding fails.
func seedConversation(ctx context.Context, db *store.DB) (map[string]webhooks.Event, error) {
	if err := db.Migrate(ctx, slices.Concat(auth.Migrations, channels.Migrations, conversations.Migrations)); err != nil {
		return nil, err
	}
	now := func() time.Time { return time.Now().UTC() }
	users := auth.NewService(db, now)
	chans := channels.NewService(db, now)
	pub := &published{}
	svc := conversations.NewService(db, now, clock.NewFormatter(nil), users, chans, pub)

	companyID, err := users.CreateCompany(ctx, "Loja Exemplo")
	if err != nil {
		return nil, err
	}
	attendant, err := users.CreateUser(ctx, companyID, "Ana Lima", "ana.lima@example.com")
	if err != nil {
		return nil, err
	}
	support, err := svc.CreateSector(ctx, companyID, "Suporte")
	if err != nil {
		return nil, err
	}
	ch, err := chans.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: companyID, Name: "Atendimento", Key: "5511987650000",
		BusinessAccountID: "waba-1", PhoneNumberID: "pn-1", AccessToken: "token", AppSecret: "secret", BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		return nil, err
	}

	out := map[string]webhooks.Event{}
	// keep checks the step's publication against the builder's data and
	// keeps the event.
	keep := func(name string, data any) error {
		pub.mu.Lock()
		got := pub.events
		pub.events = nil
		pub.mu.Unlock()
		if len(got) != 1 || got[0].Name != name {
			return fmt.Errorf("the step published %d events, want one %s", len(got), name)
		}
		built, err := json.Marshal(data)
		if err != nil {
			return err
		}
		sent, err := json.Marshal(got[0].Data)
		if err != nil {
			return err
		}
		if !bytes.Equal(built, sent) {
			return fmt.Errorf("%s: the builder gives\n%s\nthe service published\n%s", name, built, sent)
		}
		if err := eventschema.ValidateData(name, built); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		ev := got[0]
		ev.Data = data
		out[name] = ev
		return nil
	}

	// Maria is known before she writes to this channel: she talked to the
	// company's other official number, and her e-mail came from the CRM.
	// Her contact (one per number across the chat-app channels) has the
	// e-mail the document's examples show; an unknown e-mail would be null,
	// which the examples' string does not match.
	sales, err := chans.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: companyID, Name: "Vendas", Key: "5511987650001",
		BusinessAccountID: "waba-1", PhoneNumberID: "pn-2", AccessToken: "token", AppSecret: "secret", BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		return nil, err
	}
	var earlier conversations.Ref
	err = db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		earlier, err = svc.Ensure(ctx, tx, conversations.EnsureInput{CompanyID: companyID, CompanyChannelID: sales.ID,
			ChannelTypeID: channels.OfficialChatapp, ContactKey: "5511912345678", ContactName: "Maria Souza",
			OriginID: int(conversations.OriginContactInitiated)})
		return err
	})
	if err != nil {
		return nil, err
	}
	email := "maria.souza@example.com"
	if _, err := svc.UpdateContact(ctx, companyID, earlier.ContactID, "Maria Souza", &email); err != nil {
		return nil, err
	}
	pub.mu.Lock()
	pub.events = nil // that conversation's created event is not the one the contract shows
	pub.mu.Unlock()

	var ref conversations.Ref
	err = db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		ref, err = svc.Ensure(ctx, tx, conversations.EnsureInput{CompanyID: companyID, CompanyChannelID: ch.ID,
			ChannelTypeID: channels.OfficialChatapp, ContactKey: "5511912345678", ContactName: "Maria Souza",
			OriginID: int(conversations.OriginContactInitiated)})
		return err
	})
	if err != nil {
		return nil, err
	}
	created, err := svc.Get(ctx, companyID, ref.ID, conversations.AllRelations)
	if err != nil {
		return nil, err
	}
	if err := keep(events.OmnichatConversationCreated, svc.CreatedPayload(created)); err != nil {
		return nil, err
	}
	// Her message counts as unread.
	err = db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		return svc.RecordMessage(ctx, tx, ref.ID, now(), true)
	})
	if err != nil {
		return nil, err
	}
	if ref.ContactID != earlier.ContactID {
		return nil, fmt.Errorf("the official conversation has contact %d, not Maria's %d", ref.ContactID, earlier.ContactID)
	}

	inProgress, resolved := conversations.StatusInProgress, conversations.StatusResolved
	assigned, err := svc.UpdateContactChannel(ctx, companyID, ref.ID,
		conversations.Update{UserID: &attendant, SectorID: &support.ID, StatusID: &inProgress})
	if err != nil {
		return nil, err
	}
	if err := keep(events.OmnichatConversationAssigned, svc.AssignedPayload(assigned, created.UserID)); err != nil {
		return nil, err
	}
	closed, err := svc.UpdateContactChannel(ctx, companyID, ref.ID, conversations.Update{StatusID: &resolved, MarkRead: true})
	if err != nil {
		return nil, err
	}
	if err := keep(events.OmnichatConversationClosed, svc.ClosedPayload(closed, assigned.StatusID)); err != nil {
		return nil, err
	}
	return out, nil
}
