package clustertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Net is the suite's network: a bridge on the machine and one network
// namespace per replica, joined to the bridge by a veth pair. The machine
// end of the bridge (HostIP) is where PostgreSQL, Redis, HAProxy, the
// provider simulator and the webhook receivers listen, so a replica reaches
// all of them only over its veth: taking the veth down cuts it off from
// everything at once, as a host losing its network would be.
type Net struct {
	tag    string // this run's pid: every name below carries it
	prefix string // "10.231.N." : the /24 of this run
	HostIP string
	n      int
}

// namePrefix starts every namespace the suite creates; stale ones (their
// run's pid gone) are removed at the start of the next run.
const namePrefix = "gwcl-"

// NewNet creates the bridge and n namespaces. It fails with a message that
// says why when namespaces cannot be made (not root, no CAP_SYS_ADMIN, no
// iproute2): the suite must not pass by skipping.
func NewNet(n int) (_ *Net, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the cluster suite makes network namespaces (ip netns) and must run as root; CI runs as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("the cluster suite needs iproute2's ip (apt-get install -y iproute2)")
	}
	sweepStale()
	pid := os.Getpid()
	nt := &Net{tag: strconv.Itoa(pid), prefix: fmt.Sprintf("10.231.%d.", pid%250), n: n}
	nt.HostIP = nt.prefix + "1"
	defer func() {
		if err != nil {
			nt.Close()
		}
	}()
	if err := ip("link", "add", nt.bridge(), "type", "bridge"); err != nil {
		return nil, fmt.Errorf("cannot create a bridge (network namespaces unavailable here?): %w", err)
	}
	if err := ip("addr", "add", nt.HostIP+"/24", "dev", nt.bridge()); err != nil {
		return nil, err
	}
	if err := ip("link", "set", nt.bridge(), "up"); err != nil {
		return nil, err
	}
	for i := range n {
		ns, host, peer := nt.NS(i), nt.hostEnd(i), fmt.Sprintf("gwn%sx%d", nt.tag, i)
		if err := ip("netns", "add", ns); err != nil {
			return nil, fmt.Errorf("cannot create network namespace %s (ip netns needs root and CAP_SYS_ADMIN): %w", ns, err)
		}
		for _, args := range [][]string{
			{"link", "add", host, "type", "veth", "peer", "name", peer},
			{"link", "set", peer, "netns", ns},
			{"link", "set", host, "master", nt.bridge()},
			{"link", "set", host, "up"},
			{"-n", ns, "addr", "add", nt.IP(i) + "/24", "dev", peer},
			{"-n", ns, "link", "set", peer, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
		} {
			if err := ip(args...); err != nil {
				return nil, err
			}
		}
	}
	return nt, nil
}

func (nt *Net) bridge() string       { return "gwb" + nt.tag }
func (nt *Net) hostEnd(i int) string { return fmt.Sprintf("gwh%sx%d", nt.tag, i) }

// NS is replica i's namespace.
func (nt *Net) NS(i int) string { return fmt.Sprintf("%s%s-%d", namePrefix, nt.tag, i) }

// IP is replica i's address.
func (nt *Net) IP(i int) string { return nt.prefix + strconv.Itoa(11+i) }

// CIDR is the suite's subnet.
func (nt *Net) CIDR() string { return nt.prefix + "0/24" }

// Cut takes replica i's veth down on the machine's side: its packets go
// nowhere, its TCP connections stall as over a broken link.
func (nt *Net) Cut(i int) error { return ip("link", "set", nt.hostEnd(i), "down") }

// Restore brings replica i's link back.
func (nt *Net) Restore(i int) error { return ip("link", "set", nt.hostEnd(i), "up") }

// Close removes the namespaces (their veth pairs go with them) and the
// bridge; errors are ignored, for what is already gone.
func (nt *Net) Close() {
	for i := range nt.n {
		_ = ip("netns", "del", nt.NS(i))
		_ = ip("link", "del", nt.hostEnd(i))
	}
	_ = ip("link", "del", nt.bridge())
}

// sweepStale removes namespaces and links a killed earlier run left.
func sweepStale() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		name := f[0]
		rest, ok := strings.CutPrefix(name, namePrefix)
		if !ok {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		if !alive(pid) {
			_ = ip("netns", "del", name)
		}
	}
	out, _ = exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		for _, p := range []string{"gwb", "gwh"} {
			rest, ok := strings.CutPrefix(name, p)
			if !ok {
				continue
			}
			pid, _, _ := strings.Cut(rest, "x")
			if _, err := strconv.Atoi(pid); err == nil && !alive(pid) {
				_ = ip("link", "del", name)
			}
		}
	}
}

func alive(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	return syscall.Kill(n, 0) == nil
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// DialIn dials from inside namespace ns: a socket belongs to the namespace
// of the thread that made it, so a locked thread joins ns, dials and goes
// back to the machine's namespace before it is unlocked. The thread must
// not end instead: a child process started from it (a replica, with
// Pdeathsig) would be killed with it.
func DialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer home.Close()
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("setns %s: %w", ns, err)}
			return
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			// Back home: the thread may serve other goroutines again.
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}
