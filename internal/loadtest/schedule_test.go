package loadtest

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCheckSchedule(t *testing.T) {
	s := time.Second
	tests := []struct {
		name                          string
		gaps                          []AttemptGap
		seen, on, early, late, unknwn map[int]int
		unknown                       int
	}{
		{name: "none", seen: map[int]int{}, on: map[int]int{}, early: map[int]int{}, late: map[int]int{}},
		{name: "on the edges of ±10%", gaps: []AttemptGap{{2, 9 * s}, {2, 11 * s}, {3, 54 * s}, {3, 66 * s}, {4, 5 * time.Minute}},
			seen: map[int]int{2: 2, 3: 2, 4: 1}, on: map[int]int{2: 2, 3: 2, 4: 1}, early: map[int]int{}, late: map[int]int{}},
		{name: "early and late", gaps: []AttemptGap{{2, 8900 * time.Millisecond}, {2, 11100 * time.Millisecond}, {3, 10 * s},
			{5, 17 * time.Minute}}, seen: map[int]int{2: 2, 3: 1, 5: 1}, on: map[int]int{},
			early: map[int]int{2: 1, 3: 1}, late: map[int]int{2: 1, 5: 1}},
		{name: "numbers the document does not have", gaps: []AttemptGap{{1, s}, {6, s}, {0, s}, {2, 10 * s}},
			seen: map[int]int{2: 1}, on: map[int]int{2: 1}, early: map[int]int{}, late: map[int]int{}, unknown: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := CheckSchedule(tt.gaps, DocumentedRetryDelays, ScheduleTolerance)
			for _, m := range []struct {
				what      string
				got, want map[int]int
			}{{"seen", c.Seen, tt.seen}, {"on schedule", c.OnSchedule, tt.on}, {"early", c.Early, tt.early}, {"late", c.Late, tt.late}} {
				if len(m.got) != len(m.want) {
					t.Errorf("%s: got %v, want %v", m.what, m.got, m.want)
					continue
				}
				for k, v := range m.want {
					if m.got[k] != v {
						t.Errorf("%s: got %v, want %v", m.what, m.got, m.want)
					}
				}
			}
			if c.Unknown != tt.unknown {
				t.Errorf("unknown: got %d, want %d", c.Unknown, tt.unknown)
			}
			off := 0
			for _, v := range tt.early {
				off += v
			}
			for _, v := range tt.late {
				off += v
			}
			if got := c.OffSchedule(); got != off+tt.unknown {
				t.Errorf("OffSchedule: got %d, want %d", got, off+tt.unknown)
			}
		})
	}
}

