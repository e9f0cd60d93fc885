package official

import (
	"context"
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/msgtype"
)

// Transport sends official-channel messages through the provider: it is
// messaging's Transport for channel type 3.
type Transport struct {
	client *Client
}

var (
	_ messaging.Transport     = (*Transport)(nil)
	_ messaging.KeyNormalizer = (*Transport)(nil)
)

// NewTransport returns the official Transport over client.
func NewTransport(client *Client) *Transport { return &Transport{client: client} }

func account(ch channels.Channel) (*channels.ProviderAccount, error) {
	if ch.ProviderAccount == nil {
		return nil, fault.Internalf(fmt.Errorf("channel %d has no provider account", ch.ID), "official send")
	}
	return ch.ProviderAccount, nil
}

// Send sends text, a file (uploaded first) or a template. Errors: Refused
// with the provider's details, Unavailable (wrapping
// messaging.ErrOutcomeUnknown when the provider may have the message). An
// upload whose answer was lost is plain Unavailable: uploading again
// costs an unused media object, not a second message.
func (t *Transport) Send(ctx context.Context, ch channels.Channel, out messaging.Outbound) (messaging.SendResult, error) {
	acc, err := account(ch)
	if err != nil {
		return messaging.SendResult{}, err
	}
	req := SendRequest{RecipientType: recipientType(out.IsGroup), To: out.ContactKey, BizOpaqueCallbackData: fmt.Sprint(out.MessageID)}
	switch {
	case out.Template != nil:
		tpl, err := t.template(ctx, acc, out.Template)
		if err != nil {
			return messaging.SendResult{}, err
		}
		req.Type, req.Template = "template", tpl
	case out.Media != nil:
		id, err := t.upload(ctx, acc, out.Media)
		if err != nil {
			return messaging.SendResult{}, err
		}
		obj := &MediaObject{ID: id}
		switch msgtype.ForContentType(out.Media.ContentType) {
		case msgtype.Image:
			obj.Caption = out.Text
			req.Type, req.Image = "image", obj
		case msgtype.Video:
			obj.Caption = out.Text
			req.Type, req.Video = "video", obj
		case msgtype.Audio:
			req.Type, req.Audio = "audio", obj
		default:
			obj.Caption, obj.Filename = out.Text, DocumentFileName(out.Media.FileName)
			req.Type, req.Document = "document", obj
		}
	default:
		req.Type, req.Text = "text", &TextBody{Body: out.Text, PreviewURL: strings.Contains(out.Text, "http")}
	}
	// The provider assigns its own ids and cannot be asked whether it has
	// a message: the hand-off is recorded at the last moment, after the
	// uploads, so that a crash before it leaves the message to be sent.
	if err := out.HandOff(ctx); err != nil {
		return messaging.SendResult{}, err
	}
	resp, raw, err := t.client.SendMessage(ctx, acc, req)
	if err != nil {
		return messaging.SendResult{}, err
	}
	if len(resp.Messages) == 0 || resp.Messages[0].ID == "" {
		// Accepted, but with nothing to know it by: its receipt, which
		// echoes our id (biz_opaque_callback_data), settles it.
		return messaging.SendResult{}, outcomeUnknown(fault.New(fault.Unavailable, "The provider accepted the message without an id"))
	}
	return messaging.SendResult{ExternalID: resp.Messages[0].ID, Raw: raw}, nil
}

// upload streams m to the provider and returns its media id. Errors: those
// of m.Open (the media store's), and of Client.UploadMedia.
func (t *Transport) upload(ctx context.Context, acc *channels.ProviderAccount, m *messaging.Media) (string, error) {
	file, err := m.Open(ctx)
	if err != nil {
		return "", err
	}
	defer file.Close()
	return t.client.UploadMedia(ctx, acc, m.FileName, m.ContentType, m.Size, file)
}

