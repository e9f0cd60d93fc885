package httpapi

import (
	"context"

	"github.com/chatmsg/gateway/gen/api"
)

func (s *Server) ChatappCheckOnChatapp(ctx context.Context, _ api.ChatappCheckOnChatappRequestObject) (api.ChatappCheckOnChatappResponseObject, error) {
	return nil, notImplemented("chat-app connections")
}

func (s *Server) ChatappContactList(ctx context.Context, _ api.ChatappContactListRequestObject) (api.ChatappContactListResponseObject, error) {
	return nil, notImplemented("chat-app connections")
}

func (s *Server) ChatappCreate(ctx context.Context, _ api.ChatappCreateRequestObject) (api.ChatappCreateResponseObject, error) {
	return nil, notImplemented("chat-app connections")
}

func (s *Server) ChatappDelete(ctx context.Context, _ api.ChatappDeleteRequestObject) (api.ChatappDeleteResponseObject, error) {
	return nil, notImplemented("chat-app connections")
}

func (s *Server) ChatappGroupList(ctx context.Context, _ api.ChatappGroupListRequestObject) (api.ChatappGroupListResponseObject, error) {
	return nil, notImplemented("chat-app connections")
}

func (s *Server) ChatappLogout(ctx context.Context, _ api.ChatappLogoutRequestObject) (api.ChatappLogoutResponseObject, error) {
	return nil, notImplemented("chat-app connections")
}

func (s *Server) ChatappQrcode(ctx context.Context, _ api.ChatappQrcodeRequestObject) (api.ChatappQrcodeResponseObject, error) {
	return nil, notImplemented("chat-app connections")
}

func (s *Server) ChatappUpdate(ctx context.Context, _ api.ChatappUpdateRequestObject) (api.ChatappUpdateResponseObject, error) {
	return nil, notImplemented("chat-app connections")
}

func (s *Server) ListChatapps(ctx context.Context, _ api.ListChatappsRequestObject) (api.ListChatappsResponseObject, error) {
	return nil, notImplemented("chat-app connections")
}
