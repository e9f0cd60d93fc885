package netguard

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// leanTransport is an HTTP/1.1 RoundTripper for clients that keep many
// requests waiting on receivers that are slow or silent (webhook
// deliveries). net/http's Transport gives every connection a read and a
// write goroutine and two 4 KB buffers for its whole life: about 31 KB
// per request that waits on a silent receiver, measured, so a thousand
// such receivers held ~100 MB of a replica's memory. Here a request holds
// only its caller's goroutine and its socket while it waits: the request
// is written through a pooled buffer, the wait for the answer reads one
// byte straight from the socket, and the read buffer is taken from the
// pool only once the answer has begun. About 6 KB per waiting request.
//
// What it leaves out, on purpose: HTTP/2 (receivers are asked for
// HTTP/1.1 over TLS), proxies (never used, see the package comment),
// pipelining, and 100-continue. Keep-alive is kept: idle connections are
// pooled per host; one is peeked at before it is used again (quiet), so
// one the receiver closed or wrote to unasked is dropped; and a request on
// a reused connection that the receiver closes under it is sent once more
// on a new one, as net/http does for a request that can be rewound.
type leanTransport struct {
	dialer      *net.Dialer
	tlsConfig   *tls.Config
	timeout     time.Duration // bounds a request, with its context's deadline
	maxIdleHost int
	maxIdle     int
	idleTimeout time.Duration

	mu    sync.Mutex
	idle  map[string][]idleConn // newest last
	total int
}

type idleConn struct {
	c     net.Conn
	since time.Time
}

var (
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}
)

func newLeanTransport(dialer *net.Dialer, timeout time.Duration, maxIdleHost int) *leanTransport {
	return &leanTransport{dialer: dialer, timeout: timeout, maxIdleHost: maxIdleHost, maxIdle: maxIdleHost * 4,
		idleTimeout: 90 * time.Second, idle: map[string][]idleConn{},
		tlsConfig: &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}}
}

// errStale is a reused connection that failed before any byte of the
// answer: the receiver had closed it while it was idle.
var errStale = errors.New("reused connection closed before the answer")

func (t *leanTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		closeBody(req)
		return nil, fmt.Errorf("unsupported scheme %q", req.URL.Scheme)
	}
	ctx := req.Context()
	// The bound is the connection's deadline, not a context of our own:
	// the answer's body is read after RoundTrip returns, within it.
	deadline, _ := ctx.Deadline()
	if t.timeout > 0 {
		if d := time.Now().Add(t.timeout); deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
	}
	key := req.URL.Scheme + "://" + hostPort(req.URL.Scheme, req.URL.Host)
	for retried := false; ; retried = true {
		// The resend goes on a new connection: another kept one may be as
		// stale as the first.
		var c net.Conn
		reused := false
		if !retried {
			c, reused = t.take(key)
		}
		if c == nil {
			var err error
			if c, err = t.dial(ctx, deadline, req.URL.Scheme, req.URL.Host); err != nil {
				closeBody(req)
				return nil, err
			}
		}
		resp, err := t.exchange(ctx, deadline, key, c, req)
		if err == nil {
			return resp, nil
		}
		if !reused || retried || !errors.Is(err, errStale) || req.GetBody == nil {
			return nil, err
		}
		body, gerr := req.GetBody()
		if gerr != nil {
			return nil, err
		}
		r := *req
		r.Body = body
		req = &r
	}
}

// exchange writes req on c and reads the head of its answer. On success
// the answer's body owns c: closing it gives c back to the pool, or
// closes it.
func (t *leanTransport) exchange(ctx context.Context, deadline time.Time, key string, c net.Conn, req *http.Request) (*http.Response, error) {
	_ = c.SetDeadline(deadline)
	// A cancelled context ends a wait at once, without a goroutine of its
	// own: AfterFunc runs only when it fires.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = c.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return nil, err
	}
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(c)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	writers.Put(bw)
	if err != nil {
		return fail(staleIf(err))
	}
	// The wait for the answer: one byte, no buffer held.
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		return fail(staleIf(err))
	}
	br := readers.Get().(*bufio.Reader)
	br.Reset(io.MultiReader(strings.NewReader(string(first[:])), c))
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(br, req)
		if err != nil {
			br.Reset(nil)
			readers.Put(br)
			return fail(err)
		}
		// Informational answers (102, 103) precede the real one.
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	resp.Body = &leanBody{ReadCloser: resp.Body, t: t, key: key, c: c, br: br, stop: stop,
		keep: !resp.Close && !req.Close}
	return resp, nil
}

