package webhooks

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// backlog reports, on each scrape, what waits to be delivered: the gauges
// an operator alerts on when receivers or the service fall behind. Each
// scrape costs a few indexed counts, bounded by a timeout so a slow
// database never stalls /metrics; a scrape that times out leaves them out.
type backlog struct {
	s                         *Service
	deliveries, oldest, queue *prometheus.Desc
}

func newBacklog(s *Service) *backlog {
	return &backlog{s: s,
		deliveries: prometheus.NewDesc("gateway_webhook_deliveries_pending",
			"Webhook deliveries not yet finished, by state: due (to be sent now) or scheduled (a retry later).", []string{"state"}, nil),
		oldest: prometheus.NewDesc("gateway_webhook_oldest_due_seconds",
			"How long the oldest due webhook delivery has been due (0 when none is).", nil, nil),
		queue: prometheus.NewDesc("gateway_webhook_events_unfanned",
			"Published events not yet fanned out to their subscriptions' deliveries.", nil, nil),
	}
}

func (b *backlog) Describe(ch chan<- *prometheus.Desc) {
	ch <- b.deliveries
	ch <- b.oldest
	ch <- b.queue
}

func (b *backlog) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	now := b.s.now().UTC()
	var due, scheduled, unfanned int
	var oldest []time.Time
	db := b.s.db.Bun
	err := db.NewSelect().Model((*deliveryRow)(nil)).ColumnExpr("COUNT(*)").Where("next_attempt_at <= ?", now).Scan(ctx, &due)
	if err == nil {
		err = db.NewSelect().Model((*deliveryRow)(nil)).ColumnExpr("COUNT(*)").Where("next_attempt_at > ?", now).Scan(ctx, &scheduled)
	}
	if err == nil {
		err = db.NewSelect().Model((*deliveryRow)(nil)).Column("next_attempt_at").Where("next_attempt_at <= ?", now).
			Order("next_attempt_at").Limit(1).Scan(ctx, &oldest)
	}
	if err == nil {
		err = db.NewSelect().Model((*eventRow)(nil)).ColumnExpr("COUNT(*)").Where("seq IS NULL").Scan(ctx, &unfanned)
	}
	if err != nil {
		// Left out of this scrape rather than failing it: the other
		// metrics matter most when the database is slow.
		b.s.log.Warn("webhooks: backlog metrics not read", "err", err)
		return
	}
	age := 0.0
	if len(oldest) > 0 {
		age = max(0, now.Sub(oldest[0]).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(b.deliveries, prometheus.GaugeValue, float64(due), "due")
	ch <- prometheus.MustNewConstMetric(b.deliveries, prometheus.GaugeValue, float64(scheduled), "scheduled")
	ch <- prometheus.MustNewConstMetric(b.oldest, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(b.queue, prometheus.GaugeValue, float64(unfanned))
}
