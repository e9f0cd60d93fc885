//go:build browser

package console_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

	// The subscriber's receiver: answers every delivery 204, and notes which channel sent the text of
	// each omnichat.message.sent, by delivery id, to tie the page's delivery log to the sends.
	var received atomic.Int64
	var mu sync.Mutex
	sentBy := map[string]string{} // delivery id → "channel key: text"
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		var ev struct {
			Event string `json:"event"`
			Data  struct {
				Text       string `json:"text"`
				ChannelKey string `json:"company_channel_key"`
			} `json:"data"`
		}
		if err := json.NewDecoder(r.Body).Decode(&ev); err == nil && ev.Event == "omnichat.message.sent" {
			mu.Lock()
			sentBy[r.Header.Get("X-Svc-Delivery")] = ev.Data.ChannelKey + ": " + ev.Data.Text
			mu.Unlock()
		}
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
	// Every send of the form is among the deliveries the page's log listed (the program prints their
	// ids), each on its platform's channel.
	var logged []string
	for _, line := range strings.Split(string(out), "\n") {
		if ids, ok := strings.CutPrefix(strings.TrimSpace(line), "logged omnichat.message.sent: "); ok {
			logged = strings.Split(ids, ",")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"5511988887777: Hello from the console (chat app)", officialKey + ": Hello from the console (official)"} {
		if !slices.ContainsFunc(logged, func(id string) bool { return sentBy[id] == want }) {
			t.Errorf("the delivery log the page showed (%v) has no omnichat.message.sent of %q; the receiver got %v", logged, want, sentBy)
		}
	}
	t.Logf("receiver got %d deliveries", received.Load())
}
