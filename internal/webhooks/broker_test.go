package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/secrets"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// The machine's brokers (.ci/run starts them): NATS with JetStream and
// RabbitMQ with guest/guest. Each test makes its own stream or exchange
// under a unique name and deletes it.
const (
	natsAddr = "127.0.0.1:4222"
	amqpAddr = "127.0.0.1:5672"
)

// brokerMsg is one message as a broker consumer reads it.
type brokerMsg struct {
	ID     string // Nats-Msg-Id or the AMQP message id
	Header http.Header
	Body   []byte
	// verify checks the message as the subscriber library does for its
	// broker (subscriber.VerifyNATS or VerifyAMQP, on the raw headers).
	verify func(secret string, now time.Time) error
}

// jsStream is a JetStream stream of the test on subject prefix.
type jsStream struct {
	js      jetstream.JetStream
	stream  jetstream.Stream
	subject string // what a subscription publishes to
}

func newJSStream(t testing.TB, addr string) *jsStream {
	t.Helper()
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatalf("NATS at %s (start it as .ci/run does): %v", addr, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := "T" + strings.ReplaceAll(uuid.NewString(), "-", "")
	ctx := context.Background()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage,
		Duplicates: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return &jsStream{js: js, stream: st, subject: name + ".events"}
}

// read returns every message the stream holds, in order.
func (s *jsStream) read(t testing.TB) []brokerMsg {
	t.Helper()
	ctx := context.Background()
	info, err := s.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []brokerMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, brokerMsg{ID: m.Header.Get(jetstream.MsgIDHeader), Header: http.Header(m.Header), Body: m.Data,
			verify: func(secret string, now time.Time) error {
				return subscriber.VerifyNATS(secret, m.Header, m.Data, now, 5*time.Minute)
			}})
	}
	return out
}

// rabbitQueue is an exchange of the test with a queue bound to it.
type rabbitQueue struct {
	ch            *amqp.Channel
	exchange, key string
	queue         string
}

