package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// slowClient is a client on a raw connection that sends a request's
// headers at once and then drips its body.
type slowClient struct {
	t    *testing.T
	conn net.Conn
	sent atomic.Int64 // body bytes written so far
}

// dialSlow sends method path with headers and a body of len(body) bytes,
// the body written step bytes at a time every pause, in the background.
func dialSlow(t *testing.T, h *apitest.Harness, method, path string, header http.Header, body string, step int, pause time.Duration) *slowClient {
	t.Helper()
	conn, err := net.Dial("tcp", h.Server.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); _ = conn.Close() })
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: gateway.test\r\nContent-Length: %d\r\n", method, path, len(body))
	for k, vs := range header {
		for _, v := range vs {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
	}
	head.WriteString("\r\n")
	if _, err := io.WriteString(conn, head.String()); err != nil {
		t.Fatal(err)
	}
	c := &slowClient{t: t, conn: conn}
	go func() {
		for i := 0; i < len(body); i += step {
			if _, err := io.WriteString(conn, body[i:min(i+step, len(body))]); err != nil {
				return // the server gave up on us
			}
			c.sent.Store(int64(min(i+step, len(body))))
			select {
			case <-time.After(pause):
			case <-stop:
				return
			}
		}
	}()
	return c
}

// answer reads the server's answer (nil when it closed the connection
// without one); waiting is bounded so a server that never gives up fails
// the test instead of hanging it.
func (c *slowClient) answer() *http.Response {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(c.conn), nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			c.t.Fatalf("the server still held the connection after 2 minutes")
		}
		return nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

// TestSlowClientsAreCutOff drips bodies to a real listener: a JSON request
// is cut off at its read deadline long before its body is complete, a
// multipart send (an upload) gets the longer upload deadline and is
// answered on its content.
func TestSlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{Configure: func(c *config.Config) {
			c.HTTP.ReadTimeout = 500 * time.Millisecond
			c.HTTP.UploadTimeout = time.Minute
		}})
		ten := h.Tenant("Acme")
		auth := http.Header{"Authorization": {"Bearer " + ten.Token}, "Content-Type": {"application/json"}}

		// 1,000 bytes at one byte per 100 ms would take 100 s.
		body := `{"name":"` + strings.Repeat("a", 980) + `","url":"http://x"}`
		slow := dialSlow(t, h, "POST", "/api/channel-webhooks", auth, body[:1000], 1, 100*time.Millisecond)
		resp := slow.answer()
		if sent := slow.sent.Load(); sent >= 1000 {
			t.Fatalf("the dripped JSON body was read to its end (%d bytes)", sent)
		}
		if resp != nil && resp.StatusCode != 422 {
			t.Fatalf("dripped JSON body: status %d, want 422 or a closed connection", resp.StatusCode)
		}

		// A multipart send dripped over about 3 s, past the 500 ms read
		// timeout, is read to its end and answered on its fields.
		form := "--b\r\nContent-Disposition: form-data; name=\"platform\"\r\n\r\nchatapp\r\n" +
			"--b\r\nContent-Disposition: form-data; name=\"sender_key\"\r\n\r\n5511988887777\r\n" +
			"--b\r\nContent-Disposition: form-data; name=\"contact_key\"\r\n\r\n5511977776666\r\n" +
			"--b\r\nContent-Disposition: form-data; name=\"contact_is_group\"\r\n\r\nfalse\r\n" +
			"--b\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nhello\r\n--b--\r\n"
		upload := dialSlow(t, h, "POST", "/api/api-send-message",
			http.Header{"Authorization": {"Bearer " + ten.Token}, "Content-Type": {"multipart/form-data; boundary=b"}},
			form, len(form)/30+1, 100*time.Millisecond)
		resp = upload.answer()
		if resp == nil || resp.StatusCode != 509 {
			t.Fatalf("dripped multipart send: %v, want its 509 answer (unknown sender)", resp)
		}
	})
}

// TestInFlightBound holds requests open on a real listener: a token (or an
// address) with its bound of requests in progress gets 429 with
// Retry-After until one of them ends.
func TestInFlightBound(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{Configure: func(c *config.Config) {
			c.HTTP.MaxPerToken, c.HTTP.MaxPerIP = 1, 2
			// The held requests must outlive the test's waits on a loaded
			// machine: the default read and answer deadlines would end them.
			c.HTTP.ReadTimeout, c.HTTP.WriteTimeout, c.HTTP.UploadTimeout = 10*time.Minute, 10*time.Minute, 10*time.Minute
		}})
		a, b := h.Tenant("Acme"), h.Tenant("Beta")
		// The probe is a send the validator refuses (509): it documents 429
		// and spends no rate limit, so the only 429 it can get is the bound's.
		probe := func(token string) *apitest.Response {
			return h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: token, JSON: map[string]any{}})
		}
		hold := func(token string) *slowClient {
			// A body that never completes keeps the request in progress.
			return dialSlow(t, h, "POST", "/api/channel-webhooks",
				http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}, `{"name":"held"}`, 1, time.Hour)
		}
		refused := func(what string, token string) {
			t.Helper()
			var resp *apitest.Response
			eventually(t, what+" refused", func() bool { resp = probe(token); return resp.Status == 429 })
			if resp.Header.Get("Retry-After") != "1" || resp.Map(t)["message"] != "Too many requests in progress; retry shortly." {
				t.Fatalf("%s: Retry-After %q, body %s", what, resp.Header.Get("Retry-After"), resp.Body)
			}
		}

		heldA := hold(a.Token)
		refused("a second request of token A", a.Token)
		if resp := probe(b.Token); resp.Status != 509 {
			t.Fatalf("token B with one request of the address in progress: status %d", resp.Status)
		}
		heldB := hold(b.Token)
		refused("a third request from the address", "")
		_ = heldA.conn.Close()
		_ = heldB.conn.Close()
		eventually(t, "token A served again", func() bool { return probe(a.Token).Status == 509 })
	})
}
