package official

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/ratelimit"
)

// Receiver is what inbound provider webhooks are reported to
// (*messaging.Service).
type Receiver interface {
	ReceiveInbound(ctx context.Context, in messaging.Inbound) error
	ApplyReceipt(ctx context.Context, r messaging.Receipt) error
	FindByExternalID(ctx context.Context, companyChannelID int64, externalID string) (messaging.Message, error)
}

// ChannelFinder resolves the official channel of a phone number id
// (*channels.Service).
type ChannelFinder interface {
	FindByPhoneNumberID(ctx context.Context, phoneNumberID string) (channels.Channel, error)
}

// Service is the official capability's inbound side: the provider's
// webhook handshake and deliveries, reported to messaging.
type Service struct {
	channels ChannelFinder
	receiver Receiver
	opts     Options
}

// Options tune the inbound side.
type Options struct {
	Logger *slog.Logger
	// Limiter and RatePerAccount bound the deliveries one provider account
	// makes per second (0: no bound), counted once the signature is
	// checked, so a forged flood cannot spend a company's share.
	Limiter        ratelimit.Limiter
	RatePerAccount int
}

// NewService returns the inbound webhook service. It makes no provider
// call: a contact's media is fetched later through MediaFetcher.
func NewService(ch ChannelFinder, receiver Receiver, opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Limiter == nil {
		opts.RatePerAccount = 0
	}
	return &Service{channels: ch, receiver: receiver, opts: opts}
}

// MsgAccountRate is the 429 of a delivery over its account's rate.
const MsgAccountRate = "Too many webhook deliveries for this account; retry shortly."

// admit spends one of the account's deliveries this second. One
// account's flood of inbound messages then costs that company its own
// deliveries' latency (the provider delivers the refused ones again),
// not every other company's. A limiter that fails lets the delivery in:
// refusing the provider for our own fault would only delay it.
func (s *Service) admit(ctx context.Context, ch channels.Channel) error {
	if s.opts.RatePerAccount <= 0 {
		return nil
	}
	ok, wait, err := s.opts.Limiter.Allow(ctx, ratelimit.Key("inbound:account", ch.ID), s.opts.RatePerAccount, time.Second)
	if err != nil {
		s.opts.Logger.WarnContext(ctx, "official: inbound rate limiter failed; delivery admitted", "company_channel_id", ch.ID, "err", err)
		return nil
	}
	if !ok {
		return &fault.Error{Kind: fault.RateLimited, Message: MsgAccountRate, RetryAfterSeconds: ratelimit.RetryAfterSeconds(wait)}
	}
	return nil
}

// VerifyToken is the token an operator enters as the webhook's "verify
// token" at the provider for this account. It is derived from the app
// secret, so it needs no storage and changes when the secret is rotated.
func VerifyToken(acc *channels.ProviderAccount) string {
	m := hmac.New(sha256.New, []byte(acc.AppSecret))
	m.Write([]byte("webhook-verify-token:" + acc.PhoneNumberID))
	return hex.EncodeToString(m.Sum(nil))[:32]
}