func newRabbitQueue(t testing.TB) *rabbitQueue {
	t.Helper()
	conn, err := amqp.Dial("amqp://guest:guest@" + amqpAddr + "/")
	if err != nil {
		t.Fatalf("RabbitMQ at %s (start it as .ci/run does): %v", amqpAddr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	q := &rabbitQueue{ch: ch, exchange: "test-x-" + id, key: "events." + id, queue: "test-q-" + id}
	if err := ch.ExchangeDeclare(q.exchange, "direct", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(q.queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.queue, q.key, q.exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ch.QueueDelete(q.queue, false, false, false)
		_ = ch.ExchangeDelete(q.exchange, false, false)
	})
	return q
}

func (q *rabbitQueue) url(user, pass string) string {
	return fmt.Sprintf("amqp://%s:%s@%s/?exchange=%s&routing_key=%s", user, pass, amqpAddr, q.exchange, q.key)
}

// read takes every message waiting in the queue.
func (q *rabbitQueue) read(t testing.TB) []brokerMsg {
	t.Helper()
	var out []brokerMsg
	for {
		d, ok, err := q.ch.Get(q.queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		h := http.Header{}
		for k, v := range d.Headers {
			h.Set(k, fmt.Sprint(v))
		}
		h.Set("Content-Type", d.ContentType)
		out = append(out, brokerMsg{ID: d.MessageId, Header: h, Body: d.Body, verify: func(secret string, now time.Time) error {
			return subscriber.VerifyAMQP(secret, d.Headers, d.MessageId, d.Body, now, 5*time.Minute)
		}})
	}
}

// checkMessages verifies msgs as a subscriber would: each signature
// against secret, each body and header set against the AsyncAPI document,
// the message id as the delivery id, and one message per delivery.
func checkMessages(t *testing.T, msgs []brokerMsg, secret string, now time.Time) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for i, m := range msgs {
		event := m.Header.Get(webhooks.HeaderEvent)
		if err := m.verify(secret, now); err != nil {
			t.Errorf("message %d (%s): %v", i, event, err)
		}
		if err := eventschema.ValidatePayload(event, m.Body); err != nil {
			t.Errorf("message %d body: %v", i, err)
		}
		if err := eventschema.ValidateHeaders(event, m.Header); err != nil {
			t.Errorf("message %d headers: %v", i, err)
		}
		var env struct {
			DeliveryID string `json:"delivery_id"`
		}
		if err := json.Unmarshal(m.Body, &env); err != nil {
			t.Fatal(err)
		}
		if m.ID != env.DeliveryID || m.Header.Get(webhooks.HeaderDelivery) != env.DeliveryID {
			t.Errorf("message %d: id %q, header %q, envelope %q: want one delivery id", i, m.ID,
				m.Header.Get(webhooks.HeaderDelivery), env.DeliveryID)
		}
		if ids[m.ID] {
			t.Errorf("delivery %s received twice", m.ID)
		}
		ids[m.ID] = true
	}
	return ids
}

// subscribableExamples are the example data of every subscribable event.
func subscribableExamples(t testing.TB) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for name, data := range exampleData(t) {
		if info, ok := events.Lookup(name); ok && info.Subscribable {
			out[name] = data
		}
	}
	if len(out) < 5 {
		t.Fatalf("only %d subscribable examples", len(out))
	}
	return out
}

// TestBrokerDestinations: every event kind reaches a JetStream subject and
// a RabbitMQ exchange, signed as a webhook is, under its delivery id; the
// broker URL's credentials are sealed at rest and masked in reads.
func TestBrokerDestinations(t *testing.T) {
	t.Parallel()
	ring, err := secrets.Parse("k1:" + strings.Repeat("A", 43) + "=")
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{webhooks: webhooks.Options{Secrets: ring}})
		js := newJSStream(t, natsAddr)
		rq := newRabbitQueue(t)
		cases := []struct {
			name, url, shown string
			scheme           string
			read             func(testing.TB) []brokerMsg
		}{
			{"nats", "nats://" + natsAddr + "/" + js.subject, "nats://" + natsAddr + "/" + js.subject, webhooks.SchemeSvc, js.read},
			{"amqp", rq.url("guest", "guest"), rq.url("guest", "***"), webhooks.SchemeStandard, rq.read},
		}
		examples := subscribableExamples(t)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: tc.url, SignatureScheme: tc.scheme})
				if got := b.subscription(t, b.p, sub.ID).URL; got != strings.ReplaceAll(tc.shown, "***", "%2A%2A%2A") && got != tc.shown {
					t.Errorf("read url %q, want %q", got, tc.shown)
				}
				stored, dest, err := b.svc.StoredURL(context.Background(), sub.ID)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(stored+dest, "guest:guest") {
					t.Errorf("credentials stored in clear: url %q destination %q", stored, dest)
				}
				for name, data := range examples {
					ch := int64(7)
					if err := b.publish(t, webhooks.Event{Name: name, CompanyID: b.p.CompanyID, CompanyChannelID: &ch, Data: data}); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
				}
				b.deliver(t, sub.ID)
				msgs := tc.read(t)
				ids := checkMessages(t, msgs, secret, b.clk.Now())
				got := map[string]bool{}
				for _, m := range msgs {
					got[m.Header.Get(webhooks.HeaderEvent)] = true
				}
				for name := range examples {
					if !got[name] {
						t.Errorf("%s never reached the broker", name)
					}
				}
				log := b.log(t, sub.ID)
				for _, e := range log {
					if !e.Succeeded || !ids[e.DeliveryID] {
						t.Errorf("log entry %+v (%s): want succeeded and received", e, deref(e.Error))
					}
				}
				if len(log) != len(examples) || len(msgs) != len(examples) {
					t.Errorf("%d log entries and %d messages for %d events", len(log), len(msgs), len(examples))
				}
			})
		}
	})
}

