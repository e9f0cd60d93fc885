package loadtest

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteTable prints every run's results, then the median [min–max] of
// each scenario's main figures over the runs.
func (rep *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "engine %s, %d send companies (%d sends/min each at most), gateway RSS %.0f MB at start (%.0f MB anonymous), %.0f MB idle after set-up (%.0f MB anonymous)\n%v\n\n",
		rep.Engine, rep.Companies, SendRatePerCompany*98/100, rep.StartRSSMB, rep.StartAnonMB, rep.IdleRSSMB, rep.IdleAnonMB, rep.Options)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	// deliv|sent/s is deliveries per second for events, and for queued
	// sends what reached the provider per second during the load (see
	// SendResult); backlog is what was accepted but not yet at the provider
	// when the load stopped, and drain s how long it then took.
	fmt.Fprintln(tw, "run\tscenario\tload\tok\treq/s\tratio\tp50 ms\tp99 ms\tp99.9 ms\terrors\tdeliv|sent/s\te2e p50\te2e p99\tundelivered\tdup\tbacklog\tdrain s\tRSS idle/peak/after MB\tanon idle/after\tCPU ms/req\tCPU s by process\tmachine busy\t")
	for _, r := range rep.Results {
		ev := "\t\t\t\t\t\t"
		if e := r.Events; e != nil {
			ev = fmt.Sprintf("%.0f\t%.1f\t%.1f\t%d\t%d\t\t", e.DeliveriesPerSec, e.EndToEnd.P50, e.EndToEnd.P99, e.Lost, e.Duplicates)
		}
		if sr := r.Sends; sr != nil {
			ev = fmt.Sprintf("%.0f\t\t\t%d\t\t%d\t%.1f", sr.HandedPerSec, sr.Left, sr.BacklogAtEnd, sr.DrainedIn)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%.0f\t%s\t%.1f\t%.1f\t%.1f\t%s\t%s\t%.0f/%.0f/%.0f\t%.0f/%.0f\t%.2f\t%s\t%s\t\n", r.Run, r.Scenario, r.Load,
			r.OK, r.Throughput, ratio(r.Ratio), r.Latency.P50, r.Latency.P99, r.Latency.P999, errorText(r.Errors), ev,
			r.Footprint.IdleRSSMB, r.Footprint.PeakRSSMB, r.Footprint.AfterRSSMB,
			r.Footprint.IdleAnonMB, r.Footprint.AfterAnonMB, r.CPUPerReq,
			cpuText(r.Footprint.CPUByProcess), busyText(r.Footprint))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nmedian [min–max] over %d run(s)\n", rep.Options["runs"])
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\treq/s\tratio\tp50 ms\tp99 ms\tp99.9 ms\tdeliv|sent/s\te2e p99 ms\tundelivered\tbacklog\tpeak RSS MB\t")
	names := make([]string, 0, len(rep.Summary))
	for n := range rep.Summary {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return order(names[i]) < order(names[j]) })
	for _, n := range names {
		f := rep.Summary[n]
		perSec := f["deliveries_per_s"]
		if len(perSec.Runs) == 0 {
			perSec = f["handed_per_s"]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", n, spread(f["rps"], "%.0f"), spread(f["ratio"], "%.2f"),
			spread(f["p50_ms"], "%.1f"), spread(f["p99_ms"], "%.1f"), spread(f["p999_ms"], "%.1f"),
			spread(perSec, "%.0f"), spread(f["e2e_p99_ms"], "%.0f"), spread(f["lost"], "%.0f"),
			spread(f["backlog_at_end"], "%.0f"), spread(f["peak_rss_mb"], "%.0f"))
	}
	tw.Flush()
	rep.writeLaneRuns(w)
	rep.writeDetails(w)
	rep.writeTargets(w)
}

// standardFigures are those the summary table has columns for.
var standardFigures = map[string]bool{"rps": true, "ratio": true, "p50_ms": true, "p99_ms": true, "p999_ms": true,
	"peak_rss_mb": true, "cpu_ms_per_req": true, "machine_cpu_busy": true, "handed_per_s": true, "backlog_at_end": true,
	"drained_in_s": true, "lost": true, "deliveries_per_s": true, "e2e_p50_ms": true, "e2e_p99_ms": true, "duplicates": true}

