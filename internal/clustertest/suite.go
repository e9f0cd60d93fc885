// Package clustertest is the multi-host fault suite (make cluster, issue
// 26): three gateway replicas, each in a network namespace of its own with
// its own data directory, behind HAProxy (round-robin, health checks on
// /readyz), on one PostgreSQL and one Redis reached over veth pairs. Under
// load through the balancer it rolls the replicas from the binary of the
// commit before the newest migration to the current one, kills a replica
// with SIGKILL, cuts one off the network for 30 s, restarts PostgreSQL and
// stops Redis for 20 s, then checks what the issue lists and prints what
// each fault cost.
package clustertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmsg/gateway/internal/loadtest"
	"github.com/chatmsg/gateway/internal/providersim"
)

// Options configure the suite.
type Options struct {
	BinDir string // gateway and providersim of the current tree
	// OldGateway is the gateway binary of the commit before the newest
	// migration (BuildOld); empty skips the rolling upgrade (and fails the
	// report, which says so).
	OldGateway, OldCommit string
	Replicas              int
	Log                   func(format string, args ...any)
}

const (
	leaseTTL  = 30 * time.Second // connections' default lease
	heartbeat = 10 * time.Second // connections' default heartbeat
	// sendLimit is the API document's send limit per company in any 60 s.
	sendLimit = 600
)

// cluster is one run.
type cluster struct {
	o       Options
	dir     string
	nt      *Net
	pg      *Postgres
	redis   *Redis
	lb      *HAProxy
	prov    *loadtest.Proc
	recv    *loadtest.Receiver
	dbURL   string
	lbURL   string   // the balancer on the bridge (PUBLIC_BASE_URL, the provider's webhooks)
	loURL   string   // the balancer on loopback, where the load's clients come from addresses of their own
	bins    []string // binary each replica runs
	reps    []*loadtest.Proc
	direct  []*loadtest.Client // each replica without the balancer
	setup   *loadtest.Setup
	load    *loadtest.Client
	clients map[string]*loadtest.Client // one client address per kind of request
	sender  []*loadtest.Company
	conns   []*loadtest.Connection
	events  *loadtest.Company
	mgmt    *loadtest.Company
	evNames []string
	subs    map[string]subRef

	mu       sync.Mutex
	answers  []answer
	sends    []loadtest.SendOutcome
	chat     []chatSend
	accepted []string
	uploads  []upload
	moves    []time.Time       // when sessions moved (chat-app sends before the last are partly visible)
	upgraded bool              // every replica runs the current binary
	bodies   map[string]string // error answers' bodies by send text, for the report
	// fenceAt is when each connection's session last changed holder (its
	// fence moved), as the watcher saw it.
	fenceAt map[int64]time.Time
}

