package webhooks

import (
	"context"
	"log/slog"
	"time"
)

// transport makes one attempt of a delivery to a subscription's
// destination and says how it went. It is the only part of delivery that
// depends on the URL's scheme: the lane, its breaker, the retry schedule,
// the log, redelivery, recover and disabling are the same for all of them
// (issue 27).
type transport interface {
	deliver(ctx context.Context, t subscriptionRow, d Delivery, attempt int) outcome
}

// httpTransport POSTs the delivery (attempt.go).
type httpTransport struct{ s *Service }

// send makes one attempt through the transport of t's URL.
func (s *Service) send(ctx context.Context, t subscriptionRow, d Delivery, attempt int) outcome {
	var tr transport = httpTransport{s}
	switch kindOf(t.URL) {
	case kindNATS:
		tr = s.brokers.nats
	case kindAMQP:
		tr = s.brokers.amqp
	}
	return tr.deliver(ctx, t, d, attempt)
}

// brokerInFlight is the in-flight bound of a broker destination's lane.
// The document's 8 protects a receiver's HTTP server; a broker takes
// publishes on one connection and acknowledges them at its own pace, and 8
// at a time held one JetStream subject or RabbitMQ exchange to about 1,200
// events/s (issue 27 asks 2,000). It still starts at one and doubles on
// each acknowledgement, and the breaker halves it on each failure.
const brokerInFlight = 64

// boundOf is the in-flight bound of t's lane.
func (s *Service) boundOf(t subscriptionRow) int {
	if kindOf(t.URL) == kindHTTP {
		return s.perSubscription
	}
	return max(s.perSubscription, brokerInFlight)
}

// Delivery-log texts of broker attempts without an acknowledgement. Fixed,
// like the HTTP ones: they name no address and echo nothing the broker
// said, whose text may carry internal names.
const (
	msgBrokerAuth       = "broker refused the credentials"
	msgBrokerNoStream   = "broker refused: no JetStream stream stores the subject"
	msgBrokerNoExchange = "broker refused: the exchange does not exist"
	msgBrokerNack       = "broker did not confirm the message"
	msgBrokerRefused    = "broker refused the message"
	msgBrokerUnreach    = "broker unreachable"
)

// brokerIdle is how long an unused broker connection is kept open.
const brokerIdle = 2 * time.Minute

// brokerPoolSize bounds the broker connections a replica keeps per broker
// kind; past it the least recently used is closed.
const brokerPoolSize = 512

// brokerTransports are the pools of broker connections, one connection per
// destination: a broker that does not answer holds only the attempts of
// the lanes that send to it.
type brokerTransports struct {
	nats *natsTransport
	amqp *amqpTransport
}

func newBrokerTransports(s *Service) brokerTransports {
	return brokerTransports{nats: newNATSTransport(s), amqp: newAMQPTransport(s)}
}

func (b brokerTransports) close() {
	b.nats.pool.closeAll()
	b.amqp.pool.closeAll()
}

// brokerDeliver is what the broker transports' attempts share: the
// destination from the URL, the attempt's deadline, and the outcome: a
// failure classified to its fixed text and logged (or interrupted, when the
// caller is stopping), a success timed. publish is the transport's own
// part, given the attempt's context.
func (s *Service) brokerDeliver(ctx context.Context, t subscriptionRow, d Delivery, attempt int,
	classify func(error) (string, bool), publish func(actx context.Context, dest destination) error) outcome {
	dest, msg := parseDestination(t.URL)
	if msg != "" {
		return outcome{message: msgInvalidURL}
	}
	actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	start := time.Now()
	if err := publish(actx, dest); err != nil {
		o := outcome{duration: time.Since(start)}
		if ctx.Err() != nil {
			o.interrupted = true
			return o
		}
		o.message, o.retryable = classify(err)
		o.answered = brokerAnswered(o.message)
		s.logBroker(ctx, t, d, attempt, o.message, err)
		return o
	}
	o := outcome{success: true, duration: time.Since(start)}
	s.metrics.duration.Observe(o.duration.Seconds())
	return o
}

// logBroker logs the cause of a failed broker attempt for the operator; the
// tenant sees only the fixed text.
func (s *Service) logBroker(ctx context.Context, t subscriptionRow, d Delivery, attempt int, msg string, err error) {
	level := slog.LevelDebug
	if msg == MsgDestinationRefused || msg == msgBrokerAuth {
		level = slog.LevelWarn
	}
	s.log.Log(ctx, level, "webhooks: broker attempt not acknowledged", "subscription_id", t.ID,
		"delivery_id", d.ID, "attempt", attempt, "text", msg, "err", err)
}

// brokerAnswered: the text is of a broker that answered (it is up).
func brokerAnswered(msg string) bool {
	switch msg {
	case msgBrokerAuth, msgBrokerNoStream, msgBrokerNoExchange, msgBrokerNack, msgBrokerRefused:
		return true
	}
	return false
}
