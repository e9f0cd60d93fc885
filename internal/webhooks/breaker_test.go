package webhooks

import (
	"context"
	"testing"
	"time"
)

func TestBreakerTransitions(t *testing.T) {
	t.Parallel()
	answer := func(status int) outcome { return outcome{status: status, success: status >= 200 && status < 300} }
	noAnswer := outcome{message: msgTimeout, retryable: true}
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	const cooldown = 30 * time.Second
	var closed time.Time
	cases := []struct {
		name              string
		start             breaker
		outcomes          []outcome // recorded at now
		wantOpen          bool
		wantAllowed       int // at now
		wantAllowedLater  int // a cool-down after now
		wantFailuresAfter int
	}{
		{"a new lane starts slow", newBreaker(8, 0, 0, closed), nil, false, slowStart, slowStart, 0},
		{"successes double the limit up to the bound", newBreaker(8, 0, 0, closed),
			[]outcome{answer(200), answer(204), answer(200)}, false, 8, 8, 0},
		{"a failure halves it", newBreaker(8, 0, 8, closed), []outcome{noAnswer}, false, 4, 4, 1},
		{"five failures in a row open it and it cools down", newBreaker(8, 0, 8, closed),
			[]outcome{noAnswer, answer(503), noAnswer, answer(429), answer(408)}, true, 0, 1, 5},
		{"a client error is an answer: it closes", newBreaker(8, 7, 1, closed), []outcome{answer(404)}, false, 2, 2, 0},
		{"the probe's success closes it", newBreaker(8, 9, 1, closed), []outcome{answer(200)}, false, 2, 2, 0},
		{"a failed probe keeps it open and cools down", newBreaker(8, 9, 1, closed), []outcome{noAnswer}, true, 0, 1, 10},
		{"a cool-down kept in the lane's row holds", newBreaker(8, 5, 1, now.Add(cooldown/2)), nil, true, 0, 1, 5},
		{"a cool-down that has passed lets the probe out", newBreaker(8, 5, 1, now.Add(-time.Second)), nil, true, 1, 1, 5},
		{"a cut-off attempt says nothing", newBreaker(8, 4, 4, closed), []outcome{{interrupted: true}}, false, 4, 4, 4},
		{"the kept limit never passes the bound", newBreaker(2, 0, 8, closed), nil, false, 2, 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.start
			for _, o := range tc.outcomes {
				b.record(o, now, cooldown)
			}
			later := now.Add(cooldown)
			if b.open() != tc.wantOpen || b.allowed(now) != tc.wantAllowed || b.allowed(later) != tc.wantAllowedLater ||
				b.failures != tc.wantFailuresAfter {
				t.Errorf("open=%v allowed=%d then %d failures=%d, want open=%v allowed=%d then %d failures=%d",
					b.open(), b.allowed(now), b.allowed(later), b.failures,
					tc.wantOpen, tc.wantAllowed, tc.wantAllowedLater, tc.wantFailuresAfter)
			}
		})
	}
}

// TestCooldownFor: the production schedule gets the full cool-down; a
// shortened one an eighth of its length.
func TestCooldownFor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		delays []time.Duration
		want   time.Duration
	}{
		{"production", DefaultRetryDelays, probeCooldown},
		{"a 30 s test schedule", []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}, 3750 * time.Millisecond},
	}
	for _, tc := range cases {
		if got := cooldownFor(tc.delays); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFailingShare: the lanes of failing endpoints together hold at most
// failingShare turns at the database; a healthy lane never waits for one,
// and a caller that is stopping goes on without one.
func TestFailingShare(t *testing.T) {
	t.Parallel()
	failing, healthy := newBreaker(8, 1, 1, time.Time{}), newBreaker(8, 0, 8, time.Time{})
	cases := []struct {
		name      string
		b         breaker
		stopping  bool
		wantTaken bool // whether the call holds one of the turns
	}{
		{"a healthy lane goes straight on", healthy, false, false},
		{"a failing lane waits for a turn", failing, false, true},
		{"a stopping failing lane goes on without one", failing, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			turns := newDBTurns()
			var gives []func()
			for range failingShare {
				gives = append(gives, turns.take(context.Background(), failing))
			}
			if len(turns) != failingShare {
				t.Fatalf("%d turns held after %d takes, want %d", len(turns), failingShare, failingShare)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.stopping {
				cancel()
			}
			got := make(chan func(), 1)
			go func() { got <- turns.take(ctx, tc.b) }()
			if tc.wantTaken {
				select {
				case <-got:
					t.Fatal("a fifth failing lane got a turn while four were held")
				default:
				}
				gives[0]() // one gives its turn back: the waiting lane takes it
				give := <-got
				if len(turns) != failingShare {
					t.Fatalf("%d turns held, want %d", len(turns), failingShare)
				}
				give()
			} else {
				give := <-got
				give()
				gives[0]()
			}
			cancel()
			for _, g := range gives[1:] {
				g()
			}
			if len(turns) != 0 {
				t.Fatalf("%d turns still held after every give", len(turns))
			}
		})
	}
}

// TestFailingStepsRunInATurn: a failing lane's database step runs in a
// turn of the share, which it gives back when the step ends, and is done
// when run returns; a healthy lane's step takes no turn.
func TestFailingStepsRunInATurn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		b    breaker
		held int // turns held while the step runs
	}{
		{"healthy: inline, no turn", newBreaker(8, 0, 8, time.Time{}), 0},
		{"failing: in a turn", newBreaker(8, 1, 1, time.Time{}), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			turns := newDBTurns()
			held, ran := -1, false
			turns.run(context.Background(), tc.b, func() { held, ran = len(turns), true })
			if !ran || held != tc.held {
				t.Fatalf("step ran %v holding %d turns, want %d", ran, held, tc.held)
			}
			if len(turns) != 0 {
				t.Fatalf("%d turns still held after the step", len(turns))
			}
		})
	}
}

