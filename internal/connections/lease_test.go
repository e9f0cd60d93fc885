package connections_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/connections"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/connector/sim"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// receiver records what connections hands to messaging.
type receiver struct {
	mu       sync.Mutex
	inbound  []messaging.Inbound
	receipts []messaging.Receipt
}

func (r *receiver) ReceiveInbound(_ context.Context, in messaging.Inbound) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inbound = append(r.inbound, in)
	return nil
}

func (r *receiver) ApplyInboundChange(context.Context, messaging.InboundChange) error { return nil }

func (r *receiver) ApplyReceipt(_ context.Context, rc messaging.Receipt) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.receipts = append(r.receipts, rc)
	return nil
}

const leaseTTL = 30 * time.Second

// world is one database and one simulated chat app shared by replicas, as
// in production several gateway processes share PostgreSQL and the chat
// app's servers.
type world struct {
	db        *store.DB
	clock     *clock.Manual
	chat      *sim.Driver
	channels  *channels.Service
	companyID int64
	events    *publisher
}

// publisher records the events connections publishes, each checked
// against the AsyncAPI document.
type publisher struct {
	mu     sync.Mutex
	t      testing.TB
	events []webhooks.Event
}

func (p *publisher) Publish(_ context.Context, _ *store.Tx, ev webhooks.Event) error {
	raw, err := json.Marshal(ev.Data)
	if err != nil {
		return err
	}
	if err := eventschema.ValidateData(ev.Name, raw); err != nil {
		p.t.Errorf("%s data does not match the AsyncAPI document: %v", ev.Name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, ev)
	return nil
}

func (p *publisher) states() []events.ConnectionStatePayload {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []events.ConnectionStatePayload
	for _, ev := range p.events {
		if d, ok := ev.Data.(events.ConnectionStatePayload); ok && ev.Name == events.ChatappConnectionStateChanged {
			out = append(out, d)
		}
	}
	return out
}

func newWorld(t testing.TB, db *store.DB) *world {
	t.Helper()
	ctx := context.Background()
	migrations := slices.Concat(auth.Migrations, channels.Migrations, connections.Migrations)
	if err := db.Migrate(ctx, migrations); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC))
	company, err := auth.NewService(db, clk.Now).CreateCompany(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	return &world{db: db, clock: clk, chat: sim.New(clk.Now), channels: channels.NewService(db, clk.Now), companyID: company,
		events: &publisher{t: t}}
}

// replica is one gateway process's connections service. Its call loop runs
// until the test kills it; heartbeats (Tick) are stepped by hand.
type replica struct {
	*connections.Service
	stop func()
	done chan struct{}
}

func (w *world) replica(t testing.TB, name string) *replica {
	t.Helper()
	return w.replicaWithCallTimeout(t, name, 10*time.Second)
}

func (w *world) replicaWithCallTimeout(t testing.TB, name string, callTimeout time.Duration) *replica {
	t.Helper()
	svc := connections.New(connections.Options{DB: w.db, Channels: w.channels, Driver: w.chat, Now: w.clock.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ReplicaID: name, LeaseTTL: leaseTTL, Heartbeat: time.Hour, CallPoll: 5 * time.Millisecond, CallTimeout: callTimeout,
		Events: w.events, Times: clock.NewFormatter(time.UTC)})
	svc.SetReceiver(&receiver{})
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{Service: svc, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				svc.ServeCalls(ctx)
			}
		}
	}()
	t.Cleanup(r.kill)
	return r
}

// kill stops the replica without releasing anything, as a crash would.
func (r *replica) kill() {
	r.stop()
	<-r.done
}

