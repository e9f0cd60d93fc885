package eventexamples

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/chatmsg/gateway/internal/webhooks"
)

// ErrFailed is returned by Command when the receiver did not acknowledge
// every example.
var ErrFailed = errors.New("the receiver did not acknowledge every event")

// Command is `gateway events send-examples`: it parses args, sends the
// examples and writes the report to stdout.
func Command(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("events send-examples", flag.ContinueOnError)
	url := fs.String("url", "", "the receiver's URL (required)")
	secret := fs.String("secret", "", "the subscription's signing secret (required)")
	scheme := fs.String("scheme", webhooks.SchemeSvc, "signature scheme: svc (X-Svc-Signature) or standard-webhooks")
	var only []string
	fs.Func("event", "send only this event (repeat, or comma-separated); default every event of the catalog", func(v string) error {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				only = append(only, e)
			}
		}
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" || *secret == "" {
		return fmt.Errorf("events send-examples: -url and -secret are required")
	}
	if *scheme != webhooks.SchemeSvc && *scheme != webhooks.SchemeStandard {
		return fmt.Errorf("events send-examples: -scheme %q is not %s or %s", *scheme, webhooks.SchemeSvc, webhooks.SchemeStandard)
	}
	var exs []Example
	if len(only) == 0 {
		all, err := All()
		if err != nil {
			return err
		}
		exs = all
	}
	for _, e := range only {
		ex, err := Lookup(e)
		if err != nil {
			return fmt.Errorf("events send-examples: -event %q is not an event of the AsyncAPI catalog", e)
		}
		exs = append(exs, ex)
	}
	results := SendAll(ctx, Target{URL: *url, Secret: *secret, Scheme: *scheme}, exs)
	if failed := Report(stdout, results); failed > 0 {
		return fmt.Errorf("%w: %d of %d failed", ErrFailed, failed, len(results))
	}
	return nil
}
