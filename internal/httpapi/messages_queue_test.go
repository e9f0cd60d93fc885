package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestOfficialSendQueued: enqueue=true answers {message} at once and the
// send queue sends; a provider outage (HTTP 500) is retried, once the
// clock reaches the retry, until the send goes through.
func TestOfficialSendQueued(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{})
		e.contactWrites(ofcContactKey, "Oi")
		if err := e.ctl.Outage(context.Background(), providersim.FaultRequest{PhoneNumberID: e.pnid, Count: 1}); err != nil {
			t.Fatal(err)
		}
		resp := e.send(map[string]any{"text": "na fila", "enqueue": true})
		if resp.Status != http.StatusOK || resp.Map(t)["message"] != "Message queued for sending" {
			t.Fatalf("queued answer: %d %s", resp.Status, resp.Body)
		}
		pending := e.sink.first("pending", messageEvent(events.OmnichatMessageSent, "", messaging.StatusPending))
		// The first attempt meets the outage; the queue retries 1 s later.
		id := int64(pending.Data["id"].(float64))
		eventually(t, "the retry scheduled", func() bool {
			// Due within the retry's 1.1 s: no longer now (stored, not yet
			// claimed), nor at the claim's lease.
			var due *int64
			err := db.Bun.NewSelect().Table("messages").Column("send_due_at").Where("id = ?", id).Scan(context.Background(), &due)
			now := e.clk.Now()
			return err == nil && due != nil && *due > now.UnixMilli() && *due <= now.Add(1100*time.Millisecond).UnixMilli()
		})
		e.clk.Advance(2 * time.Second)
		sent := e.sink.first("sent after retry", messageEvent(events.OmnichatMessageSent, "", messaging.StatusSent))
		if sent.Data["id"] != pending.Data["id"] || sent.Data["external_id"] == nil || pending.Data["external_id"] != nil {
			t.Fatalf("pending %+v, sent %+v", pending.Data, sent.Data)
		}
		list := e.sent()
		if len(list) != 1 || list[0].ID != sent.Data["external_id"] || list[0].Request.Text.Body != "na fila" {
			t.Fatalf("provider got %+v", list)
		}
	})
}

// TestOfficialQueuedFinalFailure drives the queue by hand: an outage on
// an attempt that is not the last is retried (error returned, message still
// Pending); on the last attempt the message is marked Falha; a refusal is
// final at once.
func TestOfficialQueuedFinalFailure(t *testing.T) {
	eachQuietOfficial(t, func(t *testing.T, db *store.DB, e *officialEnv) {
		ctx := context.Background()
		queue, status := e.queue, e.message
		work := func(id int64, attempt int) error { return runSendJob(e, sendAttempt{id: id, attempt: attempt}) }

		id := queue("outage")
		if err := e.ctl.Outage(ctx, providersim.FaultRequest{PhoneNumberID: e.pnid, Count: 2}); err != nil {
			t.Fatal(err)
		}
		if err := work(id, 1); err == nil {
			t.Fatal("attempt 1 during an outage: want an error so the queue retries")
		}
		if m := status(id); m.StatusID != messaging.StatusPending {
			t.Fatalf("after a retryable failure: status %d", m.StatusID)
		}
		if err := work(id, 8); err != nil {
			t.Fatalf("last attempt: %v (the failure is recorded, not retried)", err)
		}
		if m := status(id); m.StatusID != messaging.StatusFailed || m.FailureReason == "" {
			t.Fatalf("after the last attempt: %+v", m)
		}
		if err := work(id, 8); err != nil || len(e.sent()) != 0 {
			t.Fatalf("a failed message is not sent again: %v, provider has %d", err, len(e.sent()))
		}

		id = queue("refused")
		if err := e.ctl.Refuse(ctx, providersim.FaultRequest{PhoneNumberID: e.pnid, Reason: providersim.ReasonBlocked}); err != nil {
			t.Fatal(err)
		}
		if err := work(id, 1); err != nil {
			t.Fatalf("a refusal is final: %v", err)
		}
		if m := status(id); m.StatusID != messaging.StatusFailed || m.FailureReason != "The business account is blocked" {
			t.Fatalf("after a refusal: %+v", m)
		}

		id = queue("fine")
		if err := work(id, 1); err != nil {
			t.Fatal(err)
		}
		if m := status(id); m.StatusID != messaging.StatusSent || m.ExternalID == "" {
			t.Fatalf("after a good attempt: %+v", m)
		}
		if err := work(id, 2); err != nil || len(e.sent()) != 1 {
			t.Fatalf("a repeated attempt does not send twice: %v, provider has %d", err, len(e.sent()))
		}
	})
}

