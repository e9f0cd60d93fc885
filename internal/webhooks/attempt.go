package webhooks

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/netguard"
)

// loadTarget reads what an attempt needs, nothing more. It is the one place
// the delivery path reads a subscription's signing secret.
func (s *Service) loadTarget(ctx context.Context, id int64) (subscriptionRow, error) {
	var row subscriptionRow
	err := s.db.Bun.NewSelect().Model(&row).
		Column("id", "url", "destination", "secret", "signature_scheme", "enabled", "failure_count", "last_success_at", "last_failure_at").
		Where("id = ?", id).Limit(1).Scan(ctx)
	if err != nil {
		return row, err
	}
	// An unreadable secret (SECRETS_KEY missing or without the value's key)
	// is a configuration fault: the deliveries wait, due, until it is
	// fixed, rather than spending their attempts.
	if row.Secret, err = s.signingSecret(row.Secret); err != nil {
		return row, fmt.Errorf("subscription %d signing secret: %w", id, err)
	}
	if row.Destination != "" {
		if row.URL, err = s.keyring.Open(destinationColumn.Purpose(), row.Destination); err != nil {
			return row, fmt.Errorf("subscription %d destination: %w", id, err)
		}
		row.Destination = ""
	}
	return row, nil
}

// outcome is the verdict on one attempt.
type outcome struct {
	status   int // 0 when there was no answer
	message  string
	success  bool
	duration time.Duration
	// retryable failures get another attempt (until the last one).
	retryable bool
	// answered: a broker answered without accepting the message (refused
	// credentials, no stream or exchange): it is up, for the breaker, as an
	// HTTP 4xx is. HTTP outcomes say it with status.
	answered bool
	// interrupted: the job's context ended (shutdown) mid-attempt.
	interrupted bool
}

func (o outcome) ok() bool { return o.success }

// Delivery-log texts of attempts without an answer. They are shown to the
// tenant, so they name no address of ours: the cause goes to the server
// log only.
const (
	// MsgDestinationRefused is the one text for a destination the SSRF
	// guard refuses and for a host name that does not resolve: a tenant
	// must not learn which names resolve inside our network.
	MsgDestinationRefused = "destination refused: the host is not allowed or could not be resolved (an operator can allow private or loopback addresses with OUTBOUND_ALLOW_CIDRS)"
	msgTimeout            = "timeout: no answer within 10 seconds"
	msgRefused            = "connection refused"
	msgReset              = "connection closed before an answer"
	msgTLS                = "TLS handshake failed"
	msgRequestFailed      = "request failed"
	msgInvalidURL         = "invalid url"
)

// send makes the HTTP attempt and classifies its result.
func (h httpTransport) deliver(ctx context.Context, t subscriptionRow, d Delivery, attempt int) outcome {
	s := h.s
	reqCtx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	req, err := NewSignedDeliveryRequest(reqCtx, t.URL, t.Secret, t.SignatureScheme, d, attempt, s.now())
	if err != nil {
		return outcome{message: msgInvalidURL}
	}
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		o := outcome{duration: time.Since(start)}
		if ctx.Err() != nil {
			o.interrupted = true
			return o
		}
		o.message, o.retryable = classifyError(err)
		level := slog.LevelDebug
		if o.message == MsgDestinationRefused {
			level = slog.LevelWarn
		}
		s.log.Log(ctx, level, "webhooks: attempt without an answer", "subscription_id", t.ID,
			"delivery_id", d.ID, "attempt", attempt, "err", err)
		return o
	}
	// Drain a little so the connection can be reused; the body is not used.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	o := outcome{status: resp.StatusCode, duration: time.Since(start)}
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		o.success = true
	case code >= 400 && code < 500 && code != 408 && code != 429:
		o.message = fmt.Sprintf("HTTP %d: client error, not retried", code)
	default:
		o.retryable, o.message = true, fmt.Sprintf("HTTP %d", code)
	}
	s.metrics.duration.Observe(o.duration.Seconds())
	return o
}

// classifyError turns a failed request into its tenant-visible text and
// whether another attempt may help. A refused destination and a name that
// does not exist are final (retrying cannot change where the URL points); a
// resolver that failed for now is retried, under the same text.
func classifyError(err error) (message string, retryable bool) {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var ne net.Error
	switch {
	case errors.Is(err, netguard.ErrBlocked):
		return MsgDestinationRefused, false
	case errors.As(err, &dnsErr):
		return MsgDestinationRefused, dnsErr.IsTemporary || dnsErr.IsTimeout
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return msgTimeout, true
	case errors.Is(err, syscall.ECONNREFUSED):
		return msgRefused, true
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return msgReset, true
	case errors.As(err, &opErr) && opErr.Op == "remote error", isTLSError(err):
		return msgTLS, true
	default:
		return msgRequestFailed, true
	}
}

func isTLSError(err error) bool {
	var cv *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	return errors.As(err, &cv) || errors.As(err, &rh)
}

type logRow struct {
	bun.BaseModel  `bun:"table:webhook_delivery_log"`
	ID             int64      `bun:"id,pk,autoincrement"`
	SubscriptionID int64      `bun:"subscription_id"`
	DeliveryID     string     `bun:"delivery_id"`
	Event          string     `bun:"event"`
	Attempt        int        `bun:"attempt"`
	StatusCode     int        `bun:"status_code"`
	Succeeded      bool       `bun:"succeeded"`
	DurationMs     int64      `bun:"duration_ms"`
	Error          *string    `bun:"error"`
	DeliveredAt    *time.Time `bun:"delivered_at"`
	NextRetryAt    *time.Time `bun:"next_retry_at"`
	CreatedAt      time.Time  `bun:"created_at"`
}
