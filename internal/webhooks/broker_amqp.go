package webhooks

import (
	"context"
	"errors"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// amqpTransport publishes a delivery to a RabbitMQ exchange with its
// routing key. Success is the broker's publisher confirm; the message id is
// the delivery id, so a consumer can drop a retried attempt it already has.
type amqpTransport struct {
	s    *Service
	pool *connPool[*amqpConn]
}

// amqpConn is one connection with one channel in confirm mode. A channel
// the broker closes (a missing exchange closes it with 404) is replaced at
// the next attempt; it is kept per destination (exchange included), so one
// subscription's missing exchange never closes another's channel.
type amqpConn struct {
	conn *amqp.Connection
	ch   *amqp.Channel

	mu     sync.Mutex
	closed chan *amqp.Error
	reason *amqp.Error
}

func (c *amqpConn) alive() bool { return !c.conn.IsClosed() && !c.ch.IsClosed() }
func (c *amqpConn) close()      { _ = c.conn.Close() }

// closeReason is why the broker closed the channel, if it did. The channel
// sends it before it fails the pending confirms, so an attempt that sees
// its confirm fail finds it here.
func (c *amqpConn) closeReason() *amqp.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case e, ok := <-c.closed:
		if ok && e != nil {
			c.reason = e
		}
	default:
	}
	return c.reason
}

func newAMQPTransport(s *Service) *amqpTransport {
	dial := guardedDial(s.guard)
	return &amqpTransport{s: s, pool: newConnPool(func(ctx context.Context, d destination) (*amqpConn, error) {
		conn, err := amqp.DialConfig(d.server, amqp.Config{
			Dial:       dial,
			Heartbeat:  10 * time.Second,
			Properties: amqp.Table{"connection_name": "chat-gateway webhooks"},
		})
		if err != nil {
			return nil, err
		}
		ch, err := conn.Channel()
		if err == nil {
			err = ch.Confirm(false)
		}
		if err != nil {
			_ = conn.Close()
			return nil, err
		}
		return &amqpConn{conn: conn, ch: ch, closed: ch.NotifyClose(make(chan *amqp.Error, 1))}, nil
	})}
}

func (a *amqpTransport) deliver(ctx context.Context, t subscriptionRow, d Delivery, attempt int) outcome {
	return a.s.brokerDeliver(ctx, t, d, attempt, classifyAMQP, func(actx context.Context, dest destination) error {
		// One connection per exchange: the key is the server and the exchange.
		c, err := a.pool.get(actx, dest.server+"\x00"+dest.exchange, dest)
		if err != nil {
			return err
		}
		now := a.s.now()
		headers := amqp.Table{}
		for k, v := range SignedHeaders(t.Secret, t.SignatureScheme, d, attempt, now) {
			if len(v) > 0 {
				headers[k] = v[0]
			}
		}
		dc, err := c.ch.PublishWithDeferredConfirmWithContext(actx, dest.exchange, dest.routingKey, false, false, amqp.Publishing{
			Headers: headers, ContentType: "application/json", DeliveryMode: amqp.Persistent,
			MessageId: d.ID, Type: d.Event, Timestamp: now, AppId: UserAgent, Body: d.Body,
		})
		if err != nil {
			if r := c.closeReason(); r != nil {
				return r
			}
			return err
		}
		acked, err := dc.WaitContext(actx)
		switch {
		case err != nil:
			return err
		case !acked:
			if r := c.closeReason(); r != nil {
				return r
			}
			return errNack
		}
		return nil
	})
}

var errNack = errors.New("amqp: publish nacked")

// classifyAMQP turns a failed dial or publish into its fixed text; every
// refusal is retried on the schedule (see classifyNATS).
func classifyAMQP(err error) (string, bool) {
	var ae *amqp.Error
	switch {
	case errors.Is(err, errNack):
		return msgBrokerNack, true
	case errors.Is(err, amqp.ErrCredentials), errors.Is(err, amqp.ErrSASL):
		return msgBrokerAuth, true
	case errors.As(err, &ae):
		switch ae.Code {
		case amqp.AccessRefused, amqp.NotAllowed:
			return msgBrokerAuth, true
		case amqp.NotFound:
			return msgBrokerNoExchange, true
		case amqp.ChannelError, amqp.ConnectionForced, amqp.FrameError:
			return msgBrokerUnreach, true
		}
		if errors.Is(err, amqp.ErrClosed) {
			return msgBrokerUnreach, true
		}
		return msgBrokerRefused, true
	case errors.Is(err, context.DeadlineExceeded):
		return msgTimeout, true
	}
	msg, retry := classifyError(err)
	if msg == msgRequestFailed || msg == msgReset {
		return msgBrokerUnreach, true
	}
	return msg, retry
}
