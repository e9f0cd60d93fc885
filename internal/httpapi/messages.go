package httpapi

import (
	"context"
	"encoding/json"

	"github.com/oapi-codegen/runtime"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/internal/fault"
)

// sendForm is a send request read from either body type: JSON, or
// multipart when a file is attached.
type sendForm struct {
	api.SendMessageRequest
	File *openapi_types.File
}

// readSend decodes the send body and applies the rules the schema cannot
// express, in the order the document lists them in x-rule-messages.
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
			HeaderMediaUrl: m.HeaderMediaUrl, HeaderMediaFilename: m.HeaderMediaFilename,
		}
		if m.NamedVariableValues != nil && *m.NamedVariableValues != "" {
			var named map[string]string
			if err := json.Unmarshal([]byte(*m.NamedVariableValues), &named); err != nil {
				return f, fault.New(fault.Invalid, "named_variable_values must be a JSON object of texts")
			}
			f.NamedVariableValues = &named
		}
		f.File = m.File
	default:
		return f, fault.New(fault.Invalid, "Send application/json, or multipart/form-data with a file.")
	}
	op := operationFrom(ctx)
	hasText := f.Text != nil && *f.Text != ""
	if !hasText && f.File == nil && f.ProviderTemplateId == nil {
		return f, fault.New(fault.Invalid, ruleMessage(op, "textFileOrTemplate"))
	}
	if f.ProviderTemplateId != nil && f.Platform != api.SendPlatformOfcChatapp {
		return f, fault.New(fault.Invalid, ruleMessage(op, "templateOnlyOfficial"))
	}
	if f.Platform == api.SendPlatformChatapp && f.ContactIsGroup == nil {
		return f, fault.New(fault.Invalid, ruleMessage(op, "contactIsGroupRequired"))
	}
	return f, nil
}

func (s *Server) SendMessage(ctx context.Context, req api.SendMessageRequestObject) (api.SendMessageResponseObject, error) {
	if _, err := readSend(ctx, req); err != nil {
		return nil, err
	}
	return nil, notImplemented("messaging")
}

func (s *Server) EditMessage(ctx context.Context, _ api.EditMessageRequestObject) (api.EditMessageResponseObject, error) {
	return nil, notImplemented("messaging")
}

func (s *Server) RevokeMessages(ctx context.Context, _ api.RevokeMessagesRequestObject) (api.RevokeMessagesResponseObject, error) {
	return nil, notImplemented("messaging")
}
