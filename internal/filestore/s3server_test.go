package filestore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/filestore"
)

// The S3 backend is tested against a real S3-compatible server, SeaweedFS's
// S3 gateway, built from the Go module proxy into a cache outside the
// repository (never committed). A first build takes minutes; later runs
// reuse the binary. FILESTORE_TEST_WEED names a weed binary to use instead.
const (
	weedModule  = "github.com/seaweedfs/seaweedfs"
	weedVersion = "v0.0.0-20261109003541-7506e5f91cd6"
	envWeed     = "FILESTORE_TEST_WEED"
)

// weedBinary returns the path of a weed binary, building it into
// ~/.cache/gateway-s3/<version>/weed when there is none. The module's
// go.mod has replace directives, so `go install module@version` refuses it:
// the source is downloaded and built in place.
func weedBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envWeed); p != "" {
		return p
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("S3 backend not tested: no cache directory for the SeaweedFS binary (%v); set %s", err, envWeed)
	}
	dir := filepath.Join(cache, "gateway-s3", weedVersion)
	bin := filepath.Join(dir, "weed")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Skipf("S3 backend not tested: %v", err)
	}
	budget := 25 * time.Minute
	if d, ok := t.Deadline(); ok {
		budget = min(budget, time.Until(d)-time.Minute)
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	t.Logf("building SeaweedFS %s into %s for the S3 tests (minutes, once)", weedVersion, dir)
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", weedModule+"@"+weedVersion).Output()
	if err != nil {
		t.Skipf("S3 backend not tested: SeaweedFS could not be downloaded from the module proxy: %v", err)
	}
	srcDir := jsonField(string(out), "Dir")
	src := filepath.Join(dir, "src")
	_ = os.RemoveAll(src)
	if out, err := exec.CommandContext(ctx, "cp", "-r", srcDir, src).CombinedOutput(); err != nil {
		t.Skipf("S3 backend not tested: copy SeaweedFS source: %v %s", err, out)
	}
	_ = exec.Command("chmod", "-R", "u+w", src).Run()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+".tmp", "./weed")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("S3 backend not tested: SeaweedFS could not be built here (%v; raise -timeout for a first build, or set %s): %.2000s", err, envWeed, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Skipf("S3 backend not tested: %v", err)
	}
	_ = os.RemoveAll(src)
	return bin
}

func jsonField(doc, name string) string {
	_, rest, ok := strings.Cut(doc, `"`+name+`": "`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// freePorts finds n ports free on 127.0.0.1 whose +10000 (SeaweedFS's gRPC
// ports) are free too.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	for len(out) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if p+10000 > 65535 {
			continue
		}
		g, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		_ = g.Close()
		out = append(out, p)
	}
	return out
}

// startS3 runs a SeaweedFS server with its S3 gateway on loopback for the
// test and returns a store on a fresh bucket.
func startS3(t *testing.T) *filestore.S3 {
	t.Helper()
	bin := weedBinary(t)
	ports := freePorts(t, 4)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "server", "-dir="+dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port="+strconv.Itoa(ports[0]), "-volume.port="+strconv.Itoa(ports[1]), "-master.volumeSizeLimitMB=64",
		"-filer", "-filer.port="+strconv.Itoa(ports[2]), "-s3", "-s3.port="+strconv.Itoa(ports[3]))
	logf, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start SeaweedFS: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		_ = logf.Close()
	})
	cfg, err := filestore.ParseS3(fmt.Sprintf("s3://gateway-test?endpoint=http://127.0.0.1:%d&region=us-east-1", ports[3]))
	if err != nil {
		t.Fatal(err)
	}
	cfg.AccessKey, cfg.SecretKey = "test-key", "test-secret"
	s, err := filestore.OpenS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := s.EnsureBucket(context.Background())
		if err == nil {
			return s
		}
		if time.Now().After(deadline) || !errors.Is(err, filestore.ErrUnavailable) {
			log, _ := os.ReadFile(filepath.Join(dir, "weed.log"))
			t.Fatalf("SeaweedFS S3 did not come up: %v\n%.3000s", err, log)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func TestS3(t *testing.T) {
	t.Parallel()
	s := startS3(t)
	testStore(t, s)
}
