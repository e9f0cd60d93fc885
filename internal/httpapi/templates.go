package httpapi

import (
	"context"

	"github.com/chatmsg/gateway/gen/api"
)

func (s *Server) ListProviderTemplatesForChannel(ctx context.Context, _ api.ListProviderTemplatesForChannelRequestObject) (api.ListProviderTemplatesForChannelResponseObject, error) {
	return nil, notImplemented("official templates")
}

func (s *Server) UploadSendMedia(ctx context.Context, _ api.UploadSendMediaRequestObject) (api.UploadSendMediaResponseObject, error) {
	return nil, notImplemented("official templates")
}
