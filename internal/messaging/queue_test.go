package messaging

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestClaimTakesSendersInTurn: a claim takes one message per sender in
// turn, skips a sender that holds its share of the slots, and gives one
// that holds part of it only the rest.
func TestClaimTakesSendersInTurn(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		const share = 3
		b := setup(t, db, false, Options{Workers: 10, SendShare: share})
		ctx := context.Background()
		for i := range 10 {
			b.queue(b.a, fmt.Sprint("a", i))
		}
		for i := range 2 {
			b.queue(b.b, fmt.Sprint("b", i))
		}
		for _, tc := range []struct {
			name       string
			n          int
			held       map[int64]int
			wantA      int
			wantB      int
			shareBound bool
		}{
			{"one each in turn", 3, nil, 2, 1, false},
			{"no sender past its share", 10, nil, share, 2, true},
			{"a sender at its share is skipped", 10, map[int64]int{b.a.ID: share}, 0, 2, true},
			{"a sender with part of its share gets the rest", 10, map[int64]int{b.a.ID: share - 1}, 1, 2, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				// Every message due again, none claimed.
				if _, err := db.Bun.NewUpdate().Table("messages").Set("send_due_at = ?", b.clk.Now().UnixMilli()).
					Where("status_id = ?", StatusPending).Exec(ctx); err != nil {
					t.Fatal(err)
				}
				rows, shareBound, err := b.svc.claimDue(ctx, tc.n, tc.held)
				if err != nil {
					t.Fatal(err)
				}
				got := map[int64]int{}
				for _, r := range rows {
					got[r.CompanyChannelID]++
				}
				if got[b.a.ID] != tc.wantA || got[b.b.ID] != tc.wantB || shareBound != tc.shareBound {
					t.Fatalf("claimed %d of a, %d of b (share bound %v); want %d, %d (%v)",
						got[b.a.ID], got[b.b.ID], shareBound, tc.wantA, tc.wantB, tc.shareBound)
				}
			})
		}
	})
}

// TestStalledSenderKeepsToItsShare: sender a's provider accepts calls and
// never answers, and a has a backlog far larger than the slots. a holds
// its share of the slots and no more, the rest of its backlog waits in
// the database, due, and sender b's messages are claimed and sent past it
// (b, too, never holds more than its share). The calls a made are never
// made again: their outcome is unknown.
func TestStalledSenderKeepsToItsShare(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		const workers, share, backlog = 6, 2, 40
		b := setup(t, db, false, Options{Workers: workers, SendShare: share})
		ctx := context.Background()
		b.tr.on(b.a, stalled)
		gate := make(chan struct{})
		b.tr.on(b.b, func(ctx context.Context, out Outbound) (SendResult, error) {
			select {
			case <-gate:
			case <-ctx.Done():
				return SendResult{}, ctx.Err()
			}
			return SendResult{ExternalID: fmt.Sprint("wamid.b.", out.MessageID)}, nil
		})
		for i := range backlog {
			b.queue(b.a, fmt.Sprint("a", i))
		}
		var bIDs []int64
		for i := range 5 {
			bIDs = append(bIDs, b.queue(b.b, fmt.Sprint("b", i)))
		}
		b.svc.StartQueue(ctx)
		stopped := false
		stop := func() {
			if stopped {
				return
			}
			stopped = true
			cut, cancel := context.WithCancel(ctx)
			cancel() // the stalled calls are cut at once
			_ = b.svc.StopQueue(cut)
		}
		defer stop()

		eventually(t, "both senders at their share", func() bool {
			_, aIn, _ := b.tr.stats(b.a)
			_, bIn, _ := b.tr.stats(b.b)
			return aIn == share && bIn == share
		})
		waiting := func(ch channels.Channel) int {
			var n int
			if err := db.Bun.NewSelect().Table("messages").ColumnExpr("count(*)").Where("company_channel_id = ?", ch.ID).
				Where("send_due_at <= ?", b.clk.Now().UnixMilli()).Where("handoffs = 0").Scan(ctx, &n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if got := waiting(b.a); got != backlog-share {
			t.Fatalf("%d of a's messages wait in the database, want %d", got, backlog-share)
		}
		close(gate)
		eventually(t, "b's messages sent", func() bool {
			for _, id := range bIDs {
				if b.message(id).StatusID != StatusSent {
					return false
				}
			}
			return true
		})
		b.clk.Advance(5 * time.Second)
		if due, oldest := b.counter("gateway_messages_send_due", nil), b.counter("gateway_messages_send_oldest_due_seconds", nil); due != backlog-share || oldest != 5 {
			t.Fatalf("backlog gauges: %v due, oldest %v s; want %d, 5", due, oldest, backlog-share)
		}
		stop()

		aCalls, _, aMost := b.tr.stats(b.a)
		bCalls, _, bMost := b.tr.stats(b.b)
		if aCalls != share || aMost != share || bMost > share || bCalls != len(bIDs) {
			t.Fatalf("a: %d calls, %d at most at once; b: %d calls, %d at most; share %d", aCalls, aMost, bCalls, bMost, share)
		}
		var unknown int
		if err := db.Bun.NewSelect().Table("messages").ColumnExpr("count(*)").Where("company_channel_id = ?", b.a.ID).
			Where("outcome_unknown = ?", true).Where("send_due_at IS NULL").Scan(ctx, &unknown); err != nil || unknown != share {
			t.Fatalf("%d of a's called messages outcome unknown (%v), want %d", unknown, err, share)
		}
		b.clk.Advance(time.Hour)
		b.tr.on(b.a, unavailable)
		if errs, err := b.svc.WorkDue(ctx); err != nil || len(errs) != share {
			t.Fatalf("after the stop a turn works %d (%v), want a's next %d", len(errs), err, share)
		}
		if aCalls, _, _ := b.tr.stats(b.a); aCalls != 2*share {
			t.Fatalf("a's calls after another turn: %d, want %d (none of the unanswered again)", aCalls, 2*share)
		}
	})
}