// TestSendSafetyNetAndEarlyReceipt: the safety net of a synchronous send
// marks a message left Pending (the process died mid-send) as failed and
// leaves finished ones alone; a receipt that overtakes the send's answer
// finds its message through the id echoed in biz_opaque_callback_data.
func TestSendSafetyNetAndEarlyReceipt(t *testing.T) {
	eachQuietOfficial(t, func(t *testing.T, db *store.DB, e *officialEnv) {
		ctx := context.Background()
		safetyNet := func(id int64) {
			t.Helper()
			if err := runSendJob(e, sendAttempt{id: id, attempt: 1, recover: true}); err != nil {
				t.Fatal(err)
			}
		}
		stuck := e.queue("stuck")
		var sync struct{ Data struct{ ExternalID string } }
		e.send(map[string]any{"text": "done"}).JSON(t, &sync)
		done, _ := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, sync.Data.ExternalID)

		safetyNet(stuck)
		safetyNet(done.ID)
		if m, _ := e.h.App.Messaging.Get(ctx, e.ten.CompanyID, stuck); m.StatusID != messaging.StatusFailed ||
			m.FailureReason != "The send was interrupted before it reached the provider" {
			t.Fatalf("pending message after the safety net: %+v", m)
		}
		if m, _ := e.h.App.Messaging.Get(ctx, e.ten.CompanyID, done.ID); m.StatusID != messaging.StatusSent {
			t.Fatalf("sent message after the safety net: %+v", m)
		}
		if len(e.sent()) != 1 {
			t.Fatal("the safety net sent something")
		}

		// A message still waiting for the provider's answer gets a
		// receipt first.
		early := e.queue("early")
		body := []byte(fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"w","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":%q},"statuses":[{"id":"wamid.early","status":"delivered","timestamp":"1764770000","recipient_id":%q,"biz_opaque_callback_data":"%d"}]}}]}]}`,
			e.pnid, ofcContactKey, early))
		r := e.h.Do(apitest.Request{Method: "POST", Path: "/provider-webhooks/" + e.pnid, JSON: body,
			Header: http.Header{"X-Hub-Signature-256": {official.Sign(ofcAppSecret, body)}}})
		if r.Status != 200 || r.Map(t)["receipts"] != float64(1) {
			t.Fatalf("early receipt: %d %s", r.Status, r.Body)
		}
		m, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, "wamid.early")
		if err != nil || m.ID != early || m.StatusID != messaging.StatusDelivered {
			t.Fatalf("after the early receipt: %+v %v", m, err)
		}
		// Its attempt then finds it already delivered and does not send again.
		if err := runSendJob(e, sendAttempt{id: early, attempt: 1}); err != nil || len(e.sent()) != 1 {
			t.Fatalf("attempt after the early receipt: %v, provider has %d", err, len(e.sent()))
		}
		// A receipt naming a message of another channel, or a contact's
		// message, adopts nothing.
		inbound, _ := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, e.contactWrites(ofcContactKey, "again"))
		body = []byte(fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"w","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":%q},"statuses":[{"id":"wamid.other","status":"read","timestamp":"1764770000","biz_opaque_callback_data":"%d"}]}}]}]}`,
			e.pnid, inbound.ID))
		r = e.h.Do(apitest.Request{Method: "POST", Path: "/provider-webhooks/" + e.pnid, JSON: body,
			Header: http.Header{"X-Hub-Signature-256": {official.Sign(ofcAppSecret, body)}}})
		if r.Status != 200 || r.Map(t)["receipts"] != float64(0) || r.Map(t)["ignored"] != float64(1) {
			t.Fatalf("receipt for a contact's message: %d %s", r.Status, r.Body)
		}
	})
}

