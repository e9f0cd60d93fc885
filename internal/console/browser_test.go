//go:build browser

package console_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// The simulated world: the company's official number and a contact who wrote to it (window open).
const (
	phoneNumberID     = "109876543210987"
	businessAccountID = "102938475610293"
	officialKey       = "5511999990001"
	contactKey        = "5511977776666"
	strangerKey       = "5511955554444"
)

// TestConsoleInChromium drives /console of a running gateway (the real app, River workers on, the
// provider and chat-app simulators) in Debian's chromium with playwright-core
// (.tools/console/browser-test.mjs): sign-in, pairing a connection while the test "scans" it with
// the simulator's control call (the page must switch to connected without a reload), a text sent on
// each platform from the form and its omnichat.message.sent seen in the subscription's delivery log,
// a redelivery and its second attempt, a token without webhook permissions seeing "not permitted",
// axe-core on every screen, and no request off the origin, script error or CSP violation.
// Screenshots land in .tools/console/artifacts (git-ignored). `make test-console` runs it (build tag
// browser: it needs node and chromium).
func TestConsoleInChromium(t *testing.T) {
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("no chromium at %s (apt-get install -y chromium; .ci/run does): %v", chromium, err)
	}
	tools, err := filepath.Abs("../../.tools/console")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", filepath.Join(tools, "npm-ci.sh")).CombinedOutput(); err != nil {
		t.Fatalf("npm ci in .tools/console: %v\n%s", err, out)
	}
	promo, err := filepath.Abs("../../testdata/media/promo.png")
	if err != nil {
		t.Fatal(err)
	}

	h := apitest.Start(t, storetest.SQLite(t), apitest.Options{WorkJobs: true})
	ctx := t.Context()
	sim := providersim.New(providersim.Options{Logger: slog.New(slog.DiscardHandler)})
	simSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(simSrv.Close)
	acme := h.Tenant("Acme")
	sim.AddAccount(providersim.Account{PhoneNumberID: phoneNumberID, BusinessAccountID: businessAccountID, AccessToken: "sim-token",
		AppSecret: "sim-secret", DisplayPhoneNumber: officialKey, WebhookURL: h.Server.URL + "/provider-webhooks/" + phoneNumberID})
	sim.SeedTemplates(businessAccountID, providersim.DemoTemplates())
	ch, err := h.App.Channels.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: acme.CompanyID, Name: "Loja", Key: officialKey,
		BusinessAccountID: businessAccountID, PhoneNumberID: phoneNumberID, AccessToken: "sim-token", AppSecret: "sim-secret", BaseURL: simSrv.URL})
	if err != nil {
		t.Fatalf("register official channel: %v", err)
	}
	account, err := h.App.Templates.AccountChannel(ctx, acme.CompanyID, ch.ProviderAccount.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.App.Templates.Sync(ctx, account); err != nil {
		t.Fatalf("sync templates: %v", err)
	}
	// The contact writes first, which opens the 24-hour window on the official number.
	if _, err := (providersim.Control{URL: simSrv.URL}).Inbound(ctx, providersim.InboundRequest{
		PhoneNumberID: phoneNumberID, From: contactKey, Name: "Maria", Text: "Olá!"}); err != nil {
		t.Fatalf("inbound: %v", err)
	}
	// A token of another company that may do everything but touch webhooks.
	limited := h.Tenant("Viewer", slices.DeleteFunc(slices.Clone(auth.AllPermissions), func(p string) bool {
		return strings.HasPrefix(p, "channel_webhooks")
	})...)

	// The subscriber's receiver: answers every delivery 204 and counts them.
	var received atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)

	runCtx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(runCtx, "node", "browser-test.mjs", h.Server.URL, filepath.Join(tools, "artifacts"))
	cmd.Dir = tools
	cmd.Env = append(os.Environ(),
		"CHROMIUM="+chromium,
		"TOKEN="+acme.Token,
		"LIMITED_TOKEN="+limited.Token,
		"RECEIVER_URL="+receiver.URL+"/events",
		"OFFICIAL_KEY="+officialKey,
		"CONTACT_KEY="+contactKey,
		"STRANGER_KEY="+strangerKey,
		"PROMO_PNG="+promo,
		"README_SHOTS="+os.Getenv("README_SHOTS"),
	)
	out, err := cmd.CombinedOutput()
	t.Logf("browser-test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("browser test failed: %v", err)
	}
	// Two sends, a test ping, a redelivery: the receiver got at least the sends and the redelivery.
	if n := received.Load(); n < 3 {
		t.Errorf("the receiver got %d deliveries, want at least 3 (two sends and a redelivery)", n)
	}
	t.Logf("receiver got %d deliveries", received.Load())
}