func owner(t testing.TB, r *replica, id int64) string {
	t.Helper()
	o, err := r.Owner(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (w *world) pairedConnection(t testing.TB, via *replica) channels.Unofficial {
	t.Helper()
	ctx := context.Background()
	conn, err := w.channels.CreateUnofficial(ctx, w.companyID, "Sales", "5511988887777")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := via.ChatappQrcode(ctx, w.companyID, connections.Selector{ID: &conn.ID}, connector.PairingOptions{OS: "Linux", Browser: "Chrome"}); err != nil {
		t.Fatal(err)
	}
	paired, err := via.SimulatorPair(ctx, w.companyID, conn.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !paired.Logged {
		t.Fatal("pairing did not log the connection in")
	}
	return paired
}

func TestLeaseTakeoverBetweenTwoReplicas(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorld(t, db)
		a, b := w.replica(t, "replica-a"), w.replica(t, "replica-b")
		conn := w.pairedConnection(t, a)
		sel := connections.Selector{ID: &conn.ID}
		if got := owner(t, a, conn.ID); got != "replica-a" {
			t.Fatalf("owner after pairing through A = %q", got)
		}
		if _, err := a.SimulatorSeedContacts(ctx, w.companyID, conn.ID, []sim.ContactSpec{{Key: "5511977776666", Name: "Ana"}}); err != nil {
			t.Fatal(err)
		}

		// B does not hold the session: its call is forwarded to A.
		contacts, err := b.ChatappContactList(ctx, w.companyID, sel)
		if err != nil || len(contacts) != 1 || contacts[0].Key != "5511977776666" {
			t.Fatalf("contacts through B: %+v, %v", contacts, err)
		}
		if got := owner(t, b, conn.ID); got != "replica-a" {
			t.Fatalf("a forwarded call moved the lease to %q", got)
		}

		// While A heartbeats, B cannot take the connection.
		w.clock.Advance(leaseTTL / 2)
		a.Tick(ctx)
		w.clock.Advance(leaseTTL / 2)
		b.Tick(ctx)
		if got := owner(t, b, conn.ID); got != "replica-a" {
			t.Fatalf("B took a live lease: owner %q", got)
		}

		// A renews once more, then dies (no release). Before the lease
		// expires nothing moves; after it, B's heartbeat takes the
		// connection over and reopens the session from the stored device.
		a.Tick(ctx)
		a.kill()
		w.clock.Advance(leaseTTL - time.Second)
		b.Tick(ctx)
		if got := owner(t, b, conn.ID); got != "replica-a" {
			t.Fatalf("lease moved before expiry: owner %q", got)
		}
		w.clock.Advance(2 * time.Second)
		b.Tick(ctx)
		if got := owner(t, b, conn.ID); got != "replica-b" {
			t.Fatalf("owner after A's lease expired = %q, want replica-b", got)
		}
		again, err := w.channels.GetUnofficial(ctx, w.companyID, &conn.ID, nil)
		if err != nil || !again.Logged {
			t.Fatalf("after takeover logged=%v err=%v", again.Logged, err)
		}
		contacts, err = b.ChatappContactList(ctx, w.companyID, sel)
		if err != nil || len(contacts) != 1 {
			t.Fatalf("contacts on the new holder: %+v, %v", contacts, err)
		}

		// A was only paused, not dead: its next heartbeat finds the lease
		// fenced off and closes its stale session instead of fighting.
		if !a.Holds(conn.ID) {
			t.Fatal("the paused replica should still think it holds the session before its heartbeat")
		}
		a.Tick(ctx)
		if a.Holds(conn.ID) {
			t.Fatal("the paused replica kept a session whose lease was taken over")
		}
		if got := owner(t, b, conn.ID); got != "replica-b" {
			t.Fatalf("stale holder took the lease back: %q", got)
		}

		// A graceful stop hands over at once, without waiting for expiry.
		c := w.replica(t, "replica-c")
		b.Shutdown(ctx)
		c.Tick(ctx)
		if got := owner(t, c, conn.ID); got != "replica-c" {
			t.Fatalf("owner after B released = %q, want replica-c", got)
		}
	})
}

func TestCallReachingAReplicaWhoseHolderDiedIsRerouted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorld(t, db)
		a, b := w.replica(t, "replica-a"), w.replica(t, "replica-b")
		conn := w.pairedConnection(t, a)
		a.kill()
		// The call waits in A's mailbox until A's lease expires, then B
		// withdraws it, claims the connection and answers itself.
		done := make(chan error, 1)
		go func() {
			_, err := b.ChatappGroupList(ctx, w.companyID, connections.Selector{ID: &conn.ID})
			done <- err
		}()
		// Advance the clock only once the call is waiting in the mailbox: a
		// fixed sleep loses the race on a loaded machine.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			n, err := db.Bun.NewSelect().Table("chatapp_calls").Count(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the call never reached the mailbox")
			}
		}
		w.clock.Advance(leaseTTL + time.Second)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the call never came back")
		}
		if got := owner(t, b, conn.ID); got != "replica-b" {
			t.Fatalf("owner = %q, want replica-b", got)
		}
	})
}

func TestRefusalsCrossTheMailboxWithTheirKind(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorld(t, db)
		a, b := w.replica(t, "replica-a"), w.replica(t, "replica-b")
		conn := w.pairedConnection(t, a)
		no := false
		g, err := b.SimulatorSeedGroup(ctx, w.companyID, conn.ID, sim.GroupSpec{Name: "Left", IsMember: &no})
		if err != nil {
			t.Fatal(err)
		}
		tr := b.Transport()
		err = tr.AuthorizeGroupSend(ctx, conn.Channel, g.Key)
		if fault.KindOf(err) != fault.GroupNotAuthorized || fault.As(err).Message != connections.MsgNotGroupMember {
			t.Fatalf("authorize through B: %v", err)
		}
		_, err = tr.Send(ctx, conn.Channel, messaging.Outbound{ContactKey: g.Key, IsGroup: true, Text: "x", HandOff: noHandOff})
		if fault.KindOf(err) != fault.Refused || fault.As(err).Details["reason"] != sim.MsgNotMember {
			t.Fatalf("send through B: %v", err)
		}
		if got := owner(t, b, conn.ID); got != "replica-a" {
			t.Fatalf("owner = %q", got)
		}
	})
}

// TestSendTakenAndUnansweredIsOutcomeUnknown: a send the holder took and
// never answered (it died during the call, or its answer could not be
// written) may have reached the chat app, so the caller's transport reports
// an unknown outcome (the send is then never failed for it), not a failure.
func TestSendTakenAndUnansweredIsOutcomeUnknown(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w := newWorld(t, db)
		a := w.replica(t, "replica-a")
		b := w.replicaWithCallTimeout(t, "replica-b", 500*time.Millisecond)
		conn := w.pairedConnection(t, a)
		a.kill() // its lease stays: the call waits in its mailbox
		done := make(chan error, 1)
		go func() {
			_, err := b.Transport().Send(ctx, conn.Channel, messaging.Outbound{ContactKey: "5511999990000", Text: "x", ExternalID: "ours-1", HandOff: noHandOff})
			done <- err
		}()
		// Take the call as the holder would, and never answer it.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			res, err := db.Bun.NewRaw("UPDATE chatapp_calls SET state = 1 WHERE state = 0").Exec(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the call never reached the mailbox")
			}
		}
		select {
		case err := <-done:
			if !errors.Is(err, messaging.ErrOutcomeUnknown) {
				t.Fatalf("send: %v, want an error wrapping messaging.ErrOutcomeUnknown", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the call never came back")
		}
	})
}

// noHandOff stands in for messaging's hand-off record in sends made
// straight through the Transport.
func noHandOff(context.Context) error { return nil }
