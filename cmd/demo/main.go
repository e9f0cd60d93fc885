// Command demo runs the whole gateway on one machine with one command (`make demo`): the gateway on
// a fresh SQLite database with loopback allowed for outbound calls, the official provider's
// simulator, the chat-app simulator (the gateway's simulator driver) and a loopback event printer
// that verifies each webhook's signature and prints it. It bootstraps a company, registers the
// simulated number as the company's official channel, pairs a simulated chat-app connection,
// subscribes the printer to every event, makes a contact write so the first events arrive, and
// prints the token, the ids and three curl lines to paste. Ctrl-C stops everything.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/providersim"
)

// The simulated world: the company's official number at the provider, its chat-app number, and
// the contact who writes to both.
const (
	phoneNumberID     = "109876543210987"
	businessAccountID = "102938475610293"
	officialKey       = "5511999990001"
	chatappKey        = "5511988887777"
	contactKey        = "5511977776666"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// run starts everything, sets the demo up, and serves until ctx ends; then it stops the servers
// and removes a temporary data directory.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8090", "gateway address (8090: make run keeps 8080, so both can run)")
	dataDir := fs.String("data-dir", "", "SQLite file and media (default: a temporary directory removed at exit)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out := &syncWriter{w: stdout}
	if *dataDir == "" {
		dir, err := os.MkdirTemp("", "gateway-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*dataDir = dir
	}

	gwLn, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("gateway: %w (another demo running? try -listen 127.0.0.1:0)", err)
	}
	base := "http://" + gwLn.Addr().String()
	simLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gwLn.Close()
		return err
	}
	printerLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gwLn.Close()
		simLn.Close()
		return err
	}
	simURL, printerURL := "http://"+simLn.Addr().String(), "http://"+printerLn.Addr().String()+"/events"

	// Only what the demo sets: the user's DATABASE_URL or LISTEN_ADDR must not leak in.
	cfg, err := config.Parse("demo", []string{"-listen", gwLn.Addr().String(), "-data-dir", *dataDir,
		"-public-base-url", base, "-outbound-allow-cidrs", "127.0.0.0/8", "-log-level", "warn", "-log-format", "text",
		"-connector-driver", "simulator", "-metrics-listen", "off"},
		func(string) string { return "" })
	if err != nil {
		return err
	}
	a, err := app.New(ctx, cfg, app.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer a.Close()

	sim := providersim.New(providersim.Options{Logger: slog.New(slog.DiscardHandler)})
	printer := &printer{out: out}
	side := []*http.Server{
		{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second},
		{Handler: printer, ReadHeaderTimeout: 10 * time.Second},
	}
	go side[0].Serve(simLn)     //nolint:errcheck // ends with Shutdown below
	go side[1].Serve(printerLn) //nolint:errcheck
	serveCtx, stopGateway := context.WithCancel(ctx)
	gatewayDone := make(chan error, 1)
	go func() { gatewayDone <- a.ServeListener(serveCtx, gwLn) }()
	defer func() {
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, s := range side {
			_ = s.Shutdown(stop)
		}
	}()

	setupErr := setUp(ctx, a, sim, out, printer, base, simURL, printerURL)
	if setupErr == nil {
		<-ctx.Done()
		fmt.Fprintln(out, "\nStopping…")
	}
	stopGateway()
	err = <-gatewayDone
	return errors.Join(setupErr, err)
}

