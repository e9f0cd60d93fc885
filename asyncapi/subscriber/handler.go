package subscriber

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/chatmsg/gateway/gen/events"
)

// DefaultMaxBodyBytes bounds the body the Handler reads (1 MiB; the
// service's events are a few kilobytes).
const DefaultMaxBodyBytes = 1 << 20

// More errors of Handler.Receive (besides those of Verify).
var (
	// ErrMalformedDelivery: the signature is valid but the body is not an
	// envelope of the AsyncAPI document, its data does not decode into the
	// event's type, or X-Svc-Event / X-Svc-Delivery disagree with the
	// envelope.
	ErrMalformedDelivery = errors.New("subscriber: malformed delivery")
	// ErrInProgress: another request is processing the same delivery.
	ErrInProgress = errors.New("subscriber: delivery is being processed by another request")
)

// Delivery is one verified, decoded event.
type Delivery struct {
	// ID is the delivery id (X-Svc-Delivery and the envelope's delivery_id),
	// the same on every retry: the idempotency key.
	ID string
	// Attempt is X-Svc-Attempt, 1 to 5 (0 when absent).
	Attempt int
	// Event is the event name, e.g. events.OmnichatMessageReceived.
	Event       string
	CompanyID   int64
	OccurredAt  time.Time
	Description string
	// Data is a pointer to the event's payload type generated from the
	// AsyncAPI document (events.NewData), e.g. *events.MessageReceivedPayload
	// for events.OmnichatMessageReceived; nil for an event this version of
	// the package does not know (RawData still holds it).
	Data any
	// RawData is the envelope's data as received.
	RawData json.RawMessage
}

// HandlerFunc processes one delivery. It runs before the Handler answers
// the service, which waits 10 seconds at most: do quick work here (store,
// enqueue) and the rest afterwards. An error answers 500, which the
// service retries.
type HandlerFunc func(ctx context.Context, d *Delivery) error

// Handler is an http.Handler that receives the service's webhook
// deliveries: it verifies the signature and timestamp, decodes the
// envelope and the event's data, skips deliveries already processed
// (X-Svc-Delivery is the idempotency key) and dispatches each event to the
// function registered for its name. Events without a function, including
// events added to the catalog after this version, are acknowledged and
// ignored, as the AsyncAPI document asks of receivers.
//
// Answers: 204 processed, duplicate or ignored; 401 bad signature or
// timestamp (not retried by the service); 400 malformed delivery; 413 body
// over the limit; 405 not a POST; 503 the same delivery is in progress and
// 500 the function failed (both retried by the service).
type Handler struct {
	secrets   []string
	tolerance time.Duration
	now       func() time.Time
	seen      Seen
	maxBody   int64
	onError   func(*http.Request, error)

	mu       sync.RWMutex
	handlers map[string]HandlerFunc
}

// Option configures a Handler.
type Option func(*Handler)

// WithTolerance sets the accepted distance between X-Svc-Timestamp and
// the receiver's clock (DefaultTolerance by default).
func WithTolerance(d time.Duration) Option { return func(h *Handler) { h.tolerance = d } }

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(h *Handler) { h.now = now } }

// WithSeen replaces the in-memory idempotency store, e.g. with one shared
// by every replica of the receiver.
func WithSeen(s Seen) Option { return func(h *Handler) { h.seen = s } }

// WithMaxBodyBytes bounds the request body (DefaultMaxBodyBytes by default).
func WithMaxBodyBytes(n int64) Option { return func(h *Handler) { h.maxBody = n } }

// WithErrorLog receives every delivery the Handler refused or failed, with
// the reason (the answer itself carries only a short text).
func WithErrorLog(f func(*http.Request, error)) Option { return func(h *Handler) { h.onError = f } }

// WithPreviousSecret also accepts deliveries signed with secret. The
// service signs with the new secret as soon as it is rotated; accepting
// both while the new one is rolled out to the receivers avoids refusing
// deliveries in between. Remove it once the rollout is done.
func WithPreviousSecret(secret string) Option {
	return func(h *Handler) { h.secrets = append(h.secrets, secret) }
}

// NewHandler returns a Handler verifying with secret, the subscription's
// signing secret returned by create and rotate-secret.
func NewHandler(secret string, opts ...Option) *Handler {
	h := &Handler{secrets: []string{secret}, now: time.Now, maxBody: DefaultMaxBodyBytes, handlers: map[string]HandlerFunc{}}
	for _, o := range opts {
		o(h)
	}
	if h.seen == nil {
		h.seen = NewMemorySeen(DefaultSeenTTL, h.now)
	}
	return h
}

// On registers fn for the named event (an events constant), replacing any
// earlier registration. d.Data holds the type events.NewData(event)
// returns; Handle gives it typed.
func (h *Handler) On(event string, fn HandlerFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handlers[event] = fn
}

