package httpapi

import (
	"context"

	"github.com/chatmsg/gateway/gen/api"
)

func (s *Server) SendMessage(ctx context.Context, _ api.SendMessageRequestObject) (api.SendMessageResponseObject, error) {
	return nil, notImplemented("messaging")
}

func (s *Server) EditMessage(ctx context.Context, _ api.EditMessageRequestObject) (api.EditMessageResponseObject, error) {
	return nil, notImplemented("messaging")
}

func (s *Server) RevokeMessages(ctx context.Context, _ api.RevokeMessagesRequestObject) (api.RevokeMessagesResponseObject, error) {
	return nil, notImplemented("messaging")
}