// TestLaneHoldsWhatItCanSend: a lane keeps laneWindow deliveries per
// attempt its breaker allows, so a failing endpoint's lane does not hold a
// healthy one's window of bodies; an open one takes the whole window, since
// it refuses what it fetches at once.
func TestLaneHoldsWhatItCanSend(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		b    breaker
		want int
	}{
		{"a healthy endpoint at its bound", newBreaker(8, 0, 8, time.Time{}), 8 * laneWindow},
		{"a new endpoint", newBreaker(8, 0, 0, time.Time{}), slowStart * laneWindow},
		{"a failing endpoint, breaker closed", newBreaker(8, 3, 1, time.Time{}), laneWindow},
		{"an open breaker refuses the whole window", newBreaker(8, breakerThreshold, 1, time.Time{}), 8 * laneWindow},
		{"a bound below the limit kept", newBreaker(2, 0, 8, time.Time{}), 2 * laneWindow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &lane{breaker: tc.b}
			if got := l.ahead(); got != tc.want {
				t.Fatalf("ahead %d, want %d", got, tc.want)
			}
		})
	}
}

// TestBoundOfDestination: an HTTP receiver's lane keeps the document's
// bound; a broker's takes brokerInFlight; a lane whose URL changes takes
// the new bound, its limit cut to it.
func TestBoundOfDestination(t *testing.T) {
	t.Parallel()
	s := &Service{perSubscription: 8}
	cases := []struct {
		name string
		url  string
		want int
	}{
		{"an HTTP receiver", "https://example.com/hook", 8},
		{"a JetStream subject", "nats://broker.example.com:4222/events.crm", brokerInFlight},
		{"a RabbitMQ exchange", "amqp://user:xxxxx@broker.example.com:5672/?exchange=x&routing_key=k", brokerInFlight},
		{"amqps", "amqps://broker.example.com/?exchange=x&routing_key=k", brokerInFlight},
	}
	for _, tc := range cases {
		if got := s.boundOf(subscriptionRow{URL: tc.url}); got != tc.want {
			t.Errorf("%s: bound %d, want %d", tc.name, got, tc.want)
		}
	}
	l := s.newLane(1, laneRun{}, newBreaker(8, 0, 8, time.Time{}))
	l.setBound(brokerInFlight)
	if l.breaker.bound != brokerInFlight || l.breaker.limit != 8 || l.ahead() != 8*laneWindow {
		t.Errorf("to a broker: bound %d limit %d ahead %d, want %d, 8 (it grows with acknowledgements), %d",
			l.breaker.bound, l.breaker.limit, l.ahead(), brokerInFlight, 8*laneWindow)
	}
	for range 3 {
		l.breaker.record(outcome{success: true}, time.Now(), time.Second)
	}
	if l.breaker.limit != brokerInFlight {
		t.Errorf("after three acknowledgements the limit is %d, want %d", l.breaker.limit, brokerInFlight)
	}
	l.setBound(8)
	if l.breaker.bound != 8 || l.breaker.limit != 8 || l.ahead() != 8*laneWindow {
		t.Errorf("back to HTTP: bound %d limit %d ahead %d, want 8, 8, %d", l.breaker.bound, l.breaker.limit, l.ahead(), 8*laneWindow)
	}
}
