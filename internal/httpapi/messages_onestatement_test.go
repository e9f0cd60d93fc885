package httpapi_test

import (
	"context"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestSendStoredInOneStatement: on PostgreSQL the common send (an existing
// conversation, nobody listening for its event) is stored by one
// statement, and it writes what the send's transaction writes: the same
// message row, one version more on the conversation, one unit of the
// quota. A closed window (409) and an exhausted quota (402) change
// nothing; a company that listens takes the transaction. SQLite always
// takes the transaction.
func TestSendStoredInOneStatement(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true, unheard: true})
		e.contactWrites(ofcContactKey, "hello") // the conversation, its window open
		body := map[string]any{"text": "the same send", "enqueue": true}
		stored := func() map[string]any {
			t.Helper()
			conv0, usage0 := conversationOf(t, db, e), usageOf(t, db, e)
			if resp := e.send(body); resp.Status != http.StatusOK {
				t.Fatalf("send: %d %s", resp.Status, resp.Body)
			}
			conv1, usage1 := conversationOf(t, db, e), usageOf(t, db, e)
			if conv1["version"].(int64) != conv0["version"].(int64)+1 || usage1 != usage0+1 {
				t.Fatalf("conversation version %v → %v, usage %d → %d: want one more of each", conv0["version"], conv1["version"], usage0, usage1)
			}
			if !conv1["last_message_at"].(time.Time).Equal(e.clk.Now()) {
				t.Fatalf("last_message_at %v, want %v", conv1["last_message_at"], e.clk.Now())
			}
			return lastMessageRow(t, db, e)
		}
		paths := func(oneStatement, transaction float64) {
			t.Helper()
			want := map[string]float64{}
			if db.Dialect == store.Postgres {
				want["one_statement"], want["transaction"] = oneStatement, transaction
			} else {
				want["transaction"] = oneStatement + transaction
			}
			maps.DeleteFunc(want, func(_ string, n float64) bool { return n == 0 })
			if got := storedBy(t, e.h.App.DebugRegistry); !maps.Equal(got, want) {
				t.Fatalf("sends stored by %v, want %v", got, want)
			}
		}
		byStatement := stored()
		paths(1, 0)

		unchanged := func(what string, text string, status int) {
			t.Helper()
			conv0, usage0 := conversationOf(t, db, e), usageOf(t, db, e)
			if resp := e.send(map[string]any{"text": text}); resp.Status != status {
				t.Fatalf("%s: %d %s, want %d", what, resp.Status, resp.Body, status)
			}
			if conv1, usage1 := conversationOf(t, db, e), usageOf(t, db, e); conv1["version"] != conv0["version"] || usage1 != usage0 {
				t.Fatalf("%s changed the conversation (version %v → %v) or the usage (%d → %d)", what, conv0["version"], conv1["version"], usage0, usage1)
			}
		}
		e.clk.Advance(25 * time.Hour)
		unchanged("a send in a closed window", "window closed", http.StatusConflict)
		e.contactWrites(ofcContactKey, "back") // opens it again
		limit := usageOf(t, db, e)
		if _, err := e.h.App.Messaging.SetQuota(ctx, e.ten.CompanyID, &limit); err != nil {
			t.Fatal(err)
		}
		unchanged("a send over the quota", "over the quota", http.StatusPaymentRequired)
		if _, err := e.h.App.Messaging.SetQuota(ctx, e.ten.CompanyID, nil); err != nil {
			t.Fatal(err)
		}
		paths(1, 0)

		// Once the company listens, the same send takes the transaction
		// (which writes the event too) and stores the same row.
		newEventSink(t, http.StatusNoContent).subscribe(e.h, e.ten.Token, map[string]any{"name": "all events"})
		byTransaction := stored()
		paths(1, 1)
		for _, k := range []string{"id", "uuid", "send_due_at", "platform_at", "received_at", "created_at", "updated_at"} {
			if byStatement[k] == nil || byTransaction[k] == nil {
				t.Fatalf("message column %s is NULL: %v %v", k, byStatement, byTransaction)
			}
			delete(byStatement, k)
			delete(byTransaction, k)
		}
		if !maps.EqualFunc(byStatement, byTransaction, equalValues) {
			t.Fatalf("the statement stored\n%v\nthe transaction stored\n%v", byStatement, byTransaction)
		}
	})
}

