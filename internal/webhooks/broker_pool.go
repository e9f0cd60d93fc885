package webhooks

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatmsg/gateway/internal/netguard"
)

// brokerConn is a pooled connection to one broker destination.
type brokerConn interface {
	alive() bool
	close()
}

// connPool keeps one connection per destination key, opened on first use
// and closed after brokerIdle without use. Dialing holds only that
// destination's entry, so a broker that does not answer delays the attempts
// of the lanes sending to it and nobody else's.
type connPool[C brokerConn] struct {
	dial func(ctx context.Context, d destination) (C, error)

	mu        sync.Mutex
	entries   map[string]*poolEntry[C]
	lastSweep time.Time
}

type poolEntry[C brokerConn] struct {
	// sem is held while the connection is checked or dialled; a channel so
	// a waiting attempt gives up with its context.
	sem  chan struct{}
	conn C
	ok   bool
	used atomic.Int64 // unix nanoseconds of the last get
}

func newConnPool[C brokerConn](dial func(ctx context.Context, d destination) (C, error)) *connPool[C] {
	return &connPool[C]{dial: dial, entries: map[string]*poolEntry[C]{}}
}

// get returns the open connection of key, dialling it when there is none
// or it died.
func (p *connPool[C]) get(ctx context.Context, key string, d destination) (C, error) {
	var zero C
	now := time.Now()
	p.mu.Lock()
	e := p.entries[key]
	if e == nil {
		if len(p.entries) >= brokerPoolSize {
			p.evictLocked()
		}
		e = &poolEntry[C]{sem: make(chan struct{}, 1)}
		p.entries[key] = e
	}
	e.used.Store(now.UnixNano())
	if now.Sub(p.lastSweep) > brokerIdle/4 {
		p.lastSweep = now
		p.sweepLocked(now)
	}
	p.mu.Unlock()

	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	defer func() { <-e.sem }()
	if e.ok && e.conn.alive() {
		return e.conn, nil
	}
	if e.ok {
		e.conn.close()
		e.ok = false
	}
	c, err := p.dial(ctx, d)
	if err != nil {
		return zero, err
	}
	e.conn, e.ok = c, true
	return c, nil
}

// sweepLocked closes the connections unused for brokerIdle. An entry being
// dialled is skipped (it is in use).
func (p *connPool[C]) sweepLocked(now time.Time) {
	for key, e := range p.entries {
		if now.Sub(time.Unix(0, e.used.Load())) < brokerIdle {
			continue
		}
		select {
		case e.sem <- struct{}{}:
			if e.ok {
				go e.conn.close()
			}
			delete(p.entries, key)
			<-e.sem
		default:
		}
	}
}

// evictLocked closes the least recently used connection to make room.
func (p *connPool[C]) evictLocked() {
	var oldestKey string
	oldest := int64(1<<63 - 1)
	for key, e := range p.entries {
		if u := e.used.Load(); u < oldest {
			oldest, oldestKey = u, key
		}
	}
	if e := p.entries[oldestKey]; e != nil {
		select {
		case e.sem <- struct{}{}:
			if e.ok {
				go e.conn.close()
			}
			<-e.sem
		default:
		}
		delete(p.entries, oldestKey)
	}
}

func (p *connPool[C]) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, e := range p.entries {
		select {
		case e.sem <- struct{}{}:
			if e.ok {
				e.conn.close()
			}
			<-e.sem
		default:
		}
		delete(p.entries, key)
	}
}

// brokerDialTimeout bounds opening a broker connection (TCP and the
// protocol's handshake), well within the attempt's 10 s.
const brokerDialTimeout = 5 * time.Second

// guardedDial dials through the SSRF guard, as webhook requests do: the
// address is checked after DNS, at connect time.
func guardedDial(guard *netguard.Guard) func(network, addr string) (net.Conn, error) {
	return func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: brokerDialTimeout, Control: guard.Control}
		c, err := d.Dial(network, addr)
		if err != nil {
			return nil, err
		}
		// The handshake must finish in time too; the client clears the
		// deadline once the connection is open.
		_ = c.SetDeadline(time.Now().Add(brokerDialTimeout))
		return c, nil
	}
}
