package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Client speaks the gateway's public API as a client program would: JSON
// over HTTP/1.1 with keep-alive and a bearer token. With several base URLs
// (replicas) it takes them in turn, as a round-robin load balancer would.
type Client struct {
	bases []string
	next  atomic.Uint64
	HTTP  *http.Client
}

// NewClient returns a client of bases whose connection pool does not
// limit the load it is asked to offer.
func NewClient(bases ...string) *Client {
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second,
		DisableCompression: true}
	return &Client{bases: bases, HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// TenantClient is a client whose connections come from a loopback
// address of tenant n's own (127.0.x.y, x.y from n), as different
// companies' programs connect from different hosts: the gateway's
// in-flight limit per client address then counts each tenant apart.
func TenantClient(n int, bases ...string) *Client {
	c := NewClient(bases...)
	src := &net.TCPAddr{IP: net.IPv4(127, 0, byte(1+n/250), byte(2+n%250))}
	c.HTTP.Transport.(*http.Transport).DialContext = (&net.Dialer{LocalAddr: src, Timeout: 30 * time.Second,
		KeepAlive: 30 * time.Second}).DialContext
	return c
}

func (c *Client) base() string {
	if len(c.bases) == 1 {
		return c.bases[0]
	}
	return c.bases[(c.next.Add(1)-1)%uint64(len(c.bases))]
}

// Do sends one request and returns the status and the body.
func (c *Client) Do(ctx context.Context, method, path, token string, body []byte) (int, []byte, error) {
	status, b, _, err := c.do(ctx, method, path, token, body)
	return status, b, err
}

// DoHeaders sends one request without a token, with the given headers
// (a provider's signed webhook), and returns the status and the body.
func (c *Client) DoHeaders(ctx context.Context, method, path string, body []byte, headers map[string]string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base()+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// limitedError is a 429 answer and the wait its Retry-After asks for.
type limitedError struct {
	err  error
	wait time.Duration
}

func (e *limitedError) Error() string { return e.err.Error() }

func (c *Client) do(ctx context.Context, method, path, token string, body []byte) (int, []byte, time.Duration, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base()+path, rd)
	if err != nil {
		return 0, nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	wait := time.Second
	if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
		wait = time.Duration(s) * time.Second
	}
	return resp.StatusCode, b, wait, err
}

// JSON sends in (unless nil) and decodes a 2xx answer into out (unless
// nil); any other answer is an error with its body.
func (c *Client) JSON(ctx context.Context, method, path, token string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	status, b, retry, err := c.do(ctx, method, path, token, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if status == http.StatusTooManyRequests {
		return &limitedError{fmt.Errorf("%s %s: %d %s", method, path, status, b), retry}
	}
	if status/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decode %q: %w", method, path, b, err)
		}
	}
	return nil
}

// outcome names a request's result for the error table: "" for 2xx, the
// status otherwise, "transport" when no answer came.
func outcome(status int, err error) string {
	switch {
	case err != nil:
		return "transport"
	case status/100 == 2:
		return ""
	default:
		return strconv.Itoa(status)
	}
}
