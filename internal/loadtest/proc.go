package loadtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat;
// it is 100 on every Linux architecture Go supports.
const clockTicks = 100

// RSS reads VmRSS of a process in bytes from /proc/PID/status.
func RSS(pid int) (int64, error) { return statusBytes(pid, "VmRSS") }

// AnonRSS reads RssAnon of a process in bytes: the resident memory the
// process owns (heap, stacks, runtime metadata), without the pages mapped
// from its binary and other files (RssFile), which are shared and clean.
func AnonRSS(pid int) (int64, error) { return statusBytes(pid, "RssAnon") }

// statusBytes reads a "Name:  123 kB" field of /proc/PID/status in bytes.
func statusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest) // "12345 kB"
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected %s line %q", field, sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		return kb * 1024, err
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// CPUTime reads the user + system CPU a process has used so far from
// /proc/PID/stat.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after its closing parenthesis. utime and stime are
	// fields 14 and 15, i.e. the 12th and 13th after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed utime/stime in /proc/%d/stat", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// MachineCPU reads the CPU time of the whole machine from /proc/stat, all
// cores together: busy (user, nice, system, irq, softirq, steal) and total
// (busy plus idle and iowait).
func MachineCPU() (busy, total time.Duration, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected first line of /proc/stat %q", line)
	}
	var v [8]int64 // user nice system idle iowait irq softirq steal
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("malformed /proc/stat: %w", err)
		}
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / clockTicks }
	busy = tick(v[0] + v[1] + v[2] + v[5] + v[6] + v[7])
	return busy, busy + tick(v[3]+v[4]), nil
}

// Footprint is a process's memory and CPU over one scenario.
type Footprint struct {
	IdleRSSMB  float64 `json:"idle_rss_mb"`  // before the load
	PeakRSSMB  float64 `json:"peak_rss_mb"`  // highest sample during the load
	AfterRSSMB float64 `json:"after_rss_mb"` // a few seconds after the load
	// IdleAnonMB and AfterAnonMB are the RssAnon part of IdleRSSMB and
	// AfterRSSMB: what the processes own, without the binary's pages.
	IdleAnonMB  float64 `json:"idle_anon_rss_mb"`
	AfterAnonMB float64 `json:"after_anon_rss_mb"`
	CPUSeconds  float64 `json:"cpu_s"` // user + system during the load
	// CPUByProcess is CPUSeconds of each process (each replica), in order.
	CPUByProcess []float64 `json:"cpu_s_by_process"`
	// MachineBusy is the share of the whole machine's CPU (all cores) that
	// was busy during the load, whoever used it: near 1, the machine, not
	// the gateway, is the limit. Cores is how many cores that is of.
	MachineBusy float64 `json:"machine_cpu_busy"`
	Cores       int     `json:"cores"`
}

// Sampler samples the summed RSS of processes (a gateway's replicas)
// every interval until Stop.
type Sampler struct {
	pids     []int
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	peak     int64
	idle     int64
	idleAnon int64
	cpuStart []time.Duration
	busy0    time.Duration
	total0   time.Duration
	err      error
}

// StartSampler takes the idle figures of pids and starts sampling them.
func StartSampler(pids []int, every time.Duration) *Sampler {
	s := &Sampler{pids: pids, stop: make(chan struct{}), done: make(chan struct{})}
	s.idle, s.err = sumRSS(pids)
	s.idleAnon, _ = sumOver(pids, AnonRSS)
	s.peak = s.idle
	s.cpuStart = eachCPU(pids)
	s.busy0, s.total0, _ = MachineCPU()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				if v, err := sumRSS(pids); err == nil {
					s.mu.Lock()
					s.peak = max(s.peak, v)
					s.mu.Unlock()
				}
			}
		}
	}()
	return s
}

// Stop ends the sampling, waits settle for the process to calm down and
// returns the footprint (CPU is counted up to the end of the load, not
// the settle time).
func (s *Sampler) Stop(settle time.Duration) (Footprint, error) {
	cpuEnd := eachCPU(s.pids)
	busy1, total1, merr := MachineCPU()
	close(s.stop)
	<-s.done
	time.Sleep(settle)
	after, aerr := sumRSS(s.pids)
	afterAnon, _ := sumOver(s.pids, AnonRSS)
	s.mu.Lock()
	defer s.mu.Unlock()
	f := Footprint{IdleRSSMB: mb(s.idle), PeakRSSMB: mb(max(s.peak, after)), AfterRSSMB: mb(after),
		IdleAnonMB: mb(s.idleAnon), AfterAnonMB: mb(afterAnon), Cores: runtime.NumCPU()}
	var cerr error
	for i := range s.pids {
		if cpuEnd[i] < 0 || s.cpuStart[i] < 0 {
			cerr = fmt.Errorf("CPU time of process %d unreadable", s.pids[i])
			continue
		}
		sec := (cpuEnd[i] - s.cpuStart[i]).Seconds()
		f.CPUByProcess = append(f.CPUByProcess, sec)
		f.CPUSeconds += sec
	}
	if merr == nil && total1 > s.total0 {
		f.MachineBusy = float64(busy1-s.busy0) / float64(total1-s.total0)
	}
	for _, err := range []error{s.err, cerr, aerr, merr} {
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

func sumRSS(pids []int) (int64, error) { return sumOver(pids, RSS) }

// eachCPU reads the CPU time of every process; -1 where unreadable.
func eachCPU(pids []int) []time.Duration {
	out := make([]time.Duration, len(pids))
	for i, p := range pids {
		v, err := CPUTime(p)
		if err != nil {
			v = -1
		}
		out[i] = v
	}
	return out
}

// sumOver adds up a figure of every process.
func sumOver[T int64 | time.Duration](pids []int, read func(int) (T, error)) (T, error) {
	var sum T
	for _, p := range pids {
		v, err := read(p)
		if err != nil {
			return sum, err
		}
		sum += v
	}
	return sum, nil
}

func mb(b int64) float64 { return float64(b*10/(1<<20)) / 10 }
