package official

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
)

// ClientOptions tune the provider client; zero values are the defaults.
type ClientOptions struct {
	// HTTP is the client to use (default: a plain client; the provider's
	// base URL is set by an administrator, not by API users, so it does not
	// go through the SSRF guard).
	HTTP *http.Client
	// Concurrency is how many calls the caller makes at once (the send
	// queue's slots): the default client keeps as many connections open to
	// the provider, so that a busy queue does not open and close them
	// (default 32).
	Concurrency int
	// SendTimeout bounds one send or upload (default 30 s).
	SendTimeout time.Duration
	// ReadTimeout bounds one read (template list page, media download;
	// default 30 s).
	ReadTimeout time.Duration
	// ReadAttempts is how often an idempotent read is tried (default 3).
	ReadAttempts int
	// Backoff is the wait before the second read attempt, doubled after
	// each (default 200 ms).
	Backoff time.Duration
	Logger  *slog.Logger
	// Registerer receives the provider call metrics (none when nil).
	Registerer prometheus.Registerer
}

// Client speaks the provider's Cloud-API-style HTTP interface for one
// account at a time. Sends are never retried here (the platform has no
// idempotency key, a retry after a lost answer could send twice); queued
// sends are retried by their job. Reads are retried on 5xx, 429 and
// network errors.
type Client struct {
	http     *http.Client
	opts     ClientOptions
	duration *prometheus.HistogramVec
}

// NewClient returns a provider client.
func NewClient(opts ClientOptions) *Client {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 32
	}
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: opts.Concurrency, IdleConnTimeout: 90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: time.Minute,
		}}
	}
	if opts.SendTimeout <= 0 {
		opts.SendTimeout = 30 * time.Second
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 30 * time.Second
	}
	if opts.ReadAttempts <= 0 {
		opts.ReadAttempts = 3
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 200 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Client{http: opts.HTTP, opts: opts, duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "gateway_provider_request_duration_seconds", Help: "Calls to the official provider, by call and result (2xx, 4xx, 5xx, error).",
		Buckets: prometheus.DefBuckets,
	}, []string{"call", "result"})}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(c.duration)
	}
	return c
}

// callName labels a provider request by what it does, never by ids.
func callName(req *http.Request) string {
	switch p := req.URL.Path; {
	case strings.HasSuffix(p, "/messages"):
		return "messages"
	case strings.HasSuffix(p, "/media"):
		return "media_upload"
	case strings.HasSuffix(p, "/message_templates"):
		return "templates"
	}
	return "media_download"
}

// errTooLarge is an answer longer than the caller accepts; never retried.
var errTooLarge = errors.New("provider answer too large")

// errNoAnswer marks a failure after the whole request was written (or
// while it was being written, when the call was abandoned): the provider
// may have acted on it. It covers no answer at all, an answer cut off or
// unreadable, and a 5xx without the provider's error object, which comes
// from something in front of the provider rather than from the provider.
// The provider's own 5xx (its error object, code 2 "Please retry your
// request", is_transient) says the request was not processed and is not
// marked.
var errNoAnswer = errors.New("no usable answer to a request the provider may have received")

// callTrace follows one call through the transport: whether the request
// was (or may be being) written on a connection. Its hooks run on the
// transport's goroutines.
type callTrace struct {
	mu       sync.Mutex
	onConn   bool // a connection was obtained for the request
	writeErr bool // writing the request on it failed: it never arrived whole
}

func (ct *callTrace) hooks() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			// The transport may take another connection after one that
			// failed before anything was written: it starts over.
			ct.mu.Lock()
			ct.onConn, ct.writeErr = true, false
			ct.mu.Unlock()
		},
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			ct.mu.Lock()
			ct.writeErr = i.Err != nil
			ct.mu.Unlock()
		},
	}
}

// mayHaveArrived reports whether the provider may have the whole request:
// written, or still being written when the call ended (the write's own
// report can come after the transport gave up). A request that never got a
// connection (DNS, dial, TLS, pool) or whose write failed did not arrive:
// the provider, which reads the declared length, cannot act on part of it.
func (ct *callTrace) mayHaveArrived() bool {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.onConn && !ct.writeErr
}