// staleIf marks an error of the write or of the wait for the first byte
// that says the receiver closed the connection (not a timeout).
func staleIf(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe") {
		return fmt.Errorf("%w: %w", errStale, err)
	}
	return err
}

// leanBody is an answer's body: read to its end and closed, its
// connection goes back to the pool.
type leanBody struct {
	io.ReadCloser
	t    *leanTransport
	key  string
	c    net.Conn
	br   *bufio.Reader
	stop func() bool
	keep bool
	eof  bool
	done bool
}

func (b *leanBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, errors.New("read on a closed answer body")
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *leanBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	// A body not read to its end is not drained here (net/http's Close
	// would read it all, up to the deadline): its connection is closed.
	var err error
	reusable := false
	if b.eof {
		err = b.ReadCloser.Close()
		reusable = b.keep && err == nil && b.br.Buffered() == 0 && b.stop()
	}
	b.br.Reset(nil)
	readers.Put(b.br)
	if !reusable {
		b.stop()
		return errors.Join(err, b.c.Close())
	}
	_ = b.c.SetDeadline(time.Time{})
	b.t.put(b.key, b.c)
	return nil
}

func (t *leanTransport) dial(ctx context.Context, deadline time.Time, scheme, host string) (net.Conn, error) {
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	addr := hostPort(scheme, host)
	c, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil || scheme != "https" {
		return c, err
	}
	name, _, _ := net.SplitHostPort(addr)
	cfg := t.tlsConfig.Clone()
	cfg.ServerName = name
	tc := tls.Client(c, cfg)
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return tc, nil
}

// take returns an idle connection to key, newest first, closing those
// idle too long.
func (t *leanTransport) take(key string) (net.Conn, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.idle[key]
	for len(list) > 0 {
		ic := list[len(list)-1]
		list = list[:len(list)-1]
		t.total--
		if time.Since(ic.since) < t.idleTimeout && quiet(ic.c) {
			t.setIdle(key, list)
			return ic.c, true
		}
		_ = ic.c.Close()
	}
	t.setIdle(key, list)
	return nil, false
}

// put keeps c for the next request to key, within the bounds per host
// and in all; the oldest idle connections give way.
func (t *leanTransport) put(key string, c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := append(t.idle[key], idleConn{c: c, since: time.Now()})
	t.total++
	for len(list) > t.maxIdleHost {
		_ = list[0].c.Close()
		list = list[1:]
		t.total--
	}
	t.setIdle(key, list)
	if t.total > t.maxIdle {
		t.evictOldest()
	}
}

func (t *leanTransport) setIdle(key string, list []idleConn) {
	if len(list) == 0 {
		delete(t.idle, key)
		return
	}
	t.idle[key] = list
}

// evictOldest closes idle connections that outlived idleTimeout, and the
// oldest of all while there are more than maxIdle.
func (t *leanTransport) evictOldest() {
	for t.total > t.maxIdle {
		oldestKey := ""
		var oldest time.Time
		for k, list := range t.idle {
			if oldestKey == "" || list[0].since.Before(oldest) {
				oldestKey, oldest = k, list[0].since
			}
		}
		list := t.idle[oldestKey]
		_ = list[0].c.Close()
		t.total--
		t.setIdle(oldestKey, list[1:])
	}
}

// CloseIdleConnections closes every pooled connection (http.Client calls
// it from its own CloseIdleConnections).
func (t *leanTransport) CloseIdleConnections() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, list := range t.idle {
		for _, ic := range list {
			_ = ic.c.Close()
		}
		delete(t.idle, k)
	}
	t.total = 0
}

func hostPort(scheme, host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if scheme == "https" {
		return net.JoinHostPort(host, "443")
	}
	return net.JoinHostPort(host, "80")
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
