package loadtest

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/gen/events"
)

// Receiver is a webhook receiver on loopback, built the way the AsyncAPI
// document tells subscribers to build one (asyncapi/subscriber: every
// signature verified, X-Svc-Delivery as the idempotency key). It counts
// what arrives so the load generator can report publish→receipt latency,
// losses and duplicates, and the fault suite can compare it with what the
// gateway says it delivered.
type Receiver struct {
	URL string
	srv *http.Server

	mu       sync.Mutex
	hooks    map[string]*subscriber.Handler // by path name
	subs     map[string]*hookStats
	due      map[string]time.Time // import_id → when it was meant to be published
	lat      []time.Duration
	sent     map[string][]SentEvent // omnichat.message.sent by message text
	rejected int                    // deliveries refused (signature, malformed)
	last     time.Time              // last delivery processed
}

// SentEvent is one omnichat.message.sent the receiver got.
type SentEvent struct {
	MessageID  int64
	ExternalID string
	StatusID   int
	At         time.Time // when the receiver got it
}

// hookStats is what one subscription's endpoint received.
type hookStats struct {
	deliveries map[string]int // delivery id → times processed or acknowledged
	imports    map[string]int // import_id → deliveries processed
	replays    int            // deliveries the Seen store recognised (retries of a processed one)
	lat        []time.Duration
}

// StartReceiver listens on 127.0.0.1.
func StartReceiver() (*Receiver, error) { return StartReceiverOn("127.0.0.1:0") }

// StartReceiverOn listens on addr (the cluster suite's bridge, which
// gateways in other network namespaces reach).
func StartReceiverOn(addr string) (*Receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "http://" + ln.Addr().String(), hooks: map[string]*subscriber.Handler{},
		subs: map[string]*hookStats{}, due: map[string]time.Time{}, sent: map[string][]SentEvent{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Close stops the receiver.
func (r *Receiver) Close() { _ = r.srv.Close() }

// HookURL is the URL of endpoint name; Register it once its secret is
// known.
func (r *Receiver) HookURL(name string) string { return r.URL + "/hook/" + name }

// Register starts accepting deliveries at endpoint name signed with secret.
func (r *Receiver) Register(name, secret string) {
	st := &hookStats{deliveries: map[string]int{}, imports: map[string]int{}}
	h := subscriber.NewHandler(secret, subscriber.WithSeen(&countingSeen{Seen: subscriber.NewMemorySeen(0, nil), r: r, st: st}),
		subscriber.WithErrorLog(func(*http.Request, error) {
			r.mu.Lock()
			r.rejected++
			r.mu.Unlock()
		}))
	subscriber.Handle(h, events.ContactImportCompleted, func(_ context.Context, d *subscriber.Delivery, p *events.ContactImportCompletedPayload) error {
		now := time.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		st.deliveries[d.ID]++
		st.imports[p.ImportID]++
		r.last = now
		if due, ok := r.due[p.ImportID]; ok && st.imports[p.ImportID] == 1 {
			r.lat = append(r.lat, now.Sub(due))
			st.lat = append(st.lat, now.Sub(due))
		}
		return nil
	})
	// An inbound message counts under its text, which the load generator
	// makes unique, as an event counts under its import id.
	subscriber.Handle(h, events.OmnichatMessageReceived, func(_ context.Context, d *subscriber.Delivery, p *events.MessageReceivedPayload) error {
		now := time.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		st.deliveries[d.ID]++
		st.imports[p.Text]++
		r.last = now
		if due, ok := r.due[p.Text]; ok && st.imports[p.Text] == 1 {
			r.lat = append(r.lat, now.Sub(due))
			st.lat = append(st.lat, now.Sub(due))
		}
		return nil
	})
	subscriber.Handle(h, events.OmnichatMessageSent, func(_ context.Context, d *subscriber.Delivery, p *events.MessageSentPayload) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		st.deliveries[d.ID]++
		r.sent[p.Text] = append(r.sent[p.Text], SentEvent{MessageID: p.ID, ExternalID: deref(p.ExternalID), StatusID: int(p.StatusID),
			At: time.Now()})
		return nil
	})
	r.mu.Lock()
	r.hooks[name], r.subs[name] = h, st
	r.mu.Unlock()
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	name, ok := strings.CutPrefix(req.URL.Path, "/hook/")
	r.mu.Lock()
	h := r.hooks[name]
	r.mu.Unlock()
	if !ok || h == nil {
		http.NotFound(w, req)
		return
	}
	h.ServeHTTP(w, req)
}

// Due records when the event carrying importID was meant to be published.
func (r *Receiver) Due(importID string, at time.Time) {
	r.mu.Lock()
	r.due[importID] = at
	r.mu.Unlock()
}

// EventTally is what the receiver got of a set of published events.
type EventTally struct {
	Expected   int `json:"expected"`   // accepted events × endpoints
	Received   int `json:"received"`   // distinct (endpoint, event) pairs received
	Lost       int `json:"lost"`       // expected but not received
	Duplicates int `json:"duplicates"` // deliveries beyond the first of an (endpoint, event)
	Rejected   int `json:"rejected"`   // deliveries the subscriber library refused (signature, format)
}

// Tally counts, for the accepted import ids, what reached endpoints.
func (r *Receiver) Tally(endpoints []string, accepted []string) EventTally {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := EventTally{Expected: len(endpoints) * len(accepted), Rejected: r.rejected}
	for _, e := range endpoints {
		st := r.subs[e]
		if st == nil {
			continue
		}
		for _, id := range accepted {
			if n := st.imports[id]; n > 0 {
				t.Received++
			}
		}
		for _, n := range st.imports {
			t.Duplicates += max(0, n-1)
		}
		t.Duplicates += st.replays
	}
	t.Lost = t.Expected - t.Received
	return t
}

// Reset forgets the publish times and latencies recorded so far, so that
// deliveries left over from an earlier scenario are not measured as part
// of the next one.
func (r *Receiver) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.due, r.lat = map[string]time.Time{}, nil
	for _, st := range r.subs {
		st.lat = nil
	}
}