// Sign returns the X-Hub-Signature-256 value of body for appSecret.
func Sign(appSecret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(appSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifyProviderWebhook answers the provider's subscription handshake
// (hub.mode=subscribe with the verify token): it returns the challenge to
// echo. Errors: Forbidden for a wrong mode or token, and for an unknown
// phone number id alike.
func (s *Service) VerifyProviderWebhook(ctx context.Context, phoneNumberID, mode, token, challenge string) (string, error) {
	refused := func(cause error) error { return fault.Wrap(fault.Forbidden, "The verify token does not match.", cause) }
	ch, err := s.channels.FindByPhoneNumberID(ctx, phoneNumberID)
	if fault.KindOf(err) == fault.NotFound {
		// Answered like a wrong token, after the same comparison: an
		// unknown id must not tell which numbers are registered.
		hmac.Equal([]byte(token), []byte(VerifyToken(&channels.ProviderAccount{AppSecret: unknownAccountSecret, PhoneNumberID: phoneNumberID})))
		return "", refused(errUnknownPhoneNumberID)
	}
	if err != nil {
		return "", err
	}
	want := VerifyToken(ch.ProviderAccount)
	if mode != "subscribe" || !hmac.Equal([]byte(token), []byte(want)) {
		return "", refused(nil)
	}
	return challenge, nil
}

// errUnknownPhoneNumberID is the logged cause of a provider call for a
// phone number id no official channel has; the answer is that of a wrong
// token or signature.
var errUnknownPhoneNumberID = errors.New("no official channel has this phone number id")

// unknownAccountSecret keys the comparison made for an unknown phone
// number id, so it costs what a known one's does.
const unknownAccountSecret = "unknown-account"

// Summary counts what one webhook delivery carried.
type Summary struct {
	Messages int
	Receipts int
	Ignored  int
}

// ReceiveProviderWebhook checks the signature of a delivery (HMAC-SHA256
// of the raw body with the account's app secret) and reports its messages
// and receipts to messaging. Repeated deliveries change nothing.
//
// Errors: Unauthenticated for a missing or wrong signature, and for an
// unknown phone number id alike; Invalid for a body that is not a webhook
// payload; Internal. A contact's media is fetched afterwards, by a job
// (messaging.FetchMediaArgs), never within the delivery.
func (s *Service) ReceiveProviderWebhook(ctx context.Context, phoneNumberID, signature string, body []byte) (Summary, error) {
	var sum Summary
	const badSignature = "The webhook signature is missing or wrong."
	ch, err := s.channels.FindByPhoneNumberID(ctx, phoneNumberID)
	if fault.KindOf(err) == fault.NotFound {
		// Answered like a wrong signature, after the same HMAC: an unknown
		// id must not tell which numbers are registered.
		hmac.Equal([]byte(signature), []byte(Sign(unknownAccountSecret, body)))
		return sum, fault.Wrap(fault.Unauthenticated, badSignature, errUnknownPhoneNumberID)
	}
	if err != nil {
		return sum, err
	}
	if signature == "" || !hmac.Equal([]byte(signature), []byte(Sign(ch.ProviderAccount.AppSecret, body))) {
		return sum, fault.New(fault.Unauthenticated, badSignature)
	}
	if err := s.admit(ctx, ch); err != nil {
		return sum, err
	}
	var p WebhookPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return sum, fault.Wrap(fault.Invalid, "The webhook body is not valid JSON.", err)
	}
	for _, e := range p.Entry {
		for _, c := range e.Changes {
			v := c.Value
			if id := v.Metadata.PhoneNumberID; id != "" && id != phoneNumberID {
				// Another number of the same app: its own endpoint gets it.
				sum.Ignored += len(v.Messages) + len(v.Statuses) + len(v.Groups)
				continue
			}
			if len(v.Groups) > 0 {
				for _, g := range v.Groups {
					if err := s.group(ctx, ch, c.Field, g); err != nil {
						return sum, err
					}
					sum.Messages++
				}
				continue
			}
			if c.Field != "messages" {
				sum.Ignored++
				continue
			}
			names := map[string]string{}
			for _, ct := range v.Contacts {
				names[ct.WaID] = ct.Profile.Name
			}
			for _, m := range v.Messages {
				if err := s.inbound(ctx, ch, m, names[m.From]); err != nil {
					return sum, err
				}
				sum.Messages++
			}
			for _, st := range v.Statuses {
				applied, err := s.receipt(ctx, ch, st)
				if err != nil {
					return sum, err
				}
				if applied {
					sum.Receipts++
				} else {
					sum.Ignored++
				}
			}
		}
	}
	return sum, nil
}

func unixTime(ts string) time.Time {
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

// inboundMediaLimit bounds media a contact sends (the largest provider
// limit, documents).
const inboundMediaLimit = messaging.DocumentLimit

// MediaFetcher fetches the files contacts send to an official channel
// from the provider (messaging.MediaFetcher): the media's description
// (GET /{media-id}), then its bytes from the URL it names.
type MediaFetcher struct{ client *Client }

// NewMediaFetcher returns the provider's media fetcher.
func NewMediaFetcher(c *Client) *MediaFetcher { return &MediaFetcher{client: c} }

// FetchMedia implements messaging.MediaFetcher. Errors: Refused for media
// the provider does not have or that is over the limit; Unavailable.
func (f *MediaFetcher) FetchMedia(ctx context.Context, ch channels.Channel, ref messaging.PendingMedia) (messaging.Media, error) {
	acc := ch.ProviderAccount
	if acc == nil {
		return messaging.Media{}, fault.New(fault.Refused, "The channel has no provider account")
	}
	info, err := f.client.DescribeMedia(ctx, acc, ref.ID, inboundMediaLimit)
	if err != nil {
		return messaging.Media{}, err
	}
	// Described with its size, it is streamed from the provider into the
	// store as it is saved, never held whole (a document may be 100 MB).
	m := &messaging.Media{Size: int64(info.FileSize), Open: func(ctx context.Context) (io.ReadCloser, error) {
		return f.client.OpenMedia(ctx, acc, info.URL)
	}}
	if info.FileSize == 0 {
		data, err := f.client.DownloadMedia(ctx, acc, info.URL, inboundMediaLimit)
		if err != nil {
			return messaging.Media{}, err
		}
		m = messaging.MediaBytes("", "", data)
	}
	ct := ref.ContentType
	if ct == "" {
		ct = info.MimeType
	}
	ct = strings.TrimSpace(strings.Split(ct, ";")[0])
	if ct == "" {
		if ct, err = m.Sniff(ctx); err != nil {
			return messaging.Media{}, err
		}
	}
	m.ContentType, m.FileName = ct, ref.FileName
	if m.FileName == "" {
		m.FileName = messaging.SafeFileName("", ct)
	}
	return *m, nil
}

func (s *Service) inbound(ctx context.Context, ch channels.Channel, m InboundMessage, name string) error {
	in := messaging.Inbound{Channel: ch, ExternalID: m.ID, ContactKey: m.From, ContactName: name, SentAt: unixTime(m.Timestamp)}
	if m.Context != nil {
		in.IsForwarded = m.Context.Forwarded
		in.ReplyToExternalID = m.Context.ID
	}
	in.TypeID, in.Text = describe(m)
	if m.Type == "reaction" && m.Reaction != nil {
		in.ReplyToExternalID = m.Reaction.MessageID
	}
	if media := m.media(); media != nil && media.ID != "" {
		// The file is fetched by a job after the message is stored: the
		// provider gets its answer at once, and a slow or failing media
		// download neither delays nor loses the message.
		in.PendingMedia = &messaging.PendingMedia{ID: media.ID, ContentType: media.MimeType, FileName: DocumentFileName(media.Filename)}
	}
	return s.receiver.ReceiveInbound(ctx, in)
}

// media is the file of a media message (nil for other kinds).
func (m InboundMessage) media() *InboundMedia {
	return map[string]*InboundMedia{"image": m.Image, "video": m.Video, "audio": m.Audio, "document": m.Document, "sticker": m.Sticker}[m.Type]
}

// describe maps a message kind of the provider's webhook onto a message
// type and a readable text: nothing a contact sends is stored without
// saying what it was.
func describe(m InboundMessage) (int, string) {
	switch m.Type {
	case "text":
		text := ""
		if m.Text != nil {
			text = m.Text.Body
		}
		if m.Context != nil && m.Context.ReferredProduct != nil {
			text += fmt.Sprintf(" [about product %s of catalog %s]", m.Context.ReferredProduct.ProductRetailerID, m.Context.ReferredProduct.CatalogID)
		}
		if r := m.Referral; r != nil {
			text += fmt.Sprintf(" [from %s %q %s]", r.SourceType, r.Headline, r.SourceURL)
		}
		return msgtype.Text, strings.TrimSpace(text)
	case "image", "video", "audio", "document", "sticker":
		t := map[string]int{"image": msgtype.Image, "video": msgtype.Video, "audio": msgtype.Audio,
			"document": msgtype.Document, "sticker": msgtype.Sticker}[m.Type]
		media := m.media()
		if media == nil {
			return t, "[" + m.Type + " without its media]"
		}
		return t, media.Caption
	case "location":
		l := m.Location
		if l == nil {
			return msgtype.Location, "[location]"
		}
		parts := []string{}
		for _, p := range []string{l.Name, l.Address} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		parts = append(parts, fmt.Sprintf("(%s, %s)", l.Latitude, l.Longitude))
		if l.URL != "" {
			parts = append(parts, l.URL)
		}
		return msgtype.Location, strings.Join(parts, " ")
	case "contacts":
		var cards []string
		for _, c := range m.Contacts {
			name := c.Name.FormattedName
			if name == "" {
				name = strings.TrimSpace(c.Name.FirstName + " " + c.Name.LastName)
			}
			var phones []string
			for _, p := range c.Phones {
				phones = append(phones, p.Phone)
			}
			card := name
			if len(phones) > 0 {
				card += " " + strings.Join(phones, ", ")
			}
			if c.Org.Company != "" {
				card += " (" + c.Org.Company + ")"
			}
			cards = append(cards, strings.TrimSpace(card))
		}
		return msgtype.Contacts, "Contacts: " + strings.Join(cards, "; ")
	case "reaction":
		if m.Reaction == nil || m.Reaction.Emoji == "" {
			return msgtype.Reaction, "[reaction removed]"
		}
		return msgtype.Reaction, m.Reaction.Emoji
	case "button":
		if m.Button == nil {
			return msgtype.Reply, "[button]"
		}
		return msgtype.Reply, m.Button.Text
	case "interactive":
		if i := m.Interactive; i != nil {
			switch {
			case i.ButtonReply != nil:
				return msgtype.Reply, i.ButtonReply.Title
			case i.ListReply != nil:
				text := i.ListReply.Title
				if i.ListReply.Description != "" {
					text += " — " + i.ListReply.Description
				}
				return msgtype.Reply, text
			}
		}
		return msgtype.Reply, "[interactive reply]"
	case "order":
		o := m.Order
		if o == nil {
			return msgtype.Order, "[order]"
		}
		var items []string
		for _, it := range o.ProductItems {
			items = append(items, fmt.Sprintf("%s x%s at %s %s", it.ProductRetailerID, it.Quantity, it.ItemPrice, it.Currency))
		}
		text := fmt.Sprintf("Order of %d item(s) from catalog %s: %s", len(o.ProductItems), o.CatalogID, strings.Join(items, "; "))
		if o.Text != "" {
			text += ". " + o.Text
		}
		return msgtype.Order, text
	case "system":
		if m.System == nil {
			return msgtype.System, "[system notice]"
		}
		return msgtype.System, m.System.Body
	}
	// unsupported, unknown, and any kind the platform adds later.
	text := fmt.Sprintf("[unsupported message type %q", m.Type)
	if len(m.Errors) > 0 {
		e := m.Errors[0]
		reason := e.ErrorData.Details
		if reason == "" {
			reason = e.Title
		}
		text += fmt.Sprintf(": %s (code %d)", reason, e.Code)
	}
	return msgtype.Unsupported, text + "]"
}

// group reports a group notification as a system message of the group's
// conversation: the provider sends no message id, so the notification's
// request id, field and type make one (a repeated delivery is ignored).
func (s *Service) group(ctx context.Context, ch channels.Channel, field string, g GroupNotification) error {
	participants := func(list []GroupParticipant) string {
		var out []string
		for _, p := range list {
			id := string(p.WaID)
			if id == "" {
				id = string(p.Input)
			}
			out = append(out, id)
		}
		return strings.Join(out, ", ")
	}
	var parts []string
	// A participants notification says so in its field; its type is not
	// to be trusted (the document's own example says group_create).
	if !strings.Contains(field, "participant") {
		switch g.Type {
		case "group_create":
			parts = append(parts, "Group created")
		case "group_delete":
			parts = append(parts, "Group deleted")
		case "group_settings_update":
			parts = append(parts, "Group settings changed")
		}
		if len(parts) > 0 && g.Subject != "" {
			parts[0] += ": " + g.Subject
		}
	}
	if len(g.AddedParticipants) > 0 {
		parts = append(parts, "participants added: "+participants(g.AddedParticipants))
	}
	if len(g.RemovedParticipants) > 0 {
		parts = append(parts, "participants removed: "+participants(g.RemovedParticipants))
	}
	if len(parts) == 0 {
		parts = append(parts, "Group notification "+g.Type)
	}
	text := strings.Join(parts, "; ")
	text = strings.ToUpper(text[:1]) + text[1:]
	in := messaging.Inbound{Channel: ch, ExternalID: "group." + field + "." + g.Type + "." + g.RequestID, ContactKey: g.GroupID,
		IsGroup: true, TypeID: msgtype.System, Text: text, SentAt: unixTime(string(g.Timestamp))}
	return s.receiver.ReceiveInbound(ctx, in)
}

var receiptStatus = map[string]int{
	"sent": messaging.StatusSent, "delivered": messaging.StatusDelivered, "read": messaging.StatusRead, "failed": messaging.StatusFailed,
}

// receipt reports one status to messaging. It is applied when it moved the
// stored status; a stale or repeated one (a status the message already
// passed) changes nothing and counts as ignored, as the OpenAPI document's
// ProviderWebhookResult says.
func (s *Service) receipt(ctx context.Context, ch channels.Channel, st StatusUpdate) (bool, error) {
	status, ok := receiptStatus[st.Status]
	if !ok {
		return false, nil
	}
	r := messaging.Receipt{Channel: ch, ExternalID: st.ID, StatusID: status, At: unixTime(st.Timestamp)}
	// The gateway sends its message id as biz_opaque_callback_data; the
	// echo lets a receipt that overtakes the send's answer find its message.
	if id, err := strconv.ParseInt(st.BizOpaqueCallbackData, 10, 64); err == nil && id > 0 {
		r.MessageID = id
	}
	if status == messaging.StatusFailed {
		r.Reason = failureReason(st)
	}
	before, err := s.receiver.FindByExternalID(ctx, ch.ID, st.ID)
	if err != nil && fault.KindOf(err) != fault.NotFound {
		return false, err
	}
	// Not found: perhaps still waiting for its external id (before stays
	// the zero message, so adopting it counts as applied).
	err = s.receiver.ApplyReceipt(ctx, r)
	if fault.KindOf(err) == fault.NotFound {
		s.opts.Logger.InfoContext(ctx, "receipt for an unknown message ignored", "external_id", st.ID, "status", st.Status)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	after, err := s.receiver.FindByExternalID(ctx, ch.ID, st.ID)
	if fault.KindOf(err) == fault.NotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	applied := after.StatusID != before.StatusID || after.ID != before.ID
	if applied && st.Pricing != nil {
		s.opts.Logger.DebugContext(ctx, "receipt priced", "external_id", st.ID, "category", st.Pricing.Category,
			"billable", st.Pricing.Billable, "pricing_model", st.Pricing.PricingModel)
	}
	return applied, nil
}

// failureReason is the stored reason of a failed status: every error the
// provider gave (its details, else its title, with the code), and the
// conversation and pricing category when the status carries them — the
// one place the API document has for what the provider said.
func failureReason(st StatusUpdate) string {
	var parts []string
	for _, e := range st.Errors {
		reason := e.ErrorData.Details
		if reason == "" {
			reason = e.Title
		}
		if reason == "" {
			reason = e.Message
		}
		if e.Code != 0 {
			reason = fmt.Sprintf("%s (code %d)", reason, e.Code)
		}
		parts = append(parts, reason)
	}
	if len(parts) == 0 {
		parts = append(parts, "Delivery failed")
	}
	var extra []string
	if c := st.Conversation; c != nil && (c.ID != "" || c.Origin.Type != "") {
		extra = append(extra, "conversation "+strings.TrimSpace(c.ID+" "+c.Origin.Type))
	}
	if p := st.Pricing; p != nil && p.Category != "" {
		extra = append(extra, "pricing "+p.Category)
	}
	reason := strings.Join(parts, "; ")
	if len(extra) > 0 {
		reason += " [" + strings.Join(extra, ", ") + "]"
	}
	if r := []rune(reason); len(r) > 255 {
		reason = string(r[:254]) + "…"
	}
	return reason
}
