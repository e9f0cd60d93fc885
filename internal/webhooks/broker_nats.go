package webhooks

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsTransport publishes a delivery to a JetStream subject. Success is the
// stream's publish acknowledgement (PubAck); Nats-Msg-Id is the delivery
// id, so the stream stores a retried attempt once (within its duplicate
// window).
type natsTransport struct {
	s    *Service
	pool *connPool[*natsConn]
}

type natsConn struct {
	nc *nats.Conn
	js jetstream.JetStream
}

func (c *natsConn) alive() bool { return !c.nc.IsClosed() }
func (c *natsConn) close()      { c.nc.Close() }

type natsDialer func(network, addr string) (net.Conn, error)

func (d natsDialer) Dial(network, addr string) (net.Conn, error) { return d(network, addr) }

func newNATSTransport(s *Service) *natsTransport {
	guarded := guardedDial(s.guard)
	return &natsTransport{s: s, pool: newConnPool(func(ctx context.Context, d destination) (*natsConn, error) {
		// The client reports any failed dial as "no servers"; the dial's
		// own error says whether it was refused or not allowed.
		var dialErr atomic.Pointer[error]
		dial := natsDialer(func(network, addr string) (net.Conn, error) {
			c, err := guarded(network, addr)
			dialErr.Store(&err)
			return c, err
		})
		nc, err := nats.Connect(d.server,
			nats.Name("chat-gateway webhooks"),
			nats.SetCustomDialer(dial),
			nats.Timeout(brokerDialTimeout),
			// Servers a cluster advertises were not given by the tenant
			// and are not checked at create; only the URL's host is used.
			nats.IgnoreDiscoveredServers(),
			// While reconnecting, a publish fails at once rather than
			// waiting in a buffer: the attempt is retried on the schedule.
			nats.ReconnectBufSize(-1),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(500*time.Millisecond),
		)
		if last := dialErr.Load(); errors.Is(err, nats.ErrNoServers) && last != nil && *last != nil {
			return nil, *last
		}
		if err != nil {
			return nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, err
		}
		return &natsConn{nc: nc, js: js}, nil
	})}
}

func (n *natsTransport) deliver(ctx context.Context, t subscriptionRow, d Delivery, attempt int) outcome {
	return n.s.brokerDeliver(ctx, t, d, attempt, classifyNATS, func(actx context.Context, dest destination) error {
		c, err := n.pool.get(actx, dest.server, dest)
		if err != nil {
			return err
		}
		m := NATSMessage(dest.subject, t.Secret, t.SignatureScheme, d, attempt, n.s.now())
		_, err = c.js.PublishMsg(actx, m, jetstream.WithMsgID(d.ID))
		return err
	})
}

// NATSMessage is the JetStream message of attempt number attempt of d to
// subject at time now: the envelope bytes with the signed headers of scheme
// (SignedHeaders) and Nats-Msg-Id = the delivery id. deliver publishes
// exactly this; it is exported so the message contract
// (contracttests/webhookevents) checks what subscribers receive from
// the same construction.
func NATSMessage(subject, secret, scheme string, d Delivery, attempt int, now time.Time) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = d.Body
	for k, v := range SignedHeaders(secret, scheme, d, attempt, now) {
		m.Header[k] = v
	}
	m.Header.Set(jetstream.MsgIDHeader, d.ID)
	return m
}

// classifyNATS turns a failed connect or publish into its fixed text. Every
// refusal is retried on the schedule: a stream or a permission may be added
// meanwhile, and disabling ends a destination that never works.
func classifyNATS(err error) (string, bool) {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrPermissionViolation):
		return msgBrokerAuth, true
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return msgBrokerNoStream, true
	case errors.As(err, &apiErr):
		return msgBrokerRefused, true
	case errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrDisconnected):
		// ErrNoServers wraps the dial's cause; a refused or unresolvable
		// host reads as for webhooks.
		if msg, retry := classifyError(err); msg == MsgDestinationRefused || msg == msgRefused {
			return msg, retry
		}
		return msgBrokerUnreach, true
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return msgTimeout, true
	}
	return classifyError(err)
}
