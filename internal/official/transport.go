package official

import (
	"context"
	"fmt"
	"strings"

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
// with the provider's details, Unavailable.
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
		id, err := t.client.UploadMedia(ctx, acc, out.Media.FileName, out.Media.ContentType, out.Media.Data)
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
			obj.Caption, obj.Filename = out.Text, out.Media.FileName
			req.Type, req.Document = "document", obj
		}
	default:
		req.Type, req.Text = "text", &TextBody{Body: out.Text, PreviewURL: strings.Contains(out.Text, "http")}
	}
	resp, raw, err := t.client.SendMessage(ctx, acc, req)
	if err != nil {
		return messaging.SendResult{}, err
	}
	if len(resp.Messages) == 0 || resp.Messages[0].ID == "" {
		return messaging.SendResult{}, fault.New(fault.Unavailable, "The provider accepted the message without an id")
	}
	return messaging.SendResult{ExternalID: resp.Messages[0].ID, Raw: raw}, nil
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
			id, err := t.client.UploadMedia(ctx, acc, ts.HeaderMedia.FileName, ts.HeaderMedia.ContentType, ts.HeaderMedia.Data)
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
					media.Filename = ts.HeaderMedia.FileName
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

// Edit forwards an edit to the provider. The platform refuses it on this
// channel: Refused with its reason. Errors: Refused, Unavailable.
func (t *Transport) Edit(ctx context.Context, ch channels.Channel, target messaging.Target, text string) error {
	acc, err := account(ch)
	if err != nil {
		return err
	}
	_, _, err = t.client.SendMessage(ctx, acc, SendRequest{RecipientType: recipientType(target.IsGroup), To: target.ContactKey, Type: "edit",
		Edit: &EditObject{MessageID: target.ExternalID, Text: TextBody{Body: text}}})
	return err
}

// Revoke forwards a revoke-for-everyone to the provider. The platform
// refuses it on this channel: Refused with its reason. Errors: Refused,
// Unavailable.
func (t *Transport) Revoke(ctx context.Context, ch channels.Channel, target messaging.Target) error {
	acc, err := account(ch)
	if err != nil {
		return err
	}
	_, _, err = t.client.SendMessage(ctx, acc, SendRequest{RecipientType: recipientType(target.IsGroup), To: target.ContactKey, Type: "revoke",
		Revoke: &RevokeObject{MessageID: target.ExternalID}})
	return err
}

// recipientType is the provider's name for a chat of that kind.
func recipientType(isGroup bool) string {
	if isGroup {
		return "group"
	}
	return "individual"
}
