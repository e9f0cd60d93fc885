package httpapi

import (
	"context"

	"github.com/chatmsg/gateway/gen/api"
)

func (s *Server) ListContactChannels(ctx context.Context, _ api.ListContactChannelsRequestObject) (api.ListContactChannelsResponseObject, error) {
	return nil, notImplemented("conversations")
}
