package loadtest

import (
	"os"
	"testing"
	"time"
)

// TestProcFigures reads this test process's own figures, and refuses a
// process that does not exist.
func TestProcFigures(t *testing.T) {
	self := os.Getpid()
	if rss, err := RSS(self); err != nil || rss < 1<<20 {
		t.Errorf("RSS of self = %d, %v; want at least 1 MiB", rss, err)
	}
	if cpu, err := CPUTime(self); err != nil || cpu < 0 {
		t.Errorf("CPU of self = %s, %v", cpu, err)
	}
	both, err := sumRSS([]int{self, self})
	one, _ := RSS(self)
	if err != nil || both < one {
		t.Errorf("sum of two = %d, %v; one = %d", both, err, one)
	}
	if _, err := RSS(1 << 30); err == nil {
		t.Error("RSS of a missing process: no error")
	}
	s := StartSampler([]int{self}, time.Millisecond)
	fp, err := s.Stop(0)
	if err != nil || fp.IdleRSSMB <= 0 || fp.PeakRSSMB < fp.IdleRSSMB {
		t.Errorf("footprint %+v, %v", fp, err)
	}
}
