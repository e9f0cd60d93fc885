package loadtest

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Metric reads one unlabelled counter or gauge of replica i from its
// METRICS_LISTEN (the stack gives each replica a port of its own).
func (s *Stack) Metric(ctx context.Context, i int, name string) (float64, error) {
	if i >= len(s.MetricsURLs) {
		return 0, fmt.Errorf("replica %d has no metrics listener", i+1)
	}
	st, b, err := NewClient(s.MetricsURLs[i]).Do(ctx, "GET", "/metrics", "", nil)
	if err != nil || st != 200 {
		return 0, fmt.Errorf("metrics of replica %d: %d %v", i+1, st, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("replica %d has no metric %s", i+1, name)
}

// laneRuns reads gateway_webhook_lane_runs_total of every replica: with
// several replicas each should run lanes (issue 26), not only the first.
func (s *Stack) laneRuns(ctx context.Context) []float64 {
	out := make([]float64, len(s.Replicas))
	for i := range s.Replicas {
		v, err := s.Metric(ctx, i, "gateway_webhook_lane_runs_total")
		if err != nil {
			v = -1
		}
		out[i] = v
	}
	return out
}

// writeLaneRuns prints the lane runs of each replica, and says so when a
// replica ran none although events were delivered.
func (rep *Report) writeLaneRuns(w io.Writer) {
	if len(rep.LaneRunsByReplica) == 0 {
		return
	}
	var parts []string
	idle := 0
	for i, v := range rep.LaneRunsByReplica {
		parts = append(parts, fmt.Sprintf("replica %d: %.0f", i+1, v))
		if v == 0 {
			idle++
		}
	}
	fmt.Fprintf(w, "webhook lane runs (gateway_webhook_lane_runs_total) by replica: %s\n", strings.Join(parts, ", "))
	if idle > 0 && len(rep.LaneRunsByReplica) > 1 {
		fmt.Fprintf(w, "  %d replica(s) ran no lane\n", idle)
	}
}
