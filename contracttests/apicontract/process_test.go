//go:build contract

package apicontract

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/pactstates"
)

// verifySeparateProcess builds cmd/gateway, starts it as a process of its
// own (SQLite in a temp dir, the provider-states endpoint on) and verifies
// the pact against it exactly as `make contract PROVIDER_URL=…` verifies a
// deployed gateway.
func verifySeparateProcess(t *testing.T) {
	if missing := missingStates(); len(missing) > 0 {
		t.Fatalf("pactstates lacks the provider states %q of this pact", missing)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gateway")
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gateway")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gateway: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve")
	cmd.Env = append(os.Environ(),
		"LISTEN_ADDR="+addr, "DATA_DIR="+filepath.Join(dir, "data"), "DATABASE_URL=",
		"PACT_PROVIDER_STATES=1", "CONNECTOR_DRIVER=simulator", "OUTBOUND_ALLOW_CIDRS=127.0.0.1/32",
		"METRICS_LISTEN=off", "LOG_LEVEL=warn")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	}()
	base := "http://" + addr
	waitReady(t, base, &logs)
	verifyRunning(t, base)
}

// missingStates are the states of this pact the endpoint does not know.
func missingStates() []string {
	var out []string
	for name := range states {
		if !slices.Contains(pactstates.Names(), name) {
			out = append(out, name)
		}
	}
	return out
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitReady(t *testing.T, base string, logs *syncBuffer) {
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway at %s never became ready: %v\n%s", base, err, logs.String())
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.b.String())
}
