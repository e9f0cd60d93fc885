package httpapi

import (
	"context"

	"github.com/chatmsg/gateway/gen/api"
)

func (s *Server) ListChannelWebhooks(ctx context.Context, _ api.ListChannelWebhooksRequestObject) (api.ListChannelWebhooksResponseObject, error) {
	return nil, notImplemented("webhooks")
}

func (s *Server) CreateChannelWebhook(ctx context.Context, _ api.CreateChannelWebhookRequestObject) (api.CreateChannelWebhookResponseObject, error) {
	return nil, notImplemented("webhooks")
}

func (s *Server) ListAvailableWebhookEvents(ctx context.Context, _ api.ListAvailableWebhookEventsRequestObject) (api.ListAvailableWebhookEventsResponseObject, error) {
	return nil, notImplemented("webhooks")
}

func (s *Server) DeleteChannelWebhook(ctx context.Context, _ api.DeleteChannelWebhookRequestObject) (api.DeleteChannelWebhookResponseObject, error) {
	return nil, notImplemented("webhooks")
}

func (s *Server) UpdateChannelWebhook(ctx context.Context, _ api.UpdateChannelWebhookRequestObject) (api.UpdateChannelWebhookResponseObject, error) {
	return nil, notImplemented("webhooks")
}

func (s *Server) ListChannelWebhookDeliveries(ctx context.Context, _ api.ListChannelWebhookDeliveriesRequestObject) (api.ListChannelWebhookDeliveriesResponseObject, error) {
	return nil, notImplemented("webhooks")
}

func (s *Server) RotateChannelWebhookSecret(ctx context.Context, _ api.RotateChannelWebhookSecretRequestObject) (api.RotateChannelWebhookSecretResponseObject, error) {
	return nil, notImplemented("webhooks")
}

func (s *Server) TestChannelWebhook(ctx context.Context, _ api.TestChannelWebhookRequestObject) (api.TestChannelWebhookResponseObject, error) {
	return nil, notImplemented("webhooks")
}
