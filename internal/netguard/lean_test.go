package netguard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loopbackLean is a lean client allowed to dial loopback.
func loopbackLean(timeout time.Duration) (*http.Client, *leanTransport) {
	c := New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}).NewClient(ClientOptions{Timeout: timeout, Lean: true})
	return c, c.Transport.(*leanTransport)
}

// countingServer answers every request with answer and counts the
// connections it accepted and the request bodies it read.
func countingServer(t *testing.T, answer http.HandlerFunc, tlsServer bool) (srv *httptest.Server, conns *atomic.Int32, bodies func() []string) {
	t.Helper()
	conns = &atomic.Int32{}
	var mu sync.Mutex
	var got []string
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		answer(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	if tlsServer {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, conns, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

func post(t *testing.T, c *http.Client, url, body string, readAll bool) (int, string) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	var b []byte
	if readAll {
		b, _ = io.ReadAll(resp.Body)
	} else {
		b = make([]byte, 1)
		_, _ = io.ReadFull(resp.Body, b)
	}
	_ = resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestLeanKeepsConnections: answers read to their end leave the connection
// for the next request, whatever their framing; an answer left unread or
// one that says "close" does not.
func TestLeanKeepsConnections(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		answer    http.HandlerFunc
		tls       bool
		readAll   bool
		wantConns int32
	}{
		{"content length", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }, false, true, 1},
		{"no content", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }, false, true, 1},
		{"chunked", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "o")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "k")
		}, false, true, 1},
		{"server error", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusInternalServerError) }, false, true, 1},
		{"over TLS", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }, true, true, 1},
		{"answer left unread", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, strings.Repeat("x", 64<<10)) }, false, false, 5},
		{"connection: close", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "ok")
		}, false, true, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, conns, bodies := countingServer(t, c.answer, c.tls)
			client, lt := loopbackLean(5 * time.Second)
			if c.tls {
				lt.tlsConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
			}
			for i := range 5 {
				code, _ := post(t, client, srv.URL, fmt.Sprint(`{"n":`, i, `}`), c.readAll)
				if code == 0 {
					t.Fatal("no answer")
				}
			}
			if got := conns.Load(); got != c.wantConns {
				t.Fatalf("%d connections for 5 requests, want %d", got, c.wantConns)
			}
			if got := bodies(); len(got) != 5 || got[4] != `{"n":4}` {
				t.Fatalf("the receiver read %q", got)
			}
		})
	}
}

// TestLeanResendsOnAClosedConnection: a kept connection the receiver closes
// as the next request arrives (its idle timeout racing the request) fails
// before any answer; the request is sent once more, on a new connection.
func TestLeanResendsOnAClosedConnection(t *testing.T) {
	t.Parallel()
	var answered atomic.Int32
	url, accepted := rawServer(t, func(c net.Conn, n int) {
		answering(c, func(i int) (answer, keep bool) {
			if n == 0 && i == 1 {
				return false, false // closed under the second request, unanswered
			}
			answered.Add(1)
			return true, true
		})
	})
	client, _ := loopbackLean(5 * time.Second)
	post(t, client, url, "one", true)
	if code, body := post(t, client, url, "two", true); code != 200 || body != "ok" {
		t.Fatalf("after the close: %d %q", code, body)
	}
	if n, c := answered.Load(), accepted(); n != 2 || c != 2 {
		t.Fatalf("%d answered on %d connections, want 2 on 2", n, c)
	}
}

// TestLeanDropsAnIdleConnection: a kept connection the receiver closed
// while it was idle, or wrote to unasked (a 408 before closing it), is not
// used again, and the unasked answer is never taken for the next
// request's: that request goes on a new connection.
func TestLeanDropsAnIdleConnection(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		turn func(c net.Conn, n, i int) (answer, keep bool)
	}{
		{"closed by the receiver", func(net.Conn, int, int) (bool, bool) { return true, false }},
		{"answered unasked", func(c net.Conn, n, i int) (bool, bool) {
			if n == 0 && i == 0 {
				time.AfterFunc(20*time.Millisecond, func() {
					_, _ = io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
				})
			}
			return true, true
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, accepted := rawServer(t, func(c net.Conn, n int) {
				answering(c, func(i int) (bool, bool) { return tc.turn(c, n, i) })
			})
			client, _ := loopbackLean(5 * time.Second)
			post(t, client, url, "one", true)
			time.Sleep(100 * time.Millisecond) // the close or the 408 reaches the client
			if code, body := post(t, client, url, "two", true); code != 200 || body != "ok" {
				t.Fatalf("the next request: %d %q", code, body)
			}
			if n := accepted(); n != 2 {
				t.Fatalf("%d connections, want 2", n)
			}
		})
	}
}

// TestLeanSilentReceiver: a receiver that accepts and never answers ends
// the request at its timeout or when its context is cancelled, and each
// waiting request holds one goroutine: its caller's.
func TestLeanSilentReceiver(t *testing.T) {
	t.Parallel()
	url, accepted := rawServer(t, func(net.Conn, int) {}) // read nothing, answer nothing
	t.Run("timeout", func(t *testing.T) {
		client, _ := loopbackLean(200 * time.Millisecond)
		_, err := client.Post(url, "application/json", strings.NewReader("{}"))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("err %v, want a timeout", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		client, _ := loopbackLean(time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		if _, err := client.Do(req); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	})
	t.Run("one goroutine per waiting request", func(t *testing.T) {
		client, _ := loopbackLean(time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		const n = 200
		before := runtime.NumGoroutine()
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
				if resp, err := client.Do(req); err == nil {
					_ = resp.Body.Close()
				}
			})
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			if accepted() >= n+2 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // every request written and waiting
		extra := runtime.NumGoroutine() - before
		cancel()
		wg.Wait()
		if extra > n+n/10 {
			t.Fatalf("%d waiting requests hold %d goroutines, want about one each", n, extra)
		}
	})
}

// rawServer accepts loopback connections and hands each to serve with its
// number (0 first) in a goroutine of its own; the listener and every
// connection are closed at the test's end. It returns the base URL and how
// many connections were accepted so far.
func rawServer(t *testing.T, serve func(c net.Conn, n int)) (url string, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			n := len(conns) - 1
			mu.Unlock()
			go serve(c, n)
		}
	}()
	return "http://" + ln.Addr().String() + "/", func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }
}

// answering reads requests on c and answers each 200 "ok" as turn says,
// given the request's number on c: whether to answer it, and whether to
// keep c for another afterwards (c is closed when not).
func answering(c net.Conn, turn func(i int) (answer, keep bool)) {
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; ; i++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		answer, keep := turn(i)
		if answer {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
		if !keep {
			return
		}
	}
}

// TestLeanRefusesOtherSchemes: only http and https are spoken.
func TestLeanRefusesOtherSchemes(t *testing.T) {
	t.Parallel()
	client, _ := loopbackLean(time.Second)
	if _, err := client.Get("ftp://127.0.0.1/x"); err == nil {
		t.Fatal("an ftp URL was requested")
	}
}
