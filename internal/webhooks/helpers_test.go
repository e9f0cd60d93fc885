package webhooks_test

import (
	"context"
	"encoding/json"
	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"gopkg.in/yaml.v3"

	"github.com/chatmsg/gateway/asyncapi"
	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/jobs"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/webhooks"
)

var t0 = time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// bundle is one test's world: a migrated database, the service on a fake
// clock, an insert-only River runner, and a company with a principal.
type bundle struct {
	db  *store.DB
	clk *clock.Manual
	svc *webhooks.Service
	p   auth.Principal
	// other is a second company.
	other auth.Principal
	auth  *auth.Service
	jobs  *jobs.Runner
	// work: the service's delivery runs in the background (setupOpts.work).
	work bool
}

type setupOpts struct {
	webhooks webhooks.Options
	// work starts River workers (with opts.webhooks' retry delays).
	work bool
}

func setup(t testing.TB, db *store.DB, o setupOpts) *bundle {
	t.Helper()
	ctx := context.Background()
	if err := app.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	b := &bundle{db: db, clk: clock.NewManual(t0), work: o.work}
	b.auth = auth.NewService(db, b.clk.Now)
	opts := o.webhooks
	if opts.Now == nil {
		opts.Now = b.clk.Now
	}
	b.svc, b.jobs = newService(t, db, opts, o.work)
	for i, name := range []string{"Acme", "Other"} {
		res, err := b.auth.Bootstrap(ctx, name, name+"@example.test", auth.AllPermissions, 0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := b.auth.Authenticate(ctx, res.Token)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			b.p = p
		} else {
			b.other = p
		}
	}
	return b
}

// subscribe creates a subscription of p's company and returns it and its
// secret.
func (b *bundle) subscribe(t testing.TB, p auth.Principal, in webhooks.CreateInput) (webhooks.Subscription, string) {
	t.Helper()
	if in.Name == "" {
		in.Name = "test"
	}
	sub, secret, err := b.svc.CreateChannelWebhook(context.Background(), p, in)
	if err != nil {
		t.Fatal(err)
	}
	return sub, secret
}