// answerLimit bounds a JSON answer of the provider.
const answerLimit = 8 << 20

// APIError is a provider error answer.
type APIError struct {
	Status int
	Body   ErrorObject
}

func (e *APIError) Error() string {
	return fmt.Sprintf("provider answered %d: code %d: %s (%s)", e.Status, e.Body.Code, e.Body.Message, e.Body.ErrorData.Details)
}

// Details is the client-safe reason of a refusal, as the send endpoint's
// `details` carries it: the provider's code, title and reason.
func (e *APIError) Details() map[string]any {
	d := map[string]any{"code": e.Body.Code, "title": e.Body.Message}
	reason := e.Body.ErrorData.Details
	if reason == "" {
		reason = e.Body.Message
	}
	d["reason"] = reason
	return d
}

// temporary reports provider answers worth retrying: server errors and
// throttling (HTTP 429, or the platform's rate-limit codes).
func (e *APIError) temporary() bool {
	switch e.Body.Code {
	case 4, 80007, 130429, 131016, 131048, 131056:
		return true
	}
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests
}

// classify turns a transport or provider error into a fault: refusals are
// Refused with the provider's reason (refusedMsg is the client message),
// the rest Unavailable.
func classify(err error, refusedMsg string) error {
	if errors.Is(err, errTooLarge) {
		return fault.Wrap(fault.Refused, "The media is larger than the service accepts", err)
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		if apiErr.temporary() {
			return fault.Wrap(fault.Unavailable, "The provider is unavailable, try again later", err)
		}
		return &fault.Error{Kind: fault.Refused, Message: refusedMsg, Details: apiErr.Details(), Err: err}
	}
	return fault.Wrap(fault.Unavailable, "The provider could not be reached", err)
}

// outcomeUnknown is the error of a send the provider may have taken
// without saying so.
func outcomeUnknown(err error) error {
	return fault.Wrap(fault.Unavailable, "The provider did not answer whether it accepted the message",
		fmt.Errorf("%w: %w", messaging.ErrOutcomeUnknown, err))
}

func accountURL(acc *channels.ProviderAccount, parts ...string) string {
	u := strings.TrimRight(acc.BaseURL, "/")
	for _, p := range parts {
		u += "/" + url.PathEscape(p)
	}
	return u
}

// do sends one request and decodes a 2xx JSON answer into out (raw keeps
// the undecoded body). Non-2xx answers are *APIError. A failure after the
// provider may have received the request wraps errNoAnswer.
func (c *Client) do(ctx context.Context, acc *channels.ProviderAccount, req *http.Request, out any, raw *[]byte, maxBody int64) error {
	req.Header.Set("Accept", "application/json")
	var trace callTrace
	resp, err := c.call(httptrace.WithClientTrace(ctx, trace.hooks()), acc, req)
	if err != nil {
		if trace.mayHaveArrived() {
			return fmt.Errorf("%w: %w", errNoAnswer, err)
		}
		return err
	}
	defer resp.Body.Close()
	// A refusal (4xx) is one whatever its body; an acceptance or a server
	// error that cannot be read says nothing.
	refusal := resp.StatusCode >= 400 && resp.StatusCode <= 499
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err == nil && int64(len(body)) > maxBody {
		err = fmt.Errorf("%w (%d bytes)", errTooLarge, maxBody)
	}
	if err != nil {
		if !refusal {
			return fmt.Errorf("%w: answer %d: %w", errNoAnswer, resp.StatusCode, err)
		}
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		apiErr := &APIError{Status: resp.StatusCode}
		var eb ErrorBody
		if json.Unmarshal(body, &eb) == nil && (eb.Error.Code != 0 || eb.Error.Message != "") {
			apiErr.Body = eb.Error
		} else {
			apiErr.Body.Message = http.StatusText(resp.StatusCode)
			if !refusal {
				return fmt.Errorf("%w: %w", errNoAnswer, apiErr)
			}
		}
		return apiErr
	}
	if raw != nil {
		*raw = body
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("%w: decode provider answer: %w", errNoAnswer, err)
		}
	}
	return nil
}

