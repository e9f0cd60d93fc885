package webhooks

import (
	"context"
	"time"
)

// DeliverDue fans out the stored events, then runs subscription id's lane
// by hand until nothing is due: every due delivery gets one attempt and its
// outcome is written.
func (s *Service) DeliverDue(ctx context.Context, id int64) {
	if err := s.FanOut(ctx); err != nil {
		panic(err)
	}
	s.newLane(id, laneRun{}, newBreaker(s.perSubscription, 0, s.perSubscription, time.Time{})).work(ctx)
}

// DeliverDueFailing is DeliverDue for an endpoint whose last attempt
// failed (one failure in a row, one attempt in flight).
func (s *Service) DeliverDueFailing(ctx context.Context, id int64) {
	if err := s.FanOut(ctx); err != nil {
		panic(err)
	}
	s.newLane(id, laneRun{}, newBreaker(s.perSubscription, 1, 1, time.Time{})).work(ctx)
}

// Pending is a queued delivery as tests see it.
type Pending struct {
	ID             int64
	SubscriptionID int64
	DeliveryID     string
	Event          string
	Body           string
	Attempts       int
	NextAttemptAt  time.Time
}

// PendingDeliveries lists the queued deliveries in publish order.
func (s *Service) PendingDeliveries(ctx context.Context) ([]Pending, error) {
	if err := s.FanOut(ctx); err != nil {
		return nil, err
	}
	var rows []deliveryRow
	if err := s.db.Bun.NewSelect().Model(&rows).Order("id").Scan(ctx); err != nil {
		return nil, err
	}
	out := make([]Pending, len(rows))
	for i, r := range rows {
		out[i] = Pending{ID: r.ID, SubscriptionID: r.SubscriptionID, DeliveryID: r.DeliveryID, Event: r.Event,
			Body: r.Body, Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt.UTC()}
	}
	return out, nil
}

// BreakerThreshold is the number of failures in a row that open a breaker.
const BreakerThreshold = breakerThreshold

// MsgCircuitOpen is the log text of an attempt an open breaker refused.
const MsgCircuitOpen = msgCircuitOpen

// LaneRuns counts the lanes this service's dispatcher has run.
func (s *Service) LaneRuns() int64 { return s.dispatch.runs.Load() }

// Fixed texts of broker attempts, for the refusal tests.
const (
	MsgBrokerAuth       = msgBrokerAuth
	MsgBrokerNoStream   = msgBrokerNoStream
	MsgBrokerNoExchange = msgBrokerNoExchange
	MsgBrokerUnreach    = msgBrokerUnreach
	MsgRefused          = msgRefused
	MsgNATSSubject      = msgNATSSubject
	MsgAMQPExchange     = msgAMQPExchange
	MsgBrokerURL        = msgBrokerURL
)

// StoredURL reads a subscription's url and destination columns as stored.
func (s *Service) StoredURL(ctx context.Context, id int64) (url, destination string, err error) {
	var row subscriptionRow
	err = s.db.Bun.NewSelect().Model(&row).Column("url", "destination").Where("id = ?", id).Scan(ctx)
	return row.URL, row.Destination, err
}
