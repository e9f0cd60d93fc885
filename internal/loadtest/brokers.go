package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
)

// Brokers' defaults: the machine's NATS (JetStream) and RabbitMQ.
const (
	DefaultNATSURL = "nats://127.0.0.1:4222"
	DefaultAMQPURL = "amqp://guest:guest@127.0.0.1:5672/"
)

// The targets for broker destinations and the live stream,
// printed beside the figures.
const (
	TargetBrokerPerSec    = 2000 // events/s sustained, closed loop
	TargetBrokerAckP99Ms  = 100  // publish → broker ack p99 at 500/s
	TargetStreamP99Ms     = 100  // publish → read p99, every reader
	TargetStreamRSSMB     = 150  // gateway RSS
	TargetStreamReaders   = 100
	TargetStreamPerReader = 200 // events/s each reader receives
)

// BrokerResult is events-nats or events-amqp: one subscription whose
// destination is a broker, published to paced, then closed loop.
type BrokerResult struct {
	Broker      string        `json:"broker"`      // nats or amqp
	Destination string        `json:"destination"` // the subscription's URL, password masked
	Phases      []BrokerPhase `json:"phases"`
	// Cleanup is the error of deleting the subscription, the stream or
	// the exchange and queue ("" when all went).
	Cleanup string `json:"cleanup,omitempty"`
}

// BrokerPhase is one load shape of a broker scenario.
type BrokerPhase struct {
	Name     string         `json:"name"` // paced or closed
	Load     string         `json:"load"`
	Accepted int            `json:"accepted"` // POST /api/events answered 2xx
	Errors   map[string]int `json:"errors,omitempty"`
	// Publish is the latency of POST /api/events from when it was due.
	Publish Latency `json:"publish"`
	// Read is the accepted events the consumer read back (verified);
	// Missing those it had not after the drain; Duplicates the messages
	// beyond the first of a delivery id; Rejected the messages whose
	// signature or body the subscriber library refused.
	Read         int    `json:"read"`
	Missing      int    `json:"missing"`
	Duplicates   int    `json:"duplicates"`
	Rejected     int    `json:"rejected"`
	RejectReason string `json:"reject_reason,omitempty"`
	// PerSec is the events read back per second from the first publish
	// to the last read: acknowledged by the broker and consumed.
	PerSec float64 `json:"events_per_s"`
	// ToRead is publish (when it was due) → read by the consumer;
	// ToStored (NATS) → the stream's own timestamp of the message, which
	// JetStream sets when it stores it, just before it acknowledges.
	ToRead   Latency `json:"publish_to_read"`
	ToStored Latency `json:"publish_to_stored"`
	Drained  bool    `json:"drained"`
	// DrainedIn is the seconds after the last publish until every
	// accepted event was read, or the drain bound.
	DrainedIn float64 `json:"drained_in_s"`
}

// brokerSink is a broker destination the load generator owns: a JetStream
// stream, or a RabbitMQ exchange with a queue bound to it.
type brokerSink interface {
	// url is the subscription's destination.
	url() string
	// consume starts reading; each message goes to read with its raw
	// headers, body, the broker's stored time (zero if none) and how to
	// verify it.
	consume(ctx context.Context, read func(header http.Header, body []byte, stored time.Time, verify func(secret string) error)) error
	// close stops reading and deletes what the sink created.
	close() error
}

// natsSink is a JetStream stream on a subject of its own, read with an
// ordered consumer.
type natsSink struct {
	server, name string
	nc           *nats.Conn
	js           jetstream.JetStream
	stream       jetstream.Stream
	cc           jetstream.ConsumeContext
}

