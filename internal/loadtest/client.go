package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

func (c *Client) base() string {
	if len(c.bases) == 1 {
		return c.bases[0]
	}
	return c.bases[(c.next.Add(1)-1)%uint64(len(c.bases))]
}

// Do sends one request and returns the status and the body.
func (c *Client) Do(ctx context.Context, method, path, token string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base()+path, rd)
	if err != nil {
		return 0, nil, err
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
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
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
	status, b, err := c.Do(ctx, method, path, token, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
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
