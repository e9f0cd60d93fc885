// Command clustertest runs the multi-host fault suite (make cluster):
// see internal/clustertest.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/chatmsg/gateway/internal/clustertest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run() error {
	binDir := flag.String("bin-dir", "bin", "directory with the current gateway and providersim")
	replicas := flag.Int("replicas", 3, "gateway replicas, each in its own network namespace")
	out := flag.String("out", "load-results", "directory of the JSON report")
	limit := flag.Duration("limit", 8*time.Minute, "the suite stops itself after this long")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelLimit := context.WithTimeout(ctx, *limit)
	defer cancelLimit()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	if err := install(ctx, logf); err != nil {
		return err
	}
	bins, err := filepath.Abs(*binDir)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gwcluster-old-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	wd, _ := os.Getwd()
	logf("building the gateway of the commit before the newest migration")
	old, commit, err := clustertest.BuildOld(ctx, wd, tmp)
	if err != nil {
		return err
	}
	logf("old binary: %s", commit)
	rep, err := clustertest.Run(ctx, clustertest.Options{BinDir: bins, OldGateway: old, OldCommit: commit, Replicas: *replicas, Log: logf})
	if err != nil {
		return err
	}
	rep.WriteText(os.Stdout)
	if err := os.MkdirAll(*out, 0o755); err == nil {
		b, _ := json.MarshalIndent(rep, "", "  ")
		p := filepath.Join(*out, "cluster-"+time.Now().UTC().Format("20060102T150405Z")+".json")
		if os.WriteFile(p, b, 0o644) == nil {
			fmt.Printf("JSON report: %s\n", p)
		}
	}
	if v := rep.Violations(); len(v) > 0 {
		return errors.New("the cluster suite found violations")
	}
	return nil
}

// install gets HAProxy and iproute2 from Debian when missing.
func install(ctx context.Context, logf func(string, ...any)) error {
	_, e1 := exec.LookPath("haproxy")
	_, e2 := exec.LookPath("ip")
	if e1 == nil && e2 == nil {
		return nil
	}
	if os.Geteuid() != 0 {
		return errors.New("haproxy or iproute2 is missing and installing them needs root (the suite must run as root: it makes network namespaces)")
	}
	logf("installing haproxy and iproute2")
	for _, args := range [][]string{{"update"}, {"install", "-y", "haproxy", "iproute2"}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %v: %w\n%s", args, err, b)
		}
	}
	return nil
}