// TestSendOneStatementChannelDeleted: a channel deleted while the
// statement runs takes the conversation with it. The statement's quota
// unit goes too (the message's foreign key fails the whole statement): the
// send answers as a sender that names no channel does, and the month's
// usage is what it was.
func TestSendOneStatementChannelDeleted(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		if db.Dialect != store.Postgres {
			t.Skip("SQLite has one writer at a time: nothing deletes under a statement")
		}
		ctx := context.Background()
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true, unheard: true})
		e.contactWrites(ofcContactKey, "hello")
		if resp := e.send(map[string]any{"text": "first"}); resp.Status != http.StatusOK {
			t.Fatalf("first send: %d %s", resp.Status, resp.Body)
		}
		usage0, before := usageOf(t, db, e), storedBy(t, e.h.App.DebugRegistry)["one_statement"]
		// The deletion holds the conversation's row until it commits; the
		// statement's UPDATE waits for it.
		tx, err := db.Bun.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM company_channels WHERE id = ?", e.ch.ID); err != nil {
			t.Fatal(err)
		}
		done := make(chan *apitest.Response, 1)
		go func() { done <- e.h.Do(e.sendRequest(map[string]any{"text": "under a deletion"})) }()
		waitForLockWait(t, db)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		resp := <-done
		unknown := e.send(map[string]any{"text": "no such sender", "sender_key": "5511900000000"})
		if unknown.Status < 400 || resp.Status != unknown.Status || string(resp.Body) != string(unknown.Body) {
			t.Fatalf("send under a deletion: %d %s, want %d %s", resp.Status, resp.Body, unknown.Status, unknown.Body)
		}
		if got := storedBy(t, e.h.App.DebugRegistry)["one_statement"]; got != before {
			t.Fatalf("%v sends stored by one statement, want %v", got, before)
		}
		if usage1 := usageOf(t, db, e); usage1 != usage0 {
			t.Fatalf("usage %d → %d: the refused send kept its unit", usage0, usage1)
		}
	})
}

// waitForLockWait returns once a session of db waits for a row lock.
func waitForLockWait(t *testing.T, db *store.DB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := db.Bun.NewRaw(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(context.Background(), &n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no session came to wait for the deletion's lock")
}

// storedBy is what a replica's metrics say of the paths its sends were
// stored by.
func storedBy(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "gateway_messages_stored_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "path" && m.GetCounter().GetValue() > 0 {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// conversationOf reads the env's one conversation.
func conversationOf(t *testing.T, db *store.DB, e *officialEnv) map[string]any {
	t.Helper()
	var version int64
	var last time.Time
	if err := db.Bun.NewRaw(`SELECT version, last_message_at FROM contact_channels WHERE company_channel_id = ? AND key = ?`,
		e.ch.ID, ofcContactKey).Scan(context.Background(), &version, &last); err != nil {
		t.Fatal(err)
	}
	return map[string]any{"version": version, "last_message_at": last}
}

// usageOf reads the env company's messages counted this month.
func usageOf(t *testing.T, db *store.DB, e *officialEnv) int64 {
	t.Helper()
	q, err := e.h.App.Messaging.QuotaOf(context.Background(), e.ten.CompanyID)
	if err != nil {
		t.Fatal(err)
	}
	return q.Used
}

// lastMessageRow reads every column of the env company's newest message.
func lastMessageRow(t *testing.T, db *store.DB, e *officialEnv) map[string]any {
	t.Helper()
	row := map[string]any{}
	if err := db.Bun.NewSelect().Table("messages").Where("company_id = ?", e.ten.CompanyID).OrderExpr("id DESC").Limit(1).
		Scan(context.Background(), &row); err != nil {
		t.Fatal(err)
	}
	return row
}

// equalValues compares two column values as read into a map: times by
// instant.
func equalValues(a, b any) bool {
	if ta, ok := a.(time.Time); ok {
		tb, ok := b.(time.Time)
		return ok && ta.Equal(tb)
	}
	if ba, ok := a.([]byte); ok {
		bb, ok := b.([]byte)
		return ok && string(ba) == string(bb)
	}
	return a == b
}
