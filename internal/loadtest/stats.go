package loadtest

import (
	"math"
	"sort"
	"sync"
	"time"
)

// Recorder collects the outcome of every request of a scenario. It is
// safe for concurrent use. Latencies are kept whole (a run is bounded to
// at most a few hundred thousand requests), so percentiles are exact.
type Recorder struct {
	mu        sync.Mutex
	latencies []time.Duration
	byStatus  map[string]int
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{byStatus: map[string]int{}} }

// OK records a successful request and its latency.
func (r *Recorder) OK(d time.Duration) {
	r.mu.Lock()
	r.latencies = append(r.latencies, d)
	r.mu.Unlock()
}

// Fail records a failed request under its outcome: the HTTP status
// ("429") or a client-side reason ("transport", "overload").
func (r *Recorder) Fail(outcome string) {
	r.mu.Lock()
	r.byStatus[outcome]++
	r.mu.Unlock()
}

// Latencies summarises what was recorded.
func (r *Recorder) Latencies() Latency {
	r.mu.Lock()
	ls := append([]time.Duration(nil), r.latencies...)
	r.mu.Unlock()
	return Summarise(ls)
}

// Errors returns a copy of the failures by outcome.
func (r *Recorder) Errors() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.byStatus))
	for k, v := range r.byStatus {
		out[k] = v
	}
	return out
}

// Count is the number of successful requests.
func (r *Recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.latencies)
}

// Latency is the distribution of a set of latencies, in milliseconds.
type Latency struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

// Summarise computes the distribution of ls (which it sorts).
func Summarise(ls []time.Duration) Latency {
	if len(ls) == 0 {
		return Latency{}
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
	var sum time.Duration
	for _, d := range ls {
		sum += d
	}
	return Latency{N: len(ls), P50: ms(percentile(ls, 0.50)), P99: ms(percentile(ls, 0.99)),
		P999: ms(percentile(ls, 0.999)), Max: ms(ls[len(ls)-1]), Mean: ms(sum / time.Duration(len(ls)))}
}

// percentile is the nearest-rank percentile of sorted: the smallest value
// such that at least p of the values are at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p*float64(len(sorted)))) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

// Spread is the median of a figure over repeated runs, with its range.
type Spread struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Runs   []float64 `json:"runs"`
}

// SpreadOf summarises the values of one figure over runs.
func SpreadOf(vs []float64) Spread {
	if len(vs) == 0 {
		return Spread{}
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Median: med, Min: s[0], Max: s[len(s)-1], Runs: vs}
}
