package providersim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Control is a client of the simulator's control API (what tests and
// scripts use to drive it over HTTP).
type Control struct {
	URL  string
	HTTP *http.Client
}

func (c Control) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("providersim %s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// AddAccount registers a simulated number.
func (c Control) AddAccount(ctx context.Context, a Account) error {
	return c.call(ctx, http.MethodPost, "/_control/accounts", a, nil)
}

// Inbound makes a contact send a message; the result is the gateway's
// answer to the signed webhook.
func (c Control) Inbound(ctx context.Context, in InboundRequest) (WebhookResult, error) {
	var out WebhookResult
	err := c.call(ctx, http.MethodPost, "/_control/inbound", in, &out)
	return out, err
}

// Receipt makes the platform report a status of a sent message.
func (c Control) Receipt(ctx context.Context, in ReceiptRequest) (WebhookResult, error) {
	var out WebhookResult
	err := c.call(ctx, http.MethodPost, "/_control/receipts", in, &out)
	return out, err
}

// SeedTemplates adds or replaces templates of a business account.
func (c Control) SeedTemplates(ctx context.Context, in TemplatesRequest) ([]Template, error) {
	var out struct {
		Templates []Template `json:"templates"`
	}
	err := c.call(ctx, http.MethodPost, "/_control/templates", in, &out)
	return out.Templates, err
}

// Refuse makes the next sends of a number be refused with a reason.
func (c Control) Refuse(ctx context.Context, in FaultRequest) error {
	return c.call(ctx, http.MethodPost, "/_control/refusals", in, nil)
}

// Outage makes the next provider calls of a number answer 500.
func (c Control) Outage(ctx context.Context, in FaultRequest) error {
	return c.call(ctx, http.MethodPost, "/_control/outages", in, nil)
}

// MediaOutage makes the next media lookups (GET /{media-id}) of a
// number's media answer 500.
func (c Control) MediaOutage(ctx context.Context, in FaultRequest) error {
	return c.call(ctx, http.MethodPost, "/_control/media-outages", in, nil)
}

// Deliveries lists, per message, how many sends the simulator received
// and accepted (all numbers when pnid is empty).
func (c Control) Deliveries(ctx context.Context, pnid string) ([]Delivery, error) {
	var out struct {
		Deliveries []Delivery `json:"deliveries"`
	}
	err := c.call(ctx, http.MethodGet, "/_control/deliveries?phone_number_id="+url.QueryEscape(pnid), nil, &out)
	return out.Deliveries, err
}

// Stats is what GET /_control/stats answers.
type Stats struct {
	// Messages is how many sends the simulator accepted, all numbers.
	Messages int `json:"messages"`
}

// Stats counts what the simulator holds.
func (c Control) Stats(ctx context.Context) (Stats, error) {
	var out Stats
	err := c.call(ctx, http.MethodGet, "/_control/stats", nil, &out)
	return out, err
}

// Messages lists what a number sent.
func (c Control) Messages(ctx context.Context, pnid string) ([]SentMessage, error) {
	var out struct {
		Messages []SentMessage `json:"messages"`
	}
	err := c.call(ctx, http.MethodGet, "/_control/messages?phone_number_id="+url.QueryEscape(pnid), nil, &out)
	return out.Messages, err
}
