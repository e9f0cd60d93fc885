package official

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/msgtype"
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
	client   *Client
	logger   *slog.Logger
}

// NewService returns the inbound webhook service.
func NewService(ch ChannelFinder, receiver Receiver, client *Client, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.Default()
	}
	return &Service{channels: ch, receiver: receiver, client: client, logger: logger}
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
// echo. Errors: NotFound for an unknown phone number id, Forbidden for a
// wrong mode or token.
func (s *Service) VerifyProviderWebhook(ctx context.Context, phoneNumberID, mode, token, challenge string) (string, error) {
	ch, err := s.channels.FindByPhoneNumberID(ctx, phoneNumberID)
	if err != nil {
		return "", err
	}
	want := VerifyToken(ch.ProviderAccount)
	if mode != "subscribe" || !hmac.Equal([]byte(token), []byte(want)) {
		return "", fault.New(fault.Forbidden, "The verify token does not match.")
	}
	return challenge, nil
}

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
// Errors: NotFound for an unknown phone number id; Unauthenticated for a
// missing or wrong signature; Invalid for a body that is not a webhook
// payload; Unavailable when a contact's media could not be fetched (the
// provider retries the delivery); Internal.
func (s *Service) ReceiveProviderWebhook(ctx context.Context, phoneNumberID, signature string, body []byte) (Summary, error) {
	var sum Summary
	ch, err := s.channels.FindByPhoneNumberID(ctx, phoneNumberID)
	if err != nil {
		return sum, err
	}
	if signature == "" || !hmac.Equal([]byte(signature), []byte(Sign(ch.ProviderAccount.AppSecret, body))) {
		return sum, fault.New(fault.Unauthenticated, "The webhook signature is missing or wrong.")
	}
	var p WebhookPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return sum, fault.Wrap(fault.Invalid, "The webhook body is not valid JSON.", err)
	}
	for _, e := range p.Entry {
		for _, c := range e.Changes {
			if c.Field != "messages" {
				sum.Ignored++
				continue
			}
			v := c.Value
			if id := v.Metadata.PhoneNumberID; id != "" && id != phoneNumberID {
				// Another number of the same app: its own endpoint gets it.
				sum.Ignored += len(v.Messages) + len(v.Statuses)
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

func (s *Service) inbound(ctx context.Context, ch channels.Channel, m InboundMessage, name string) error {
	in := messaging.Inbound{Channel: ch, ExternalID: m.ID, ContactKey: m.From, ContactName: name, SentAt: unixTime(m.Timestamp)}
	if m.Context != nil {
		in.IsForwarded = m.Context.Forwarded
		in.ReplyToExternalID = m.Context.ID
	}
	var media *InboundMedia
	switch m.Type {
	case "text":
		in.TypeID = msgtype.Text
		if m.Text != nil {
			in.Text = m.Text.Body
		}
	case "image":
		in.TypeID, media = msgtype.Image, m.Image
	case "video":
		in.TypeID, media = msgtype.Video, m.Video
	case "audio":
		in.TypeID, media = msgtype.Audio, m.Audio
	case "document":
		in.TypeID, media = msgtype.Document, m.Document
	case "sticker":
		in.TypeID, media = msgtype.Sticker, m.Sticker
	case "location":
		in.TypeID = msgtype.Location
		if l := m.Location; l != nil {
			in.Text = strings.TrimSpace(fmt.Sprintf("%s %s (%f, %f)", l.Name, l.Address, l.Latitude, l.Longitude))
		}
	case "button":
		in.TypeID = msgtype.Text
		if m.Button != nil {
			in.Text = m.Button.Text
		}
	default:
		in.TypeID = msgtype.Text
		in.Text = fmt.Sprintf("[unsupported message type %q]", m.Type)
	}
	if media != nil {
		in.Text = media.Caption
		if _, err := s.receiver.FindByExternalID(ctx, ch.ID, m.ID); err == nil {
			return nil // a repeated delivery: do not fetch the media again
		}
		info, data, err := s.client.DownloadMedia(ctx, ch.ProviderAccount, media.ID, inboundMediaLimit)
		switch fault.KindOf(err) {
		case fault.Unavailable:
			return err
		case fault.Refused:
			// Gone or refused for good: keep the message, without its file.
			s.logger.WarnContext(ctx, "inbound media not available; storing the message without it", "message", m.ID, "err", err)
		default:
			if err != nil {
				return err
			}
			ct := media.MimeType
			if ct == "" {
				ct = info.MimeType
			}
			fileName := media.Filename
			if fileName == "" {
				fileName = messaging.SafeFileName("", messaging.SniffContentType(data))
			}
			in.Media = &messaging.Media{FileName: fileName, ContentType: strings.TrimSpace(strings.Split(ct, ";")[0]), Data: data}
		}
	}
	return s.receiver.ReceiveInbound(ctx, in)
}

var receiptStatus = map[string]int{
	"sent": messaging.StatusSent, "delivered": messaging.StatusDelivered, "read": messaging.StatusRead, "failed": messaging.StatusFailed,
}

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
	if status == messaging.StatusFailed && len(st.Errors) > 0 {
		e := st.Errors[0]
		r.Reason = e.ErrorData.Details
		if r.Reason == "" {
			r.Reason = e.Title
		}
	}
	err := s.receiver.ApplyReceipt(ctx, r)
	if fault.KindOf(err) == fault.NotFound {
		s.logger.InfoContext(ctx, "receipt for an unknown message ignored", "external_id", st.ID, "status", st.Status)
		return false, nil
	}
	return err == nil, err
}
