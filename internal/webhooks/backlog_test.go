package webhooks_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// TestBacklogGauges: /metrics shows the events waiting for their fan-out,
// the deliveries due and scheduled, and how long the oldest has waited.
func TestBacklogGauges(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		reg := prometheus.NewRegistry()
		b := setup(t, db, setupOpts{webhooks: webhooks.Options{Registerer: reg}})
		for range 2 {
			b.subscribe(t, b.p, webhooks.CreateInput{URL: "https://example.com/hook"})
		}
		for range 3 {
			if err := b.publishUnfanned(t, webhooks.Event{Name: events.CrmBusinessWon, CompanyID: b.p.CompanyID, Data: exampleData(t)[events.CrmBusinessWon]}); err != nil {
				t.Fatal(err)
			}
		}
		steps := []struct {
			name string
			act  func()
			want map[string]float64
		}{
			{"published, not fanned out", func() {}, map[string]float64{
				"gateway_webhook_events_unfanned": 3, "gateway_webhook_deliveries_pending/due": 0, "gateway_webhook_oldest_due_seconds": 0}},
			{"fanned out", func() {
				if err := b.svc.FanOut(context.Background()); err != nil {
					t.Fatal(err)
				}
			}, map[string]float64{
				"gateway_webhook_events_unfanned": 0, "gateway_webhook_deliveries_pending/due": 6,
				"gateway_webhook_deliveries_pending/scheduled": 0, "gateway_webhook_oldest_due_seconds": 0}},
			{"waiting", func() { b.clk.Advance(5 * time.Second) }, map[string]float64{
				"gateway_webhook_deliveries_pending/due": 6, "gateway_webhook_oldest_due_seconds": 5}},
		}
		for _, step := range steps {
			step.act()
			got := gather(t, reg)
			for k, v := range step.want {
				if got[k] != v {
					t.Errorf("%s: %s = %v, want %v", step.name, k, got[k], v)
				}
			}
		}
	})
}

// gather reads reg's gauges as name (or name/label value) → value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "/" + l.GetValue()
			}
			if g := m.GetGauge(); g != nil {
				out[key] = g.GetValue()
			}
		}
	}
	return out
}
