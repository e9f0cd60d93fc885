// Command providersim runs the official provider simulator: the provider's
// HTTP interface as its published OpenAPI document describes it (every
// request validated against that document) plus the control API documented
// in internal/official/README.md. Optionally it registers one account and
// demo templates at start, so a local gateway can use it right away.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/chatmsg/gateway/internal/providersim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "providersim:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("providersim", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9090", "address to listen on")
	var acc providersim.Account
	fs.StringVar(&acc.PhoneNumberID, "phone-number-id", "", "register this phone number id at start (with the flags below)")
	fs.StringVar(&acc.BusinessAccountID, "business-account-id", "", "business account id of the registered number")
	fs.StringVar(&acc.AccessToken, "access-token", "", "access token the gateway must present")
	fs.StringVar(&acc.AppSecret, "app-secret", "", "app secret that signs the webhooks")
	fs.StringVar(&acc.DisplayPhoneNumber, "display-phone-number", "", "the number as contacts see it")
	fs.StringVar(&acc.WebhookURL, "webhook-url", "", "where inbound webhooks go, e.g. http://127.0.0.1:8080/provider-webhooks/<phone-number-id>")
	sentReceipts := fs.Bool("sent-receipts", false, "after accepting a message, POST its `sent` status webhook as the platform does (retried while the gateway does not answer 2xx)")
	demo := fs.Bool("demo-templates", false, "seed demo templates (positional, named, IMAGE and DOCUMENT headers) for the registered account")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	sim := providersim.New(providersim.Options{Logger: logger, SentReceipts: *sentReceipts})
	if acc.PhoneNumberID != "" {
		if acc.BusinessAccountID == "" || acc.AccessToken == "" || acc.AppSecret == "" {
			return errors.New("-phone-number-id needs -business-account-id, -access-token and -app-secret")
		}
		sim.AddAccount(acc)
		logger.Info("account registered", "phone_number_id", acc.PhoneNumberID, "webhook_url", acc.WebhookURL)
		if *demo {
			sim.SeedTemplates(acc.BusinessAccountID, providersim.DemoTemplates())
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("provider simulator listening", "addr", ln.Addr().String())
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
