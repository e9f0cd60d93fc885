// Package eventexamples sends the examples of the AsyncAPI document to a
// webhook receiver, signed exactly as deliveries are, so a subscriber can
// test its receiver against every event in one command (`gateway events
// send-examples`). The same examples back the test-event extension of
// POST /api/channel-webhooks/{id}/test.
//
// Each send is one delivery as the dispatcher makes it: the envelope of
// webhooks.NewDelivery with a fresh delivery id and occurred_at now, the
// request of webhooks.NewSignedDeliveryRequest (the worker's own) signed
// now, and the worker's 10-second limit; nothing here signs on its own.
package eventexamples

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"gopkg.in/yaml.v3"

	"github.com/chatmsg/gateway/asyncapi"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// Example is the first example of one event of the AsyncAPI document.
type Example struct {
	Event string
	// Name is the example's name in the document.
	Name string
	// CompanyID is the example envelope's company_id.
	CompanyID int64
	// Data is the example's `data`, as the document writes it.
	Data json.RawMessage
}

// MsgUnknownEvent is the validation message of an event the catalog lacks.
const MsgUnknownEvent = "The selected event is invalid."

// All returns the first example of every event of the catalog
// (events.Catalog, ping included), in catalog order. It fails when an
// event has no example.
func All() ([]Example, error) { return load() }

// Lookup returns the example of event; an event the catalog lacks is a
// fault.Invalid naming the field `event`.
func Lookup(event string) (Example, error) {
	all, err := load()
	if err != nil {
		return Example{}, err
	}
	for _, ex := range all {
		if ex.Event == event {
			return ex, nil
		}
	}
	return Example{}, &fault.Error{Kind: fault.Invalid, Message: MsgUnknownEvent,
		Fields: map[string][]string{"event": {MsgUnknownEvent}}}
}

var load = sync.OnceValues(func() ([]Example, error) {
	var doc struct {
		Components struct {
			Messages map[string]struct {
				Name     string `yaml:"name"`
				Examples []struct {
					Name    string `yaml:"name"`
					Payload struct {
						CompanyID int64 `yaml:"company_id"`
						Data      any   `yaml:"data"`
					} `yaml:"payload"`
				} `yaml:"examples"`
			} `yaml:"messages"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(asyncapi.Document, &doc); err != nil {
		return nil, fmt.Errorf("eventexamples: asyncapi.yaml: %w", err)
	}
	byEvent := map[string]Example{}
	for _, m := range doc.Components.Messages {
		if len(m.Examples) == 0 {
			continue
		}
		e := m.Examples[0]
		data, err := json.Marshal(e.Payload.Data)
		if err != nil {
			return nil, fmt.Errorf("eventexamples: %s example %s: %w", m.Name, e.Name, err)
		}
		byEvent[m.Name] = Example{Event: m.Name, Name: e.Name, CompanyID: e.Payload.CompanyID, Data: data}
	}
	out := make([]Example, 0, len(events.Catalog))
	for _, info := range events.Catalog {
		ex, ok := byEvent[info.Name]
		if !ok {
			return nil, fmt.Errorf("eventexamples: event %s has no example in asyncapi.yaml", info.Name)
		}
		out = append(out, ex)
	}
	return out, nil
})

// Target is the receiver under test.
type Target struct {
	URL    string
	Secret string
	// Scheme is webhooks.SchemeSvc (default) or webhooks.SchemeStandard.
	Scheme string
	// Client sends the requests; default a client that follows no
	// redirects, as deliveries do not count one as an answer.
	Client *http.Client
	// Now is the clock of delivery timestamps; default time.Now.
	Now func() time.Time
}

// Result is the receiver's answer to one example.
type Result struct {
	Event      string
	DeliveryID string
	// Status is the HTTP status; 0 when there was no answer.
	Status int
	// Duration is from sending the request to the end of the answer's
	// headers, as deliveries measure it.
	Duration time.Duration
	// Err is why there was no answer (including the 10-second limit).
	Err error
	// Body is the start of the answer's body.
	Body string
}

// OK is what a delivery counts as acknowledged: a 2xx within
// webhooks.AttemptTimeout (the document's 10-second rule).
func (r Result) OK() bool {
	return r.Err == nil && r.Status >= 200 && r.Status < 300 && r.Duration <= webhooks.AttemptTimeout
}

// Send posts ex to t as attempt 1 of a new delivery and reports the answer.
func Send(ctx context.Context, t Target, ex Example) Result {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	client := t.Client
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	res := Result{Event: ex.Event, DeliveryID: uuid.NewString()}
	d, err := webhooks.NewDelivery(webhooks.Event{Name: ex.Event, CompanyID: ex.CompanyID, OccurredAt: now(), Data: ex.Data},
		res.DeliveryID, clock.Formatter{})
	if err != nil {
		res.Err = err
		return res
	}
	reqCtx, cancel := context.WithTimeout(ctx, webhooks.AttemptTimeout)
	defer cancel()
	req, err := webhooks.NewSignedDeliveryRequest(reqCtx, t.URL, t.Secret, t.Scheme, d, 1, now())
	if err != nil {
		res.Err = err
		return res
	}
	start := time.Now()
	resp, err := client.Do(req)
	res.Duration = time.Since(start)
	if err != nil {
		if reqCtx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("no answer within %s", webhooks.AttemptTimeout)
		}
		res.Err = err
		return res
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	res.Body = strings.TrimSpace(string(body))
	return res
}

// SendAll sends every example in order, one at a time.
func SendAll(ctx context.Context, t Target, exs []Example) []Result {
	out := make([]Result, 0, len(exs))
	for _, ex := range exs {
		out = append(out, Send(ctx, t, ex))
	}
	return out
}

// Report writes one line per result and a summary, and returns how many
// failed.
func Report(w io.Writer, results []Result) (failed int) {
	var b bytes.Buffer
	for _, r := range results {
		verdict := "ok  "
		if !r.OK() {
			verdict = "FAIL"
			failed++
		}
		answer := fmt.Sprintf("HTTP %d", r.Status)
		switch {
		case r.Err != nil:
			answer = "no answer: " + r.Err.Error()
		case r.Duration > webhooks.AttemptTimeout:
			answer += fmt.Sprintf(" after the %s limit", webhooks.AttemptTimeout)
		case r.Status < 200 || r.Status >= 300:
			if r.Body != "" {
				answer += " " + r.Body
			}
		}
		fmt.Fprintf(&b, "%s %-34s %8s  %s  delivery %s\n", verdict, r.Event, r.Duration.Round(time.Millisecond), answer, r.DeliveryID)
	}
	fmt.Fprintf(&b, "%d of %d events acknowledged with a 2xx within %s\n", len(results)-failed, len(results), webhooks.AttemptTimeout)
	_, _ = w.Write(b.Bytes())
	return failed
}