// Handle registers fn for the named event with its data typed: T must be
// the event's payload type in gen/events (events.MessageReceivedPayload for
// events.OmnichatMessageReceived, …). A mismatch is a programming error and
// panics at registration, not at the first delivery.
func Handle[T any](h *Handler, event string, fn func(ctx context.Context, d *Delivery, data *T) error) {
	if _, ok := events.NewData(event).(*T); !ok {
		panic(fmt.Sprintf("subscriber: %s carries %T, not *%s", event, events.NewData(event), reflect.TypeFor[T]()))
	}
	h.On(event, func(ctx context.Context, d *Delivery) error { return fn(ctx, d, d.Data.(*T)) })
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.answer(w, r, http.StatusMethodNotAllowed, "method not allowed", nil)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.answer(w, r, http.StatusRequestEntityTooLarge, "body too large", err)
			return
		}
		h.answer(w, r, http.StatusBadRequest, "unreadable body", err)
		return
	}
	err = h.Receive(r.Context(), r.Header, body)
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, ErrMissingSignature), errors.Is(err, ErrMalformedTimestamp),
		errors.Is(err, ErrSignatureMismatch), errors.Is(err, ErrTimestampOutOfTolerance):
		h.answer(w, r, http.StatusUnauthorized, "invalid signature", err)
	case errors.Is(err, ErrMalformedDelivery):
		h.answer(w, r, http.StatusBadRequest, "malformed delivery", err)
	case errors.Is(err, ErrInProgress):
		w.Header().Set("Retry-After", "10")
		h.answer(w, r, http.StatusServiceUnavailable, "delivery in progress", err)
	default:
		// The function's error text stays in the log: it may say more
		// about the receiver than the sender should learn.
		h.answer(w, r, http.StatusInternalServerError, "processing failed", err)
	}
}

func (h *Handler) answer(w http.ResponseWriter, r *http.Request, status int, text string, err error) {
	if h.onError != nil && err != nil {
		h.onError(r, err)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text+"\n")
}

// Receive is ServeHTTP without HTTP: it verifies, decodes, deduplicates
// and dispatches one delivery given its headers and raw body, for
// receivers built on another server framework or a queue. A nil error
// means acknowledge (processed, duplicate or ignored).
func (h *Handler) Receive(ctx context.Context, header http.Header, rawBody []byte) error {
	if err := h.verify(header, rawBody); err != nil {
		return err
	}
	d, err := Decode(header, rawBody)
	if err != nil {
		return err
	}
	h.mu.RLock()
	fn := h.handlers[d.Event]
	h.mu.RUnlock()
	if fn == nil {
		return nil
	}
	switch claim, err := h.seen.Claim(ctx, d.ID); {
	case err != nil:
		return fmt.Errorf("subscriber: claim delivery %s: %w", d.ID, err)
	case claim == AlreadyDone:
		return nil
	case claim == InProgress:
		return fmt.Errorf("%w: %s", ErrInProgress, d.ID)
	}
	if err := fn(ctx, d); err != nil {
		if rerr := h.seen.Release(ctx, d.ID); rerr != nil {
			err = errors.Join(err, fmt.Errorf("release delivery %s: %w", d.ID, rerr))
		}
		return fmt.Errorf("subscriber: %s handler for delivery %s: %w", d.Event, d.ID, err)
	}
	if err := h.seen.Complete(ctx, d.ID); err != nil {
		// Processed but not recorded: answering an error makes the service
		// retry, which is the at-least-once side of the trade-off.
		return fmt.Errorf("subscriber: complete delivery %s: %w", d.ID, err)
	}
	return nil
}

// verify tries every accepted secret. An authentic delivery with a bad
// timestamp reports that, whatever the other secrets say.
func (h *Handler) verify(header http.Header, body []byte) error {
	var first error
	for _, s := range h.secrets {
		// Either signature scheme: the subscription's signature_scheme decides.
		err := VerifyAny(s, header, body, h.now(), h.tolerance)
		if err == nil || errors.Is(err, ErrTimestampOutOfTolerance) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// Decode decodes a delivery whose signature was already verified: the
// envelope, then the event's data into its gen/events type. Fields the
// types do not know are ignored (the service may add fields at any time);
// X-Svc-Event and X-Svc-Delivery, when present, must equal the envelope's
// event and delivery_id (the headers are not signed, the body is).
func Decode(header http.Header, rawBody []byte) (*Delivery, error) {
	var env events.Envelope
	if err := json.Unmarshal(rawBody, &env); err != nil {
		return nil, fmt.Errorf("%w: envelope: %v", ErrMalformedDelivery, err)
	}
	if env.Event == "" || env.DeliveryID == "" {
		return nil, fmt.Errorf("%w: envelope without event or delivery_id", ErrMalformedDelivery)
	}
	if v := header.Get(HeaderEvent); v != "" && v != env.Event {
		return nil, fmt.Errorf("%w: %s %q but envelope event %q", ErrMalformedDelivery, HeaderEvent, v, env.Event)
	}
	if v := header.Get(HeaderDelivery); v != "" && v != env.DeliveryID {
		return nil, fmt.Errorf("%w: %s %q but envelope delivery_id %q", ErrMalformedDelivery, HeaderDelivery, v, env.DeliveryID)
	}
	at, err := time.Parse(time.RFC3339, env.OccurredAt)
	if err != nil {
		return nil, fmt.Errorf("%w: occurred_at %q: %v", ErrMalformedDelivery, env.OccurredAt, err)
	}
	d := &Delivery{ID: env.DeliveryID, Event: env.Event, CompanyID: env.CompanyID, OccurredAt: at,
		Description: env.Description, RawData: env.Data}
	d.Attempt, _ = strconv.Atoi(header.Get(HeaderAttempt))
	if data := events.NewData(env.Event); data != nil {
		raw := bytes.TrimSpace(env.Data)
		if len(raw) == 0 || raw[0] != '{' {
			return nil, fmt.Errorf("%w: %s data is not an object", ErrMalformedDelivery, env.Event)
		}
		if err := json.Unmarshal(raw, data); err != nil {
			return nil, fmt.Errorf("%w: %s data: %v", ErrMalformedDelivery, env.Event, err)
		}
		d.Data = data
	}
	return d, nil
}
