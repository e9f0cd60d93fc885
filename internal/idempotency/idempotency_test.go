package idempotency_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/idempotency"
	"github.com/chatmsg/gateway/internal/secrets"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

type bundle struct {
	db      *store.DB
	clk     *clock.Manual
	company int64
}

func setup(t *testing.T, db *store.DB) bundle {
	t.Helper()
	ctx := context.Background()
	if err := db.Migrate(ctx, slices.Concat(auth.Migrations, idempotency.Migrations)); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	id, err := auth.NewService(db, clk.Now).CreateCompany(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	return bundle{db: db, clk: clk, company: id}
}

func (b bundle) service(o idempotency.Options) *idempotency.Service {
	o.Now = b.clk.Now
	return idempotency.NewService(b.db, o)
}

// claim begins key as its first request, failing the test otherwise.
func claim(t *testing.T, svc *idempotency.Service, company int64, key, fp string) *idempotency.Claim {
	t.Helper()
	c, a, err := svc.Begin(context.Background(), company, key, fp)
	if err != nil || c == nil || a != nil {
		t.Fatalf("Begin %d %s: claim %v, answer %v, err %v", company, key, c, a, err)
	}
	return c
}

func TestClaimReplayRelease(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		svc := b.service(idempotency.Options{Wait: time.Millisecond})

		first := claim(t, svc, b.company, "k", "fp-1")
		if _, _, err := svc.Begin(ctx, b.company, "k", "fp-1"); !errors.Is(err, idempotency.ErrInProgress) {
			t.Fatalf("Begin while the first runs, past the wait: %v, want ErrInProgress", err)
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		second := claim(t, svc, b.company, "k", "fp-1")
		want := idempotency.Answer{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":7}`)}
		if err := second.Complete(ctx, want); err != nil {
			t.Fatal(err)
		}
		_, got, err := svc.Begin(ctx, b.company, "k", "fp-1")
		if err != nil || got == nil || got.Status != want.Status || string(got.Body) != string(want.Body) || got.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("replay: %+v %v", got, err)
		}
		if _, _, err := svc.Begin(ctx, b.company, "k", "fp-2"); !errors.Is(err, idempotency.ErrReused) {
			t.Fatalf("another fingerprint: %v, want ErrReused", err)
		}
	})
}

// TestConcurrentRepeatWaitsForTheFirst: a repeat that arrives while the
// first request runs (here through a second service, as on another replica)
// waits and then replays the first answer.
func TestConcurrentRepeatWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		first, other := b.service(idempotency.Options{}), b.service(idempotency.Options{Poll: 5 * time.Millisecond})
		running := claim(t, first, b.company, "k", "fp")
		type result struct {
			claim  *idempotency.Claim
			answer *idempotency.Answer
			err    error
		}
		done := make(chan result, 1)
		go func() {
			c, a, err := other.Begin(ctx, b.company, "k", "fp")
			done <- result{c, a, err}
		}()
		if err := running.Complete(ctx, idempotency.Answer{Status: 200, Body: []byte("first")}); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || r.claim != nil || r.answer == nil || string(r.answer.Body) != "first" {
			t.Fatalf("waiter: %+v", r)
		}
	})
}

// TestStaleClaimIsTakenOver: a claim whose process died is taken over once
// it is older than StaleAfter, and the dead owner can no longer complete it.
func TestStaleClaimIsTakenOver(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		svc := b.service(idempotency.Options{Wait: time.Millisecond, StaleAfter: time.Minute})
		dead := claim(t, svc, b.company, "k", "fp")
		b.clk.Advance(time.Minute)
		live := claim(t, svc, b.company, "k", "fp")
		if err := dead.Complete(ctx, idempotency.Answer{Status: 200, Body: []byte("dead")}); err != nil {
			t.Fatal(err)
		}
		if err := live.Complete(ctx, idempotency.Answer{Status: 200, Body: []byte("live")}); err != nil {
			t.Fatal(err)
		}
		if _, a, err := svc.Begin(ctx, b.company, "k", "fp"); err != nil || string(a.Body) != "live" {
			t.Fatalf("replay after take-over: %+v %v", a, err)
		}
	})
}

// TestPurgeDeletesExpiredKeys: the periodic purge removes keys older than
// TTL and keeps the others; companies' keys are independent.
func TestPurgeDeletesExpiredKeys(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		svc := b.service(idempotency.Options{})
		other, err := auth.NewService(db, b.clk.Now).CreateCompany(ctx, "Other")
		if err != nil {
			t.Fatal(err)
		}
		begin := func(company int64, key, fp string) {
			t.Helper()
			if err := claim(t, svc, company, key, fp).Complete(ctx, idempotency.Answer{Status: 200}); err != nil {
				t.Fatal(err)
			}
		}
		begin(b.company, "old", "fp")
		begin(other, "old", "another fingerprint") // same key, other company: its own
		b.clk.Advance(time.Hour)
		begin(b.company, "new", "fp")
		b.clk.Advance(idempotency.TTL - time.Hour)
		n, err := svc.Purge(ctx)
		if err != nil || n != 2 {
			t.Fatalf("purge: %d %v, want the 2 old keys", n, err)
		}
		if _, a, err := svc.Begin(ctx, b.company, "new", "fp"); err != nil || a == nil {
			t.Fatalf("the fresh key was purged: %v %v", a, err)
		}
	})
}

// TestAnswersAreSealed: with a key ring, a stored answer (which may hold a
// new webhook secret) is not readable in the table, and replays in clear.
func TestAnswersAreSealed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		ring, err := secrets.Parse("k1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)))
		if err != nil {
			t.Fatal(err)
		}
		svc := b.service(idempotency.Options{Secrets: ring})
		body := []byte(`{"secret":"whsec_0123"}`)
		if err := claim(t, svc, b.company, "k", "fp").Complete(ctx, idempotency.Answer{Status: 201, Body: body}); err != nil {
			t.Fatal(err)
		}
		var raw []byte
		if err := db.Bun.NewSelect().Table("idempotency_keys").Column("body").Scan(ctx, &raw); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte("whsec_0123")) || !bytes.HasPrefix(raw, []byte("enc:v1:k1:")) {
			t.Fatalf("stored answer %q is not sealed", raw)
		}
		if _, a, err := svc.Begin(ctx, b.company, "k", "fp"); err != nil || !bytes.Equal(a.Body, body) {
			t.Fatalf("replay: %+v %v", a, err)
		}
	})
}