func newNATSSink(ctx context.Context, server string) (*natsSink, error) {
	nc, err := nats.Connect(server, nats.Name("loadgen"))
	if err != nil {
		return nil, fmt.Errorf("NATS at %s: %w", server, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s := &natsSink{server: server, name: "LOADGEN" + strings.ReplaceAll(uuid.NewString(), "-", ""), nc: nc, js: js}
	// File storage and a duplicate window, as a stream receiving webhooks
	// in production would have.
	s.stream, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: s.name, Subjects: []string{s.name + ".>"},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("create stream %s: %w", s.name, err)
	}
	return s, nil
}

func (s *natsSink) url() string { return strings.TrimSuffix(s.server, "/") + "/" + s.name + ".events" }

func (s *natsSink) consume(ctx context.Context, read func(http.Header, []byte, time.Time, func(string) error)) error {
	cons, err := s.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	s.cc, err = cons.Consume(func(m jetstream.Msg) {
		var stored time.Time
		if md, err := m.Metadata(); err == nil {
			stored = md.Timestamp
		}
		h, data := m.Headers(), m.Data()
		hh := http.Header{}
		for k, v := range h {
			hh[textproto.CanonicalMIMEHeaderKey(k)] = v
		}
		read(hh, data, stored, func(secret string) error {
			return subscriber.VerifyNATS(secret, h, data, time.Now(), signatureTolerance)
		})
	})
	return err
}

func (s *natsSink) close() error {
	if s.cc != nil {
		s.cc.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.js.DeleteStream(ctx, s.name)
	s.nc.Close()
	if err != nil {
		return fmt.Errorf("delete stream %s: %w", s.name, err)
	}
	return nil
}

// amqpSink is a direct exchange with a durable queue bound to it under a
// routing key, all named for this run.
type amqpSink struct {
	server                   string
	exchange, queue, key, tg string
	conn                     *amqp.Connection
	ch                       *amqp.Channel
	done                     chan struct{}
}

func newAMQPSink(server string) (*amqpSink, error) {
	conn, err := amqp.Dial(server)
	if err != nil {
		return nil, fmt.Errorf("RabbitMQ at %s: %w", redact(server), err)
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	id := uuid.NewString()
	s := &amqpSink{server: server, exchange: "loadgen-x-" + id, queue: "loadgen-q-" + id, key: "events." + id,
		tg: "loadgen-" + id, conn: conn, ch: ch}
	err = ch.ExchangeDeclare(s.exchange, "direct", true, false, false, false, nil)
	if err == nil {
		_, err = ch.QueueDeclare(s.queue, true, false, false, false, nil)
	}
	if err == nil {
		err = ch.QueueBind(s.queue, s.key, s.exchange, false, nil)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("declare exchange and queue: %w", err), s.close())
	}
	return s, nil
}

func (s *amqpSink) url() string {
	u, err := url.Parse(s.server)
	if err != nil {
		return s.server
	}
	u.RawQuery = url.Values{"exchange": {s.exchange}, "routing_key": {s.key}}.Encode()
	if u.Path == "" {
		u.Path = "/"
	}
	return u.String()
}

func (s *amqpSink) consume(_ context.Context, read func(http.Header, []byte, time.Time, func(string) error)) error {
	// A prefetch window keeps the broker sending while earlier messages
	// are verified; each is acknowledged once read.
	if err := s.ch.Qos(1000, 0, false); err != nil {
		return err
	}
	ds, err := s.ch.Consume(s.queue, s.tg, false, true, false, false, nil)
	if err != nil {
		return err
	}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		for d := range ds {
			h := http.Header{}
			for k, v := range d.Headers {
				h.Set(k, fmt.Sprint(v))
			}
			read(h, d.Body, time.Time{}, func(secret string) error {
				return subscriber.VerifyAMQP(secret, d.Headers, d.MessageId, d.Body, time.Now(), signatureTolerance)
			})
			_ = d.Ack(false)
		}
	}()
	return nil
}

func (s *amqpSink) close() error {
	var errs []error
	if s.done != nil {
		errs = append(errs, s.ch.Cancel(s.tg, false))
		<-s.done
	}
	if _, err := s.ch.QueueDelete(s.queue, false, false, false); err != nil {
		errs = append(errs, fmt.Errorf("delete queue %s: %w", s.queue, err))
	}
	if err := s.ch.ExchangeDelete(s.exchange, false, false); err != nil {
		errs = append(errs, fmt.Errorf("delete exchange %s: %w", s.exchange, err))
	}
	errs = append(errs, s.conn.Close())
	return errors.Join(errs...)
}

// scenarioCompany is the company of events-nats, events-amqp or
// events-stream, made on first use.
func (r *runner) scenarioCompany(ctx context.Context, name string) (*Company, error) {
	if co := r.scenarioCos[name]; co != nil {
		return co, nil
	}
	num := map[string]int{ScenarioEventsNATS: 8000, ScenarioEventsAMQP: 8001, ScenarioEventsStream: 8100}[name]
	cs, err := r.setup.Companies(ctx, name, num, 1, 0)
	if err != nil {
		return nil, err
	}
	// The publishes rotate over 8 tokens, as events-fanout's do: the
	// gateway allows 32 requests in flight per token.
	if err := r.setup.MoreTokens(ctx, cs[0], 7); err != nil {
		return nil, err
	}
	if r.scenarioCos == nil {
		r.scenarioCos = map[string]*Company{}
	}
	r.scenarioCos[name] = cs[0]
	return cs[0], nil
}

// runBroker makes a broker destination of its own, subscribes the
// scenario's company to it, publishes contact.import.completed paced at
// -broker-rate, then closed loop over -conns connections, each for
// -duration, reads every message back verifying it as a subscriber does,
// and deletes the subscription and the destination.
func (r *runner) runBroker(ctx context.Context, run int, name string, res *Result) (err error) {
	co, err := r.scenarioCompany(ctx, name)
	if err != nil {
		return err
	}
	var sink brokerSink
	br := &BrokerResult{}
	res.Broker = br
	switch name {
	case ScenarioEventsNATS:
		br.Broker = "nats"
		sink, err = newNATSSink(ctx, r.o.NATSURL)
	case ScenarioEventsAMQP:
		br.Broker = "amqp"
		sink, err = newAMQPSink(r.o.AMQPURL)
	}
	if err != nil {
		return err
	}
	br.Destination = redact(sink.url())
	var sub Subscription
	subscribed := false
	defer func() {
		var errs []error
		if subscribed {
			cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if _, uerr := r.setup.Unsubscribe(cctx, co, []Subscription{sub}); uerr != nil {
				errs = append(errs, fmt.Errorf("delete subscription %d: %w", sub.ID, uerr))
			}
			cancel()
		}
		// After the subscription: the gateway stops publishing to the
		// destination before it goes.
		errs = append(errs, sink.close())
		if cerr := errors.Join(errs...); cerr != nil {
			br.Cleanup = cerr.Error()
			r.o.Log("%s: cleanup: %v", name, cerr)
		}
	}()
	if sub, err = r.setup.Subscribe(ctx, co, fmt.Sprintf("%s-%d", name, run), sink.url(), []string{"contact.import.completed"}); err != nil {
		return err
	}
	subscribed = true
	// Each phase reads into a log of its own; a message of an earlier
	// phase read late lands in the next one's and is not counted there.
	var current atomic.Pointer[readLog]
	current.Store(newReadLog())
	if err := sink.consume(ctx, func(h http.Header, body []byte, stored time.Time, verify func(string) error) {
		l := current.Load()
		id, importID, err := brokerEvent(h, body, func() error { return verify(sub.Secret) })
		if err != nil {
			l.reject(err)
			return
		}
		l.add(id, importID, time.Now(), stored)
	}); err != nil {
		return fmt.Errorf("%s: consume: %w", name, err)
	}
	shapes := []struct {
		name  string
		shape Shape
	}{
		{"paced", Shape{Mode: Open, Rate: r.o.BrokerRate, Duration: r.o.Duration, MaxInFlight: 1024}},
		{"closed", Shape{Mode: Closed, Conns: r.o.Conns, Duration: r.o.Duration}},
	}
	for _, s := range shapes {
		log := newReadLog()
		current.Store(log)
		ph := r.brokerPhase(ctx, co, log, s.shape, fmt.Sprintf("%s-%d-%s", name, run, s.name))
		ph.Name = s.name
		br.Phases = append(br.Phases, ph)
		r.o.Log("%s %s: %d accepted, %d read, %.0f events/s, publish→read p50 %.1f p99 %.1f ms, %d missing, %d duplicates, %d rejected",
			name, s.name, ph.Accepted, ph.Read, ph.PerSec, ph.ToRead.P50, ph.ToRead.P99, ph.Missing, ph.Duplicates, ph.Rejected)
		res.OK += ph.Accepted
		for k, v := range ph.Errors {
			if res.Errors == nil {
				res.Errors = map[string]int{}
			}
			res.Errors[k] += v
		}
	}
	return nil
}

// brokerPhase publishes with shape, waits up to the drain bound for the
// consumer to read every accepted event, and counts.
func (r *runner) brokerPhase(ctx context.Context, co *Company, log *readLog, shape Shape, prefix string) BrokerPhase {
	pub := newPublishLog()
	rec := NewRecorder()
	Drive(ctx, shape, rec, r.eventCall(co, prefix, pub))
	accepted, due := pub.snapshot()
	last := time.Now()
	drained := WaitFor(ctx, r.o.Drain, func() bool { return log.missing(accepted) == 0 })
	ph := BrokerPhase{Load: shape.String(), Accepted: rec.Count(), Errors: rec.Errors(), Publish: rec.Latencies(),
		Drained: drained, DrainedIn: time.Since(last).Seconds()}
	t := log.tally(accepted, due)
	ph.Read, ph.Missing, ph.Duplicates, ph.Rejected = t.Read, t.Missing, t.Duplicates, t.Rejected
	ph.RejectReason = t.RejectReason
	ph.ToRead, ph.ToStored, ph.PerSec = Summarise(t.ToRead), Summarise(t.ToStored), t.perSecond()
	return ph
}