// TestSendQueueClaims: the send queue (the messages table) sends what is
// due, and takes back what an attempt left behind: a claim whose lease ran
// out (its replica died) and a synchronous send cut off (its safety net).
// The official provider assigns its own ids, so a message handed before
// is never sent blindly again.
func TestSendQueueClaims(t *testing.T) {
	eachQuietOfficial(t, func(t *testing.T, db *store.DB, e *officialEnv) {
		ctx := context.Background()
		past := e.clk.Now().Add(-time.Second).UnixMilli()
		cases := []struct {
			name string
			// set is what the case's row holds before the queue starts.
			set  string
			want func(m messaging.Message) bool
			// sent: the provider gets this case's message once.
			sent bool
		}{
			{name: "queued send due", set: fmt.Sprintf("send_due_at = %d", past), sent: true,
				want: func(m messaging.Message) bool { return m.StatusID == messaging.StatusSent && m.ExternalID != "" }},
			// A claim leases without counting a hand-off: a replica that
			// died between its claim and its hand-off sent nothing.
			{name: "lease ran out before a hand-off", set: fmt.Sprintf("send_due_at = %d, send_attempts = 1", past), sent: true,
				want: func(m messaging.Message) bool { return m.StatusID == messaging.StatusSent && m.ExternalID != "" }},
			{name: "lease ran out after a hand-off", set: fmt.Sprintf("send_due_at = %d, handoffs = 1, send_attempts = 1", past),
				want: func(m messaging.Message) bool { return m.StatusID == messaging.StatusPending && m.OutcomeUnknown }},
			{name: "sync send cut off before its hand-off", set: fmt.Sprintf("send_due_at = %d, send_recover = %s", past, sqlTrue(db)),
				want: func(m messaging.Message) bool {
					return m.StatusID == messaging.StatusFailed && m.FailureReason == "The send was interrupted before it reached the provider"
				}},
			{name: "sync send cut off after its hand-off", set: fmt.Sprintf("send_due_at = %d, send_recover = %s, handoffs = 1", past, sqlTrue(db)),
				want: func(m messaging.Message) bool { return m.StatusID == messaging.StatusPending && m.OutcomeUnknown }},
			{name: "not due yet", set: fmt.Sprintf("send_due_at = %d", e.clk.Now().Add(time.Hour).UnixMilli()),
				want: func(m messaging.Message) bool { return m.StatusID == messaging.StatusPending && !m.OutcomeUnknown }},
			{name: "left the queue", set: "send_due_at = NULL",
				want: func(m messaging.Message) bool { return m.StatusID == messaging.StatusPending && !m.OutcomeUnknown }},
		}
		ids := make([]int64, len(cases))
		for i, c := range cases {
			ids[i] = e.queue(c.name)
			if _, err := db.Bun.ExecContext(ctx, fmt.Sprintf("UPDATE messages SET %s WHERE id = %d", c.set, ids[i])); err != nil {
				t.Fatal(err)
			}
		}
		q := e.h.App.Messaging
		q.StartQueue(ctx)
		eventually(t, "every case settled", func() bool {
			for i, c := range cases {
				if !c.want(e.message(ids[i])) {
					return false
				}
			}
			return true
		})
		if err := q.StopQueue(ctx); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, m := range e.sent() {
			got[m.Request.Text.Body]++
		}
		for i, c := range cases {
			m := e.message(ids[i]) // read here: e reports to the parent test
			t.Run(c.name, func(t *testing.T) {
				if !c.want(m) {
					t.Errorf("%+v", m)
				}
				if want := map[bool]int{true: 1}[c.sent]; got[c.name] != want {
					t.Errorf("the provider got it %d times, want %d", got[c.name], want)
				}
			})
		}
	})
}

func sqlTrue(db *store.DB) string {
	if db.Dialect == store.Postgres {
		return "TRUE"
	}
	return "1"
}

