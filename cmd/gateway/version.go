package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/chatmsg/gateway/internal/buildinfo"
	"github.com/chatmsg/gateway/internal/config"
)

// runVersion prints the build: one line, or its JSON with -json.
func runVersion(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the build as JSON: version, revision, time, modified, go_version")
	if err := fs.Parse(args); err != nil {
		return err
	}
	info := buildinfo.Read()
	if *asJSON {
		return printJSON(stdout, info)
	}
	_, err := fmt.Fprintln(stdout, info.String())
	return err
}

// errUnhealthy is the healthcheck's failure: the probe answered, or did not,
// and the container is to be marked unhealthy.
var errUnhealthy = errors.New("unhealthy")

// runHealthcheck asks a local gateway's /healthz (or /readyz with -ready)
// and fails unless it answers 200. It exists for container images with no
// shell and no curl: a Dockerfile's HEALTHCHECK runs the binary itself.
func runHealthcheck(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	listen := getenv(config.EnvListenAddr)
	if listen == "" {
		listen = "127.0.0.1:8080"
	}
	addr := fs.String("addr", probeAddr(listen), "address of the gateway to probe (default: the loopback form of $"+config.EnvListenAddr+")")
	ready := fs.Bool("ready", false, "probe /readyz (the database answers) instead of /healthz (the process serves)")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	path := "/healthz"
	if *ready {
		path = "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+*addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", errUnhealthy, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s answered %d %s", errUnhealthy, path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(stdout, "%s: %d\n", path, resp.StatusCode)
	return nil
}

// probeAddr turns a listen address into one to connect to: a wildcard or
// empty host (":8080", "0.0.0.0:8080", "[::]:8080") becomes loopback.
func probeAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}
