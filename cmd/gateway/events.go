package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/chatmsg/gateway/internal/eventexamples"
)

// runEvents routes `gateway events …`; the work is in internal/eventexamples.
func runEvents(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "send-examples" {
		return eventexamples.Command(ctx, args[1:], stdout)
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("events: want send-examples: %w", errUsage)
}
