package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/chatmsg/gateway/internal/providersim"
)

// InboundBody is the provider's webhook for one text message from a
// contact to company c's official number, in the provider's format, and
// its X-Hub-Signature-256 (keyed with the account's app secret, as the
// provider signs). The load generator posts it to the gateway itself: at
// a thousand messages a second the provider simulator's document checks
// would be the bottleneck, not the gateway.
func InboundBody(c *Company, from, name, id, text string, at time.Time) ([]byte, string) {
	msg := map[string]any{"from": from, "id": id, "timestamp": strconv.FormatInt(at.Unix(), 10), "type": "text",
		"text": map[string]any{"body": text}}
	value := map[string]any{"messaging_product": "whatsapp",
		"metadata": map[string]any{"display_phone_number": c.ChannelKey, "phone_number_id": c.PhoneNumberID},
		"contacts": []any{map[string]any{"wa_id": from, "profile": map[string]any{"name": name}}},
		"messages": []any{msg}}
	body, _ := json.Marshal(map[string]any{"object": "whatsapp_business_account", "entry": []any{map[string]any{
		"id": c.BusinessAccountID, "changes": []any{map[string]any{"field": "messages", "value": value}}}}})
	return body, providersim.Sign(c.AppSecret, body)
}

// inboundCall posts, through api, an inbound text to company c's provider webhook,
// from one of contacts contacts in turn; each text is unique
// (prefix-seq), and due and accepted hear of it.
func (r *runner) inboundCall(api *Client, c *Company, prefix string, contacts int, due func(text string, at time.Time), accepted func(text string)) Call {
	return func(ctx context.Context, seq int, intended time.Time) string {
		text := fmt.Sprintf("%s-%d", prefix, r.seq.Add(1))
		from := fmt.Sprintf("5561%04d%05d", c.ID%10000, seq%contacts)
		body, sig := InboundBody(c, from, "Contato "+from, "wamid.LOAD"+text, text, time.Now())
		due(text, intended)
		status, _, err := api.DoHeaders(ctx, "POST", "/provider-webhooks/"+c.PhoneNumberID, body,
			map[string]string{"X-Hub-Signature-256": sig})
		out := outcome(status, err)
		if out == "" {
			accepted(text)
		}
		return out
	}
}
