package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chatmsg/gateway/internal/loadtest"
)

// errViolations makes the process fail when a guarantee was broken.
var errViolations = errors.New("the fault suite found violations")

func runChaos(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	c := commonFlags(fs)
	companies := fs.Int("companies", 4, "send companies")
	sendRate := fs.Float64("send-rate", 30, "queued sends per second")
	syncRate := fs.Float64("sync-rate", 10, "synchronous sends per second")
	eventRate := fs.Float64("event-rate", 30, "published events per second (each to two endpoints)")
	chatappRate := fs.Float64("chatapp-rate", 10, "chat-app sends per second (half synchronous, half queued)")
	replicas := fs.Int("replicas", 1, "gateway processes on one PostgreSQL database; only the first is killed (chat-app sends are left out with more than one)")
	kills := fs.Int("kills", 3, "SIGKILL + restart of the gateway")
	terms := fs.Int("terminations", 3, "terminations of the gateway's PostgreSQL backends (PostgreSQL only)")
	interval := fs.Duration("interval", 3*time.Second, "load time between faults")
	settle := fs.Duration("settle", envDuration("LOADGEN_SETTLE", 150*time.Second),
		"bound of the wait for every check to hold after the load; River rescues a killed process's jobs after a minute ($LOADGEN_SETTLE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	engines, err := c.engineList()
	if err != nil {
		return err
	}
	var failed []string
	var reports []*loadtest.ChaosReport
	for _, engine := range engines {
		rep, err := loadtest.Chaos(ctx, loadtest.ChaosOptions{Engine: engine, AdminURL: *c.adminURL, BinDir: *c.binDir,
			Companies: *companies, SendRate: *sendRate, SyncRate: *syncRate, EventRate: *eventRate, ChatappRate: *chatappRate, Replicas: *replicas, Kills: *kills,
			Terminations: *terms, Interval: *interval, Settle: *settle, GatewayEnv: *c.env, Log: logf, KeepLogsIn: *c.out})
		if err != nil {
			return fmt.Errorf("%s: %w", engine, err)
		}
		rep.WriteText(stdout)
		reports = append(reports, rep)
		if v := rep.Violations(); len(v) > 0 {
			failed = append(failed, string(engine)+": "+strings.Join(v, "; "))
		}
	}
	if err := os.MkdirAll(*c.out, 0o755); err != nil {
		return err
	}
	p := filepath.Join(*c.out, "chaos-"+time.Now().UTC().Format("20060102T150405Z")+".json")
	b, _ := json.MarshalIndent(reports, "", "  ")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "JSON report: %s\n", p)
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s", errViolations, strings.Join(failed, " | "))
	}
	return nil
}