func TestScheduleCheckString(t *testing.T) {
	tests := []struct {
		name string
		gaps []AttemptGap
		want string
	}{
		{"nothing", nil, "no retry seen"},
		{"one late", []AttemptGap{{2, 10 * time.Second}, {2, 12 * time.Second}},
			"attempt 2: 1/2 on schedule (0 early, 1 late) gap 11.0 s [10.0–12.0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CheckSchedule(tt.gaps, DocumentedRetryDelays, ScheduleTolerance).String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestJobRatios(t *testing.T) {
	closed := "closed 16 conns"
	results := []Result{
		{Scenario: "baseline:closed", Load: closed, Throughput: 1000},
		{Scenario: "send-queued:closed", Load: closed, Throughput: 400, Sends: &SendResult{CompletedPerSec: 120}},
		{Scenario: "baseline-send:closed", Load: closed, Throughput: 500, Sends: &SendResult{CompletedPerSec: 200}},
		{Scenario: "events-1:closed", Load: closed, Throughput: 300, Events: &EventResult{DeliveriesPerSec: 250}},
		{Scenario: "baseline-delivery:closed", Load: closed, Throughput: 600, Events: &EventResult{DeliveriesPerSec: 500}},
		// Another load: no baseline ran under it, so no ratio.
		{Scenario: "send-queued:open", Load: "open 200/s", Throughput: 200, Sends: &SendResult{CompletedPerSec: 190}},
	}
	JobRatios(results)
	want := []map[string]float64{
		nil,
		{RatioToBaselineSend: 0.6, RatioCompletedToBaselineInsert: 0.12, RatioToBaselineInsert: 0.4},
		{RatioCompletedToBaselineInsert: 0.2, RatioToBaselineInsert: 0.5},
		{RatioToBaselineDelivery: 0.5, RatioDeliveriesToBaselineInsert: 0.25},
		{RatioDeliveriesToBaselineInsert: 0.5, RatioToBaselineInsert: 0.6},
		nil,
	}
	for i, r := range results {
		t.Run(r.Scenario, func(t *testing.T) {
			if len(r.Ratios) != len(want[i]) {
				t.Fatalf("got %v, want %v", r.Ratios, want[i])
			}
			for k, v := range want[i] {
				if got := r.Ratios[k]; got < v-1e-9 || got > v+1e-9 {
					t.Errorf("%s: got %v, want %v", k, got, v)
				}
			}
		})
	}
}

func TestRatioOf(t *testing.T) {
	tests := []struct {
		name       string
		a, b, want float64
	}{
		{"half", 1, 2, 0.5},
		{"zero numerator", 0, 2, 0},
		{"zero denominator", 2, 0, 0},
		{"negative numerator", -1, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ratioOf(tt.a, tt.b); got != tt.want {
				t.Errorf("ratioOf(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestSeedStatus(t *testing.T) {
	var by [8]int
	for i := range 1000 {
		by[seedStatus(i)]++
	}
	if by[1] != 600 || by[2] != 200 || by[3] != 100 || by[4] != 100 {
		t.Errorf("statuses of 1000 seeded conversations: %v, want 600 open, 200 pending, 100 in progress, 100 resolved", by)
	}
}

func TestSentLatencies(t *testing.T) {
	r := &Receiver{sent: map[string][]SentEvent{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.sent["a"] = []SentEvent{{ExternalID: "", At: t0.Add(time.Second)}, {ExternalID: "wamid.1", At: t0.Add(3 * time.Second)},
		{ExternalID: "wamid.1", At: t0.Add(2 * time.Second)}}
	r.sent["b"] = []SentEvent{{ExternalID: "", At: t0.Add(time.Second)}}
	lats, missing := sentLatencies(r, map[string]time.Time{"a": t0, "b": t0, "c": t0})
	if len(lats) != 1 || lats[0] != 2*time.Second {
		t.Errorf("latencies %v, want [2s] (the first event carrying the provider's id)", lats)
	}
	if missing != 2 {
		t.Errorf("missing %d, want 2 (one without an id yet, one without any event)", missing)
	}
}

func TestFailingEndpoints(t *testing.T) {
	f, err := StartFailingEndpoints([]EndpointKind{Unavailable, Unavailable})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	post := func(i int, delivery, importID string, attempt int) int {
		req, _ := http.NewRequest(http.MethodPost, f.URL(i), strings.NewReader(`{"data":{"import_id":"`+importID+`"}}`))
		req.Header.Set("X-Svc-Delivery", delivery)
		req.Header.Set("X-Svc-Attempt", strconv.Itoa(attempt))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		name     string
		posts    func()
		attempts []int // attempt numbers of the gaps, sorted
		tally    ClassTally
	}{
		{"first attempts only", func() {
			post(0, "d1", "e1", 1)
			post(1, "d2", "e1", 1)
		}, nil, ClassTally{Endpoints: 2, Expected: 4, Attempted: 2}},
		{"retries of one delivery", func() {
			post(0, "d1", "e1", 1)
			post(0, "d1", "e1", 2)
			post(0, "d1", "e1", 3)
			post(1, "d3", "e2", 1)
			post(1, "d3", "e2", 3) // attempt 2 never seen: no gap for 3
		}, []int{2, 3}, ClassTally{Endpoints: 2, Expected: 4, Attempted: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.Reset()
			tt.posts()
			var got []int
			for _, g := range f.Gaps() {
				got = append(got, g.Attempt)
			}
			sort.Ints(got)
			if fmt.Sprint(got) != fmt.Sprint(tt.attempts) {
				t.Errorf("gaps of attempts %v, want %v", got, tt.attempts)
			}
			tally := f.Tally([]int{0, 0}, map[int][]string{0: {"e1", "e2"}})[Unavailable]
			if tally != tt.tally {
				t.Errorf("tally %+v, want %+v", tally, tt.tally)
			}
		})
	}
	if got := post(0, "d9", "e9", 1); got != http.StatusServiceUnavailable {
		t.Errorf("a 503 endpoint answered %d", got)
	}
}

func TestPairFinish(t *testing.T) {
	tests := []struct {
		name               string
		p                  Pair
		r50, r99           float64
		quietBey, noisyBey string
	}{
		{"all arrived", Pair{Quiet: Latency{N: 100, P50: 10, P99: 20}, Noisy: Latency{N: 100, P50: 20, P99: 50}}, 2, 2.5, "", ""},
		{"1% missing", Pair{Quiet: Latency{N: 100, P50: 10, P99: 20}, Noisy: Latency{N: 99, P50: 20, P99: 50}, LostNoisy: 1}, 2, 2.5, "", ""},
		{"2% missing", Pair{Quiet: Latency{N: 100, P50: 10, P99: 20}, Noisy: Latency{N: 98, P50: 20, P99: 50}, LostNoisy: 2}, 2, 0, "", "p99"},
		{"most missing", Pair{Quiet: Latency{N: 100, P50: 10, P99: 20}, Noisy: Latency{N: 40, P50: 20, P99: 50}, LostNoisy: 60}, 0, 0, "", "p50 and p99"},
		{"none arrived", Pair{Quiet: Latency{N: 100, P50: 10, P99: 20}, LostNoisy: 60}, 0, 0, "", "p50 and p99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			p.finish()
			if p.RatioP50 != tt.r50 || p.RatioP99 != tt.r99 || p.QuietBeyond != tt.quietBey || p.NoisyBeyond != tt.noisyBey {
				t.Errorf("got ratios %v %v, beyond %q %q; want %v %v, %q %q", p.RatioP50, p.RatioP99, p.QuietBeyond,
					p.NoisyBeyond, tt.r50, tt.r99, tt.quietBey, tt.noisyBey)
			}
		})
	}
}
