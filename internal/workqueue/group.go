package workqueue

import (
	"context"
	"sync"
	"time"
)

// Group is a group commit: writes that arrive while one statement runs go
// together in the next. The first write of a quiet moment runs at once,
// alone, so nothing waits for company; under load each statement carries
// what queued behind the one before, up to Max, and the statements per
// second stay near one per round trip rather than one per write.
//
// Exec runs one batch and answers each input, by index. It runs with a
// context of its own, bounded by Timeout and not ended by any caller's:
// the statement serves several callers, and one giving up must not cut it
// short for the others.
type Group[In, Out any] struct {
	Max     int
	Timeout time.Duration
	Exec    func(ctx context.Context, batch []In) ([]Out, []error)

	mu      sync.Mutex
	busy    bool // a flush goroutine runs
	pending []*groupCall[In, Out]
}

type groupCall[In, Out any] struct {
	in   In
	out  Out
	err  error
	done chan struct{}
}

// Do queues in for the next statement and returns its answer. It waits for
// the statement even when ctx ends: a caller that left before knowing
// whether its write committed could not act on it safely, and the wait is
// bounded by Timeout.
func (g *Group[In, Out]) Do(in In) (Out, error) {
	c := &groupCall[In, Out]{in: in, done: make(chan struct{})}
	g.mu.Lock()
	g.pending = append(g.pending, c)
	if !g.busy {
		g.busy = true
		go g.flush()
	}
	g.mu.Unlock()
	<-c.done
	return c.out, c.err
}

// flush runs what is pending, batch after batch, until nothing is.
func (g *Group[In, Out]) flush() {
	for {
		g.mu.Lock()
		n := min(len(g.pending), g.Max)
		batch := g.pending[:n:n]
		g.pending = g.pending[n:]
		if n == 0 {
			g.pending = nil
			g.busy = false
		}
		g.mu.Unlock()
		if n == 0 {
			return
		}
		in := make([]In, n)
		for i, c := range batch {
			in[i] = c.in
		}
		ctx, cancel := context.WithTimeout(context.Background(), g.Timeout)
		outs, errs := g.Exec(ctx, in)
		cancel()
		for i, c := range batch {
			if i < len(outs) {
				c.out = outs[i]
			}
			if i < len(errs) {
				c.err = errs[i]
			}
			close(c.done)
		}
	}
}
