package webhooks

import "testing"

func TestBreakerTransitions(t *testing.T) {
	t.Parallel()
	answer := func(status int) outcome { return outcome{status: status, success: status >= 200 && status < 300} }
	noAnswer := outcome{message: msgTimeout, retryable: true}
	cases := []struct {
		name              string
		start             breaker
		outcomes          []outcome
		wantOpen          bool
		wantAllowed       int
		wantFailuresAfter int
	}{
		{"a new lane starts slow", newBreaker(8, 0, 0), nil, false, slowStart, 0},
		{"successes double the limit up to the bound", newBreaker(8, 0, 0),
			[]outcome{answer(200), answer(204), answer(200)}, false, 8, 0},
		{"a failure halves it", newBreaker(8, 0, 8), []outcome{noAnswer}, false, 4, 1},
		{"five failures in a row open it", newBreaker(8, 0, 8),
			[]outcome{noAnswer, answer(503), noAnswer, answer(429), answer(408)}, true, 1, 5},
		{"a client error is an answer: it closes", newBreaker(8, 7, 1), []outcome{answer(404)}, false, 2, 0},
		{"the probe's success closes it", newBreaker(8, 9, 1), []outcome{answer(200)}, false, 2, 0},
		{"a failed probe keeps it open", newBreaker(8, 9, 1), []outcome{noAnswer}, true, 1, 10},
		{"a cut-off attempt says nothing", newBreaker(8, 4, 4), []outcome{{interrupted: true}}, false, 4, 4},
		{"the kept limit never passes the bound", newBreaker(2, 0, 8), nil, false, 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.start
			for _, o := range tc.outcomes {
				b.record(o)
			}
			if b.open() != tc.wantOpen || b.allowed() != tc.wantAllowed || b.failures != tc.wantFailuresAfter {
				t.Errorf("open=%v allowed=%d failures=%d, want open=%v allowed=%d failures=%d",
					b.open(), b.allowed(), b.failures, tc.wantOpen, tc.wantAllowed, tc.wantFailuresAfter)
			}
		})
	}
}