// TestBrokerRefusals: a broker that refuses fails the attempt with a fixed
// text in the log and schedules the next attempt, as an unreachable host
// does.
func TestBrokerRefusals(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{})
		rq := newRabbitQueue(t)
		closed, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := closed.Addr().String()
		closed.Close()
		cases := []struct {
			name, url, want string
		}{
			{"amqp bad credentials", rq.url("guest", "wrong"), webhooks.MsgBrokerAuth},
			{"amqp missing exchange", fmt.Sprintf("amqp://guest:guest@%s/?exchange=missing-%s&routing_key=k", amqpAddr, uuid.NewString()), webhooks.MsgBrokerNoExchange},
			{"amqp unreachable", "amqp://guest:guest@" + dead + "/?exchange=x", webhooks.MsgRefused},
			{"nats missing stream", "nats://" + natsAddr + "/nostream-" + uuid.NewString() + ".x", webhooks.MsgBrokerNoStream},
			{"nats unreachable", "nats://" + dead + "/a.b", webhooks.MsgRefused},
		}
		data := exampleData(t)[events.CrmBusinessWon]
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				sub, _ := b.subscribe(t, b.p, webhooks.CreateInput{URL: tc.url, Events: []string{events.CrmBusinessWon}})
				if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: data}); err != nil {
					t.Fatal(err)
				}
				// Only this subscription's delivery: the others' were
				// delivered (or refused) in their own subtests.
				b.deliver(t, sub.ID)
				log := b.log(t, sub.ID)
				if len(log) != 1 {
					t.Fatalf("%d log entries, want 1", len(log))
				}
				e := log[0]
				if e.Succeeded || e.StatusCode != 0 || deref(e.Error) != tc.want || e.NextRetryAt == nil {
					t.Errorf("log entry: succeeded %v status %d error %q next %v; want the fixed text %q and a retry",
						e.Succeeded, e.StatusCode, deref(e.Error), e.NextRetryAt, tc.want)
				}
				if strings.Contains(deref(e.Error), "127.0.0.1") {
					t.Errorf("error text names an address: %q", deref(e.Error))
				}
			})
		}
	})
}

// TestBrokerURLValidation: an unknown scheme, a malformed broker URL and a
// broker URL without its subject or exchange answer 422 on url.
func TestBrokerURLValidation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db, setupOpts{})
		cases := []struct{ name, url, want string }{
			{"unknown scheme", "kafka://127.0.0.1:9092/topic", "Url must be a valid http or https URL"},
			{"nats without subject", "nats://127.0.0.1:4222", webhooks.MsgNATSSubject},
			{"nats wildcard subject", "nats://127.0.0.1:4222/a.*", webhooks.MsgNATSSubject},
			{"nats bad port", "nats://127.0.0.1:99999/a", webhooks.MsgBrokerURL},
			{"amqp without exchange", "amqp://guest:guest@127.0.0.1:5672/?routing_key=k", webhooks.MsgAMQPExchange},
			{"amqp without host", "amqp://guest:guest@:5672/?exchange=x", webhooks.MsgBrokerURL},
			{"refused broker host", "nats://10.1.2.3:4222/a", "Url host 10.1.2.3 is an address the service may not reach; an operator can allow it with OUTBOUND_ALLOW_CIDRS"},
		}
		for _, tc := range cases {
			_, _, err := b.svc.CreateChannelWebhook(context.Background(), b.p, webhooks.CreateInput{Name: "n", URL: tc.url})
			if got := fieldErr(err, "url"); got != tc.want {
				t.Errorf("%s: url error %q (%v), want %q", tc.name, got, err, tc.want)
			}
		}
	})
}