// writeDetails prints what the table's columns do not hold: each run's
// noisy-neighbour, fan-out and listing figures, then every other figure
// of the summary (ratios to the job's baselines among them) as median
// [min–max].
func (rep *Report) writeDetails(w io.Writer) {
	for _, r := range rep.Results {
		if n := r.Noisy; n != nil {
			fmt.Fprintf(w, "\nrun %d %s (%s):\n", r.Run, r.Scenario, r.Load)
			names := make([]string, 0, len(n.Healthy))
			for s := range n.Healthy {
				names = append(names, s)
			}
			sort.Strings(names)
			for _, s := range names {
				p := n.Healthy[s]
				fmt.Fprintf(w, "  healthy %s: without noise p50 %.1f p99 %.1f ms (n %d, %d missing after the drain); with noise p50 %.1f p99 %.1f ms (n %d, %d missing); ratio p50 %s p99 %s; errors %s\n",
					s, p.Quiet.P50, p.Quiet.P99, p.Quiet.N, p.LostQuiet, p.Noisy.P50, p.Noisy.P99, p.Noisy.N, p.LostNoisy,
					ratio(p.RatioP50), ratio(p.RatioP99), errorText(p.Errors))
				for _, b := range []struct{ phase, which string }{{"without", p.QuietBeyond}, {"with", p.NoisyBeyond}} {
					if b.which != "" {
						fmt.Fprintf(w, "    %s noise, %s lie beyond the drain bound (too many missing): the figure above is of those that arrived, a lower bound\n", b.phase, b.which)
					}
				}
			}
			nf := n.Noise
			fmt.Fprintf(w, "  noise: %d requests, %d accepted, errors %s, %d undelivered at the end", nf.Requests, nf.Accepted, errorText(nf.Errors), nf.Undelivered)
			if nf.StalledSends > 0 || r.Scenario == ScenarioNoisySends {
				fmt.Fprintf(w, ", %d sends reached the stalled provider, %d of them more than once", nf.StalledSends, nf.Resent)
			}
			fmt.Fprintln(w)
			kinds := make([]string, 0, len(nf.Endpoints))
			for k := range nf.Endpoints {
				kinds = append(kinds, string(k))
			}
			sort.Strings(kinds)
			for _, k := range kinds {
				t := nf.Endpoints[EndpointKind(k)]
				fmt.Fprintf(w, "  endpoints %s: %d, %d (endpoint, event) pairs expected, %d attempted, %d answered 2xx\n",
					k, t.Endpoints, t.Expected, t.Attempted, t.Answered)
			}
			if nf.Schedule != nil {
				fmt.Fprintf(w, "  %d retries %s (the endpoints got %d requests), watched %.0f s after the noise: %s\n",
					nf.Retries, nf.ScheduleSource, nf.Attempts, nf.Observed, nf.Schedule)
			}
			fmt.Fprintf(w, "  gateway RSS: without the noisy endpoints peak %.0f MB, end %.0f MB; with them peak %.0f MB, end %.0f MB\n",
				n.QuietRSS.PeakRSSMB, n.QuietRSS.AfterRSSMB, n.NoisyRSS.PeakRSSMB, n.NoisyRSS.AfterRSSMB)
		}
		if len(r.Fanout) > 0 {
			fmt.Fprintf(w, "\nrun %d %s: subscriptions per event, publish p50 · p99 ms, deliveries (lost), CPU ms per delivery gateway / PostgreSQL / total (backends)\n", r.Run, r.Scenario)
			for _, lv := range r.Fanout {
				fmt.Fprintf(w, "  N=%d at %.1f/s: %.1f · %.1f ms, errors %s, %d deliveries (%d lost), %.2f / %.2f / %.2f ms (%d backends, %d gone)\n",
					lv.Subscriptions, lv.Rate, lv.Publish.P50, lv.Publish.P99, errorText(lv.Errors), lv.Deliveries, lv.Lost,
					lv.GatewayMs, lv.PostgresMs, lv.TotalMs, lv.Backends, lv.BackendsGone)
			}
		}
		if b := r.Broker; b != nil {
			fmt.Fprintf(w, "\nrun %d %s to %s (targets: ≥ %d events/s closed loop; paced, publish→broker-ack p99 < %d ms):\n",
				r.Run, r.Scenario, b.Destination, TargetBrokerPerSec, TargetBrokerAckP99Ms)
			for _, p := range b.Phases {
				stored := ""
				if p.ToStored.N > 0 {
					stored = fmt.Sprintf(", publish→stored p50 %.1f p99 %.1f ms", p.ToStored.P50, p.ToStored.P99)
				}
				fmt.Fprintf(w, "  %s (%s): %d accepted, errors %s, POST p99 %.1f ms; %d read back, %.0f events/s; publish→read p50 %.1f p99 %.1f ms%s; %d missing after the drain (%.1f s), %d duplicates, %d rejected%s\n",
					p.Name, p.Load, p.Accepted, errorText(p.Errors), p.Publish.P99, p.Read, p.PerSec, p.ToRead.P50, p.ToRead.P99,
					stored, p.Missing, p.DrainedIn, p.Duplicates, p.Rejected, reason(p.RejectReason))
			}
			if b.Cleanup != "" {
				fmt.Fprintf(w, "  cleanup: %s\n", b.Cleanup)
			}
		}
		if st := r.Stream; st != nil {
			fmt.Fprintf(w, "\nrun %d %s (%s; targets: %d readers at %d events/s each, publish→read p99 < %d ms, gateway RSS < %d MB):\n",
				r.Run, r.Scenario, r.Load, TargetStreamReaders, TargetStreamPerReader, TargetStreamP99Ms, TargetStreamRSSMB)
			fmt.Fprintf(w, "  %d of %d readers connected; %d published (errors %s, POST p99 %.1f ms); publish→read p50 %.1f p99 %.1f ms over %d reads, %.0f reads/s per reader\n",
				st.Connected, st.Readers, st.Accepted, errorText(st.Errors), st.Publish.P99, st.ToRead.P50, st.ToRead.P99,
				st.ToRead.N, st.PerReader)
			fmt.Fprintf(w, "  missing after the drain (%.1f s): at most %d per reader, %d readers missing any, %d in all; %d duplicates, %d rejected\n",
				st.DrainedIn, st.MissingMax, st.ReadersMissing, st.MissingTotal, st.Duplicates, st.Rejected)
			fmt.Fprintf(w, "  stream.cut: %d readers cut, %d cuts (%s), %d reconnects, open errors %s; gateway RSS idle %.0f MB, peak %.0f MB\n",
				st.ReadersCut, st.Cuts, errorText(st.Reasons), st.Reconnects, errorText(st.OpenErrors), r.Footprint.IdleRSSMB,
				r.Footprint.PeakRSSMB)
		}
		if m := r.Media; m != nil {
			fmt.Fprintf(w, "\nrun %d %s (a %.0f MB document; target: each step grows the gateway's RSS by < %d MB):\n",
				r.Run, r.Scenario, m.SizeMB, TargetMediaGrowthMB)
			for _, s := range m.Steps {
				fmt.Fprintf(w, "  %s: %d in %.1f s, peak RSS +%.1f MB%s\n", s.Name, s.Status, s.Seconds, s.PeakGrowthMB, reason(s.Error))
			}
		}
		if len(r.Listing) > 0 {
			fmt.Fprintf(w, "\nrun %d %s (%s):\n", r.Run, r.Scenario, r.Load)
			for _, lc := range r.Listing {
				fmt.Fprintf(w, "  %s: p50 %.1f p99 %.1f ms, %.0f req/s, total %d, errors %s\n", lc.Name, lc.Latency.P50,
					lc.Latency.P99, lc.Throughput, lc.Total, errorText(lc.Errors))
			}
		}
	}
	names := make([]string, 0, len(rep.Summary))
	for n := range rep.Summary {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return order(names[i]) < order(names[j]) })
	header := false
	for _, n := range names {
		var figs []string
		for f := range rep.Summary[n] {
			if !standardFigures[f] {
				figs = append(figs, f)
			}
		}
		if len(figs) == 0 {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\nmore figures, median [min–max] over %d run(s)\n", rep.Options["runs"])
			header = true
		}
		sort.Strings(figs)
		for _, f := range figs {
			fmt.Fprintf(w, "  %s  %s  %s\n", n, f, spread(rep.Summary[n][f], "%.2f"))
		}
	}
}

