package workqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/workqueue"
)

func TestDoubling(t *testing.T) {
	cases := []struct {
		n    int
		want time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {4, 8 * time.Second}, {20, time.Minute}}
	for _, c := range cases {
		t.Run(c.want.String(), func(t *testing.T) {
			if got := workqueue.Doubling(c.n, time.Second, time.Minute); got != c.want {
				t.Fatalf("Doubling(%d) = %s, want %s", c.n, got, c.want)
			}
		})
	}
}

func TestJitterStaysWithinItsFraction(t *testing.T) {
	for range 1000 {
		if d := workqueue.Jitter(time.Second, 0.1); d < time.Second || d > 1100*time.Millisecond {
			t.Fatalf("Jitter(1s, 10%%) = %s", d)
		}
	}
	if d := workqueue.Jitter(0, 0.1); d != 0 {
		t.Fatalf("Jitter(0) = %s", d)
	}
}

func TestPause(t *testing.T) {
	w := workqueue.NewWake()
	w.Ring()
	w.Ring() // merges into the pending ring
	if !workqueue.Pause(context.Background(), time.Hour, w) {
		t.Fatal("a ring must end the pause")
	}
	select {
	case <-w:
		t.Fatal("two rings left two wake-ups")
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if workqueue.Pause(ctx, time.Hour, nil, w) {
		t.Fatal("an ended context must end the pause with false")
	}
}

func TestPersist(t *testing.T) {
	cases := []struct {
		name      string
		failures  int
		bound     time.Duration
		cancelled bool
		wantErr   bool
	}{
		{"first try", 0, time.Second, false, false},
		{"after failures", 3, 5 * time.Second, false, false},
		{"caller already stopping", 2, 5 * time.Second, true, false},
		{"bound passes", 1000, 200 * time.Millisecond, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			if c.cancelled {
				cancel()
			}
			defer cancel()
			tries := 0
			err := workqueue.Persist(ctx, c.bound, func(ctx context.Context) error {
				if ctx.Err() != nil {
					t.Fatal("the write's context must outlive the caller's")
				}
				tries++
				if tries <= c.failures {
					return errors.New("connection reset")
				}
				return nil
			})
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v after %d tries, want error: %v", err, tries, c.wantErr)
			}
			if !c.wantErr && tries != c.failures+1 {
				t.Fatalf("%d tries, want %d", tries, c.failures+1)
			}
		})
	}
}