// TestBrokerRestartUnderLoad: a broker that goes away while events are
// published and comes back loses none of them, and the failed attempts are
// scheduled on the retry schedule. NATS is a real restart of a nats-server
// process of the test's own (its store on disk); RabbitMQ, shared by the
// machine, is cut off instead: a proxy in front of it closes every
// connection and refuses new ones, then accepts again.
func TestBrokerRestartUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		// The schedule spans more than one attempt's 10 s timeout: an
		// open breaker's probe sent as the broker restarts may wait that
		// long for its acknowledgement, and every delivery due meanwhile
		// is refused on schedule. A schedule shorter than the probe (the
		// production one is 21 minutes) would end them all before the
		// next probe could find the broker back.
		delays := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
		b := setup(t, db, setupOpts{work: true, webhooks: webhooks.Options{Now: time.Now, RetryDelays: delays}})
		srv := startNATS(t)
		js := newJSStream(t, srv.addr)
		rq := newRabbitQueue(t)
		px := startProxy(t, amqpAddr)
		cases := []struct {
			name        string
			url         string
			stop, start func(testing.TB)
			read        func(testing.TB) []brokerMsg
		}{
			{"nats", "nats://" + srv.addr + "/" + js.subject, srv.stop, srv.start, js.read},
			{"amqp", fmt.Sprintf("amqp://guest:guest@%s/?exchange=%s&routing_key=%s", px.addr, rq.exchange, rq.key), px.stop, px.start, rq.read},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				sub, secret := b.subscribe(t, b.p, webhooks.CreateInput{URL: tc.url, Events: []string{events.CrmBusinessWon}})
				data := exampleData(t)[events.CrmBusinessWon]
				const total = 300
				for i := range total {
					if i == total/3 {
						tc.stop(t)
					}
					if i == total*2/3 {
						tc.start(t)
					}
					if err := b.publish(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: data}); err != nil {
						t.Fatal(err)
					}
					time.Sleep(5 * time.Millisecond)
				}
				deadline := time.Now().Add(90 * time.Second)
				for countSucceeded(logAll(t, b, sub.ID)) != total {
					if time.Now().After(deadline) {
						texts := map[string]int{}
						for _, e := range logAll(t, b, sub.ID) {
							texts[fmt.Sprintf("attempt %d ok %v %s", e.Attempt, e.Succeeded, deref(e.Error))]++
						}
						t.Fatalf("%d of %d delivered within 90 s; attempts: %v", countSucceeded(logAll(t, b, sub.ID)), total, texts)
					}
					time.Sleep(20 * time.Millisecond)
				}
				// At least once: a message whose confirm was lost with the
				// connection is sent again under its id; a consumer keeps one.
				msgs := tc.read(t)
				seen := map[string]bool{}
				var unique []brokerMsg
				for _, m := range msgs {
					if !seen[m.ID] {
						seen[m.ID] = true
						unique = append(unique, m)
					}
				}
				ids := checkMessages(t, unique, secret, time.Now())
				failed := 0
				for _, e := range logAll(t, b, sub.ID) {
					if e.Succeeded {
						if !ids[e.DeliveryID] {
							t.Errorf("delivery %s logged as delivered is not at the broker", e.DeliveryID)
						}
						continue
					}
					failed++
					if e.NextRetryAt == nil {
						t.Errorf("failed attempt %d of %s without a next attempt", e.Attempt, e.DeliveryID)
						continue
					}
					if gap := e.NextRetryAt.Sub(e.CreatedAt) - delays[e.Attempt-1]; gap < -time.Second || gap > time.Second {
						t.Errorf("attempt %d retried %v after, want %v", e.Attempt, e.NextRetryAt.Sub(e.CreatedAt), delays[e.Attempt-1])
					}
				}
				if len(ids) != total {
					t.Errorf("%d distinct deliveries at the broker, want %d", len(ids), total)
				}
				if failed == 0 {
					t.Error("no attempt failed while the broker was away: the outage was not felt")
				}
			})
		}
	})
}

// proxy forwards TCP connections to a broker; stop closes them all and
// stops listening, start listens again on the same address.
type proxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), target: target}
	p.serve(ln)
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *proxy) stop(testing.TB) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) start(t testing.TB) {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy listen again: %v", err)
	}
	p.serve(ln)
}

// natsServer is a nats-server process of the test's own.
type natsServer struct {
	addr, dir string
	cmd       *exec.Cmd
}

func startNATS(t *testing.T) *natsServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &natsServer{addr: addr, dir: t.TempDir()}
	s.start(t)
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *natsServer) start(t testing.TB) {
	_, port, _ := net.SplitHostPort(s.addr)
	bin := "/usr/sbin/nats-server"
	if _, err := os.Stat(bin); err != nil {
		bin = "nats-server"
	}
	s.cmd = exec.Command(bin, "-a", "127.0.0.1", "-p", port, "-js", "-sd", s.dir)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	waitUntil(t, "nats-server listens", func() bool {
		nc, err := nats.Connect("nats://"+s.addr, nats.Timeout(time.Second))
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		_, err = js.AccountInfo(context.Background())
		return err == nil
	})
}

func (s *natsServer) stop(t testing.TB) {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// fieldErr is the first error of field in a fault's field errors.
func fieldErr(err error, field string) string {
	var fe *fault.Error
	if !errors.As(err, &fe) || len(fe.Fields[field]) == 0 {
		return ""
	}
	return fe.Fields[field][0]
}

// logAll reads every page of a subscription's delivery log.
func logAll(t testing.TB, b *bundle, id int64) []webhooks.LogEntry {
	t.Helper()
	var out []webhooks.LogEntry
	for page := 1; ; page++ {
		list, _, err := b.svc.ListChannelWebhookDeliveries(context.Background(), b.p, id, webhooks.DeliveryFilter{Page: store.Page{Number: page, PerPage: 500}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, list...)
		if len(list) < 500 {
			return out
		}
	}
}
