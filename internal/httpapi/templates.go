package httpapi

import (
	"context"

	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/internal/auth"
)

func (s *Server) ListProviderTemplatesForChannel(ctx context.Context, _ api.ListProviderTemplatesForChannelRequestObject) (api.ListProviderTemplatesForChannelResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	if err := p.Require(auth.PermTemplatesView); err != nil {
		return nil, err
	}
	return nil, notImplemented("official templates")
}

func (s *Server) UploadSendMedia(ctx context.Context, _ api.UploadSendMediaRequestObject) (api.UploadSendMediaResponseObject, error) {
	return nil, notImplemented("official templates")
}
