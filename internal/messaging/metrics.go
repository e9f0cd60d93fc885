package messaging

import "github.com/prometheus/client_golang/prometheus"

// metrics count what messaging does, by channel type name.
type metrics struct {
	accepted  *prometheus.CounterVec // sends stored: mode=sync|queued
	refused   *prometheus.CounterVec // sends refused before storing: reason=kind
	delivered *prometheus.CounterVec // hand-overs to a Transport: outcome=sent|failed|retry
	inbound   *prometheus.CounterVec // inbound messages stored
	receipts  *prometheus.CounterVec // receipts that changed a status: status=id
	sentBatch prometheus.Histogram   // Sent outcomes written per statement (sentWriter)
	stored    *prometheus.CounterVec // sends stored: path=one_statement|transaction
}

func newMetrics(reg prometheus.Registerer) *metrics {
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
			Help: "Receipts that changed a message status, by channel type and new status id."}, []string{"channel_type", "status"}),
		sentBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gateway_messages_sent_outcomes_per_write",
			Help:    "Sent outcomes recorded by one UPDATE: attempts that end together share one statement and one commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 100}}),
		stored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_messages_stored_total",
			Help: "Sends stored, by path: one_statement (the common send on PostgreSQL) or transaction."}, []string{"path"}),
	}
	if reg != nil {
		reg.MustRegister(m.accepted, m.refused, m.delivered, m.inbound, m.receipts, m.sentBatch, m.stored)
	}
	return m
}
