package loadtest

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
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

// LoggedGaps reads the retries of companies' subscriptions from the
// gateway's delivery log (PostgreSQL; the load generator's own check, not
// the API, whose times are whole seconds, as coarse as the 10 s delay's
// tolerance). An endpoint that never answers no longer sees most of its
// attempts: an open breaker refuses them on schedule and logs them, so the
// log is where the schedule shows. The gap of attempt n is from the log
// entry of attempt n-1 (written when it ended, the time its next attempt is
// counted from) to the start of attempt n (its entry less its duration).
func LoggedGaps(ctx context.Context, databaseURL string, companyIDs []int64) ([]AttemptGap, error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT l.subscription_id, l.delivery_id, l.attempt, l.created_at, l.duration_ms
FROM webhook_delivery_log l JOIN webhook_subscriptions s ON s.id = l.subscription_id
WHERE s.company_id = ANY($1) ORDER BY l.subscription_id, l.delivery_id, l.attempt`, companyIDs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AttemptGap
	var prevSub int64
	var prevDelivery string
	var prevAttempt int
	var prevAt time.Time
	for rows.Next() {
		var sub, ms int64
		var delivery string
		var attempt int
		var at time.Time
		if err := rows.Scan(&sub, &delivery, &attempt, &at, &ms); err != nil {
			return nil, err
		}
		if sub == prevSub && delivery == prevDelivery && attempt == prevAttempt+1 {
			start := at.Add(-time.Duration(ms) * time.Millisecond)
			out = append(out, AttemptGap{Attempt: attempt, Gap: start.Sub(prevAt)})
		}
		prevSub, prevDelivery, prevAttempt, prevAt = sub, delivery, attempt, at
	}
	return out, rows.Err()
}