// gatedTransport holds every Send until its gate closes, counting calls.
// It answers with id(out) when id is set, else with an id per call.
type gatedTransport struct {
	messaging.Transport
	gate  chan struct{}
	id    func(out messaging.Outbound) string
	calls atomic.Int32
}

func (g *gatedTransport) Send(ctx context.Context, ch channels.Channel, out messaging.Outbound) (messaging.SendResult, error) {
	if err := out.HandOff(ctx); err != nil {
		return messaging.SendResult{}, err
	}
	n := g.calls.Add(1)
	select {
	case <-g.gate:
	case <-ctx.Done():
		return messaging.SendResult{}, ctx.Err()
	}
	if g.id != nil {
		return messaging.SendResult{ExternalID: g.id(out)}, nil
	}
	return messaging.SendResult{ExternalID: fmt.Sprintf("wamid.gated.%d", n)}, nil
}

// TestSendQueueLeaseKept: an attempt that outlasts its claim's lease (a
// slow provider call) keeps moving the lease on, so the queue does not
// take it for a dead replica's: the message is neither claimed again nor
// marked outcome unknown, and is Sent once the call answers. The clock
// moves half a lease at a time, four leases in all, and each step waits
// for the renewal it makes due.
func TestSendQueueLeaseKept(t *testing.T) {
	t.Parallel()
	const lease = 600 * time.Millisecond
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{sendLease: lease})
		e.contactWrites(ofcContactKey, "Oi")
		tr := &gatedTransport{gate: make(chan struct{})}
		e.h.App.Messaging.RegisterTransport(channels.OfficialChatapp, tr)
		id := e.queue("slow")
		eventually(t, "the call", func() bool { return tr.calls.Load() == 1 })
		due := func() int64 {
			var due *int64
			if err := db.Bun.NewSelect().Table("messages").Column("send_due_at").Where("id = ?", id).Scan(context.Background(), &due); err != nil || due == nil {
				t.Fatalf("due %v, %v", due, err)
			}
			return *due
		}
		for range 8 {
			e.clk.Advance(lease / 2)
			want := e.clk.Now().Add(lease).UnixMilli()
			eventually(t, "the lease renewed", func() bool { return due() == want })
		}
		if m := e.message(id); m.StatusID != messaging.StatusPending || m.OutcomeUnknown || tr.calls.Load() != 1 {
			t.Fatalf("during the call, after 4 leases: calls %d, %+v", tr.calls.Load(), m)
		}
		close(tr.gate)
		eventually(t, "sent", func() bool { return e.message(id).StatusID == messaging.StatusSent })
		if tr.calls.Load() != 1 {
			t.Fatalf("%d calls", tr.calls.Load())
		}
	})
}

// TestSendQueueReplicas: two replicas on one database claim from the same
// queue side by side (FOR UPDATE SKIP LOCKED on PostgreSQL); every message
// reaches the provider exactly once between them. All the
// messages are one sender's: its share is every slot here, so that claims
// take batches as large as with many senders (the share has its own tests
// in internal/messaging).
func TestSendQueueReplicas(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		const n, workers = 200, 256
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true, sendShare: workers})
		e.contactWrites(ofcContactKey, "Oi")
		for i := range n {
			e.queue(fmt.Sprintf("replicas %d", i))
		}
		ctx := context.Background()
		other := apitest.Start(t, db, apitest.Options{WorkJobs: true, MessagingOptions: func(o *messaging.Options) { o.SendShare = workers }})
		e.h.App.Messaging.StartQueue(ctx)
		defer func() {
			if err := e.h.App.Messaging.StopQueue(ctx); err != nil {
				t.Error(err)
			}
		}()
		eventually(t, "every message sent", func() bool { return len(e.sent()) >= n })
		seen := map[string]int{}
		for _, m := range e.sent() {
			seen[m.Request.Text.Body]++
		}
		for text, c := range seen {
			if c != 1 {
				t.Errorf("%q reached the provider %d times", text, c)
			}
		}
		if len(seen) != n {
			t.Fatalf("%d distinct messages reached the provider, want %d", len(seen), n)
		}
		// Each message claimed once: a claim counts an attempt.
		var twice int
		if err := db.Bun.NewSelect().Table("messages").ColumnExpr("count(*)").
			Where("send_attempts <> 1").Where("text LIKE 'replicas %'").Scan(ctx, &twice); err != nil || twice != 0 {
			t.Fatalf("%d messages claimed other than once (%v)", twice, err)
		}
		// Which replica claims what is a matter of scheduling (one may take
		// every batch on a busy machine); together they sent each once.
		mine, theirs := sentBy(t, e.h.App.Registry), sentBy(t, other.App.Registry)
		if mine+theirs != n {
			t.Fatalf("sent by this replica %v, by the other %v; want %d in all", mine, theirs, n)
		}
	})
}

