package loadtest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // StoredExternalIDs on SQLite
)

// Engine is the gateway's database.
type Engine string

const (
	Postgres Engine = "postgres"
	SQLite   Engine = "sqlite"
)

// DefaultPostgresURL is the machine's PostgreSQL; the stack creates its own
// database there and drops it afterwards.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// StackOptions say what to start.
type StackOptions struct {
	Engine Engine
	// AdminURL is a PostgreSQL URL the stack connects to for creating and
	// dropping its database (and for terminating the gateway's backends).
	// Used for the SQLite engine too, by the baseline server.
	AdminURL string
	// BinDir holds prebuilt gateway and providersim binaries; empty means
	// build them from the module in the working directory.
	BinDir string
	// Env is added to the gateway's environment (after the stack's own).
	Env []string
	// Replicas is the number of `gateway serve` processes on the one
	// database (PostgreSQL only when more than one; default 1).
	Replicas int
	// SentReceipts starts providersim with -sent-receipts: every accepted
	// message's `sent` status is posted back, as the platform does.
	SentReceipts bool
	// Debug gives every replica a pprof listener (DEBUG_LISTEN) on a free
	// loopback port; DebugURLs lists them.
	Debug bool
	Log   func(format string, args ...any)
}

// Stack is a running gateway and provider simulator on loopback, on a
// database of their own.
type Stack struct {
	opts        StackOptions
	Dir         string // temporary: binaries, SQLite data, process logs
	DBName      string // PostgreSQL database created for this stack
	DatabaseURL string // the gateway's DATABASE_URL ("" for SQLite)
	BaselineURL string // PostgreSQL URL for the baseline server
	GatewayURL  string // the first replica's
	ProviderURL string
	Gateway     *Proc // the first replica
	Provider    *Proc
	// Replicas are every gateway process and its URL (Gateway and
	// GatewayURL are the first).
	Replicas    []*Proc
	ReplicaURLs []string
	// DebugURLs are the replicas' pprof listeners (StackOptions.Debug).
	DebugURLs []string
	// MetricsURLs are the replicas' METRICS_LISTEN (Metric reads them).
	MetricsURLs []string
	bins        string
}

// StartStack builds (unless opts.BinDir is set) and starts the gateway
// and providersim, and waits until the gateway answers /readyz.
func StartStack(ctx context.Context, opts StackOptions) (_ *Stack, err error) {
	if opts.AdminURL == "" {
		opts.AdminURL = DefaultPostgresURL
	}
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	dir, err := os.MkdirTemp("", "loadgen-")
	if err != nil {
		return nil, err
	}
	s := &Stack{opts: opts, Dir: dir, bins: opts.BinDir}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.bins == "" {
		s.bins = filepath.Join(dir, "bin")
		opts.Log("building gateway and providersim")
		build := exec.CommandContext(ctx, "go", "build", "-o", s.bins+"/", "./cmd/gateway", "./cmd/providersim")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build: %w\n%s", err, out)
		}
	}
	if err := s.createDatabase(ctx); err != nil {
		return nil, err
	}
	providerAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s.ProviderURL = "http://" + providerAddr
	providerArgs := []string{"-listen", providerAddr}
	if opts.SentReceipts {
		providerArgs = append(providerArgs, "-sent-receipts")
	}
	s.Provider = &Proc{Name: "providersim", Path: filepath.Join(s.bins, "providersim"),
		Args: providerArgs, LogPath: filepath.Join(dir, "providersim.log")}
	if err := s.Provider.Start(); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, s.ProviderURL+"/_control/messages?phone_number_id=none", s.Provider); err != nil {
		return nil, err
	}
	replicas := max(1, opts.Replicas)
	if replicas > 1 && opts.Engine != Postgres {
		return nil, fmt.Errorf("%d replicas: several replicas need PostgreSQL", replicas)
	}
	for i := range replicas {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		env := append(s.gatewayEnv(addr), opts.Env...)
		metricsAddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		env = append(env, "METRICS_LISTEN="+metricsAddr) // the last of a name wins
		s.MetricsURLs = append(s.MetricsURLs, "http://"+metricsAddr)
		if opts.Debug {
			debugAddr, err := freeAddr()
			if err != nil {
				return nil, err
			}
			env = append(env, "DEBUG_LISTEN="+debugAddr) // the last of a name wins
			s.DebugURLs = append(s.DebugURLs, "http://"+debugAddr)
		}
		p := &Proc{Name: fmt.Sprintf("gateway-%d", i+1), Path: filepath.Join(s.bins, "gateway"), Args: []string{"serve"},
			Env: env, LogPath: filepath.Join(dir, fmt.Sprintf("gateway-%d.log", i+1))}
		if err := p.Start(); err != nil {
			return nil, err
		}
		s.Replicas, s.ReplicaURLs = append(s.Replicas, p), append(s.ReplicaURLs, "http://"+addr)
		if err := waitHTTP(ctx, "http://"+addr+"/readyz", p); err != nil {
			return nil, err
		}
	}
	s.Gateway, s.GatewayURL = s.Replicas[0], s.ReplicaURLs[0]
	return s, nil
}