// call sends req with the account's token and times it by call and status
// class; the caller reads and closes the answer.
func (c *Client) call(ctx context.Context, acc *channels.ProviderAccount, req *http.Request) (*http.Response, error) {
	req.Header.Set("Authorization", "Bearer "+acc.AccessToken)
	start := time.Now()
	resp, err := c.http.Do(req.WithContext(ctx))
	if err != nil {
		c.duration.WithLabelValues(callName(req), "error").Observe(time.Since(start).Seconds())
		return nil, err
	}
	c.duration.WithLabelValues(callName(req), fmt.Sprintf("%dxx", resp.StatusCode/100)).Observe(time.Since(start).Seconds())
	return resp, nil
}

// read performs an idempotent GET with retries.
func (c *Client) read(ctx context.Context, acc *channels.ProviderAccount, u string, out any, raw *[]byte, maxBody int64) error {
	wait := c.opts.Backoff
	var err error
	for attempt := 1; attempt <= c.opts.ReadAttempts; attempt++ {
		err = func() error {
			rctx, cancel := context.WithTimeout(ctx, c.opts.ReadTimeout)
			defer cancel()
			req, err := http.NewRequest(http.MethodGet, u, nil)
			if err != nil {
				return err
			}
			return c.do(rctx, acc, req, out, raw, maxBody)
		}()
		var apiErr *APIError
		if err == nil || (errors.As(err, &apiErr) && !apiErr.temporary()) || errors.Is(err, errTooLarge) || ctx.Err() != nil {
			return err
		}
		if attempt < c.opts.ReadAttempts {
			c.opts.Logger.DebugContext(ctx, "provider read failed, retrying", "url", u, "attempt", attempt, "err", err)
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return ctx.Err()
			}
			wait *= 2
		}
	}
	return err
}

// SendMessage posts one message. It returns the provider's answer and its
// raw JSON (Data.raw). Errors: Refused with the provider's details,
// Unavailable for the provider's 5xx, throttling and network failures
// before the request arrived; Unavailable wrapping
// messaging.ErrOutcomeUnknown when the provider may have the message but
// its answer was lost (see errNoAnswer).
func (c *Client) SendMessage(ctx context.Context, acc *channels.ProviderAccount, body SendRequest) (SendResponse, map[string]any, error) {
	body.MessagingProduct = "whatsapp"
	b, err := json.Marshal(body)
	if err != nil {
		return SendResponse{}, nil, fault.Internalf(err, "encode send")
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.SendTimeout)
	defer cancel()
	req, err := http.NewRequest(http.MethodPost, accountURL(acc, acc.PhoneNumberID, "messages"), bytes.NewReader(b))
	if err != nil {
		return SendResponse{}, nil, fault.Internalf(err, "build send request")
	}
	req.Header.Set("Content-Type", "application/json")
	var out SendResponse
	var raw []byte
	if err := c.do(ctx, acc, req, &out, &raw, answerLimit); err != nil {
		if errors.Is(err, errNoAnswer) {
			return SendResponse{}, nil, outcomeUnknown(err)
		}
		return SendResponse{}, nil, classify(err, "The provider refused the message")
	}
	// The answer already decoded into out; the raw map is what clients see
	// of it, and stays nil for an answer that is not an object.
	var rawMap map[string]any
	_ = json.Unmarshal(raw, &rawMap)
	return out, rawMap, nil
}

