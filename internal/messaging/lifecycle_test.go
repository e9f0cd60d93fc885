package messaging

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/jobs"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestSendLifecycle follows one queued and one synchronous send from the
// request to the outcome on each engine, with and without a subscription
// to the message events, and checks which write each stage chose: the one
// statement (PostgreSQL, nobody listening) or the transaction for the
// store; the batched, bare or transactional write for the outcome.
func TestSendLifecycle(t *testing.T) {
	t.Parallel()
	for _, listens := range []bool{false, true} {
		name := map[bool]string{false: "nobody listens", true: "a subscription listens"}[listens]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				b := setup(t, db, listens, Options{})
				ctx := context.Background()
				storedInOne := db.Dialect == store.Postgres && !listens

				id := b.queue(b.a, "queued")
				if got := b.counter("gateway_messages_stored_total", map[string]string{"path": "one_statement"}); got != map[bool]float64{true: 1}[storedInOne] {
					t.Fatalf("stored in one statement %v times", got)
				}
				row := b.message(id)
				if row.StatusID != StatusPending || row.SendDueAt == nil || *row.SendDueAt != b.clk.Now().UnixMilli() || row.ConversationName != "Maria Souza" {
					t.Fatalf("stored: %+v", row)
				}
				errs, err := b.svc.WorkDue(ctx)
				if err != nil || len(errs) != 1 || errs[id] != nil {
					t.Fatalf("worked %v, %v", errs, err)
				}
				row = b.message(id)
				if row.StatusID != StatusSent || row.ExternalID == nil || row.SendDueAt != nil || row.Handoffs != 0 || row.Version != 2 {
					t.Fatalf("after the attempt: %+v", row)
				}
				batched := b.counter("gateway_messages_sent_outcomes_per_write", nil)
				if batched != map[bool]float64{false: 1}[listens] {
					t.Fatalf("%v batched Sent writes", batched)
				}

				out, err := b.svc.SendMessage(ctx, SendInput{CompanyID: b.a.CompanyID, Platform: channels.OfficialChatapp,
					SenderKey: b.a.Key, ContactKey: contactKey, Text: "sync"})
				if err != nil || out.Queued || out.ExternalID == "" {
					t.Fatalf("sync send: %+v %v", out, err)
				}
				if row := b.message(out.MessageID); row.StatusID != StatusSent || row.SendDueAt != nil || row.SendRecover != true {
					t.Fatalf("sync send stored: %+v", row)
				}

				sent := events.OmnichatMessageSent
				var want []string
				switch {
				case listens:
					want = []string{sent, sent, sent, sent} // stored and Sent, twice
				case !storedInOne:
					// The transaction publishes; a real publisher queues
					// nothing for a company nobody listens to.
					want = []string{sent, sent}
				}
				if got := b.events.names(); !slices.Equal(got, want) {
					t.Fatalf("published %v, want %v", got, want)
				}
			})
		})
	}
}

// TestRetryFollowsTheClock: a provider that cannot be reached puts the
// send back in the queue for a retry n⁴ seconds later, by the service's
// clock; nothing is claimed before the clock gets there, and the retry
// sends it.
func TestRetryFollowsTheClock(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, false, Options{})
		ctx := context.Background()
		b.tr.on(b.a, unavailable)
		id := b.queue(b.a, "later")
		for _, step := range []struct {
			name    string
			advance time.Duration
			want    func(errs map[int64]error, row *messageRow) bool
		}{
			{"the provider is unreachable", 0, func(errs map[int64]error, row *messageRow) bool {
				due := b.clk.Now().Add(time.Second).UnixMilli()
				return fault.KindOf(errs[id]) == fault.Unavailable && row.StatusID == StatusPending && row.Handoffs == 0 &&
					row.SendDueAt != nil && *row.SendDueAt >= due && *row.SendDueAt <= due+100
			}},
			{"not due before its time", 999 * time.Millisecond, func(errs map[int64]error, row *messageRow) bool {
				return len(errs) == 0 && row.StatusID == StatusPending && row.SendAttempts == 1
			}},
			{"the retry sends it", 101 * time.Millisecond, func(errs map[int64]error, row *messageRow) bool {
				return len(errs) == 1 && errs[id] == nil && row.StatusID == StatusSent && row.SendAttempts == 2
			}},
		} {
			t.Run(step.name, func(t *testing.T) {
				b.clk.Advance(step.advance)
				if step.name == "the retry sends it" {
					b.tr.on(b.a, nil)
				}
				errs, err := b.svc.WorkDue(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if row := b.message(id); !step.want(errs, row) {
					t.Fatalf("worked %v; message %+v", errs, row)
				}
			})
		}
	})
}

// legacySend is the River job of a queued send before the send queue.
type legacySend struct {
	MessageID int64 `json:"message_id"`
	Recover   bool  `json:"recover,omitempty"`
}

func (legacySend) Kind() string { return legacySendKind }

