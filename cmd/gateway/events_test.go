package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/eventexamples"
)

// `gateway events send-examples` against a receiver on 127.0.0.1 built on
// the subscriber library (it verifies every signature): every event is
// acknowledged with the right secret in both schemes, none with another,
// and bad flags fail before anything is sent.
func TestEventsSendExamples(t *testing.T) {
	const secret = "whsec_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	h := subscriber.NewHandler(secret)
	for _, info := range events.Catalog {
		h.On(info.Name, func(context.Context, *subscriber.Delivery) error { return nil })
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	all := len(events.Catalog)
	cases := []struct {
		name    string
		args    []string
		wantErr error // nil: success; errUsage stands for "any error but ErrFailed"
		want    string
	}{
		{"every event, svc", []string{"--url", srv.URL, "--secret", secret}, nil, fmt.Sprintf("%d of %d events acknowledged", all, all)},
		{"standard-webhooks", []string{"--url", srv.URL, "--secret", secret, "--scheme", "standard-webhooks"}, nil, fmt.Sprintf("%d of %d", all, all)},
		{"one event", []string{"--url", srv.URL, "--secret", secret, "--event", events.CrmBusinessWon}, nil, "1 of 1"},
		{"another secret", []string{"--url", srv.URL, "--secret", secret + "0"}, eventexamples.ErrFailed, fmt.Sprintf("0 of %d", all)},
		{"unknown event", []string{"--url", srv.URL, "--secret", secret, "--event", "nope"}, errUsage, ""},
		{"no url", []string{"--secret", secret}, errUsage, ""},
		{"unknown scheme", []string{"--url", srv.URL, "--secret", secret, "--scheme", "md5"}, errUsage, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"events", "send-examples"}, c.args...), &out, func(string) string { return "" })
			switch {
			case c.wantErr == nil && err != nil:
				t.Fatalf("error %v\n%s", err, out.String())
			case c.wantErr == eventexamples.ErrFailed && !errors.Is(err, eventexamples.ErrFailed):
				t.Fatalf("error %v, want ErrFailed\n%s", err, out.String())
			case c.wantErr == errUsage && (err == nil || errors.Is(err, eventexamples.ErrFailed) || out.Len() > 0):
				t.Fatalf("error %v, output %q: want a flag error before sending", err, out.String())
			}
			if !strings.Contains(out.String(), c.want) {
				t.Fatalf("output lacks %q:\n%s", c.want, out.String())
			}
		})
	}
}