// publish publishes ev in a transaction of its own. Without background
// delivery it then fans the event out at once, as the fan-out does after a
// commit, so tests see its deliveries.
func (b *bundle) publish(t testing.TB, ev webhooks.Event) error {
	t.Helper()
	err := b.publishUnfanned(t, ev)
	if err == nil && !b.work {
		if err := b.svc.FanOut(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return err
}

// publishUnfanned publishes ev in a transaction of its own and leaves the
// event stored, as the publisher's commit does.
func (b *bundle) publishUnfanned(t testing.TB, ev webhooks.Event) error {
	t.Helper()
	return b.db.InTx(context.Background(), func(ctx context.Context, tx *store.Tx) error {
		return b.svc.Publish(ctx, tx, ev)
	})
}

// pending returns the queued deliveries.
func (b *bundle) pending(t testing.TB) []webhooks.Pending {
	t.Helper()
	rows, err := b.svc.PendingDeliveries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// takeDeliveries returns the deliveries queued since the last call and
// removes them (tests that only check what publishing queued).
func (b *bundle) takeDeliveries(t testing.TB) []webhooks.Pending {
	t.Helper()
	rows := b.pending(t)
	if _, err := b.db.Bun.NewDelete().Table("webhook_deliveries").Where("TRUE").Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rows
}

// pendingOf returns the one queued delivery of subscription id, if any.
func (b *bundle) pendingOf(t testing.TB, id int64) (webhooks.Pending, bool) {
	t.Helper()
	for _, p := range b.pending(t) {
		if p.SubscriptionID == id {
			return p, true
		}
	}
	return webhooks.Pending{}, false
}

// deliver runs subscription id's lane by hand: one attempt of every due
// delivery, outcomes written.
func (b *bundle) deliver(t testing.TB, id int64) {
	t.Helper()
	b.svc.DeliverDue(context.Background(), id)
}

// subscription reads a subscription back through the service.
func (b *bundle) subscription(t testing.TB, p auth.Principal, id int64) webhooks.Subscription {
	t.Helper()
	list, _, err := b.svc.ListChannelWebhooks(context.Background(), p, webhooks.ListFilter{Page: store.Page{Number: 1, PerPage: 500}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("subscription %d not found", id)
	return webhooks.Subscription{}
}

func (b *bundle) log(t testing.TB, id int64) []webhooks.LogEntry {
	t.Helper()
	list, _, err := b.svc.ListChannelWebhookDeliveries(context.Background(), b.p, id, webhooks.DeliveryFilter{Page: store.Page{Number: 1, PerPage: 500}})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

type unlimited struct{}

func (unlimited) Allow(context.Context, string, int, time.Duration) (bool, time.Duration, error) {
	return true, 0, nil
}

// hit is one request a receiver got.
type hit struct {
	Header http.Header
	Body   []byte
}

// receiver is a subscriber on 127.0.0.1 that checks every delivery the way
// a subscriber would, against the secret it currently trusts.
type receiver struct {
	t   testing.TB
	srv *httptest.Server

	mu     sync.Mutex
	secret string
	hits   []hit
	// answer decides the status of request n (0-based); 200 when nil.
	answer func(n int) int
	delay  time.Duration
	// hold, when set, keeps every request open until it closes or the
	// sender gives up; inFlight/maxInFlight count requests held at once.
	hold                  chan struct{}
	inFlight, maxInFlight int
	// now is the receiver's clock for the timestamp check.
	now func() time.Time
}

// held returns how many requests are held now and the most held at once.
func (r *receiver) held() (now, most int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight, r.maxInFlight
}

func newReceiver(t testing.TB, secret string, now func() time.Time) *receiver {
	r := &receiver{t: t, secret: secret, now: now}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) URL() string { return r.srv.URL + "/hook" }

func (r *receiver) setSecret(s string) { r.mu.Lock(); r.secret = s; r.mu.Unlock() }
func (r *receiver) setAnswer(f func(int) int) {
	r.mu.Lock()
	r.answer = f
	r.mu.Unlock()
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	n := len(r.hits)
	r.hits = append(r.hits, hit{req.Header.Clone(), body})
	secret, answer, delay, hold := r.secret, r.answer, r.delay, r.hold
	if hold != nil {
		r.inFlight++
		r.maxInFlight = max(r.maxInFlight, r.inFlight)
	}
	r.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done(): // the attempt timed out
		}
		r.mu.Lock()
		r.inFlight--
		r.mu.Unlock()
	}
	event := req.Header.Get(webhooks.HeaderEvent)
	if req.Method != http.MethodPost {
		r.t.Errorf("method %s", req.Method)
	}
	// Either scheme: the subscription's signature_scheme decides the headers.
	if err := subscriber.VerifyAny(secret, req.Header, body, r.now(), 5*time.Minute); err != nil {
		r.t.Errorf("delivery %d: %v", n, err)
	}
	if err := eventschema.ValidatePayload(event, body); err != nil {
		r.t.Errorf("delivery %d body: %v\n%s", n, err, body)
	}
	if err := eventschema.ValidateHeaders(event, req.Header); err != nil {
		r.t.Errorf("delivery %d headers: %v", n, err)
	}
	status := http.StatusOK
	if answer != nil {
		status = answer(n)
	}
	w.WriteHeader(status)
}

func (r *receiver) received() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

// exampleData returns the data of the first example of each message of the
// AsyncAPI document, by event name: valid payloads for every event.
func exampleData(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	var doc struct {
		Components struct {
			Messages map[string]struct {
				Name     string `yaml:"name"`
				Examples []struct {
					Payload struct {
						Data any `yaml:"data"`
					} `yaml:"payload"`
				} `yaml:"examples"`
			} `yaml:"messages"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(asyncapi.Document, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, m := range doc.Components.Messages {
		if len(m.Examples) == 0 {
			continue
		}
		b, err := json.Marshal(m.Examples[0].Payload.Data)
		if err != nil {
			t.Fatal(err)
		}
		out[m.Name] = b
	}
	return out
}

// replica starts a second service with its own working River client on
// the same database, as a second gateway replica would.
func (b *bundle) replica(t testing.TB, opts webhooks.Options) *webhooks.Service {
	t.Helper()
	svc, _ := newService(t, b.db, opts, true)
	return svc
}

// newService builds the service and its River runner over db, and starts
// both the runner and the service's delivery when work is set (stopped at
// cleanup).
func newService(t testing.TB, db *store.DB, opts webhooks.Options, work bool) (*webhooks.Service, *jobs.Runner) {
	t.Helper()
	if opts.Limiter == nil {
		opts.Limiter = unlimited{} // tests poll the log; the limit has its own test
	}
	if opts.AllowCIDRs == nil {
		opts.AllowCIDRs = loopback
	}
	svc := webhooks.NewService(db, opts)
	workers := river.NewWorkers()
	svc.AddWorkers(workers)
	runner, err := jobs.New(db, jobs.Options{
		Workers: workers, InsertOnly: !work, Logger: slog.New(slog.DiscardHandler), Periodic: svc.PeriodicJobs(),
		Queues: map[string]river.QueueConfig{webhooks.QueueName: webhooks.Queue()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if work {
		runCtx, cancel := context.WithCancel(context.Background())
		if err := runner.Start(runCtx); err != nil {
			t.Fatal(err)
		}
		svc.Start(runCtx)
		t.Cleanup(func() {
			stopCtx, stop := context.WithTimeout(context.Background(), 20*time.Second)
			defer stop()
			_ = svc.Stop(stopCtx)
			_ = runner.Stop(stopCtx)
			cancel()
		})
	}
	return svc, runner
}

// waitUntil polls cond until it holds, failing the test after a generous
// bound (a hang, not a speed check).
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
