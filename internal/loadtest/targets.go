package loadtest

import (
	"fmt"
	"io"
	"sort"
)

// figures are a broker scenario's figures for the summary, by phase.
func (b *BrokerResult) figures() map[string]float64 {
	out := map[string]float64{}
	for _, p := range b.Phases {
		k := p.Name + " "
		out[k+"events/s"] = p.PerSec
		out[k+"publish→read p50 ms"], out[k+"publish→read p99 ms"] = p.ToRead.P50, p.ToRead.P99
		if p.ToStored.N > 0 {
			out[k+"publish→stored p50 ms"], out[k+"publish→stored p99 ms"] = p.ToStored.P50, p.ToStored.P99
		}
		out[k+"POST p99 ms"] = p.Publish.P99
		out[k+"accepted"] = float64(p.Accepted)
		out[k+"missing after drain"] = float64(p.Missing)
		out[k+"duplicates"] = float64(p.Duplicates)
		out[k+"rejected"] = float64(p.Rejected)
		out[k+"publish errors"] = float64(sumCounts(p.Errors))
	}
	return out
}

// figures are events-stream's figures for the summary (its RSS peak is
// the scenario's footprint, peak_rss_mb).
func (s *StreamResult) figures() map[string]float64 {
	return map[string]float64{
		"readers connected": float64(s.Connected), "offered events/s": s.Rate,
		"publish→read p50 ms": s.ToRead.P50, "publish→read p99 ms": s.ToRead.P99,
		"reads/s per reader": s.PerReader, "missing per reader max": float64(s.MissingMax),
		"readers missing": float64(s.ReadersMissing), "readers cut": float64(s.ReadersCut),
		"stream.cut events": float64(s.Cuts), "duplicates": float64(s.Duplicates), "rejected": float64(s.Rejected),
		"reconnects": float64(s.Reconnects), "POST p99 ms": s.Publish.P99,
		"publish errors": float64(sumCounts(s.Errors)), "open errors": float64(sumCounts(s.OpenErrors)),
	}
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// target is one of the targets against the median of its figure.
type target struct {
	Figure string
	Value  Spread
	Want   string // the target, as the issue says it
	Met    bool
	// Note qualifies the figure (what it bounds).
	Note string
}

// targetsOf checks the medians of a scenario's figures against the
// issue's targets; none for other scenarios or figures that are absent.
func targetsOf(scenario string, f map[string]Spread) []target {
	has := func(k string) bool { return len(f[k].Runs) > 0 }
	var out []target
	switch scenario {
	case ScenarioEventsNATS, ScenarioEventsAMQP:
		if has("closed events/s") {
			v := f["closed events/s"]
			out = append(out, target{Figure: "closed events/s", Value: v, Want: fmt.Sprintf("≥ %d/s sustained", TargetBrokerPerSec),
				Met: v.Median >= TargetBrokerPerSec})
		}
		// The ack itself is not visible to a client: JetStream's stored
		// time is just before it, a read just after it.
		ack, note := "paced publish→stored p99 ms", "the stream's stored time, just before its ack"
		if !has(ack) {
			ack, note = "paced publish→read p99 ms", "read back: an upper bound of the ack"
		}
		if has(ack) {
			v := f[ack]
			out = append(out, target{Figure: ack, Value: v, Want: fmt.Sprintf("publish→broker-ack p99 < %d ms", TargetBrokerAckP99Ms),
				Met: v.Median < TargetBrokerAckP99Ms, Note: note})
		}
	case ScenarioMediaLarge:
		for _, step := range mediaSteps {
			if k := step + " peak RSS growth MB"; has(k) {
				v := f[k]
				out = append(out, target{Figure: k, Value: v, Want: fmt.Sprintf("< %d MB", TargetMediaGrowthMB), Met: v.Max < TargetMediaGrowthMB,
					Note: "every run"})
			}
		}
	case ScenarioEventsStream:
		if has("readers connected") {
			c, rate, miss := f["readers connected"], f["offered events/s"], f["missing per reader max"]
			out = append(out, target{Figure: "readers connected", Value: c,
				Want: fmt.Sprintf("%d readers at %d events/s each, none missing any", TargetStreamReaders, TargetStreamPerReader),
				Met:  c.Median >= TargetStreamReaders && rate.Median >= TargetStreamPerReader && has("missing per reader max") && miss.Max == 0,
				Note: fmt.Sprintf("at %.0f/s, most missing by one reader %.0f", rate.Median, miss.Max)})
		}
		if has("publish→read p99 ms") {
			v := f["publish→read p99 ms"]
			out = append(out, target{Figure: "publish→read p99 ms", Value: v, Want: fmt.Sprintf("< %d ms", TargetStreamP99Ms),
				Met: v.Median < TargetStreamP99Ms})
		}
		if has("peak_rss_mb") {
			v := f["peak_rss_mb"]
			out = append(out, target{Figure: "gateway peak RSS MB", Value: v, Want: fmt.Sprintf("< %d MB", TargetStreamRSSMB),
				Met: v.Median < TargetStreamRSSMB})
		}
	}
	return out
}

// writeTargets prints the targets beside the medians of the
// scenarios that have any.
func (rep *Report) writeTargets(w io.Writer) {
	names := make([]string, 0, len(rep.Summary))
	for n := range rep.Summary {
		names = append(names, n)
	}
	sort.Strings(names)
	header := false
	for _, n := range names {
		for _, t := range targetsOf(n, rep.Summary[n]) {
			if !header {
				fmt.Fprintf(w, "\ntargets (issues 26 and 27), median [min–max] over %d run(s)\n", rep.Options["runs"])
				header = true
			}
			verdict := "not met"
			if t.Met {
				verdict = "met"
			}
			note := ""
			if t.Note != "" {
				note = " (" + t.Note + ")"
			}
			fmt.Fprintf(w, "  %s  %s  %s%s — target %s: %s\n", n, t.Figure, spread(t.Value, "%.1f"), note, t.Want, verdict)
		}
	}
}
