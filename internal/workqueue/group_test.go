package workqueue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/workqueue"
)

// TestGroup holds the first statement open while more writes arrive: they
// must go together in the second, each answered with its own result, and a
// batch never larger than Max.
func TestGroup(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	g := &workqueue.Group[int, string]{Max: 4, Timeout: time.Second,
		Exec: func(ctx context.Context, batch []int) ([]string, []error) {
			mu.Lock()
			first := len(sizes) == 0
			sizes = append(sizes, len(batch))
			mu.Unlock()
			if first {
				<-release
			}
			if _, ok := ctx.Deadline(); !ok {
				t.Error("a batch's context has no bound of its own")
			}
			outs, errs := make([]string, len(batch)), make([]error, len(batch))
			for i, n := range batch {
				if n%3 == 0 {
					errs[i] = fmt.Errorf("refused %d", n)
					continue
				}
				outs[i] = fmt.Sprint("ok ", n)
			}
			return outs, errs
		}}
	check := func(n int, out string, err error) {
		if n%3 == 0 {
			if err == nil || err.Error() != fmt.Sprint("refused ", n) {
				t.Errorf("write %d: err %v, want its own refusal", n, err)
			}
			return
		}
		if err != nil || out != fmt.Sprint("ok ", n) {
			t.Errorf("write %d: %q, %v; want its own answer", n, out, err)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { out, err := g.Do(1); check(1, out, err) })
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == 1 })
	for n := 2; n <= 10; n++ {
		wg.Go(func() { out, err := g.Do(n); check(n, out, err) })
	}
	time.Sleep(50 * time.Millisecond) // the nine queue behind the open statement
	close(release)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	want := []int{1, 4, 4, 1}
	if fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Fatalf("batches %v, want %v", sizes, want)
	}
}

// TestGroupAloneRunsAtOnce: a write with nothing queued is not held back.
func TestGroupAloneRunsAtOnce(t *testing.T) {
	g := &workqueue.Group[int, int]{Max: 8, Timeout: time.Second,
		Exec: func(_ context.Context, batch []int) ([]int, []error) {
			return []int{batch[0] * 2}, nil
		}}
	for n := range 3 {
		if out, err := g.Do(n); out != n*2 || err != nil {
			t.Fatalf("Do(%d) = %d, %v", n, out, err)
		}
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