// TestLegacySendsAdopted: queued sends an earlier gateway left as River
// jobs join the send queue (a safety net keeps its mark) and their jobs
// are gone; the queue then works them as its own.
func TestLegacySendsAdopted(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, false, Options{})
		ctx := context.Background()
		if n, err := b.svc.adoptLegacySends(ctx); n != 0 || err != nil {
			t.Fatalf("without River's tables: %d, %v", n, err)
		}
		if err := jobs.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		runner, err := jobs.New(db, jobs.Options{InsertOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		queued, interrupted := b.queue(b.a, "queued before"), b.queue(b.a, "sync before")
		// As the earlier design stored them: no place in the queue, a job.
		if _, err := db.Bun.NewUpdate().Table("messages").Set("send_due_at = NULL").Where("send_due_at IS NOT NULL").Exec(ctx); err != nil {
			t.Fatal(err)
		}
		err = db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			if err := runner.Insert(ctx, tx, legacySend{MessageID: queued}, nil); err != nil {
				return err
			}
			return runner.Insert(ctx, tx, legacySend{MessageID: interrupted, Recover: true}, nil)
		})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := b.svc.adoptLegacySends(ctx); n != 2 || err != nil {
			t.Fatalf("adopted %d, %v", n, err)
		}
		var left int
		if err := db.Bun.NewRaw("SELECT count(*) FROM river_job WHERE kind = ?", legacySendKind).Scan(ctx, &left); err != nil || left != 0 {
			t.Fatalf("%d jobs left, %v", left, err)
		}
		errs, err := b.svc.WorkDue(ctx)
		if err != nil || len(errs) != 2 {
			t.Fatalf("worked %v, %v", errs, err)
		}
		if row := b.message(queued); row.StatusID != StatusSent {
			t.Fatalf("queued: %+v", row)
		}
		if row := b.message(interrupted); row.StatusID != StatusFailed || deref(row.FailureReason) != interruptedReason {
			t.Fatalf("safety net: %+v", row)
		}
	})
}

// TestUnknownOutcomeNotResent: a call written and never answered (the
// attempt's own timeout, a stop) leaves the official send outcome unknown,
// and no later attempt calls the provider again.
func TestUnknownOutcomeNotResent(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, false, Options{})
		b.tr.on(b.a, stalled)
		id := b.queue(b.a, "unanswered")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan map[int64]error)
		go func() {
			errs, _ := b.svc.WorkDue(ctx)
			done <- errs
		}()
		eventually(t, "the call", func() bool { calls, _, _ := b.tr.stats(b.a); return calls == 1 })
		cancel()
		errs := <-done
		if errs[id] != nil && !errors.Is(errs[id], ErrOutcomeUnknown) {
			t.Fatalf("attempt: %v", errs[id])
		}
		row := b.message(id)
		if row.StatusID != StatusPending || !row.OutcomeUnknown || row.SendDueAt != nil {
			t.Fatalf("after the unanswered call: %+v", row)
		}
		b.clk.Advance(time.Hour)
		if errs, err := b.svc.WorkDue(context.Background()); err != nil || len(errs) != 0 {
			t.Fatalf("worked again: %v, %v", errs, err)
		}
		if calls, _, _ := b.tr.stats(b.a); calls != 1 {
			t.Fatalf("%d calls", calls)
		}
	})
}

// TestInterruptedBeforeTheRequest: an attempt cut off before its transport
// made the request (the replica died after its claim, or was stopped
// during the media upload) leaves a message that the next attempt sends,
// once. Only a hand-off the transport recorded right before its request
// makes a message read as possibly sent, which a channel that assigns its
// own ids never sends again.
func TestInterruptedBeforeTheRequest(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		interrupt func(t *testing.T, b *bundle)
	}{
		{"the replica died after its claim", func(t *testing.T, b *bundle) {
			ctx := context.Background()
			rows, _, err := b.svc.claimDue(ctx, queueBatch, nil)
			if err != nil || len(rows) != 1 {
				t.Fatalf("claimed %d, %v", len(rows), err)
			}
			b.svc.prepareClaimed(ctx, rows) // and no attempt follows
		}},
		{"the attempt was stopped during its upload", func(t *testing.T, b *bundle) {
			ctx, stop := context.WithCancel(context.Background())
			b.tr.preparing(b.a, func(ctx context.Context) error {
				stop()
				<-ctx.Done()
				return fault.Internalf(ctx.Err(), "upload media")
			})
			if _, err := b.svc.WorkDue(ctx); err != nil {
				t.Fatal(err)
			}
			b.tr.preparing(b.a, nil)
		}},
		{"the upload failed", func(t *testing.T, b *bundle) {
			b.tr.preparing(b.a, func(context.Context) error { return fault.New(fault.Unavailable, "upload refused") })
			if _, err := b.svc.WorkDue(context.Background()); err != nil {
				t.Fatal(err)
			}
			b.tr.preparing(b.a, nil)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				b := setup(t, db, false, Options{})
				id := b.queue(b.a, "interrupted")
				c.interrupt(t, b)
				if row := b.message(id); row.StatusID != StatusPending || row.Handoffs != 0 || row.OutcomeUnknown {
					t.Fatalf("after the interruption: %+v", row)
				}
				b.clk.Advance(defaultSendLease + time.Second) // its lease or its retry
				errs, err := b.svc.WorkDue(context.Background())
				if err != nil || len(errs) != 1 || errs[id] != nil {
					t.Fatalf("worked %v, %v", errs, err)
				}
				row := b.message(id)
				if row.StatusID != StatusSent || row.OutcomeUnknown || row.Handoffs != 0 || b.tr.requestsOf(b.a) != 1 {
					t.Fatalf("sent %d times; message %+v", b.tr.requestsOf(b.a), row)
				}
			})
		})
	}
}
