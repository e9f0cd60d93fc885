package httpapi

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/oapi-codegen/runtime"

	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
)

// sendForm is a send request read from either body type: JSON, or
// multipart when a file is attached.
type sendForm struct {
	api.SendMessageRequest
	File *formPart // in the spool
}

// readSend decodes the send body and applies the rule the schema does not
// express (x-rule-messages).
func readSend(ctx context.Context, req api.SendMessageRequestObject) (sendForm, error) {
	var f sendForm
	switch {
	case req.JSONBody != nil:
		f.SendMessageRequest = *req.JSONBody
	case req.MultipartBody != nil:
		var m api.SendMessageMultipartRequest
		if err := runtime.BindMultipart(&m, *req.MultipartBody); err != nil {
			return f, fault.Wrap(fault.Invalid, "The multipart body could not be read.", err)
		}
		f.SendMessageRequest = api.SendMessageRequest{
			Platform: m.Platform, SenderKey: m.SenderKey, ContactKey: m.ContactKey, ContactIsGroup: m.ContactIsGroup,
			Enqueue: m.Enqueue, Text: m.Text, ProviderTemplateId: m.ProviderTemplateId,
			HeaderMediaUrl: m.HeaderMediaUrl, HeaderMediaFilename: m.HeaderMediaFilename, VariableValues: m.VariableValues,
		}
		if m.NamedVariableValues != nil && *m.NamedVariableValues != "" {
			var named map[string]string
			if err := json.Unmarshal([]byte(*m.NamedVariableValues), &named); err != nil {
				return f, fault.New(fault.Invalid, multipartInvalidMessage(operationFrom(ctx), "named_variable_values"))
			}
			f.NamedVariableValues = &named
		}
		if m.File != nil {
			// The binder read the skeleton, whose files are empty; the
			// file itself is in the spool.
			if f.File = formOf(ctx).file("file"); f.File == nil {
				return f, fault.Internalf(errors.New("no spooled file part"), "read the multipart file")
			}
		}
	default:
		return f, fault.New(fault.Invalid, "Send application/json, or multipart/form-data with a file.")
	}
	op := operationFrom(ctx)
	hasText := f.Text != nil && *f.Text != ""
	if !hasText && f.File == nil && f.ProviderTemplateId == nil {
		return f, fault.New(fault.Invalid, ruleMessage(op, "textFileOrTemplate"))
	}
	// contact_is_group with chatapp and a template only with ofc_chatapp are
	// the body's oneOf on platform: the validator has answered them.
	return f, nil
}

// Answers of a successful send.
const (
	sentMessage   = "Message sent"
	queuedMessage = "Message queued for sending"
)

func (s *Server) SendMessage(ctx context.Context, req api.SendMessageRequestObject) (api.SendMessageResponseObject, error) {
	f, err := readSend(ctx, req)
	if err != nil {
		return nil, err
	}
	p, _ := auth.FromContext(ctx)
	in, err := toSendInput(p.CompanyID, f)
	if err != nil {
		return nil, err
	}
	out, err := s.Messaging.SendMessage(ctx, in)
	if err != nil {
		return nil, err
	}
	var res api.SendMessageResult
	if out.Queued {
		err = res.FromSendQueued(api.SendQueued{Message: queuedMessage})
	} else {
		sync := api.SendAcceptedSync{Status: true, Message: sentMessage}
		if out.OutcomeUnknown {
			// 200, not 509: the message may be on its way, and an answer
			// the idempotency layer keeps makes a retry replay this one
			// instead of sending again.
			sync = api.SendAcceptedSync{Status: false, Message: messaging.OutcomeUnknownReason}
		}
		sync.Data.ExternalID = out.ExternalID
		if out.Raw != nil {
			sync.Data.Raw = &out.Raw
		}
		err = res.FromSendAcceptedSync(sync)
	}
	if err != nil {
		return nil, fault.Internalf(err, "encode send answer")
	}
	return api.SendMessage200JSONResponse(res), nil
}

// toSendInput converts the API send to the messaging service's input.
func toSendInput(companyID int64, f sendForm) (messaging.SendInput, error) {
	in := messaging.SendInput{CompanyID: companyID, SenderKey: f.SenderKey, ContactKey: f.ContactKey, Enqueue: f.Enqueue,
		IsGroup: deref(f.ContactIsGroup), Text: deref(f.Text)}
	switch f.Platform {
	case api.SendPlatformChatapp:
		in.Platform = channels.UnofficialChatapp
	case api.SendPlatformOfcChatapp:
		in.Platform = channels.OfficialChatapp
	default:
		return in, fault.New(fault.Invalid, "Platform must be chatapp or ofc_chatapp")
	}
	if f.File != nil {
		in.File = f.File.media()
	}
	if f.ProviderTemplateId != nil {
		in.Template = &messaging.TemplateRequest{TemplateID: int64(*f.ProviderTemplateId), Positional: deref(f.VariableValues),
			Named: deref(f.NamedVariableValues), HeaderMediaURL: deref(f.HeaderMediaUrl), HeaderMediaFilename: deref(f.HeaderMediaFilename)}
	} else if f.HeaderMediaUrl != nil || f.HeaderMediaFilename != nil {
		return in, fault.New(fault.Rule, "header_media_url and header_media_filename are only accepted with provider_template_id")
	}
	return in, nil
}

func (s *Server) EditMessage(ctx context.Context, req api.EditMessageRequestObject) (api.EditMessageResponseObject, error) {
	if req.Body == nil {
		return nil, fault.New(fault.Invalid, "Id is required")
	}
	p, _ := auth.FromContext(ctx)
	m, err := s.Messaging.EditMessage(ctx, messaging.EditInput{CompanyID: p.CompanyID, ID: int64(req.Body.Id), Text: req.Body.Text})
	if err != nil {
		return nil, err
	}
	// The answer carries a fresh URL of the message's file.
	if m, err = s.Messaging.MediaOf(ctx, m); err != nil {
		return nil, err
	}
	out := api.EditMessage200JSONResponse{Id: int(m.ID), Text: m.Text, Edited: m.Edited, CompanyChannelId: int(m.CompanyChannelID),
		ContactChannelId: int(m.ContactChannelID), MessageTypeId: api.MessageTypeId(m.TypeID), UpdatedAt: s.Times.MicroUTC(m.UpdatedAt),
		Version: m.Version}
	if m.ExternalID != "" {
		ext := m.ExternalID
		out.ExternalId = &ext
	}
	out.Media = s.toAPIMedia(m)
	return out, nil
}

func (s *Server) RevokeMessages(ctx context.Context, req api.RevokeMessagesRequestObject) (api.RevokeMessagesResponseObject, error) {
	if req.Body == nil {
		return nil, fault.New(fault.Invalid, "Ids is required and must be an array")
	}
	p, _ := auth.FromContext(ctx)
	in := messaging.RevokeInput{CompanyID: p.CompanyID, Scope: messaging.ScopeMe, IDs: int64s(&req.Body.Ids), RemoveMedia: deref(req.Body.RemoveMedia)}
	if req.Body.Scope != nil {
		in.Scope = string(*req.Body.Scope)
	}
	results, err := s.Messaging.RevokeMessages(ctx, in)
	if err != nil {
		return nil, err
	}
	return api.RevokeMessages200JSONResponse(convert(results, func(r messaging.RevokeResult) api.RevokeResult {
		return api.RevokeResult{Status: r.Status, Message: r.Message}
	})), nil
}
