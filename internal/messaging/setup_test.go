package messaging

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// bundle is a messaging service over a fresh database: a company with two
// official channels (two senders) whose contact has written to each (the
// window is open), a manual clock, a publisher that records events, and a
// transport per channel.
type bundle struct {
	t      *testing.T
	db     *store.DB
	svc    *Service
	clk    *clock.Manual
	reg    *prometheus.Registry
	events *recordedEvents
	a, b   channels.Channel
	tr     *fakeTransport
}

const contactKey = "5511977776666"

// setup builds a bundle on db. listens says whether a subscription wants
// the message events (webhooks.Audience).
func setup(t *testing.T, db *store.DB, listens bool, opts Options) *bundle {
	t.Helper()
	ctx := context.Background()
	if err := db.Migrate(ctx, slices.Concat(auth.Migrations, channels.Migrations,
		conversations.Migrations, Migrations)); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	users := auth.NewService(db, clk.Now)
	company, err := users.Bootstrap(ctx, "Acme", "acme@example.test", auth.AllPermissions, 0)
	if err != nil {
		t.Fatal(err)
	}
	chans := channels.NewService(db, clk.Now)
	events := &recordedEvents{listens: listens}
	convs := conversations.NewService(db, clk.Now, clock.NewFormatter(nil), users, chans, events)
	reg := prometheus.NewRegistry()
	opts.Registerer, opts.DebugRegisterer = reg, reg
	files, err := filestore.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(Deps{DB: db, Channels: chans, Conversations: convs, Events: events, Now: clk.Now, Times: clock.NewFormatter(nil),
		Files: files, MissingFiles: filestore.NewMissingLog(slog.New(slog.DiscardHandler)), PublicBaseURL: "http://127.0.0.1"}, opts)
	b := &bundle{t: t, db: db, svc: svc, clk: clk, reg: reg, events: events, tr: newFakeTransport()}
	for i, ch := range []*channels.Channel{&b.a, &b.b} {
		pnid := fmt.Sprintf("10980000000%d", i)
		*ch, err = chans.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: company.CompanyID, Name: fmt.Sprint("Official ", i),
			Key: fmt.Sprintf("551199999000%d", i), BusinessAccountID: "waba-" + pnid, PhoneNumberID: pnid, AccessToken: "token",
			AppSecret: "secret", BaseURL: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.ReceiveInbound(ctx, Inbound{Channel: *ch, ExternalID: fmt.Sprint("wamid.in.", i), ContactKey: contactKey,
			ContactName: "Maria Souza", Text: "Oi", SentAt: clk.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	svc.RegisterTransport(channels.OfficialChatapp, b.tr)
	events.reset()
	return b
}

// queue stores a queued send of text from ch.
func (b *bundle) queue(ch channels.Channel, text string) int64 {
	b.t.Helper()
	enqueue := true
	out, err := b.svc.SendMessage(context.Background(), SendInput{CompanyID: ch.CompanyID, Platform: channels.OfficialChatapp,
		SenderKey: ch.Key, ContactKey: contactKey, Text: text, Enqueue: &enqueue})
	if err != nil || !out.Queued {
		b.t.Fatalf("queue: %+v %v", out, err)
	}
	return out.MessageID
}

func (b *bundle) message(id int64) *messageRow {
	b.t.Helper()
	row, err := loadMessageByID(context.Background(), b.db.Bun, id)
	if err != nil {
		b.t.Fatal(err)
	}
	return row
}

// counter is the value of a counter or the sample count of a histogram
// named name whose labels include want.
func (b *bundle) counter(name string, want map[string]string) float64 {
	b.t.Helper()
	families, err := b.reg.Gather()
	if err != nil {
		b.t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
					continue metric
				}
			}
			if h := m.GetHistogram(); h != nil {
				sum += float64(h.GetSampleCount())
			} else if g := m.GetGauge(); g != nil {
				sum += g.GetValue()
			} else {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// eventually polls cond until it holds (or fails the test after a while).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recordedEvents is a webhooks.Publisher and Audience: it records what is
// published, and says whether anyone listens.
type recordedEvents struct {
	listens bool
	mu      sync.Mutex
	got     []webhooks.Event
}

func (r *recordedEvents) Publish(_ context.Context, _ *store.Tx, ev webhooks.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, ev)
	return nil
}

func (r *recordedEvents) Listens(context.Context, int64, string, *int64) (bool, error) {
	return r.listens, nil
}

func (r *recordedEvents) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.got {
		out = append(out, ev.Name)
	}
	return out
}

func (r *recordedEvents) reset() {
	r.mu.Lock()
	r.got = nil
	r.mu.Unlock()
}

// fakeTransport answers each channel's sends as its behaviour says, and
// counts the calls in flight per channel and their most.
type fakeTransport struct {
	Transport
	mu       sync.Mutex
	behave   map[int64]func(ctx context.Context, out Outbound) (SendResult, error)
	prepare  map[int64]func(ctx context.Context) error // before the hand-off, as an upload
	requests map[int64]int                             // calls past the hand-off
	inFlight map[int64]int
	most     map[int64]int
	calls    map[int64]int
	n        atomic.Int64
}

func newFakeTransport() *fakeTransport {
	return &fakeTransport{behave: map[int64]func(context.Context, Outbound) (SendResult, error){},
		prepare: map[int64]func(context.Context) error{}, requests: map[int64]int{},
		inFlight: map[int64]int{}, most: map[int64]int{}, calls: map[int64]int{}}
}

// on sets how ch's sends are answered (default: accepted at once).
func (f *fakeTransport) on(ch channels.Channel, fn func(ctx context.Context, out Outbound) (SendResult, error)) {
	f.mu.Lock()
	f.behave[ch.ID] = fn
	f.mu.Unlock()
}

// preparing sets the work ch's sends do before their hand-off (nil: none).
func (f *fakeTransport) preparing(ch channels.Channel, fn func(ctx context.Context) error) {
	f.mu.Lock()
	f.prepare[ch.ID] = fn
	f.mu.Unlock()
}

// requestsOf is how many of ch's sends got past their hand-off.
func (f *fakeTransport) requestsOf(ch channels.Channel) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[ch.ID]
}

func (f *fakeTransport) Send(ctx context.Context, ch channels.Channel, out Outbound) (SendResult, error) {
	f.mu.Lock()
	f.calls[ch.ID]++
	f.inFlight[ch.ID]++
	f.most[ch.ID] = max(f.most[ch.ID], f.inFlight[ch.ID])
	fn, prep := f.behave[ch.ID], f.prepare[ch.ID]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight[ch.ID]--
		f.mu.Unlock()
	}()
	if prep != nil {
		if err := prep(ctx); err != nil {
			return SendResult{}, err
		}
	}
	if err := out.HandOff(ctx); err != nil {
		return SendResult{}, err
	}
	f.mu.Lock()
	f.requests[ch.ID]++
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, out)
	}
	return SendResult{ExternalID: fmt.Sprint("wamid.out.", f.n.Add(1))}, nil
}

// stats are a channel's calls: in all, in flight, and the most at once.
func (f *fakeTransport) stats(ch channels.Channel) (calls, inFlight, most int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[ch.ID], f.inFlight[ch.ID], f.most[ch.ID]
}

// stalled never answers: the call ends only with its context (the
// provider accepted the connection and went silent).
func stalled(ctx context.Context, _ Outbound) (SendResult, error) {
	<-ctx.Done()
	return SendResult{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
}

// unavailable is a provider that cannot be reached.
func unavailable(context.Context, Outbound) (SendResult, error) {
	return SendResult{}, fault.New(fault.Unavailable, "The provider could not be reached")
}