// Latencies returns and forgets the publish→receipt latencies recorded
// so far (first receipt of each event at each endpoint).
func (r *Receiver) Latencies() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lat
	r.lat = nil
	return l
}

// EndpointLatencies returns and forgets the publish→receipt latencies
// recorded at the named endpoints (first receipt of each event at each).
func (r *Receiver) EndpointLatencies(names []string) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for _, n := range names {
		if st := r.subs[n]; st != nil {
			out = append(out, st.lat...)
			st.lat = nil
		}
	}
	return out
}

// LastReceipt is when the last event was processed.
func (r *Receiver) LastReceipt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// DeliveryIDs are the delivery ids endpoint name acknowledged.
func (r *Receiver) DeliveryIDs(name string) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	if st := r.subs[name]; st != nil {
		for id, n := range st.deliveries {
			out[id] = n
		}
	}
	return out
}

// Sent returns the omnichat.message.sent events received for a text.
func (r *Receiver) Sent(text string) []SentEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]SentEvent(nil), r.sent[text]...)
}

// WaitFor polls cond until it holds or timeout passes, and says which.
func WaitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countingSeen is the subscriber library's idempotency store, counting
// the deliveries it recognises as already processed: the gateway sent
// the same delivery again.
type countingSeen struct {
	subscriber.Seen
	r  *Receiver
	st *hookStats
}

func (c *countingSeen) Claim(ctx context.Context, id string) (subscriber.Claim, error) {
	claim, err := c.Seen.Claim(ctx, id)
	if err == nil && claim != subscriber.Claimed {
		c.r.mu.Lock()
		c.st.replays++
		if claim == subscriber.AlreadyDone {
			c.st.deliveries[id]++
		}
		c.r.mu.Unlock()
	}
	return claim, err
}

// deref is *s, "" for nil (external_id is null until the provider confirmed
// the message).
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
