package webhooks

import (
	"context"
	"sync"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/fault"
)

// The event log (issue 27): the outbox rows kept after their fan-out,
// numbered by seq in the order they became visible, for the live stream
// (internal/eventstream). This package owns the table; the stream reads it
// through these functions only.

// EventLogRetention is how long a fanned-out event stays in the log: a
// stream resumes from Last-Event-ID within it, the redelivery retention of
// delivered events.
const EventLogRetention = RedeliverDeliveredFor

// LoggedEvent is one event of the log.
type LoggedEvent struct {
	Seq              int64
	Name             string
	CompanyID        int64
	CompanyChannelID *int64
	// Envelope is the event's JSON without a delivery_id (a stream has no
	// delivery).
	Envelope []byte
}

// EventLogAfter returns up to limit events of the log after seq, oldest
// first; companyID 0 reads every company's (the replica's shared tail).
// ping (a subscription's test) is not an event of the company's stream and
// is left out.
func (s *Service) EventLogAfter(ctx context.Context, companyID, seq int64, limit int) ([]LoggedEvent, error) {
	var rows []eventRow
	q := s.db.Bun.NewSelect().Model(&rows).Column("seq", "event", "company_id", "company_channel_id", "envelope").
		Where("seq > ?", seq).Where("event <> ?", events.Ping).OrderExpr("seq").Limit(int64(limit))
	if companyID != 0 {
		q = q.Where("company_id = ?", companyID)
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fault.Internalf(err, "read event log")
	}
	out := make([]LoggedEvent, len(rows))
	for i, r := range rows {
		out[i] = LoggedEvent{Seq: *r.Seq, Name: r.Event, CompanyID: r.CompanyID, CompanyChannelID: r.CompanyChannelID,
			Envelope: []byte(r.Envelope)}
	}
	return out, nil
}

// EventLogHead is the highest seq of the log (0 when empty).
func (s *Service) EventLogHead(ctx context.Context) (int64, error) {
	var head int64
	err := s.db.Bun.NewSelect().Model((*eventRow)(nil)).ColumnExpr("COALESCE(MAX(seq), 0)").Scan(ctx, &head)
	if err != nil {
		return 0, fault.Internalf(err, "read event log head")
	}
	return head, nil
}

// Logged returns a channel closed when this replica's fan-out numbers new
// events (replaced by a fresh one at each close): the in-process wake of
// the stream's tail; events fanned out by other replicas are found by its
// poll.
func (s *Service) Logged() <-chan struct{} {
	s.logged.mu.Lock()
	defer s.logged.mu.Unlock()
	if s.logged.ch == nil {
		s.logged.ch = make(chan struct{})
	}
	return s.logged.ch
}

type loggedSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *Service) signalLogged() {
	s.logged.mu.Lock()
	defer s.logged.mu.Unlock()
	if s.logged.ch != nil {
		close(s.logged.ch)
		s.logged.ch = nil
	}
}

// SetStreamAudience tells Listens about the live streams open on this
// replica: a publisher that skips an event nobody subscribes to must not
// skip one a stream of the company is reading.
func (s *Service) SetStreamAudience(f func(companyID int64) bool) { s.streamAudience.Store(&f) }

func (s *Service) streamListens(companyID int64) bool {
	f := s.streamAudience.Load()
	return f != nil && (*f)(companyID)
}

// eventLogPoll is how often a stream's tail looks for events other
// replicas fanned out.
const EventLogPoll = 100 * time.Millisecond

// ForgetCompanyEvents deletes a company's event log (its outbox rows, fanned
// out or not), for a company being removed: the log is kept for stream
// resume, not for a company that no longer exists, and its rows name the
// company without a foreign key (they are written in the hot path).
func (s *Service) ForgetCompanyEvents(ctx context.Context, companyID int64) error {
	if _, err := s.db.Bun.NewDelete().Table("webhook_events").Where("company_id = ?", companyID).Exec(ctx); err != nil {
		return fault.Internalf(err, "forget the events of company %d", companyID)
	}
	return nil
}