// order keeps the summary in the order of DefaultScenarios.
func order(sc string) int {
	for i, s := range DefaultScenarios {
		if s == sc {
			return i
		}
	}
	return len(DefaultScenarios)
}

func spread(s Spread, format string) string {
	if len(s.Runs) == 0 {
		return "-"
	}
	if len(s.Runs) == 1 {
		return fmt.Sprintf(format, s.Median)
	}
	return fmt.Sprintf(format+" ["+format+"–"+format+"]", s.Median, s.Min, s.Max)
}

// cpuText is the CPU seconds of each process, "3.1+2.9" for two replicas.
func cpuText(secs []float64) string {
	parts := make([]string, len(secs))
	for i, v := range secs {
		parts[i] = fmt.Sprintf("%.1f", v)
	}
	return strings.Join(parts, "+")
}

// busyText is the machine's busy share, "97% of 2".
func busyText(f Footprint) string {
	if f.Cores == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%% of %d", f.MachineBusy*100, f.Cores)
}

func ratio(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// reason is ": why" for a non-empty why.
func reason(why string) string {
	if why == "" {
		return ""
	}
	return " (first: " + why + ")"
}

func errorText(errs map[string]int) string {
	if len(errs) == 0 {
		return "0"
	}
	var parts []string
	for k, v := range errs {
		parts = append(parts, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
