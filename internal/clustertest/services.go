package clustertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmsg/gateway/internal/loadtest"
)

// Postgres is a PostgreSQL server of the suite's own, made with the
// machine's PostgreSQL binaries in a temporary directory: it listens on the
// bridge (where the replicas reach it) and may be restarted without
// touching the machine's cluster, its configuration or its other users.
type Postgres struct {
	dir, bin, addr string
	port           int
	uid, gid       int
	logPath        string
	cmd            *exec.Cmd
	exited         chan struct{}
}

// StartPostgres initialises a cluster in dir (owned by the postgres user:
// the server refuses to run as root) and starts it on addr:port.
func StartPostgres(ctx context.Context, dir, addr string, port int) (*Postgres, error) {
	bin, err := pgBin()
	if err != nil {
		return nil, err
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("the cluster suite runs PostgreSQL as the postgres user (Debian's postgresql package makes it): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	p := &Postgres{dir: dir, bin: bin, addr: addr, port: port, uid: uid, gid: gid, logPath: filepath.Join(filepath.Dir(dir), "postgres.log")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", dir, "-U", "postgres", "-A", "trust", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	initdb.Dir = "/"
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	// Trust from the suite's subnet only: the replicas and the suite itself.
	hba := "local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all " + addr + "/24 trust\n"
	if err := os.WriteFile(filepath.Join(dir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return nil, err
	}
	_ = os.Chown(filepath.Join(dir, "pg_hba.conf"), uid, gid)
	return p, p.Start(ctx)
}

func pgBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(dirs) == 0 {
		return "", errors.New("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (apt-get install -y postgresql)")
	}
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(dirs[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(dirs[j]))))
		return vi > vj
	})
	return filepath.Dir(dirs[0]), nil
}

// URL is a database's URL on this server.
func (p *Postgres) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@%s:%d/%s?sslmode=disable", p.addr, p.port, db)
}

// Start starts the server and waits until it accepts connections.
func (p *Postgres) Start(ctx context.Context) error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.dir, "-p", strconv.Itoa(p.port), "-k", p.dir,
		"-c", "listen_addresses="+p.addr, "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=64MB")
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(p.uid), Gid: uint32(p.gid)},
		Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(p.exited) }()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		c, err := pgx.Connect(ctx, p.URL("postgres"))
		if err == nil {
			c.Close(ctx)
			return nil
		}
		select {
		case <-p.exited:
			b, _ := os.ReadFile(p.logPath)
			return fmt.Errorf("postgres exited at start:\n%s", tail(b))
		case <-time.After(200 * time.Millisecond):
		}
	}
	return errors.New("postgres did not accept connections within a minute")
}

// Stop shuts the server down fast (SIGINT: open transactions roll back,
// clients are disconnected), as a restart by an operator does.
func (p *Postgres) Stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Redis is a redis-server of the suite's own on the bridge. It appends
// every write to a file synced at once, so stopping it and starting it
// again keeps the shared rate-limit windows, as a persistent Redis does.
type Redis struct {
	proc *loadtest.Proc
	Addr string
}

// StartRedis starts redis-server on addr with its files in dir.
func StartRedis(ctx context.Context, dir, addr string) (*Redis, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("the cluster suite needs redis-server (apt-get install -y redis-server)")
	}
	host, port, _ := net.SplitHostPort(addr)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r := &Redis{Addr: addr, proc: &loadtest.Proc{Name: "redis", Path: path, LogPath: filepath.Join(dir, "redis.log"),
		Args: []string{"--bind", host, "--port", port, "--dir", dir, "--save", "", "--appendonly", "yes",
			"--appendfsync", "always", "--protected-mode", "no", "--daemonize", "no"}}}
	return r, r.Start(ctx)
}

// Start starts the server and waits until its port accepts connections.
func (r *Redis) Start(ctx context.Context) error {
	if err := r.proc.Start(); err != nil {
		return err
	}
	return waitTCP(ctx, r.Addr, r.proc)
}

// Stop stops the server (SIGTERM).
func (r *Redis) Stop() { r.proc.Stop(10 * time.Second) }

// HAProxy balances round-robin over the replicas and takes a replica out
// while its /readyz fails.
type HAProxy struct {
	proc *loadtest.Proc
	Addr string
}

// StartHAProxy writes the configuration and starts haproxy in the
// foreground as the suite's child.
func StartHAProxy(ctx context.Context, dir, addr string, backends []string) (*HAProxy, error) {
	path, err := exec.LookPath("haproxy")
	if err != nil {
		return nil, errors.New("haproxy is not installed (the suite installs it with apt-get install -y haproxy)")
	}
	var b strings.Builder
	b.WriteString(`global
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 65s
  option forwardfor
frontend api
  bind :` + port(addr) + `
  default_backend gateways
backend gateways
  balance roundrobin
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter 500ms fall 2 rise 2
`)
	for i, be := range backends {
		fmt.Fprintf(&b, "  server r%d %s check\n", i, be)
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, path, "-c", "-f", cfg).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("haproxy -c: %w\n%s", err, out)
	}
	h := &HAProxy{Addr: addr, proc: &loadtest.Proc{Name: "haproxy", Path: path, Args: []string{"-db", "-f", cfg},
		LogPath: filepath.Join(dir, "haproxy.log")}}
	if err := h.proc.Start(); err != nil {
		return nil, err
	}
	return h, waitTCP(ctx, addr, h.proc)
}

// Stop stops haproxy.
func (h *HAProxy) Stop() { h.proc.Stop(5 * time.Second) }

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func waitTCP(ctx context.Context, addr string, p *loadtest.Proc) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("%s exited at start:\n%s", p.Name, p.LogTail())
		}
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not listening on %s:\n%s", p.Name, addr, p.LogTail())
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