// UploadMedia uploads size bytes of file for a later send and returns its
// media id. The file is streamed into the request between the form's
// other parts, which are built ahead, so the request has its length and no
// copy of the file is made: a document may be 100 MB.
// Errors: Refused, Unavailable; Internal for a file shorter or longer
// than size.
func (c *Client) UploadMedia(ctx context.Context, acc *channels.ProviderAccount, fileName, contentType string, size int64, file io.Reader) (string, error) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, fileName))
	h.Set("Content-Type", contentType)
	err := errors.Join(mw.WriteField("messaging_product", "whatsapp"), mw.WriteField("type", contentType))
	if err == nil {
		_, err = mw.CreatePart(h) // the part's headers; its bytes are the file's
	}
	// The closing boundary, as mw.Close would write it after the file.
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	if err != nil {
		return "", fault.Internalf(err, "build upload")
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.SendTimeout+time.Duration(size/(256<<10))*time.Second)
	defer cancel()
	length := int64(head.Len()) + size + int64(len(tail))
	body := io.MultiReader(&head, io.LimitReader(file, size), strings.NewReader(tail))
	req, err := http.NewRequest(http.MethodPost, accountURL(acc, acc.PhoneNumberID, "media"), body)
	if err != nil {
		return "", fault.Internalf(err, "build upload")
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var out MediaUploadResponse
	if err := c.do(ctx, acc, req, &out, nil, answerLimit); err != nil {
		return "", classify(err, "The provider refused the media")
	}
	if out.ID == "" {
		return "", fault.New(fault.Unavailable, "The provider answered the upload without a media id")
	}
	return out.ID, nil
}

// ListTemplates reads every template of the account's business account,
// following the pagination cursors. Errors: Refused, Unavailable.
func (c *Client) ListTemplates(ctx context.Context, acc *channels.ProviderAccount) ([]Template, error) {
	var all []Template
	next := accountURL(acc, acc.BusinessAccountID, "message_templates") + "?limit=100"
	for page := 0; next != "" && page < 1000; page++ {
		var p TemplatePage
		if err := c.read(ctx, acc, next, &p, nil, answerLimit); err != nil {
			return nil, classify(err, "The provider refused the template listing")
		}
		all = append(all, p.Data...)
		next = ""
		if p.Paging.Next != "" && p.Paging.Cursors.After != "" {
			next = accountURL(acc, acc.BusinessAccountID, "message_templates") + "?limit=100&after=" + url.QueryEscape(p.Paging.Cursors.After)
		}
	}
	return all, nil
}

// DescribeMedia reads the provider's description of media a contact
// sent (its URL, type and size), refusing media over limit.
// Errors: Refused, Unavailable.
func (c *Client) DescribeMedia(ctx context.Context, acc *channels.ProviderAccount, mediaID string, limit int64) (MediaInfo, error) {
	var info MediaInfo
	if err := c.read(ctx, acc, accountURL(acc, mediaID), &info, nil, answerLimit); err != nil {
		return info, classify(err, "The provider refused the media")
	}
	if info.URL == "" {
		return info, fault.New(fault.Refused, "The provider gave no media URL")
	}
	if int64(info.FileSize) > limit {
		return info, fault.New(fault.Refused, "The media is larger than the service accepts")
	}
	return info, nil
}

// DownloadMedia reads the bytes of a described media URL whole (at most
// limit), with retries: for a description without a size to stream it by
// (OpenMedia). Errors: Refused, Unavailable.
func (c *Client) DownloadMedia(ctx context.Context, acc *channels.ProviderAccount, u string, limit int64) ([]byte, error) {
	var data []byte
	if err := c.read(ctx, acc, u, nil, &data, limit); err != nil {
		return nil, classify(err, "The provider refused the media")
	}
	return data, nil
}

// OpenMedia streams the bytes of a described media URL; the caller reads
// and closes them. No retry: the reader may be half read when it fails,
// and the caller's job tries again from the description (whose URL
// expires). Errors: Refused for the provider's 4xx, Unavailable.
func (c *Client) OpenMedia(ctx context.Context, acc *channels.ProviderAccount, u string) (io.ReadCloser, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, fault.Internalf(err, "build media download")
	}
	resp, err := c.call(ctx, acc, req)
	if err != nil {
		return nil, classify(err, "The provider refused the media")
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_ = resp.Body.Close()
		apiErr := &APIError{Status: resp.StatusCode}
		apiErr.Body.Message = http.StatusText(resp.StatusCode)
		return nil, classify(apiErr, "The provider refused the media")
	}
	return resp.Body, nil
}

// The provider's real API: the Graph host and the version of the published
// document this client is written against (internal/providersim/testdata).
// An account's base URL is GraphURL/GraphVersion unless an administrator
// sets another (the simulator).
const (
	GraphURL     = "https://graph.facebook.com"
	GraphVersion = "v23.0"
)
