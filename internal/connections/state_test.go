package connections_test

import (
	"context"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/connections"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// pairedWorld is a world with replica a holding a paired connection.
func pairedWorld(t *testing.T, db *store.DB) (*world, *replica, channels.Unofficial) {
	t.Helper()
	w := newWorld(t, db)
	a := w.replica(t, "a")
	return w, a, w.pairedConnection(t, a)
}

func stateOf(t *testing.T, r *replica, conn channels.Unofficial) connections.State {
	t.Helper()
	states, err := r.States(context.Background(), []channels.Unofficial{conn})
	if err != nil {
		t.Fatal(err)
	}
	return states[conn.ID]
}

// TestSessionStatesAreStoredAndPublished drives a connection through the
// states the chat app reports: each is stored under the lease, shown on the
// record and published as chatapp.connection.state_changed; a terminal one
// closes the session and gives the lease up without a heartbeat taking it
// over again; a replica that lost the lease stores and publishes nothing.
func TestSessionStatesAreStoredAndPublished(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w, a, conn := pairedWorld(t, db)
		if st := stateOf(t, a, conn); st.State != connector.StateConnected {
			t.Fatalf("after pairing: %+v", st)
		}

		// The chat app confirms what pairing said: nothing new to publish.
		if err := w.chat.Session(conn.ID).Report(ctx, connector.SessionState{State: connector.StateConnected}); err != nil {
			t.Fatal(err)
		}
		if err := w.chat.Session(conn.ID).Report(ctx, connector.SessionState{State: connector.StateDisconnected, Reason: "dropped"}); err != nil {
			t.Fatal(err)
		}
		if st := stateOf(t, a, conn); st.State != connector.StateDisconnected || st.Reason != "dropped" || !a.Holds(conn.ID) {
			t.Fatalf("after a drop: %+v holds=%v", st, a.Holds(conn.ID))
		}

		ban := connector.SessionState{State: connector.StateBanned, Reason: "banned for 1h", Terminal: true}
		if err := w.chat.Session(conn.ID).Report(ctx, ban); err != nil {
			t.Fatal(err)
		}
		if st := stateOf(t, a, conn); st.State != connector.StateBanned || st.Reason != "banned for 1h" {
			t.Fatalf("after a ban: %+v", st)
		}
		if a.Holds(conn.ID) || owner(t, a, conn.ID) != "" {
			t.Fatal("a terminal state must close the session and release the lease")
		}
		cur, err := w.channels.UnofficialByID(ctx, conn.ID)
		if err != nil || !cur.Logged {
			t.Fatalf("a banned connection is still paired: %+v %v", cur, err)
		}
		b := w.replica(t, "b")
		b.Tick(ctx)
		if b.Holds(conn.ID) {
			t.Fatal("a heartbeat took over a banned connection")
		}

		got := w.events.states()
		want := []string{connector.StateConnected, connector.StateDisconnected, connector.StateBanned}
		if len(got) != len(want) {
			t.Fatalf("published %+v", got)
		}
		for i, st := range want {
			if string(got[i].State) != st || got[i].ID != conn.ID || got[i].Key != conn.Key || !got[i].Logged {
				t.Errorf("event %d: %+v, want %s", i, got[i], st)
			}
		}

		// A call reopens it (on b, say) and the phone unlinks: logged out.
		if _, err := b.ChatappContactList(ctx, w.companyID, connections.Selector{ID: &conn.ID}); err != nil {
			t.Fatal(err)
		}
		if err := b.SimulatorUnlink(ctx, w.companyID, conn.ID); err != nil {
			t.Fatal(err)
		}
		cur, _ = w.channels.UnofficialByID(ctx, conn.ID)
		if st := stateOf(t, b, cur); st.State != connector.StateLoggedOut || cur.Logged {
			t.Fatalf("after unlink: %+v logged=%v", st, cur.Logged)
		}
		last := w.events.states()[len(w.events.states())-1]
		if last.State != events.ConnectionStateLoggedOut || last.Logged {
			t.Fatalf("last event %+v", last)
		}
	})
}

// TestStaleHolderReportsNothing: the session of a replica whose lease was
// taken over (a paused replica) cannot store or publish a state over the
// new holder's.
func TestStaleHolderReportsNothing(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		w, _, conn := pairedWorld(t, db)
		stale := w.chat.Session(conn.ID)
		w.clock.Advance(leaseTTL + time.Second)
		b := w.replica(t, "b")
		b.Tick(ctx)
		if !b.Holds(conn.ID) {
			t.Fatal("b did not take over")
		}
		before := len(w.events.states())
		err := stale.Report(ctx, connector.SessionState{State: connector.StateReplaced, Terminal: true})
		if err == nil || fault.KindOf(err) != fault.Unavailable {
			t.Fatalf("stale report: %v", err)
		}
		if st := stateOf(t, b, conn); st.State != connector.StateConnected || len(w.events.states()) != before {
			t.Fatalf("the stale holder changed the state: %+v", st)
		}
	})
}
