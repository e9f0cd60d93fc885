package loadtest

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// DocumentedRetryDelays are the API document's waits before attempts 2 to
// 5 ("delays since the previous attempt": 10 seconds, 1, 5 and 15
// minutes). The load generator checks what a receiver sees against them;
// it does not read the gateway's own setting.
var DocumentedRetryDelays = []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute}

// ScheduleTolerance is how far from its documented delay an attempt may
// come: within 10% of it.
const ScheduleTolerance = 0.10

// AttemptGap is one retry a receiver saw: attempt n (2…5) of a delivery,
// and how long after the end of attempt n-1 it arrived (the end is when
// the receiver answered, or when the gateway hung up on a receiver that
// never answers).
type AttemptGap struct {
	Attempt int
	Gap     time.Duration
}

// ScheduleCheck is how the retries a receiver saw compare with the
// documented delays, by attempt number.
type ScheduleCheck struct {
	// Seen, OnSchedule, Early and Late count retries by attempt number
	// (the JSON keys are the numbers as text).
	Seen       map[int]int `json:"seen"`
	OnSchedule map[int]int `json:"on_schedule"`
	Early      map[int]int `json:"early"`
	Late       map[int]int `json:"late"`
	// Unknown counts attempts numbered outside 2…5 (a header the gateway
	// did not send, or a number the document does not have).
	Unknown int `json:"unknown"`
	// Gaps is the median and the extremes of the seen gap, in seconds, by
	// attempt number.
	Gaps map[int]Spread `json:"gap_s"`
}

// CheckSchedule compares gaps with delays (delays[0] is the wait before
// attempt 2) within tolerance (0.10 = ±10%).
func CheckSchedule(gaps []AttemptGap, delays []time.Duration, tolerance float64) ScheduleCheck {
	c := ScheduleCheck{Seen: map[int]int{}, OnSchedule: map[int]int{}, Early: map[int]int{}, Late: map[int]int{},
		Gaps: map[int]Spread{}}
	byAttempt := map[int][]float64{}
	for _, g := range gaps {
		i := g.Attempt - 2
		if i < 0 || i >= len(delays) {
			c.Unknown++
			continue
		}
		c.Seen[g.Attempt]++
		byAttempt[g.Attempt] = append(byAttempt[g.Attempt], g.Gap.Seconds())
		want := float64(delays[i])
		switch d := float64(g.Gap); {
		case d < want*(1-tolerance):
			c.Early[g.Attempt]++
		case d > want*(1+tolerance):
			c.Late[g.Attempt]++
		default:
			c.OnSchedule[g.Attempt]++
		}
	}
	for n, vs := range byAttempt {
		s := SpreadOf(vs)
		s.Runs = nil // every gap would make the report large
		c.Gaps[n] = s
	}
	return c
}

// OffSchedule is how many seen retries came outside the tolerance.
func (c ScheduleCheck) OffSchedule() int {
	n := c.Unknown
	for _, v := range c.Early {
		n += v
	}
	for _, v := range c.Late {
		n += v
	}
	return n
}

// String is "attempt 2: 40/41 on schedule (1 late), attempt 3: …", or
// "no retry seen".
func (c ScheduleCheck) String() string {
	var ns []int
	for n := range c.Seen {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	out := ""
	for _, n := range ns {
		if out != "" {
			out += ", "
		}
		out += fmt.Sprintf("attempt %d: %d/%d on schedule", n, c.OnSchedule[n], c.Seen[n])
		if e, l := c.Early[n], c.Late[n]; e+l > 0 {
			out += fmt.Sprintf(" (%d early, %d late)", e, l)
		}
		if g, ok := c.Gaps[n]; ok {
			out += fmt.Sprintf(" gap %.1f s [%.1f–%.1f]", g.Median, g.Min, g.Max)
		}
	}
	if c.Unknown > 0 {
		out += fmt.Sprintf(", %d attempts numbered outside 2…5", c.Unknown)
	}
	if out == "" {
		return "no retry seen"
	}
	return out
}

// ratioOf is a/b, or 0 when either is not a figure (a scenario that did
// not run, or did nothing).
func ratioOf(a, b float64) float64 {
	if a <= 0 || b <= 0 || math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return 0
	}
	return a / b
}
