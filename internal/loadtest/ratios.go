package loadtest

import "strings"

// Ratio names of Result.Ratios.
const (
	// RatioToBaselineSend is a queued send's completed sends per second
	// (accepted and at the provider, over the load and its drain) over
	// baseline-send's under the same load.
	RatioToBaselineSend = "vs_baseline_send"
	// RatioToBaselineDelivery is an events-1 scenario's deliveries per
	// second over baseline-delivery's under the same load.
	RatioToBaselineDelivery = "vs_baseline_delivery"
	// RatioToBaselineInsert is requests per second over the one-INSERT
	// baseline's under the same load (also Result.Ratio).
	RatioToBaselineInsert = "vs_baseline_insert"
	// RatioCompletedToBaselineInsert is baseline-send's and the queued
	// send's completed sends per second over the one-INSERT baseline's
	// requests per second: the whole job against the machine's limit.
	RatioCompletedToBaselineInsert = "completed_vs_baseline_insert"
	// RatioDeliveriesToBaselineInsert is deliveries per second (events-1,
	// baseline-delivery) over the one-INSERT baseline's requests per
	// second.
	RatioDeliveriesToBaselineInsert = "deliveries_vs_baseline_insert"
)

// JobRatios fills Ratios of one run's results: each figure compared with
// the baseline of the same job under the same load (same mode, same
// connections or pace), and with the one-INSERT baseline. A ratio whose
// baseline did not run in that run is left out.
func JobRatios(results []Result) {
	type key struct{ name, load string }
	byKey := map[key]*Result{}
	for i := range results {
		name, _, _ := strings.Cut(results[i].Scenario, ":")
		byKey[key{name, results[i].Load}] = &results[i]
	}
	for i := range results {
		r := &results[i]
		name, _, _ := strings.Cut(r.Scenario, ":")
		set := func(k string, v float64) {
			if v <= 0 {
				return
			}
			if r.Ratios == nil {
				r.Ratios = map[string]float64{}
			}
			r.Ratios[k] = v
		}
		insert := byKey[key{ScenarioBaseline, r.Load}]
		var insertRPS float64
		if insert != nil {
			insertRPS = insert.Throughput
		}
		switch name {
		case ScenarioSendQueued:
			if b := byKey[key{ScenarioBaselineSend, r.Load}]; b != nil && b.Sends != nil && r.Sends != nil {
				set(RatioToBaselineSend, ratioOf(r.Sends.CompletedPerSec, b.Sends.CompletedPerSec))
			}
			if r.Sends != nil {
				set(RatioCompletedToBaselineInsert, ratioOf(r.Sends.CompletedPerSec, insertRPS))
			}
			set(RatioToBaselineInsert, ratioOf(r.Throughput, insertRPS))
		case ScenarioBaselineSend:
			if r.Sends != nil {
				set(RatioCompletedToBaselineInsert, ratioOf(r.Sends.CompletedPerSec, insertRPS))
			}
			set(RatioToBaselineInsert, ratioOf(r.Throughput, insertRPS))
		case ScenarioEvents1:
			if b := byKey[key{ScenarioBaselineDelivery, r.Load}]; b != nil && b.Events != nil && r.Events != nil {
				set(RatioToBaselineDelivery, ratioOf(r.Events.DeliveriesPerSec, b.Events.DeliveriesPerSec))
			}
			if r.Events != nil {
				set(RatioDeliveriesToBaselineInsert, ratioOf(r.Events.DeliveriesPerSec, insertRPS))
			}
		case ScenarioBaselineDelivery:
			if r.Events != nil {
				set(RatioDeliveriesToBaselineInsert, ratioOf(r.Events.DeliveriesPerSec, insertRPS))
			}
			set(RatioToBaselineInsert, ratioOf(r.Throughput, insertRPS))
		case ScenarioSendSync, ScenarioEvents4, ScenarioListDefault, ScenarioListFilter:
			set(RatioToBaselineInsert, ratioOf(r.Throughput, insertRPS))
		}
	}
}
