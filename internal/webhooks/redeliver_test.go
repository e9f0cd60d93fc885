package webhooks_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// TestStandardWebhooksScheme: a subscription with the Standard Webhooks
// scheme gets webhook-id/-timestamp/-signature instead of the X-Svc
// timestamp and signature (the receiver verifies either), and switching the
// scheme applies to the next attempt.
func TestStandardWebhooksScheme(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{})
		rcv := newReceiver(t, "", b.clk.Now)
		sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL(), SignatureScheme: webhooks.SchemeStandard})
		rcv.setSecret(secret)
		if sub.SignatureScheme != webhooks.SchemeStandard {
			t.Fatalf("scheme %q", sub.SignatureScheme)
		}
		publishWon := func() {
			t.Helper()
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: exampleData(t)[events.CrmBusinessWon]}); err != nil {
				t.Fatal(err)
			}
			b.deliver(t, sub.ID)
		}
		publishWon()
		svc := webhooks.SchemeSvc
		if _, err := b.svc.UpdateChannelWebhook(context.Background(), b.p, sub.ID, webhooks.UpdateInput{SignatureScheme: &svc}); err != nil {
			t.Fatal(err)
		}
		publishWon()
		hits := rcv.received()
		if len(hits) != 2 {
			t.Fatalf("%d deliveries", len(hits))
		}
		std, doc := hits[0].Header, hits[1].Header
		if std.Get("webhook-id") != std.Get(webhooks.HeaderDelivery) || std.Get("webhook-timestamp") == "" ||
			std.Get(webhooks.HeaderSignature) != "" || std.Get(webhooks.HeaderTimestamp) != "" {
			t.Errorf("standard-webhooks headers: %v", std)
		}
		if doc.Get("webhook-signature") != "" || doc.Get(webhooks.HeaderSignature) == "" {
			t.Errorf("svc headers: %v", doc)
		}
		bad := "hmac-sha1"
		_, err := b.svc.UpdateChannelWebhook(context.Background(), b.p, sub.ID, webhooks.UpdateInput{SignatureScheme: &bad})
		if fault.KindOf(err) != fault.Invalid {
			t.Errorf("unknown scheme: %v", err)
		}
	})
}

// TestRedeliveryRetention: delivered events stay redeliverable
// RedeliverDeliveredFor, failed ones FailureRetention; the retention job
// prunes the rest.
func TestRedeliveryRetention(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{})
		rcv := newReceiver(t, "", b.clk.Now)
		status := 200
		rcv.setAnswer(func(int) int { return status })
		sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL()})
		rcv.setSecret(secret)
		day := 24 * time.Hour
		entries := []struct {
			age           time.Duration
			code          int
			redeliverable bool
		}{
			{webhooks.RedeliverDeliveredFor + time.Minute, 200, false},
			{webhooks.RedeliverDeliveredFor - time.Minute, 200, true},
			{webhooks.FailureRetention + time.Minute, 400, false},
			{webhooks.FailureRetention - time.Minute, 400, true},
			{time.Hour, 410, true},
		}
		pruneAt := t0.Add(40 * day)
		ids := make([]string, len(entries))
		for i, e := range entries {
			b.clk.Set(pruneAt.Add(-e.age))
			status = e.code // the lane runs in this goroutine's call below
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: exampleData(t)[events.CrmBusinessWon]}); err != nil {
				t.Fatal(err)
			}
			p, ok := b.pendingOf(t, sub.ID)
			if !ok {
				t.Fatal("nothing queued")
			}
			ids[i] = p.DeliveryID
			b.deliver(t, sub.ID)
			if _, still := b.pendingOf(t, sub.ID); still {
				t.Fatalf("entry %d: delivery not finished", i)
			}
		}
		b.clk.Set(pruneAt)
		if _, err := b.svc.PruneDeliveryLog(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i, e := range entries {
			n, err := b.svc.RedeliverChannelWebhookDelivery(context.Background(), b.p, sub.ID, ids[i])
			switch {
			case e.redeliverable && (err != nil || n != 1):
				t.Errorf("entry %d (age %s, %d): %d, %v; want redelivered", i, e.age, e.code, n, err)
			case !e.redeliverable && fault.KindOf(err) != fault.NotFound:
				t.Errorf("entry %d (age %s, %d): %d, %v; want NotFound", i, e.age, e.code, n, err)
			}
			b.takeDeliveries(t)
		}
		// Recover sees the failures within the window, none older.
		n, err := b.svc.RecoverChannelWebhookDeliveries(context.Background(), b.p, sub.ID, pruneAt.Add(-webhooks.FailureRetention-day))
		if err != nil || n != 2 {
			t.Errorf("recover: %d, %v; want the 2 failures kept", n, err)
		}
	})
}

// TestRecoverAfterDisabling: deliveries queued to a subscription that gets
// disabled are dropped unsent but kept as failed; once it is enabled again,
// recover sends them, under their delivery ids, once.
func TestRecoverAfterDisabling(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{})
		ctx := context.Background()
		rcv := newReceiver(t, "", b.clk.Now)
		sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL()})
		rcv.setSecret(secret)
		var ids []string
		for range 2 {
			if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: exampleData(t)[events.CrmBusinessWon]}); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range b.pending(t) {
			ids = append(ids, p.DeliveryID)
		}
		off, on := false, true
		if _, err := b.svc.UpdateChannelWebhook(ctx, b.p, sub.ID, webhooks.UpdateInput{Enabled: &off}); err != nil {
			t.Fatal(err)
		}
		b.deliver(t, sub.ID) // the lane drops what is queued to a disabled subscription
		if len(rcv.received()) != 0 || len(b.pending(t)) != 0 {
			t.Fatalf("disabled: %d received, %d pending", len(rcv.received()), len(b.pending(t)))
		}
		if _, err := b.svc.RecoverChannelWebhookDeliveries(ctx, b.p, sub.ID, t0.Add(-time.Hour)); fault.KindOf(err) != fault.Rule {
			t.Errorf("recover while disabled: %v, want Rule", err)
		}
		if _, err := b.svc.UpdateChannelWebhook(ctx, b.p, sub.ID, webhooks.UpdateInput{Enabled: &on}); err != nil {
			t.Fatal(err)
		}
		n, err := b.svc.RecoverChannelWebhookDeliveries(ctx, b.p, sub.ID, t0.Add(-time.Hour))
		if err != nil || n != 2 {
			t.Fatalf("recover: %d, %v", n, err)
		}
		// Queued already: a second recover adds nothing.
		if n, err := b.svc.RecoverChannelWebhookDeliveries(ctx, b.p, sub.ID, t0.Add(-time.Hour)); err != nil || n != 0 {
			t.Errorf("second recover: %d, %v", n, err)
		}
		b.deliver(t, sub.ID)
		var got []string // sent concurrently: in any order
		for _, h := range rcv.received() {
			got = append(got, h.Header.Get(webhooks.HeaderDelivery))
		}
		slices.Sort(got)
		slices.Sort(ids)
		if !slices.Equal(got, ids) {
			t.Fatalf("recovered deliveries %v, want %v", got, ids)
		}
		// Delivered now: nothing failed remains.
		if n, err := b.svc.RecoverChannelWebhookDeliveries(ctx, b.p, sub.ID, t0.Add(-time.Hour)); err != nil || n != 0 {
			t.Errorf("recover after delivery: %d, %v", n, err)
		}
	})
}