// gatewayEnv is the configuration the stack sets; everything else keeps
// its production default, whatever the caller's shell exports (only
// PATH, HOME and TMPDIR are passed on; -env adds settings on purpose).
// Loopback is let through the SSRF guard because the webhook receivers
// and the provider simulator live there.
func (s *Stack) gatewayEnv(listen string) []string {
	env := []string{"LISTEN_ADDR=" + listen, "DATA_DIR=" + filepath.Join(s.Dir, "data"),
		"OUTBOUND_ALLOW_CIDRS=127.0.0.0/8", "DATABASE_URL=" + s.DatabaseURL,
		// Several replicas share this host: each its own metrics port; the
		// simulator is the stack's chat app on purpose.
		"METRICS_LISTEN=127.0.0.1:0", "CONNECTOR_DRIVER=simulator"}
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// StartGateway restarts the first gateway replica and waits for /readyz.
func (s *Stack) StartGateway(ctx context.Context) error {
	if err := s.Gateway.Start(); err != nil {
		return err
	}
	return waitHTTP(ctx, s.GatewayURL+"/readyz", s.Gateway)
}

// PIDs are the process ids of the running gateway replicas.
func (s *Stack) PIDs() []int {
	out := make([]int, len(s.Replicas))
	for i, p := range s.Replicas {
		out[i] = p.PID()
	}
	return out
}

// Engine is the stack's database engine.
func (s *Stack) Engine() Engine { return s.opts.Engine }

// Bin is the path of a built binary (gateway, providersim).
func (s *Stack) Bin(name string) string { return filepath.Join(s.bins, name) }

// Admin runs `gateway admin args…` against the stack's database and
// decodes its JSON output into out.
func (s *Stack) Admin(ctx context.Context, out any, args ...string) error {
	cmd := exec.CommandContext(ctx, s.Gateway.Path, append([]string{"admin"}, args...)...)
	cmd.Env = s.Gateway.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("gateway admin %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("gateway admin %s: output %q: %w", strings.Join(args, " "), stdout.String(), err)
	}
	return nil
}

// TerminateBackends ends every PostgreSQL backend connected to the
// stack's database (the gateway's pool, its River listener) as an
// operator or a failover would, and returns how many it ended.
func (s *Stack) TerminateBackends(ctx context.Context) (int, error) {
	if s.DBName == "" {
		return 0, errors.New("terminate backends: the stack is not on PostgreSQL")
	}
	conn, err := pgx.Connect(ctx, s.opts.AdminURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid()) t`, s.DBName).Scan(&n)
	return n, err
}

// StoredExternalIDs reads, from the stack's database, the external ids
// stored on the messages whose text is one of texts: what a fault suite
// checks for the sends of a company that listens to no message event
// (whose ids no event carries). Messages without an id are left out.
func (s *Stack) StoredExternalIDs(ctx context.Context, texts []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(texts) == 0 {
		return out, nil
	}
	add := func(text, id string) { out[text] = append(out[text], id) }
	if s.opts.Engine == Postgres {
		conn, err := pgx.Connect(ctx, s.DatabaseURL)
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.Background())
		rows, err := conn.Query(ctx, `SELECT text, external_id FROM messages WHERE text = ANY($1) AND external_id IS NOT NULL`, texts)
		if err != nil {
			return nil, err
		}
		var text, id string
		_, err = pgx.ForEachRow(rows, []any{&text, &id}, func() error { add(text, id); return nil })
		return out, err
	}
	// The gateway's SQLite file in WAL mode: a reader takes no write lock.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(s.Dir, "data", "gateway.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	for start := 0; start < len(texts); start += 500 {
		chunk := texts[start:min(start+500, len(texts))]
		args := make([]any, len(chunk))
		for i, t := range chunk {
			args[i] = t
		}
		rows, err := db.QueryContext(ctx, `SELECT text, external_id FROM messages WHERE external_id IS NOT NULL AND text IN (?`+
			strings.Repeat(", ?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var text, id string
			if err := rows.Scan(&text, &id); err != nil {
				rows.Close()
				return nil, err
			}
			add(text, id)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// createDatabase makes a fresh PostgreSQL database for the gateway (on
// the PostgreSQL engine) and for the baseline server (always), so nothing
// left from earlier runs or other users of the server is measured.
func (s *Stack) createDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.opts.AdminURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(s.opts.AdminURL), err)
	}
	defer conn.Close(context.Background())
	name := fmt.Sprintf("loadgen_%d_%d", time.Now().Unix(), os.Getpid())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	s.DBName = name
	u, err := url.Parse(s.opts.AdminURL)
	if err != nil {
		return err
	}
	u.Path = "/" + name
	s.BaselineURL = u.String()
	if s.opts.Engine == Postgres {
		s.DatabaseURL = u.String()
	}
	return nil
}

// Close stops the processes, drops the database and removes the
// temporary directory; with LOADGEN_KEEP set it keeps both, to read the
// logs and the rows after a failure (drop the database by hand).
func (s *Stack) Close() {
	for _, p := range append(s.Replicas, s.Provider) {
		if p != nil {
			p.Stop(10 * time.Second)
		}
	}
	keep := os.Getenv("LOADGEN_KEEP") != ""
	switch {
	case s.DBName == "":
	case keep:
		s.opts.Log("kept database %s (LOADGEN_KEEP)", s.DBName)
	default:
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, s.opts.AdminURL); err == nil {
			if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+s.DBName+" WITH (FORCE)"); err != nil {
				s.opts.Log("drop database %s: %v", s.DBName, err)
			}
			conn.Close(ctx)
		}
	}
	if !keep {
		os.RemoveAll(s.Dir)
	} else {
		s.opts.Log("kept %s (LOADGEN_KEEP)", s.Dir)
	}
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

// Proc is a child process whose output goes to a log file. It dies with
// the load generator (Pdeathsig), so an interrupted run leaves nothing
// behind.
type Proc struct {
	Name, Path string
	Args, Env  []string
	LogPath    string
	cmd        *exec.Cmd
	exited     chan struct{}
}

// Start starts the process (again, after Kill or Stop).
func (p *Proc) Start() error {
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	if p.Env != nil {
		cmd.Env = p.Env
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	return nil
}

// PID is the running process's id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop asks the process to end (SIGTERM) and kills it after grace.
func (p *Proc) Stop(grace time.Duration) {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.Kill()
	}
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// LogTail is the end of the process's log, for error messages.
func (p *Proc) LogTail() string {
	b, _ := os.ReadFile(p.LogPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitHTTP polls u until it answers 200, the process dies or a minute
// passes.
func waitHTTP(ctx context.Context, u string, p *Proc) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("%s exited at start:\n%s", p.Name, p.LogTail())
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready at %s after a minute:\n%s", p.Name, u, p.LogTail())
}

// MessageStates reads, for each text, the send bookkeeping of its stored
// message (status, hand-offs, unknown outcome, attempts, due time), so a
// fault suite that finds a send lost can say where it stopped.
func (s *Stack) MessageStates(ctx context.Context, texts []string) (map[string]string, error) {
	out := map[string]string{}
	const cols = `text, status_id, handoffs, outcome_unknown, send_attempts, COALESCE(send_due_at, 0), send_recover, COALESCE(failure_reason, '')`
	add := func(row func(dest ...any) error) error {
		var text, reason string
		var status, handoffs, attempts int
		var due int64
		var unknown, recover bool
		if err := row(&text, &status, &handoffs, &unknown, &attempts, &due, &recover, &reason); err != nil {
			return err
		}
		out[text] += fmt.Sprintf("[status %d, hand-offs %d, outcome unknown %v, attempts %d, due %s, recover %v, failure %q]",
			status, handoffs, unknown, attempts, time.UnixMilli(due).UTC().Format(time.RFC3339Nano), recover, reason)
		return nil
	}
	if s.opts.Engine == Postgres {
		conn, err := pgx.Connect(ctx, s.DatabaseURL)
		if err != nil {
			return nil, err
		}
		defer conn.Close(context.Background())
		rows, err := conn.Query(ctx, `SELECT `+cols+` FROM messages WHERE text = ANY($1)`, texts)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			if err := add(rows.Scan); err != nil {
				return nil, err
			}
		}
		return out, rows.Err()
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(s.Dir, "data", "gateway.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	for _, text := range texts {
		rows, err := db.QueryContext(ctx, `SELECT `+cols+` FROM messages WHERE text = ?`, text)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			if err := add(rows.Scan); err != nil {
				rows.Close()
				return nil, err
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// KeepLogs copies the stack's process logs into a new directory under
// parent and returns it.
func (s *Stack) KeepLogs(parent string) (string, error) {
	dir := filepath.Join(parent, "logs-"+filepath.Base(s.Dir))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	logs, err := filepath.Glob(filepath.Join(s.Dir, "*.log"))
	if err != nil {
		return "", err
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(l)), b, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}