// sentBy is what a replica's metrics say it handed to the provider.
func sentBy(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "gateway_messages_delivery_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == "sent" {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestSendQueueBatchesOutcomes: attempts that end together record their
// Sent outcomes (of a company that listens to no message event) in shared
// statements (the test holds the database while
// they end, so they queue up behind the first), each message with its own
// external id. An id another message of the channel holds (the far side
// reused it) fails the batch; each outcome is then written alone, and the
// reused id goes to the newest message.
func TestSendQueueBatchesOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reuse bool
	}{{"own ids", false}, {"one id reused", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				e := newOfficialEnv(t, db, ofcEnvOptions{unheard: true})
				reused := e.contactWrites(ofcContactKey, "Oi")
				// Each message gets an id of its own (by its text), but
				// "reuse" gets the id the inbound message holds.
				tr := &gatedTransport{gate: make(chan struct{}), id: func(out messaging.Outbound) string {
					if out.Text == "reuse" {
						return reused
					}
					return "wamid.batch." + out.Text
				}}
				e.h.App.Messaging.RegisterTransport(channels.OfficialChatapp, tr)
				texts := []string{"b1", "b2", "b3", "b4", "b5", "b6"}
				if tc.reuse {
					texts = append(texts, "reuse")
				}
				ids := map[string]int64{}
				for _, text := range texts {
					ids[text] = e.queue(text)
				}
				eventually(t, "every call", func() bool { return int(tr.calls.Load()) == len(texts) })

				hold, err := db.Bun.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if db.Dialect == store.Postgres {
					if _, err := hold.NewRaw("SELECT id FROM messages WHERE text IN (?) FOR UPDATE", bun.In(texts)).Exec(ctx); err != nil {
						t.Fatal(err)
					}
				} // SQLite: the transaction holds the writer and the only connection.
				close(tr.gate)
				time.Sleep(300 * time.Millisecond)
				if err := hold.Rollback(); err != nil {
					t.Fatal(err)
				}

				eventually(t, "every message sent", func() bool {
					for _, id := range ids {
						if e.message(id).StatusID != messaging.StatusSent {
							return false
						}
					}
					return true
				})
				for text, id := range ids {
					want := "wamid.batch." + text
					if text == "reuse" {
						want = reused
					}
					if got := e.message(id).ExternalID; got != want {
						t.Errorf("message %q has external id %q, want %q", text, got, want)
					}
				}
				if tc.reuse {
					if m, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, reused); err != nil || m.ID != ids["reuse"] {
						t.Errorf("the reused id names message %d (%v), want the newest, %d", m.ID, err, ids["reuse"])
					}
				}
				writes, written := sentWrites(t, e.h.App.DebugRegistry)
				switch {
				case !tc.reuse && (written != float64(len(texts)) || writes >= written):
					t.Fatalf("%v Sent outcomes in %v batched statements; want the %d that ended together sharing statements",
						written, writes, len(texts))
				case tc.reuse && written >= float64(len(texts)):
					t.Fatalf("%v Sent outcomes in %v batched statements; want the reused id's batch written alone", written, writes)
				}
			})
		})
	}
}

// sentWrites is what a replica's metrics say of its batched Sent
// outcomes: the statements, and the outcomes they wrote.
func sentWrites(t *testing.T, reg *prometheus.Registry) (writes, written float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "gateway_messages_sent_outcomes_per_write" {
			for _, m := range f.GetMetric() {
				writes += float64(m.GetHistogram().GetSampleCount())
				written += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return writes, written
}
