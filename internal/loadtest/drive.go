package loadtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is how load is offered.
type Mode string

const (
	// Open paces requests at a fixed rate whatever the server does, and
	// measures each from the time it was meant to be sent.
	Open Mode = "open"
	// Closed keeps N requests outstanding (N connections), each sent as
	// soon as the previous one on its connection is answered.
	Closed Mode = "closed"
)

// Shape is the load of one scenario.
type Shape struct {
	Mode     Mode
	Rate     float64       // open loop: requests per second
	Conns    int           // closed loop: concurrent connections
	Duration time.Duration // how long requests are started (0: until Stop)
	// Stop, when closed, ends the load early: no request starts after it,
	// those in flight finish.
	Stop <-chan struct{}
	// MaxInFlight bounds the open loop's outstanding requests; a request
	// due while that many are outstanding is not sent and counts as
	// "overload" (the client, not the server, gave up on the pace).
	MaxInFlight int
}

func (s Shape) String() string {
	if s.Mode == Open {
		return fmt.Sprintf("open %.0f/s", s.Rate)
	}
	return fmt.Sprintf("closed %d conns", s.Conns)
}

// Call performs request number seq, which was due at intended, and
// returns "" when it succeeded or its outcome otherwise (an HTTP status
// such as "429", or "transport").
type Call func(ctx context.Context, seq int, intended time.Time) string

// Drove is what Drive did.
type Drove struct {
	Started int
	Elapsed time.Duration // from the first request started to the last answered
}

// Drive offers load of shape s, calling call for every request and
// recording each outcome in rec. Latency is measured from the intended
// send time in the open loop and from the send time in the closed loop.
func Drive(ctx context.Context, s Shape, rec *Recorder, call Call) Drove {
	var started atomic.Int64
	one := func(seq int, intended time.Time) {
		started.Add(1)
		if out := call(ctx, seq, intended); out != "" {
			rec.Fail(out)
			return
		}
		rec.OK(time.Since(intended))
	}
	begin := time.Now()
	end := begin.Add(s.Duration)
	if s.Duration <= 0 {
		end = begin.Add(100 * 365 * 24 * time.Hour)
	}
	stopped := func() bool {
		select {
		case <-s.Stop:
			return true
		default:
			return ctx.Err() != nil
		}
	}
	var wg sync.WaitGroup
	switch s.Mode {
	case Open:
		interval := time.Duration(float64(time.Second) / s.Rate)
		limit := s.MaxInFlight
		if limit <= 0 {
			limit = 1024
		}
		slots := make(chan struct{}, limit)
		for i := 0; ; i++ {
			due := begin.Add(time.Duration(i) * interval)
			if !due.Before(end) || stopped() {
				break
			}
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-s.Stop:
				case <-ctx.Done():
				}
				if stopped() {
					break
				}
			}
			select {
			case slots <- struct{}{}:
			default:
				rec.Fail("overload")
				continue
			}
			wg.Add(1)
			go func(seq int, due time.Time) {
				defer wg.Done()
				defer func() { <-slots }()
				one(seq, due)
			}(i, due)
		}
	case Closed:
		var seq atomic.Int64
		for range max(1, s.Conns) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) && !stopped() {
					one(int(seq.Add(1)-1), time.Now())
				}
			}()
		}
	}
	wg.Wait()
	return Drove{Started: int(started.Load()), Elapsed: time.Since(begin)}
}
