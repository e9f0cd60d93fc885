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
	if len(os.Args) > 2 && os.Args[1] == "build-old" {
		// Built before the suite's clock starts, like bin/gateway.
		wd, _ := os.Getwd()
		commit, err := clustertest.BuildOld(context.Background(), wd, os.Args[2])
		if err == nil {
			fmt.Printf("built %s from %s, the commit before the newest migration\n", os.Args[2], commit)
		}
		return err
	}
	oldBin := flag.String("old-gateway", "bin/gateway-old", "the gateway of the commit before the newest migration (clustertest build-old PATH)")
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
	wd, _ := os.Getwd()
	commit, err := clustertest.OldCommit(ctx, wd)
	if err != nil {
		return err
	}
	old, err := filepath.Abs(*oldBin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(old); err != nil {
		return fmt.Errorf("no old gateway (run: clustertest build-old %s): %w", *oldBin, err)
	}
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
