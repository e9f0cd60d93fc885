package messaging

import (
	"context"
	"database/sql"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics count what messaging does, by channel type name.
type metrics struct {
	accepted  *prometheus.CounterVec // sends stored: mode=sync|queued
	refused   *prometheus.CounterVec // sends refused before storing: reason=kind
	delivered *prometheus.CounterVec // hand-overs to a Transport: outcome=sent|failed|retry
	inbound   *prometheus.CounterVec // inbound messages stored
	receipts  *prometheus.CounterVec // receipts that changed a status: status=name
	// Tuning figures, for whoever tunes the service rather than runs it:
	// they go to the debug registry (DEBUG_LISTEN's /debug/metrics).
	sentBatch    prometheus.Histogram   // Sent outcomes written per statement (s.sent)
	handOffBatch prometheus.Histogram   // hand-offs recorded per statement (s.handed)
	stored       *prometheus.CounterVec // sends stored: path=one_statement|transaction
}

// newMetrics registers the operator's metrics with reg and the tuning
// figures with debug (each may be nil: not registered).
func newMetrics(reg, debug prometheus.Registerer) *metrics {
	m := &metrics{
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_messages_accepted_total",
			Help: "Sends stored, by channel type and mode (sync or queued)."}, []string{"channel_type", "mode"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_messages_refused_total",
			Help: "Sends refused before being stored, by channel type and reason."}, []string{"channel_type", "reason"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_messages_delivery_total",
			Help: "Hand-overs of messages to their channel, by channel type and outcome (sent, failed, retry)."}, []string{"channel_type", "outcome"}),
		inbound: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_messages_inbound_total",
			Help: "Inbound messages stored, by channel type."}, []string{"channel_type"}),
		receipts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_messages_receipts_total",
			Help: "Receipts that changed a message status, by channel type and new status (sent, delivered, read, failed)."}, []string{"channel_type", "status"}),
		sentBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gateway_messages_sent_outcomes_per_write",
			Help:    "Sent outcomes recorded by one UPDATE: attempts that end together share one statement and one commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 100}}),
		handOffBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gateway_messages_handoffs_per_write",
			Help:    "Hand-offs to a transport recorded by one UPDATE: requests made together share one statement and one commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 100}}),
		stored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_messages_stored_total",
			Help: "Sends stored, by path: one_statement (the common send on PostgreSQL) or transaction."}, []string{"path"}),
	}
	if reg != nil {
		reg.MustRegister(m.accepted, m.refused, m.delivered, m.inbound, m.receipts)
	}
	if debug != nil {
		debug.MustRegister(m.sentBatch, m.handOffBatch, m.stored)
	}
	return m
}

// backlog reports the send queue's backlog on each scrape: how many sends
// are due and how long the oldest has waited. One query over the partial
// index of queued messages (messages_send_due), bounded in time; a scrape
// that cannot read it reports nothing rather than stale figures.
type backlog struct{ s *Service }

var (
	backlogDue = prometheus.NewDesc("gateway_messages_send_due",
		"Queued sends (and synchronous sends' safety nets) due now and not yet claimed.", nil, nil)
	backlogOldest = prometheus.NewDesc("gateway_messages_send_oldest_due_seconds",
		"How long the oldest send due now has been due (0 when none is).", nil, nil)
)

// Describe implements prometheus.Collector.
func (b *backlog) Describe(ch chan<- *prometheus.Desc) {
	ch <- backlogDue
	ch <- backlogOldest
}

// Collect implements prometheus.Collector.
func (b *backlog) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	due, oldest, err := b.s.sendBacklog(ctx)
	if err != nil {
		b.s.deps.Logger.Warn("send queue backlog not read", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(backlogDue, prometheus.GaugeValue, float64(due))
	ch <- prometheus.MustNewConstMetric(backlogOldest, prometheus.GaugeValue, oldest.Seconds())
}

// backlogTimeout bounds the backlog's query on a scrape.
const backlogTimeout = 2 * time.Second

// sendBacklog counts the sends due now and the age of the oldest.
func (s *Service) sendBacklog(ctx context.Context) (due int64, oldest time.Duration, err error) {
	now := s.deps.Now().UnixMilli()
	var first sql.NullInt64
	err = s.deps.DB.Bun.NewSelect().Table("messages").ColumnExpr("count(*), min(send_due_at)").
		Where("send_due_at IS NOT NULL").Where("send_due_at <= ?", now).Scan(ctx, &due, &first)
	if err != nil {
		return 0, 0, err
	}
	if first.Valid {
		oldest = time.Duration(now-first.Int64) * time.Millisecond
	}
	return due, oldest, nil
}

// receiptLabel names a receipt's new status for the metric, so dashboards
// read "delivered" rather than a status id.
func receiptLabel(status int) string {
	switch status {
	case StatusSent:
		return "sent"
	case StatusDelivered:
		return "delivered"
	case StatusRead:
		return "read"
	case StatusFailed:
		return "failed"
	}
	return "other"
}