// setUp builds the demo company through the same services and API a user would, prints how to
// use it, and makes the contact write the first message.
func setUp(ctx context.Context, a *app.App, sim *providersim.Server, out io.Writer, p *printer, base, simURL, printerURL string) error {
	boot, err := a.Auth.Bootstrap(ctx, "Demo Company", "admin@demo.test", auth.AllPermissions, 0)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	sim.AddAccount(providersim.Account{PhoneNumberID: phoneNumberID, BusinessAccountID: businessAccountID,
		AccessToken: "sim-token", AppSecret: "sim-secret", DisplayPhoneNumber: officialKey,
		WebhookURL: base + "/provider-webhooks/" + phoneNumberID})
	sim.SeedTemplates(businessAccountID, providersim.DemoTemplates())
	official, err := a.Channels.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: boot.CompanyID, Name: "Loja",
		Key: officialKey, BusinessAccountID: businessAccountID, PhoneNumberID: phoneNumberID,
		AccessToken: "sim-token", AppSecret: "sim-secret", BaseURL: simURL})
	if err != nil {
		return fmt.Errorf("register the official channel: %w", err)
	}

	ch, err := a.Templates.AccountChannel(ctx, boot.CompanyID, official.ProviderAccount.ID)
	if err != nil {
		return err
	}
	if _, err := a.Templates.Sync(ctx, ch); err != nil {
		return fmt.Errorf("sync the templates: %w", err)
	}

	api := client{base: base, token: boot.Token}
	var tpl struct {
		Templates []struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"templates"`
	}
	if err := api.do(ctx, http.MethodGet, fmt.Sprintf("/api/provider-templates/for-channel?company_channel_id=%d", official.ID), nil, &tpl); err != nil {
		return err
	}
	var promoImage int64
	for _, t := range tpl.Templates {
		if t.Name == "promo_image" {
			promoImage = t.ID
		}
	}
	if promoImage == 0 {
		return errors.New("the synced templates lack promo_image")
	}
	var conn struct {
		Data struct {
			ID  int64  `json:"id"`
			Key string `json:"key"`
		} `json:"data"`
	}
	if err := api.do(ctx, http.MethodPost, "/api/chatapp-create", map[string]any{"name": "Sales", "key": chatappKey}, &conn); err != nil {
		return err
	}
	if err := api.do(ctx, http.MethodPost, "/api/chatapp-qrcode", map[string]any{"id": conn.Data.ID, "os": "Linux", "browser": "Demo"}, nil); err != nil {
		return err
	}
	if err := api.do(ctx, http.MethodPost, fmt.Sprintf("/api/chatapp-simulator/%d/pair", conn.Data.ID), map[string]any{}, nil); err != nil {
		return err
	}
	var hook struct {
		Data struct {
			ID int64 `json:"id"`
		} `json:"data"`
		Secret string `json:"secret"`
	}
	if err := api.do(ctx, http.MethodPost, "/api/channel-webhooks", map[string]any{"name": "demo printer", "url": printerURL}, &hook); err != nil {
		return err
	}
	p.setSecret(hook.Secret)

	auth := "-H 'Authorization: Bearer " + boot.Token + "' -H 'Accept: application/json' -H 'Content-Type: application/json'"
	fmt.Fprintf(out, `Chat Messaging Gateway demo (Ctrl-C stops everything)

  gateway              %[1]s   docs: %[1]s/docs
  provider simulator   %[2]s
  event printer        %[3]s
  token                %[4]s
  company_id %[5]d, user_id %[6]d
  official channel     company_channel_id %[7]d, key %[8]s, provider account %[9]d
  chat-app connection  id %[10]d, key %[11]s (paired with the simulator)
  webhook              id %[12]d → the event printer, every event

In another shell, paste this first: the README's walk-throughs use these names, never fixed ids.
  export GW=%[1]s SIM=%[2]s TOKEN=%[4]s COMPANY_ID=%[5]d COMPANY_CHANNEL_ID=%[7]d PROVIDER_ACCOUNT_ID=%[9]d OFFICIAL_KEY=%[8]s CONNECTION_ID=%[10]d CHATAPP_KEY=%[11]s CONTACT_KEY=%[14]s WEBHOOK_ID=%[12]d PROMO_IMAGE_TEMPLATE_ID=%[15]d

Or paste any of these as they are; each makes events appear below.
  # answer the contact on the official channel (omnichat.message.sent)
  curl -sS --fail-with-body -w '\n' %[13]s %[1]s/api/api-send-message -d '{"platform":"ofc_chatapp","sender_key":"%[8]s","contact_key":"%[14]s","text":"Oi Maria! How can we help?"}'
  # the contact writes to the chat-app connection (omnichat.conversation.created, omnichat.message.received)
  curl -sS --fail-with-body -w '\n' %[13]s %[1]s/api/chatapp-simulator/%[10]d/inbound -d '{"from":"%[14]s","name":"Maria","text":"Hello from the chat app"}'
  # answer on the chat-app connection (omnichat.message.sent)
  curl -sS --fail-with-body -w '\n' %[13]s %[1]s/api/api-send-message -d '{"platform":"chatapp","sender_key":"%[11]s","contact_key":"%[14]s","contact_is_group":false,"text":"Hi Maria!"}'

Events:
`, base, simURL, printerURL, boot.Token, boot.CompanyID, boot.UserID, official.ID, officialKey,
		official.ProviderAccount.ID, conn.Data.ID, conn.Data.Key, hook.Data.ID, auth, contactKey, promoImage)

	// The contact writes to the official number: the provider simulator POSTs its signed webhook to
	// the gateway, which opens the 24-hour window and publishes the first events.
	if _, err := (providersim.Control{URL: simURL}).Inbound(ctx, providersim.InboundRequest{
		PhoneNumberID: phoneNumberID, From: contactKey, Name: "Maria", Text: "Olá! Is my order 4471 on its way?"}); err != nil {
		return fmt.Errorf("first inbound message: %w", err)
	}
	return nil
}

// client calls the gateway's API with the demo token.
type client struct {
	base, token string
}

// do sends in as JSON (none when nil) and decodes a 200 or 201 answer into out (when not nil).
func (c client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, answer)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// syncWriter serialises the setup's and the printer's output.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// printer is the loopback webhook receiver: it verifies each delivery the way a subscriber must and
// prints the event.
type printer struct {
	out    io.Writer
	mu     sync.Mutex
	secret string
}

func (p *printer) setSecret(s string) {
	p.mu.Lock()
	p.secret = s
	p.mu.Unlock()
}
