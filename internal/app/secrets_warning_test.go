package app_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// lockedBuffer collects log output written from the serving goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServeWarnsWithoutSecretsKey: serve says at start when secrets are
// kept in clear, and not when SECRETS_KEY is set; a malformed key ring stops
// the start.
func TestServeWarnsWithoutSecretsKey(t *testing.T) {
	t.Parallel()
	const warning = "SECRETS_KEY is not set"
	ring := "k1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	for _, tc := range []struct {
		key  string
		warn bool
	}{{"", true}, {ring, false}} {
		cfg := apitest.Config(t)
		cfg.SecretsKey = tc.key
		logs := &lockedBuffer{}
		ctx, cancel := context.WithCancel(context.Background())
		a, err := app.New(ctx, cfg, app.Options{DB: storetest.SQLite(t), Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.ServeListener(ctx, ln) }()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(logs.String(), "gateway listening") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		a.Close()
		if got := strings.Contains(logs.String(), warning); got != tc.warn {
			t.Errorf("SECRETS_KEY %q: warning logged = %v, want %v\n%s", tc.key, got, tc.warn, logs)
		}
	}

	cfg := apitest.Config(t)
	cfg.SecretsKey = "k1:too-short"
	if _, err := app.New(context.Background(), cfg, app.Options{DB: storetest.SQLite(t)}); err == nil || !strings.Contains(err.Error(), "SECRETS_KEY") {
		t.Errorf("malformed SECRETS_KEY: %v", err)
	}
}