// watchSessions records, until ctx ends, when each connection's fence
// changes: what the chat-app simulator of a former holder received is gone
// with it, so a send before the change is checked for duplicates only.
func (c *cluster) watchSessions(ctx context.Context) {
	last := map[int64]int64{}
	for ctx.Err() == nil {
		if all, err := c.sessions(ctx); err == nil {
			now := time.Now()
			c.mu.Lock()
			for id, s := range all {
				if f, ok := last[id]; ok && f != s.fence {
					c.fenceAt[id] = now
				}
				last[id] = s.fence
			}
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

type subRef struct {
	company *loadtest.Company
	id      int64
}

type answer struct {
	at   time.Time
	kind string
	out  string // "" for 2xx
}

type chatSend struct {
	loadtest.SendOutcome
	at   time.Time
	conn int64 // the connection's company channel id
}

type upload struct {
	url  string
	body []byte
	// old: made while a replica ran the old binary, which kept media on
	// its own disk (before the shared store); the upgrade does not move
	// them (gateway admin media migrate does), so they are not checked.
	old bool
}

// Run runs the suite. Everything it creates it removes before it returns,
// on failure too.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	begin := time.Now()
	c := &cluster{o: o, subs: map[string]subRef{}, bodies: map[string]string{}, fenceAt: map[int64]time.Time{}}
	if c.dir, err = os.MkdirTemp("", "gwcluster-"); err != nil {
		return nil, err
	}
	defer c.close()
	// PostgreSQL runs as the postgres user and must reach its directory.
	if err := os.Chmod(c.dir, 0o755); err != nil {
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	rep = &Report{Replicas: o.Replicas, OldCommit: o.OldCommit}
	if err := c.run(ctx, rep); err != nil {
		return nil, err
	}
	rep.Seconds = time.Since(begin).Seconds()
	return rep, nil
}

func (c *cluster) close() {
	for _, p := range c.reps {
		if p != nil {
			p.Stop(5 * time.Second)
		}
	}
	if c.lb != nil {
		c.lb.Stop()
	}
	if c.prov != nil {
		c.prov.Stop(5 * time.Second)
	}
	if c.recv != nil {
		c.recv.Close()
	}
	if c.redis != nil {
		c.redis.Stop()
	}
	if c.pg != nil {
		c.pg.Stop()
	}
	if c.nt != nil {
		c.nt.Close()
	}
	if os.Getenv("CLUSTER_KEEP") != "" {
		c.o.Log("kept %s (CLUSTER_KEEP)", c.dir)
		return
	}
	_ = os.RemoveAll(c.dir)
}

// freePort is a free port on addr.
func freePort(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (c *cluster) start(ctx context.Context) (err error) {
	if c.nt, err = NewNet(c.o.Replicas); err != nil {
		return err
	}
	host := c.nt.HostIP
	pgAddr, err := freePort(host)
	if err != nil {
		return err
	}
	_, pgPort, _ := net.SplitHostPort(pgAddr)
	port, _ := strconv.Atoi(pgPort)
	c.o.Log("PostgreSQL of the suite's own on %s (the machine's is left alone)", pgAddr)
	if c.pg, err = StartPostgres(ctx, filepath.Join(c.dir, "pg"), host, port); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, c.pg.URL("postgres"))
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE gateway")
	conn.Close(ctx)
	if err != nil {
		return err
	}
	c.dbURL = c.pg.URL("gateway")
	redisAddr, err := freePort(host)
	if err != nil {
		return err
	}
	if c.redis, err = StartRedis(ctx, filepath.Join(c.dir, "redis"), redisAddr); err != nil {
		return err
	}
	provAddr, err := freePort(host)
	if err != nil {
		return err
	}
	c.prov = &loadtest.Proc{Name: "providersim", Path: filepath.Join(c.o.BinDir, "providersim"),
		Args: []string{"-listen", provAddr, "-sent-receipts"}, LogPath: filepath.Join(c.dir, "providersim.log")}
	if err := c.prov.Start(); err != nil {
		return err
	}
	if err := waitTCP(ctx, provAddr, c.prov); err != nil {
		return err
	}
	if c.recv, err = loadtest.StartReceiverOn(host + ":0"); err != nil {
		return err
	}
	lbAddr, err := freePort(host)
	if err != nil {
		return err
	}
	var backends []string
	for i := range c.o.Replicas {
		backends = append(backends, c.nt.IP(i)+":8080")
	}
	if c.lb, err = StartHAProxy(ctx, c.dir, lbAddr, backends); err != nil {
		return err
	}
	c.lbURL = "http://" + lbAddr
	_, lbPort, _ := net.SplitHostPort(lbAddr)
	c.loURL = "http://127.0.0.1:" + lbPort
	// The replicas start on the old binary: the rolling upgrade replaces
	// them one by one under load.
	first := filepath.Join(c.o.BinDir, "gateway")
	if c.o.OldGateway != "" {
		first = c.o.OldGateway
	}
	for i := range c.o.Replicas {
		c.bins = append(c.bins, first)
		c.reps = append(c.reps, nil)
		c.direct = append(c.direct, loadtest.NewClient("http://"+c.nt.IP(i)+":8080"))
		if err := c.startReplica(ctx, i); err != nil {
			return err
		}
	}
	if err := c.waitBalanced(ctx); err != nil {
		return err
	}
	stack := &loadtest.Stack{GatewayURL: c.lbURL, ProviderURL: "http://" + provAddr,
		Gateway: &loadtest.Proc{Name: "admin", Path: first, Env: c.env(-1)}}
	c.setup = &loadtest.Setup{Stack: stack, API: loadtest.NewClient(c.lbURL), Provider: providersim.Control{URL: stack.ProviderURL}}
	c.load = loadtest.NewClient(c.lbURL)
	// Each kind of request comes from a loopback address of its own, as
	// different customers' programs do: the gateways see it in
	// X-Forwarded-For (HAProxy is a trusted proxy) and bound the requests
	// in flight per address, not for the whole balancer.
	c.clients = map[string]*loadtest.Client{}
	for n, kind := range []string{"send-0", "send-1", "send-2", "chatapp", "event", "inbound", "upload", "media", "manage"} {
		c.clients[kind] = loadtest.TenantClient(n, c.loURL)
	}
	return c.prepare(ctx)
}

// env is replica i's environment (i < 0: the admin CLI on the machine).
func (c *cluster) env(i int) []string {
	listen := "127.0.0.1:0"
	if i >= 0 {
		listen = c.nt.IP(i) + ":8080"
	}
	env := []string{"LISTEN_ADDR=" + listen, "DATABASE_URL=" + c.dbURL, "REDIS_URL=redis://" + c.redis.Addr,
		"DATA_DIR=" + filepath.Join(c.dir, fmt.Sprintf("data-%d", i)), "CONNECTOR_DRIVER=simulator",
		"OUTBOUND_ALLOW_CIDRS=" + c.nt.CIDR(), "TRUSTED_PROXIES=" + c.nt.HostIP + "/32",
		"PUBLIC_BASE_URL=" + c.lbURL}
	if i >= 0 {
		env = append(env, "METRICS_LISTEN="+c.nt.IP(i)+":9090")
	}
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// startReplica starts replica i in its namespace (ip netns exec execs the
// gateway: the process id is the gateway's) and waits for its /readyz.
func (c *cluster) startReplica(ctx context.Context, i int) error {
	p := c.reps[i]
	if p == nil || p.Path != c.bins[i] {
		p = &loadtest.Proc{Name: fmt.Sprintf("replica-%d", i+1), Path: "ip",
			Args: []string{"netns", "exec", c.nt.NS(i), c.bins[i], "serve"}, Env: c.env(i),
			LogPath: filepath.Join(c.dir, fmt.Sprintf("replica-%d.log", i+1))}
		c.reps[i] = p
	}
	if path, err := execPath("ip"); err == nil {
		p.Path = path
	}
	p.Args[3] = c.bins[i]
	if err := p.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("%s exited at start:\n%s", p.Name, p.LogTail())
		}
		if st, _, err := c.direct[i].Do(ctx, "GET", "/readyz", "", nil); err == nil && st == 200 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after 90 s:\n%s", p.Name, p.LogTail())
}

// waitBalanced waits until the balancer answers through every replica.
func (c *cluster) waitBalanced(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	ok := 0
	for time.Now().Before(deadline) && ok < 2*c.o.Replicas {
		if st, _, err := c.setupOrLoad().Do(ctx, "GET", "/readyz", "", nil); err == nil && st == 200 {
			ok++
		} else {
			ok = 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ok < 2*c.o.Replicas {
		return errors.New("the balancer does not answer 200 on /readyz within 30 s")
	}
	return nil
}

func (c *cluster) setupOrLoad() *loadtest.Client {
	if c.load != nil {
		return c.load
	}
	return loadtest.NewClient(c.lbURL)
}

func (c *cluster) prepare(ctx context.Context) error {
	var err error
	// Three send companies: the first is offered more than its limit of
	// 600 sends a minute, so the limit shared over replicas is tested.
	if c.sender, err = c.setup.Companies(ctx, "cluster-send", 1, 3, 2); err != nil {
		return err
	}
	for i, co := range c.sender {
		conn, err := c.setup.Connect(ctx, co, fmt.Sprintf("5541%09d", i+1),
			[]string{fmt.Sprintf("5551%04d00001", i+1), fmt.Sprintf("5551%04d00002", i+1)})
		if err != nil {
			return fmt.Errorf("chat-app connection: %w", err)
		}
		c.conns = append(c.conns, conn)
		name := fmt.Sprintf("msg-%d", i)
		sub, err := c.setup.Subscribe(ctx, co, name, c.recv.HookURL(name), []string{"omnichat.message.sent"})
		if err != nil {
			return err
		}
		c.recv.Register(name, sub.Secret)
		c.subs[name] = subRef{co, sub.ID}
	}
	evs, err := c.setup.Companies(ctx, "cluster-events", 100, 2, 0)
	if err != nil {
		return err
	}
	c.events, c.mgmt = evs[0], evs[1]
	for i := range 3 {
		name := fmt.Sprintf("ev-%d", i)
		sub, err := c.setup.Subscribe(ctx, c.events, name, c.recv.HookURL(name), []string{"contact.import.completed"})
		if err != nil {
			return err
		}
		c.recv.Register(name, sub.Secret)
		c.subs[name] = subRef{c.events, sub.ID}
		c.evNames = append(c.evNames, name)
	}
	return nil
}

// faultCost is what one fault cost.
type faultCost struct {
	Name         string  `json:"name"`
	Failed       int     `json:"failed_requests"` // 5xx and unanswered while the fault and its recovery lasted
	Requests     int     `json:"requests"`
	RecoverS     float64 `json:"recover_s"` // from the fault until every replica is ready and the balancer answers
	SessionsMove float64 `json:"sessions_move_s,omitempty"`
	Sessions     int     `json:"sessions_moved,omitempty"`
	Note         string  `json:"note,omitempty"`
	start, end   time.Time
}

func (c *cluster) record(kind, out string) {
	c.mu.Lock()
	c.answers = append(c.answers, answer{time.Now(), kind, out})
	c.mu.Unlock()
}

func (c *cluster) run(ctx context.Context, rep *Report) error {
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go c.watchSessions(watch)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range []struct {
		rate float64
		call loadtest.Call
	}{
		{12, c.sendCall(0, false)}, // the hot company: 720 a minute offered
		{3, c.sendCall(1, false)}, {2, c.sendCall(2, false)},
		{2, c.sendCall(1, true)}, {2, c.sendCall(2, true)},
		{4, c.chatappCall()},
		{8, c.publishCall()},
		{3, c.inboundCall()},
		{1, c.uploadCall()},
		{2, c.mediaReadCall()},
		{0.5, c.manageCall()},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loadtest.Drive(ctx, loadtest.Shape{Mode: loadtest.Open, Rate: l.rate, Stop: stop, MaxInFlight: 64}, loadtest.NewRecorder(), l.call)
		}()
	}
	ended := false
	end := func() {
		if !ended {
			ended = true
			close(stop)
			wg.Wait()
		}
	}
	defer end()
	interval := 8 * time.Second
	faults := []func(context.Context, *Report) (*faultCost, error){c.upgrade, c.kill, c.cut, c.restartPostgres, c.stopRedis}
	for _, f := range faults {
		time.Sleep(interval)
		fc, err := f(ctx, rep)
		if err != nil {
			return err
		}
		rep.Faults = append(rep.Faults, fc)
	}
	time.Sleep(interval)
	end()
	loadEnd := time.Now()
	c.o.Log("load done; waiting up to 150 s for every check to hold")
	c.settle(ctx, rep, 150*time.Second)
	rep.SettledIn = time.Since(loadEnd).Seconds()
	c.costs(rep)
	c.mu.Lock()
	for _, v := range []*loadtest.SendVerdict{&rep.Sends, &rep.Chatapp} {
		for i, p := range v.Problems {
			if text, _, ok := strings.Cut(strings.TrimPrefix(p, `"`), `"`); ok && c.bodies[text] != "" {
				v.Problems[i] = p + "; its answer: " + c.bodies[text]
			}
		}
	}
	c.mu.Unlock()
	c.checkMedia(ctx, rep)
	c.checkRate(ctx, rep)
	rep.Answers = map[string]int{}
	c.mu.Lock()
	for _, a := range c.answers {
		o := a.out
		if o == "" {
			o = "2xx"
		}
		rep.Answers[a.kind+" "+o]++
	}
	c.mu.Unlock()
	return nil
}

// failed says whether an answer is a failure of the service (not a
// refusal the client caused or the rate limit).
func failed(out string) bool {
	return out == "transport" || (out != "" && out[0] == '5' && out != "509")
}

// costs counts the failed requests in each fault's window.
func (c *cluster) costs(rep *Report) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range rep.Faults {
		for _, a := range c.answers {
			if a.at.Before(f.start) || a.at.After(f.end) {
				continue
			}
			f.Requests++
			if failed(a.out) {
				f.Failed++
			}
		}
	}
}

// recovered waits until every replica answers /readyz 200 and the
// balancer answers three probes in a row, and returns when that was.
func (c *cluster) recovered(ctx context.Context, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	why := ""
	for time.Now().Before(deadline) {
		why = ""
		for i := range c.reps {
			if st, _, err := c.probe(ctx, c.direct[i], "/readyz"); err != nil || st != 200 {
				why = fmt.Sprintf("replica %d's /readyz: %d %v", i+1, st, err)
				break
			}
		}
		if why == "" {
			for range 3 {
				if st, _, err := c.probe(ctx, c.load, "/readyz"); err != nil || st != 200 {
					why = fmt.Sprintf("the balancer's /readyz: %d %v", st, err)
				}
			}
			if why == "" {
				return time.Now(), nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i, p := range c.reps {
		if p.Exited() {
			why += fmt.Sprintf("\nreplica %d exited; the end of its log:\n%s", i+1, p.LogTail())
		}
	}
	return time.Time{}, fmt.Errorf("the cluster did not recover within %s (last: %s)", limit, why)
}

// probe is a GET with a short bound, on a fresh connection: a pooled one
// may have stalled across a cut.
func (c *cluster) probe(ctx context.Context, cl *loadtest.Client, path string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", cl.Base()+path, nil)
	req.Close = true
	resp, err := cl.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, nil
}

// upgrade replaces each replica running the old binary with the current
// one. The first new replica migrates the schema while the old ones keep
// serving: they are probed directly the whole time and must answer.
func (c *cluster) upgrade(ctx context.Context, rep *Report) (*faultCost, error) {
	fc := &faultCost{Name: "rolling upgrade", start: time.Now()}
	newBin := filepath.Join(c.o.BinDir, "gateway")
	if c.o.OldGateway == "" {
		rep.violation("no rolling upgrade: no binary of the commit before the newest migration")
		fc.Note = "skipped"
		fc.end = time.Now()
		return fc, nil
	}
	before, _ := c.migrations(ctx)
	{
		i := len(c.reps) - 1
		c.o.Log("upgrade: replica %d to the current binary while the others (old binary %s) serve", i+1, c.o.OldCommit)
		probeStop := make(chan struct{})
		probed := make(chan []string)
		go func() { probed <- c.probeOld(ctx, i, probeStop) }()
		c.reps[i].Stop(15 * time.Second)
		c.bins[i] = newBin
		err := c.startReplica(ctx, i)
		close(probeStop)
		bad := <-probed
		if err != nil {
			return nil, err
		}
		for _, b := range bad {
			rep.violation("an old replica failed while the new one migrated: " + b)
		}
	}
	after, _ := c.migrations(ctx)
	fc.Note = fmt.Sprintf("old %s; the new replica applied %d migration(s) while old replicas served", c.o.OldCommit, after-before)
	rep.MigrationsApplied = after - before
	if after <= before {
		rep.violation("the rolling upgrade applied no migration: the old binary is not older than the schema")
	}
	for i := len(c.reps) - 2; i >= 0; i-- {
		c.o.Log("upgrade: replica %d", i+1)
		c.reps[i].Stop(15 * time.Second)
		c.bins[i] = newBin
		if err := c.startReplica(ctx, i); err != nil {
			return nil, err
		}
	}
	c.setup.Stack.Gateway.Path = newBin
	// A replica that stops hands its sessions on: what the simulators in
	// the stopped processes received is gone with them.
	c.mu.Lock()
	c.moves = append(c.moves, time.Now())
	c.upgraded = true
	c.mu.Unlock()
	at, err := c.recovered(ctx, time.Minute)
	if err != nil {
		return nil, err
	}
	fc.end = at
	fc.RecoverS = at.Sub(fc.start).Seconds()
	return fc, nil
}

// probeOld asks every replica but skip, directly, for an authenticated
// read every 200 ms until stop, and lists what failed.
func (c *cluster) probeOld(ctx context.Context, skip int, stop <-chan struct{}) []string {
	var bad []string
	for {
		for i := range c.reps {
			if i == skip {
				continue
			}
			st, b, err := c.direct[i].Do(ctx, "GET", "/api/channel-webhooks?perPage=1", c.mgmt.Token, nil)
			if err != nil || st >= 500 {
				if len(bad) < 10 {
					bad = append(bad, fmt.Sprintf("replica %d: %d %v %.200s", i+1, st, err, b))
				}
			}
		}
		select {
		case <-stop:
			return bad
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *cluster) migrations(ctx context.Context) (int, error) {
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n)
	return n, err
}

// session is a chatapp_sessions row.
type session struct {
	owner   string
	fence   int64
	expires time.Time
}

func (c *cluster) sessions(ctx context.Context) (map[int64]session, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT company_channel_id, owner_id, fence, lease_expires_ms FROM chatapp_sessions WHERE device_ref IS NOT NULL")
	if err != nil {
		return nil, err
	}
	out := map[int64]session{}
	var id, fence, exp int64
	var owner string
	_, err = pgx.ForEachRow(rows, []any{&id, &owner, &fence, &exp}, func() error {
		out[id] = session{owner, fence, time.UnixMilli(exp)}
		return nil
	})
	return out, err
}

// ownerPID is the process id in a lease's owner id (host-pid-random).
func ownerPID(owner string) int {
	f := strings.Split(owner, "-")
	if len(f) < 3 {
		return 0
	}
	n, _ := strconv.Atoi(f[len(f)-2])
	return n
}

// busiest is the replica holding the most sessions, and those sessions.
func (c *cluster) busiest(ctx context.Context) (int, map[int64]session, error) {
	all, err := c.sessions(ctx)
	if err != nil {
		return 0, nil, err
	}
	best, held := 0, map[int64]session{}
	for i, p := range c.reps {
		mine := map[int64]session{}
		for id, s := range all {
			if ownerPID(s.owner) == p.PID() && s.expires.After(time.Now()) {
				mine[id] = s
			}
		}
		if len(mine) > len(held) {
			best, held = i, mine
		}
	}
	return best, held, nil
}

// awaitMove waits until every session in held has a new fence (another
// holder took it over) and returns when; the bound is the latest lease
// expiry plus one heartbeat of the others plus 5 s.
func (c *cluster) awaitMove(ctx context.Context, held map[int64]session) (time.Time, error) {
	var bound time.Time
	for _, s := range held {
		if s.expires.After(bound) {
			bound = s.expires
		}
	}
	bound = bound.Add(heartbeat + 5*time.Second)
	for {
		all, err := c.sessions(ctx)
		if err == nil {
			moved := 0
			for id, s := range held {
				if now := all[id]; now.fence > s.fence && now.owner != s.owner {
					moved++
				}
			}
			if moved == len(held) {
				now := time.Now()
				c.mu.Lock()
				c.moves = append(c.moves, now)
				c.mu.Unlock()
				return now, nil
			}
		}
		if time.Now().After(bound) {
			c.mu.Lock()
			c.moves = append(c.moves, time.Now())
			c.mu.Unlock()
			return time.Time{}, fmt.Errorf("%d session(s) not taken over by %s (lease expiry + one heartbeat + 5 s)", len(held), bound.Format("15:04:05"))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (c *cluster) kill(ctx context.Context, rep *Report) (*faultCost, error) {
	i, held, err := c.busiest(ctx)
	if err != nil {
		return nil, err
	}
	fc := &faultCost{Name: fmt.Sprintf("SIGKILL replica %d + restart", i+1), start: time.Now(), Sessions: len(held)}
	c.o.Log("%s (pid %d, %d sessions)", fc.Name, c.reps[i].PID(), len(held))
	c.reps[i].Kill()
	if err := c.startReplica(ctx, i); err != nil {
		return nil, err
	}
	if len(held) == 0 {
		rep.violation("kill: the killed replica held no chat-app session, nothing could move")
	} else if at, err := c.awaitMove(ctx, held); err != nil {
		rep.violation("kill: " + err.Error())
	} else {
		fc.SessionsMove = at.Sub(fc.start).Seconds()
	}
	at, err := c.recovered(ctx, time.Minute)
	if err != nil {
		return nil, err
	}
	fc.end, fc.RecoverS = at, at.Sub(fc.start).Seconds()
	return fc, nil
}

// cut takes the busiest replica off the network for 30 s. Its own
// /readyz, asked from inside its namespace, must stop answering 200; its
// sessions must move; once back it must not act for them (its sessions
// gauge falls to what the database says it holds).
func (c *cluster) cut(ctx context.Context, rep *Report) (*faultCost, error) {
	i, held, err := c.busiest(ctx)
	if err != nil {
		return nil, err
	}
	// Cut just before the victim's next renewal (9 s after one is seen),
	// so its leases expire 21 s into the cut and the others take them over
	// while it is still away.
	if len(held) > 0 {
		var first session
		for _, s := range held {
			first = s
			break
		}
		deadline := time.Now().Add(2 * heartbeat)
		for time.Now().Before(deadline) {
			all, err := c.sessions(ctx)
			if err == nil {
				for id := range held {
					if all[id].expires.After(first.expires) {
						held = nil
						break
					}
				}
			}
			if held == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(heartbeat - time.Second)
		if i, held, err = c.busiest(ctx); err != nil {
			return nil, err
		}
	}
	fc := &faultCost{Name: fmt.Sprintf("network cut of replica %d for 30 s", i+1), start: time.Now(), Sessions: len(held)}
	c.o.Log("%s (%d sessions)", fc.Name, len(held))
	if err := c.nt.Cut(i); err != nil {
		return nil, err
	}
	restored := false
	defer func() {
		if !restored {
			_ = c.nt.Restore(i)
		}
	}()
	moved := make(chan error, 1)
	var movedAt time.Time
	go func() {
		if len(held) == 0 {
			moved <- errors.New("the cut replica held no chat-app session, nothing could move")
			return
		}
		at, err := c.awaitMove(ctx, held)
		movedAt = at
		moved <- err
	}()
	unready := c.probeReady(ctx, i, 30*time.Second)
	if err := c.nt.Restore(i); err != nil {
		return nil, err
	}
	restored = true
	if unready < 0 {
		rep.violation(fmt.Sprintf("cut: replica %d stayed ready on /readyz for the 30 s it was cut off", i+1))
	} else {
		fc.Note = fmt.Sprintf("its /readyz stopped answering 200 after %.1f s", unready.Seconds())
	}
	if err := <-moved; err != nil {
		rep.violation("cut: " + err.Error())
	} else {
		fc.SessionsMove = movedAt.Sub(fc.start).Seconds()
	}
	at, err := c.recovered(ctx, time.Minute)
	if err != nil {
		return nil, err
	}
	fc.end, fc.RecoverS = at, at.Sub(fc.start).Seconds()
	if v := c.fenced(ctx, i, held); v != "" {
		rep.violation("fencing: " + v)
	}
	return fc, nil
}

// probeReady asks replica i's /readyz from inside its namespace every
// second for d and returns when it first failed to answer 200 within 5 s
// (-1: it never did).
func (c *cluster) probeReady(ctx context.Context, i int, d time.Duration) time.Duration {
	ns := c.nt.NS(i)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialIn(ctx, ns, network, addr)
		}}}
	start := time.Now()
	first := time.Duration(-1)
	for time.Since(start) < d {
		t := time.Now()
		resp, err := hc.Get("http://" + c.nt.IP(i) + ":8080/readyz")
		ok := err == nil && resp.StatusCode == 200
		if resp != nil {
			resp.Body.Close()
		}
		if !ok && first < 0 {
			first = time.Since(start)
		}
		if rest := time.Second - time.Since(t); rest > 0 {
			time.Sleep(min(rest, d-time.Since(start)))
		}
	}
	return first
}

// fenced checks, for two heartbeats after the cut replica returned, that
// it never holds a session taken from it with its old fence, and that its
// sessions gauge comes down to what the database says it holds.
func (c *cluster) fenced(ctx context.Context, i int, held map[int64]session) string {
	pid := c.reps[i].PID()
	// Two heartbeats, and the TCP retransmission backoff of connections
	// that stalled for 30 s.
	deadline := time.Now().Add(2*heartbeat + 20*time.Second)
	var gaugeOK bool
	var last string
	for time.Now().Before(deadline) {
		all, err := c.sessions(ctx)
		if err != nil {
			last = err.Error()
			time.Sleep(500 * time.Millisecond)
			continue
		}
		owned := 0
		for id, s := range all {
			if ownerPID(s.owner) == pid {
				owned++
				if old, ok := held[id]; ok && s.fence == old.fence && s.owner == old.owner && all[id].expires.After(old.expires.Add(heartbeat)) {
					return fmt.Sprintf("replica %d renewed the lease of connection %d with its old fence %d after it was cut off past the lease", i+1, id, s.fence)
				}
			}
		}
		g, err := c.gauge(ctx, i, "gateway_connection_sessions")
		if err == nil {
			gaugeOK = int(g) == owned
			last = fmt.Sprintf("replica %d reports %d sessions held, the database gives it %d", i+1, int(g), owned)
			if gaugeOK {
				return ""
			}
		} else {
			last = err.Error()
		}
		time.Sleep(500 * time.Millisecond)
	}
	return last
}

// gauge reads one unlabelled metric of replica i.
func (c *cluster) gauge(ctx context.Context, i int, name string) (float64, error) {
	hc := loadtest.NewClient("http://" + c.nt.IP(i) + ":9090")
	st, b, err := hc.Do(ctx, "GET", "/metrics", "", nil)
	if err != nil || st != 200 {
		return 0, fmt.Errorf("metrics of replica %d: %d %v", i+1, st, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("replica %d has no metric %s", i+1, name)
}

func (c *cluster) restartPostgres(ctx context.Context, rep *Report) (*faultCost, error) {
	fc := &faultCost{Name: "PostgreSQL restart", start: time.Now()}
	c.o.Log("%s", fc.Name)
	c.pg.Stop()
	if err := c.pg.Start(ctx); err != nil {
		return nil, err
	}
	at, err := c.recovered(ctx, 90*time.Second)
	if err != nil {
		return nil, err
	}
	fc.end, fc.RecoverS = at, at.Sub(fc.start).Seconds()
	return fc, nil
}

func (c *cluster) stopRedis(ctx context.Context, rep *Report) (*faultCost, error) {
	fc := &faultCost{Name: "Redis stopped for 20 s", start: time.Now()}
	c.o.Log("%s", fc.Name)
	c.redis.Stop()
	time.Sleep(20 * time.Second)
	if err := c.redis.Start(ctx); err != nil {
		return nil, err
	}
	at, err := c.recovered(ctx, 90*time.Second)
	if err != nil {
		return nil, err
	}
	fc.end, fc.RecoverS = at, at.Sub(fc.start).Seconds()
	return fc, nil
}

func (c *cluster) sendCall(company int, sync bool) loadtest.Call {
	kind := "queued"
	if sync {
		kind = "sync"
	}
	return func(ctx context.Context, seq int, _ time.Time) string {
		co := c.sender[company]
		text := fmt.Sprintf("cluster %s %d-%d", kind, company, seq)
		body, _ := json.Marshal(map[string]any{"platform": "ofc_chatapp", "sender_key": co.ChannelKey,
			"contact_key": co.Contacts[seq%len(co.Contacts)], "text": text, "enqueue": !sync})
		status, b, err := c.clients[fmt.Sprintf("send-%d", company)].Do(ctx, "POST", "/api/api-send-message", co.Token, body)
		out := loadtest.SendOutcome{Text: text, Answer: answerOf(status, b, err), Sync: sync}
		if sync && out.Answer == "" {
			out.ExternalID = externalID(b)
		}
		c.mu.Lock()
		c.sends = append(c.sends, out)
		c.keepBody(out, b)
		c.mu.Unlock()
		c.record(kind, out.Answer)
		return out.Answer
	}
}

func (c *cluster) chatappCall() loadtest.Call {
	return func(ctx context.Context, seq int, _ time.Time) string {
		i := seq % len(c.sender)
		co, conn := c.sender[i], c.conns[i]
		sync := seq%2 == 0
		kind := "chatapp-queued"
		if sync {
			kind = "chatapp-sync"
		}
		text := fmt.Sprintf("cluster %s %d", kind, seq)
		body, _ := json.Marshal(map[string]any{"platform": "chatapp", "sender_key": conn.Key, "contact_is_group": false,
			"contact_key": conn.Contacts[seq/2%len(conn.Contacts)], "text": text, "enqueue": !sync})
		status, b, err := c.clients["chatapp"].Do(ctx, "POST", "/api/api-send-message", co.Token, body)
		out := loadtest.SendOutcome{Text: text, Answer: answerOf(status, b, err), Sync: sync}
		if sync && out.Answer == "" {
			out.ExternalID = externalID(b)
		}
		c.mu.Lock()
		c.chat = append(c.chat, chatSend{out, time.Now(), conn.ID})
		c.keepBody(out, b)
		c.mu.Unlock()
		c.record(kind, out.Answer)
		return out.Answer
	}
}

func (c *cluster) publishCall() loadtest.Call {
	return func(ctx context.Context, seq int, due time.Time) string {
		id := fmt.Sprintf("cluster-%d", seq)
		c.recv.Due(id, due)
		status, _, err := c.clients["event"].Do(ctx, "POST", "/api/events", c.events.Token, loadtest.ImportEvent(id))
		out := outcomeOf(status, err)
		if out == "" {
			c.mu.Lock()
			c.accepted = append(c.accepted, id)
			c.mu.Unlock()
		}
		c.record("event", out)
		return out
	}
}

func (c *cluster) inboundCall() loadtest.Call {
	return func(ctx context.Context, seq int, _ time.Time) string {
		co := c.sender[1+seq%2]
		from := fmt.Sprintf("5561%04d%05d", co.ID%10000, seq%20)
		text := fmt.Sprintf("cluster inbound %d", seq)
		body, sig := loadtest.InboundBody(co, from, "Contato "+from, fmt.Sprintf("wamid.CLUSTER%d", seq), text, time.Now())
		status, _, err := c.clients["inbound"].DoHeaders(ctx, "POST", "/provider-webhooks/"+co.PhoneNumberID, body,
			map[string]string{"X-Hub-Signature-256": sig})
		out := outcomeOf(status, err)
		c.record("inbound", out)
		return out
	}
}

// uploadCall uploads a small PDF as header media; its URL is read back
// through the balancer (mediaReadCall) and, after the load, from every
// replica directly.
func (c *cluster) uploadCall() loadtest.Call {
	return func(ctx context.Context, seq int, _ time.Time) string {
		co := c.sender[1]
		pdf := fakePDF(seq)
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.WriteField("provider_account_id", strconv.FormatInt(co.ProviderAccountID, 10))
		fw, _ := mw.CreateFormFile("file", fmt.Sprintf("doc-%d.pdf", seq))
		_, _ = fw.Write(pdf)
		_ = mw.Close()
		req, _ := http.NewRequestWithContext(ctx, "POST", c.loURL+"/api/provider-templates/upload-send-media", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+co.Token)
		resp, err := c.clients["upload"].HTTP.Do(req)
		out := "transport"
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out = outcomeOf(resp.StatusCode, nil)
			var res struct {
				Data struct {
					URL string `json:"url"`
				} `json:"data"`
			}
			if out == "" {
				if json.Unmarshal(b, &res) == nil && res.Data.URL != "" {
					c.mu.Lock()
					c.uploads = append(c.uploads, upload{res.Data.URL, pdf, !c.upgraded})
					c.mu.Unlock()
				} else {
					out = "bad-body"
				}
			}
		}
		c.record("upload", out)
		return out
	}
}

func fakePDF(seq int) []byte {
	noise := make([]byte, 4096)
	_, _ = rand.Read(noise)
	return append([]byte(fmt.Sprintf("%%PDF-1.4\n%% cluster %d\n", seq)), append(noise, []byte("\n%%EOF\n")...)...)
}

func (c *cluster) mediaReadCall() loadtest.Call {
	return func(ctx context.Context, seq int, _ time.Time) string {
		c.mu.Lock()
		if len(c.uploads) == 0 {
			c.mu.Unlock()
			return ""
		}
		u := c.uploads[seq%len(c.uploads)]
		c.mu.Unlock()
		out := c.fetch(ctx, c.clients["media"].HTTP, strings.Replace(u.url, c.lbURL, c.loURL, 1), u.body)
		c.record("media-read", out)
		return out
	}
}

// fetch GETs a media URL and compares its bytes.
func (c *cluster) fetch(ctx context.Context, hc *http.Client, url string, want []byte) string {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return "transport"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out := outcomeOf(resp.StatusCode, nil); out != "" {
		return out
	}
	if !bytes.Equal(b, want) {
		return "wrong-bytes"
	}
	return ""
}

// manageCall creates a subscription, lists, and deletes it.
func (c *cluster) manageCall() loadtest.Call {
	return func(ctx context.Context, seq int, _ time.Time) string {
		body, _ := json.Marshal(map[string]any{"url": c.recv.HookURL(fmt.Sprintf("mgmt-%d", seq)),
			"events": []string{"omnichat.message.received"}, "name": fmt.Sprintf("mgmt-%d", seq)})
		mc := c.clients["manage"]
		st, b, err := mc.Do(ctx, "POST", "/api/channel-webhooks", c.mgmt.Token, body)
		out := outcomeOf(st, err)
		c.record("webhook-create", out)
		if out != "" {
			return out
		}
		var res struct {
			Data struct {
				ID int64 `json:"id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(b, &res)
		st, _, err = mc.Do(ctx, "GET", "/api/channel-webhooks?perPage=50", c.mgmt.Token, nil)
		c.record("webhook-list", outcomeOf(st, err))
		st, _, err = mc.Do(ctx, "DELETE", fmt.Sprintf("/api/channel-webhooks/%d", res.Data.ID), c.mgmt.Token, nil)
		out = outcomeOf(st, err)
		c.record("webhook-delete", out)
		return out
	}
}

// keepBody keeps the body of a refused or failed send: a send answered
// with an error and delivered all the same is reported with what it was
// answered. Called with c.mu held.
func (c *cluster) keepBody(out loadtest.SendOutcome, b []byte) {
	if out.Answer != "" && out.Answer != "transport" && out.Answer != "429" {
		if len(b) > 300 {
			b = b[:300]
		}
		c.bodies[out.Text] = string(b)
	}
}

// proxyAnswer is the body HAProxy writes when it answers itself (no
// replica ready: 503; no answer in time: 504): the gateway may or may not
// have taken the request, as when the connection breaks.
var proxyAnswer = []byte("<html><body><h1>")

// answerOf is outcomeOf, with the balancer's own answers as "transport".
func answerOf(status int, body []byte, err error) string {
	if err == nil && status >= 500 && bytes.HasPrefix(body, proxyAnswer) {
		return "transport"
	}
	return outcomeOf(status, err)
}

func outcomeOf(status int, err error) string {
	if err != nil {
		return "transport"
	}
	if status >= 200 && status < 300 {
		return ""
	}
	return strconv.Itoa(status)
}

func externalID(syncAnswer []byte) string {
	var res struct {
		Data struct {
			ExternalID string `json:"ExternalID"`
		} `json:"Data"`
	}
	_ = json.Unmarshal(syncAnswer, &res)
	return res.Data.ExternalID
}

// checkMedia reads every uploaded URL from every replica directly.
func (c *cluster) checkMedia(ctx context.Context, rep *Report) {
	c.mu.Lock()
	ups := append([]upload(nil), c.uploads...)
	c.mu.Unlock()
	for _, u := range ups {
		if u.old {
			rep.OldUploads++
			continue
		}
		rep.Uploads++
		for i := range c.reps {
			// The URL names the balancer (PUBLIC_BASE_URL): ask replica i
			// for the same path.
			path := u.url[strings.Index(u.url[len("http://"):], "/")+len("http://"):]
			if out := c.fetch(ctx, c.direct[i].HTTP, "http://"+c.nt.IP(i)+":8080"+path, u.body); out != "" {
				rep.MediaUnserved++
				if rep.MediaUnserved <= 5 {
					rep.violation(fmt.Sprintf("media %s: replica %d answered %s", path, i+1, out))
				}
			}
		}
	}
	if rep.MediaUnserved > 5 {
		rep.violation(fmt.Sprintf("%d media reads from a replica failed in all", rep.MediaUnserved))
	}
}

// checkRate counts, at the provider, the sends of each company in every
// 60 s window.
func (c *cluster) checkRate(ctx context.Context, rep *Report) {
	for _, co := range c.sender {
		msgs, err := c.setup.Provider.Messages(ctx, co.PhoneNumberID)
		if err != nil {
			rep.violation("rate check: " + err.Error())
			return
		}
		var at []time.Time
		for _, m := range msgs {
			at = append(at, m.CreatedAt)
		}
		sort.Slice(at, func(a, b int) bool { return at[a].Before(at[b]) })
		most, j := 0, 0
		for k := range at {
			for at[k].Sub(at[j]) >= time.Minute {
				j++
			}
			most = max(most, k-j+1)
		}
		rep.MostPerMinute = max(rep.MostPerMinute, most)
		if most > sendLimit {
			rep.violation(fmt.Sprintf("company %d: %d sends reached the provider within 60 s (limit %d)", co.ID, most, sendLimit))
		}
	}
}

// settle re-runs the send and event checks until nothing is pending or
// the bound passes.
func (c *cluster) settle(ctx context.Context, rep *Report, bound time.Duration) {
	rep.Settled = loadtest.Settle(ctx, bound, c.o.Log, func() (int, error) {
		err := c.check(ctx, rep)
		return rep.pending(), err
	})
}

func (c *cluster) check(ctx context.Context, rep *Report) error {
	var handed, chatHanded []loadtest.HandedOver
	for i, co := range c.sender {
		msgs, err := c.setup.Provider.Messages(ctx, co.PhoneNumberID)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			h := loadtest.HandedOver{ProviderID: m.ID, MessageID: m.Request.BizOpaqueCallbackData}
			if m.Request.Text != nil {
				h.Text = m.Request.Text.Body
			}
			handed = append(handed, h)
		}
		got, err := c.setup.SimulatorMessages(ctx, co, c.conns[i])
		if err != nil {
			return err
		}
		chatHanded = append(chatHanded, got...)
	}
	c.mu.Lock()
	sends := append([]loadtest.SendOutcome(nil), c.sends...)
	accepted := append([]string(nil), c.accepted...)
	var lastMove time.Time
	if len(c.moves) > 0 {
		lastMove = c.moves[len(c.moves)-1]
	}
	// The chat-app simulator lives in the process holding the session: a
	// send answered before the last move may be in a record that went with
	// the old holder, so only duplicates and error answers are checked
	// for it.
	chat := make([]loadtest.SendOutcome, len(c.chat))
	for i, s := range c.chat {
		chat[i] = s.SendOutcome
		moved := lastMove
		if at := c.fenceAt[s.conn]; at.After(moved) {
			moved = at
		}
		chat[i].Partial = !s.at.After(moved.Add(5 * time.Second))
	}
	c.mu.Unlock()
	rep.Sends = loadtest.CheckSends(sends, handed, c.recv.Sent)
	rep.Chatapp = loadtest.CheckSends(chat, chatHanded, c.recv.Sent)
	// The check runs again until everything settles: the rows are those
	// of this check's lost sends only.
	rep.LostRows = nil
	if lost := append(append([]string(nil), rep.Sends.LostTexts...), rep.Chatapp.LostTexts...); len(lost) > 0 {
		rows, err := c.lostRows(ctx, lost)
		if err != nil {
			return err
		}
		rep.LostRows = rows
	}
	rep.EventsAccepted = len(accepted)
	rep.Events = c.recv.Tally(c.evNames, accepted)
	rep.Deliveries, rep.MissingLogRows = 0, 0
	for name, ref := range c.subs {
		acked := c.recv.DeliveryIDs(name)
		logged, err := c.logged(ctx, ref)
		if err != nil {
			return err
		}
		rep.Deliveries += len(acked)
		rep.MissingLogRows += len(loadtest.MissingLogRows(acked, logged))
	}
	return nil
}

func (c *cluster) logged(ctx context.Context, ref subRef) (map[string]bool, error) {
	ok := map[string]bool{}
	for page := 1; ; page++ {
		var res struct {
			LastPage int `json:"last_page"`
			Data     []struct {
				DeliveryID string `json:"delivery_id"`
				Succeeded  bool   `json:"succeeded"`
			} `json:"data"`
		}
		if err := c.setup.API.JSON(ctx, "GET", fmt.Sprintf("/api/channel-webhooks/%d/deliveries?perPage=500&page=%d", ref.id, page),
			ref.company.Token, nil, &res); err != nil {
			return nil, err
		}
		for _, d := range res.Data {
			ok[d.DeliveryID] = ok[d.DeliveryID] || d.Succeeded
		}
		if page >= res.LastPage {
			return ok, nil
		}
	}
}

func execPath(name string) (string, error) {
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", syscall.ENOENT
}

// lostRows reads the stored send bookkeeping of lost sends, so a loss
// names where it stopped (hand-off counted, outcome unknown, due again…).
func (c *cluster) lostRows(ctx context.Context, texts []string) ([]string, error) {
	conn, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT text, status_id, handoffs, outcome_unknown, send_attempts, COALESCE(send_due_at, 0), COALESCE(failure_reason, '')
		FROM messages WHERE text = ANY($1)`, texts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var text, reason string
		var status, handoffs, attempts int
		var due int64
		var unknown bool
		if err := rows.Scan(&text, &status, &handoffs, &unknown, &attempts, &due, &reason); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("lost send %q: status %d, hand-offs %d, outcome unknown %v, attempts %d, due %s, failure %q",
			text, status, handoffs, unknown, attempts, time.UnixMilli(due).UTC().Format(time.RFC3339), reason))
	}
	return out, rows.Err()
}
