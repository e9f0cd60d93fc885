//go:build browser

package docs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestDocsPageInChromium opens /docs of a running gateway in Debian's chromium, driven by
// playwright-core (.tools/docs/browser-test.mjs): every operation of the OpenAPI document and every
// event of the AsyncAPI document appears, search finds operations by name, and the page asks no
// host but the gateway for anything. Screenshots land in .tools/docs/artifacts (git-ignored).
// `make test-docs` runs it (build tag browser: it needs node and chromium, which plain `go test`
// does not assume). The page does not touch the database, so SQLite alone serves it.
func TestDocsPageInChromium(t *testing.T) {
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("no chromium at %s (apt-get install -y chromium; .ci/run does): %v", chromium, err)
	}
	tools, err := filepath.Abs("../../.tools/docs")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", filepath.Join(tools, "npm-ci.sh")).CombinedOutput(); err != nil {
		t.Fatalf("npm ci in .tools/docs: %v\n%s", err, out)
	}

	h := apitest.Start(t, storetest.SQLite(t), apitest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "browser-test.mjs", h.Server.URL, filepath.Join(tools, "artifacts"))
	cmd.Dir = tools
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("browser-test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("browser test failed: %v", err)
	}
}
