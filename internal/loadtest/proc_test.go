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
	if anon, err := AnonRSS(self); err != nil || anon <= 0 {
		t.Errorf("anonymous RSS of self = %d, %v", anon, err)
	}
	if _, err := RSS(1 << 30); err == nil {
		t.Error("RSS of a missing process: no error")
	}
	busy, total, err := MachineCPU()
	if err != nil || busy <= 0 || total < busy {
		t.Errorf("machine CPU busy %s of %s, %v", busy, total, err)
	}
	s := StartSampler([]int{self, self}, time.Millisecond)
	// Use a few clock ticks of CPU (counted in CPU time, not wall time: the
	// machine may be busy with other work).
	for start, _ := CPUTime(self); ; {
		if now, err := CPUTime(self); err != nil || now-start >= 30*time.Millisecond {
			break
		}
	}
	fp, err := s.Stop(0)
	if err != nil || fp.IdleRSSMB <= 0 || fp.PeakRSSMB < fp.IdleRSSMB || fp.IdleAnonMB <= 0 || fp.AfterAnonMB <= 0 {
		t.Errorf("footprint %+v, %v", fp, err)
	}
	if len(fp.CPUByProcess) != 2 || fp.CPUByProcess[0]+fp.CPUByProcess[1] != fp.CPUSeconds || fp.CPUSeconds <= 0 {
		t.Errorf("CPU by process %v, total %v", fp.CPUByProcess, fp.CPUSeconds)
	}
	if fp.MachineBusy <= 0 || fp.MachineBusy > 1 || fp.Cores < 1 {
		t.Errorf("machine busy %v of %d cores", fp.MachineBusy, fp.Cores)
	}
	if _, err := StartSampler([]int{1 << 30}, time.Millisecond).Stop(0); err == nil {
		t.Error("footprint of a missing process: no error")
	}
}