// template builds the template object: header media (uploaded when the
// service fetched it, by link when it is the template's own), then the
// text parameters of each component.
func (t *Transport) template(ctx context.Context, acc *channels.ProviderAccount, ts *messaging.TemplateSend) (*TemplateObj, error) {
	obj := &TemplateObj{Name: ts.Name, Language: TemplateLanguage{Code: ts.Language}}
	var header *TemplateComponent
	if f := strings.ToUpper(ts.HeaderFormat); f == "IMAGE" || f == "VIDEO" || f == "DOCUMENT" {
		var media *MediaObject
		switch {
		case ts.HeaderMedia != nil:
			id, err := t.upload(ctx, acc, ts.HeaderMedia)
			if err != nil {
				return nil, err
			}
			media = &MediaObject{ID: id}
		case ts.HeaderMediaURL != "":
			media = &MediaObject{Link: ts.HeaderMediaURL}
		}
		if media != nil {
			p := TemplateParameter{Type: strings.ToLower(f)}
			switch f {
			case "IMAGE":
				p.Image = media
			case "VIDEO":
				p.Video = media
			case "DOCUMENT":
				if ts.HeaderMedia != nil {
					media.Filename = DocumentFileName(ts.HeaderMedia.FileName)
				}
				p.Document = media
			}
			header = &TemplateComponent{Type: "header", Parameters: []TemplateParameter{p}}
		}
	}
	for _, c := range ts.Components {
		comp := TemplateComponent{Type: c.Type, SubType: c.SubType}
		if c.Type == "button" {
			comp.Index = fmt.Sprint(c.Index)
		}
		for _, p := range c.Params {
			text := p.Text
			comp.Parameters = append(comp.Parameters, TemplateParameter{Type: "text", ParameterName: p.Name, Text: &text})
		}
		if c.Type == "header" && header == nil {
			header = &comp
			continue
		}
		obj.Components = append(obj.Components, comp)
	}
	if header != nil {
		obj.Components = append([]TemplateComponent{*header}, obj.Components...)
	}
	return obj, nil
}

// Messages of the API document's "not available on the official channel":
// the provider's API has no edit and no revoke operation (its document,
// internal/providersim/testdata), so both are answered here, without a
// provider call, and nothing changes.
const (
	editUnavailable   = "Editing sent messages is not available on the official channel"
	revokeUnavailable = "Revoking sent messages is not available on the official channel"
)

// Edit answers locally: the provider has no edit. Errors: Rule, always
// (answered 509 with the reason; messaging stores nothing).
func (t *Transport) Edit(context.Context, channels.Channel, messaging.Target, string) error {
	return fault.New(fault.Rule, editUnavailable)
}

// Revoke answers locally: the provider has no revoke for everyone.
// Errors: Rule, always (that entry answers Status=false with the reason).
func (t *Transport) Revoke(context.Context, channels.Channel, messaging.Target) error {
	return fault.New(fault.Rule, revokeUnavailable)
}

// recipientType is the provider's name for a chat of that kind.
func recipientType(isGroup bool) string {
	if isGroup {
		return "group"
	}
	return "individual"
}

// documentNameLimit caps a document's file name: the recipient sees it,
// and file systems take 255 bytes.
const documentNameLimit = 240

// DocumentFileName is the name a document is shown to the recipient with:
// the client's own name ("Fatura Abril.pdf" stays so), without what the
// provider or a file system cannot take — path separators (only the last
// element is kept) and control characters — and capped in length, keeping
// the extension. "" when nothing is left.
func DocumentFileName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	if name == "." || name == ".." {
		return ""
	}
	if len(name) > documentNameLimit {
		ext := path.Ext(name)
		if len(ext) > 16 {
			ext = ""
		}
		stem := name[:len(name)-len(ext)]
		cut := documentNameLimit - len(ext)
		for cut > 0 && !utf8.RuneStart(stem[cut]) {
			cut--
		}
		name = strings.TrimSpace(stem[:cut]) + ext
	}
	return name
}
