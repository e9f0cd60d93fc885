package loadtest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestSummarise(t *testing.T) {
	var ls []time.Duration
	for i := 1000; i >= 1; i-- { // out of order on purpose
		ls = append(ls, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		name string
		in   []time.Duration
		want Latency
	}{
		{"empty", nil, Latency{}},
		{"one", []time.Duration{3 * time.Millisecond}, Latency{N: 1, P50: 3, P99: 3, P999: 3, Max: 3, Mean: 3}},
		// Nearest rank: the 500th, 990th and 999th of 1..1000 ms.
		{"1..1000 ms", ls, Latency{N: 1000, P50: 500, P99: 990, P999: 999, Max: 1000, Mean: 500.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Summarise(tt.in); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSpreadOf(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want Spread
	}{
		{"odd count unsorted", []float64{3, 1, 2}, Spread{Median: 2, Min: 1, Max: 3}},
		{"even count takes the mean of the middle two", []float64{4, 1, 2, 3}, Spread{Median: 2.5, Min: 1, Max: 4}},
		{"one run", []float64{7}, Spread{Median: 7, Min: 7, Max: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SpreadOf(tt.in)
			if got.Median != tt.want.Median || got.Min != tt.want.Min || got.Max != tt.want.Max || len(got.Runs) != len(tt.in) {
				t.Errorf("SpreadOf(%v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

// TestBudget: no company is picked more than its share within a window,
// the picks spread over companies, and the window slides.
func TestBudget(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := NewBudget(3, 2, time.Minute)
	b.now = func() time.Time { return now }
	counts := map[int]int{}
	for range 6 {
		i := b.Pick()
		if i < 0 {
			t.Fatal("budget exhausted early")
		}
		counts[i]++
	}
	for i := range 3 {
		if counts[i] != 2 {
			t.Errorf("company %d picked %d times, want 2", i, counts[i])
		}
	}
	if i := b.Pick(); i != -1 {
		t.Fatalf("picked %d beyond the budget", i)
	}
	now = now.Add(59 * time.Second)
	if i := b.Pick(); i != -1 {
		t.Fatalf("picked %d before the window slid", i)
	}
	now = now.Add(time.Second)
	if i := b.Pick(); i < 0 {
		t.Fatal("budget not renewed after the window")
	}
}

// TestDriveClosedCountsOutcomes: every call is recorded, failures by
// outcome. (No timing is asserted.)
func TestDriveClosedCountsOutcomes(t *testing.T) {
	rec := NewRecorder()
	d := Drive(t.Context(), Shape{Mode: Closed, Conns: 2, Duration: 50 * time.Millisecond}, rec, func(_ context.Context, seq int, _ time.Time) string {
		if seq%2 == 1 {
			return "429"
		}
		return ""
	})
	if d.Started == 0 || rec.Count()+rec.Errors()["429"] != d.Started {
		t.Fatalf("started %d, ok %d, errors %v", d.Started, rec.Count(), rec.Errors())
	}
}

// TestSummariseRuns: figures are grouped per scenario over runs, and a
// scenario that had no baseline under the same load gets no ratio.
func TestSummariseRuns(t *testing.T) {
	results := []Result{
		{Scenario: "send-queued:closed", Run: 1, Throughput: 100, Ratio: 0.1},
		{Scenario: "send-queued:closed", Run: 2, Throughput: 300, Ratio: 0.3},
		{Scenario: "send-queued:closed", Run: 3, Throughput: 200, Ratio: 0.2},
		{Scenario: "events-1:open", Run: 1, Throughput: 500, Events: &EventResult{DeliveriesPerSec: 480, EventTally: EventTally{Lost: 2}}},
	}
	sum := summarise(results)
	if got := sum["send-queued:closed"]["rps"]; got.Median != 200 || got.Min != 100 || got.Max != 300 {
		t.Errorf("send-queued rps %+v", got)
	}
	if got := sum["send-queued:closed"]["ratio"]; got.Median != 0.2 {
		t.Errorf("send-queued ratio %+v", got)
	}
	if _, ok := sum["events-1:open"]["ratio"]; ok {
		t.Error("events-1:open has a ratio without a baseline under its load")
	}
	if got := sum["events-1:open"]["deliveries_per_s"]; got.Median != 480 {
		t.Errorf("deliveries/s %+v", got)
	}
	if got := sum["events-1:open"]["lost"]; got.Median != 2 {
		t.Errorf("lost %+v", got)
	}
}

// TestDriveStops: a load without a duration ends when Stop is closed, in
// both modes, and every request it started is recorded.
func TestDriveStops(t *testing.T) {
	for _, mode := range []Mode{Open, Closed} {
		t.Run(string(mode), func(t *testing.T) {
			stop := make(chan struct{})
			rec := NewRecorder()
			var calls atomic.Int64
			go func() {
				for calls.Load() < 5 {
					time.Sleep(time.Millisecond)
				}
				close(stop)
			}()
			d := Drive(t.Context(), Shape{Mode: mode, Rate: 1000, Conns: 2, Stop: stop}, rec, func(context.Context, int, time.Time) string {
				calls.Add(1)
				return ""
			})
			if d.Started < 5 || rec.Count() != d.Started || int64(d.Started) != calls.Load() {
				t.Fatalf("started %d, recorded %d, calls %d", d.Started, rec.Count(), calls.Load())
			}
		})
	}
}
