package httpapi

import (
	"context"
	"strings"

	"github.com/google/uuid"

	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/eventexamples"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// Webhook management: permissions, the rate limit and the business rules
// live in webhooks.Service; this file only converts. Errors are fault kinds
// that writeError renders as the document prescribes (403, 422, 429, 509).

func (s *Server) CreateChannelWebhook(ctx context.Context, req api.CreateChannelWebhookRequestObject) (api.CreateChannelWebhookResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	b := req.Body
	in := webhooks.CreateInput{Name: b.Name, URL: b.Url, Enabled: b.Enabled}
	if b.SignatureScheme != nil {
		in.SignatureScheme = string(*b.SignatureScheme)
	}
	if b.Events != nil {
		in.Events = *b.Events
		if in.Events == nil {
			in.Events = []string{}
		}
	}
	in.CompanyChannelIDs = int64s(b.CompanyChannelIds)
	sub, secret, err := s.Webhooks.CreateChannelWebhook(ctx, p, in)
	if err != nil {
		return nil, err
	}
	return api.CreateChannelWebhook201JSONResponse{Success: api.WebhookSubscriptionWithSecretSuccessTrue,
		Data: s.toAPIWebhook(sub), Secret: secret, Message: "Webhook subscription created"}, nil
}

func (s *Server) ListChannelWebhooks(ctx context.Context, req api.ListChannelWebhooksRequestObject) (api.ListChannelWebhooksResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	prm := req.Params
	f := webhooks.ListFilter{Enabled: prm.Enabled, Page: page(prm.Page, prm.PerPage, 100), Filter: deref(prm.Filter),
		CompanyChannelID: int64Ptr(prm.CompanyChannelId)}
	if prm.OrderBy != nil {
		f.OrderBy = string(*prm.OrderBy)
	}
	if prm.OrderMode != nil {
		f.Desc = strings.EqualFold(string(*prm.OrderMode), "desc")
	}
	list, total, err := s.Webhooks.ListChannelWebhooks(ctx, p, f)
	if err != nil {
		return nil, err
	}
	return api.ListChannelWebhooks200JSONResponse{CurrentPage: f.Page.Number, PerPage: f.Page.PerPage, Total: total,
		LastPage: f.Page.LastPage(total), Data: convert(list, s.toAPIWebhook)}, nil
}

func (s *Server) ListAvailableWebhookEvents(ctx context.Context, _ api.ListAvailableWebhookEventsRequestObject) (api.ListAvailableWebhookEventsResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	list, err := s.Webhooks.ListAvailableWebhookEvents(ctx, p)
	if err != nil {
		return nil, err
	}
	out := api.ListAvailableWebhookEvents200JSONResponse{Success: api.AvailableEventsResultSuccessTrue}
	out.Data = make([]struct {
		Description string `json:"description"`
		Event       string `json:"event"`
	}, len(list))
	for i, e := range list {
		out.Data[i].Event, out.Data[i].Description = e.Name, e.Description
	}
	return out, nil
}

// GetChannelWebhook reads one subscription (an extension); never its secret.
func (s *Server) GetChannelWebhook(ctx context.Context, req api.GetChannelWebhookRequestObject) (api.GetChannelWebhookResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	sub, err := s.Webhooks.GetChannelWebhook(ctx, p, int64(req.Id))
	if err != nil {
		return nil, err
	}
	return api.GetChannelWebhook200JSONResponse{Success: api.WebhookSubscriptionResultSuccessTrue,
		Data: s.toAPIWebhook(sub), Message: "Webhook subscription retrieved"}, nil
}

func (s *Server) UpdateChannelWebhook(ctx context.Context, req api.UpdateChannelWebhookRequestObject) (api.UpdateChannelWebhookResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	b := req.Body
	in := webhooks.UpdateInput{Name: b.Name, URL: b.Url, Events: b.Events, Enabled: b.Enabled}
	if b.SignatureScheme != nil {
		scheme := string(*b.SignatureScheme)
		in.SignatureScheme = &scheme
	}
	// Absent leaves the filter unchanged; null or [] means all channels.
	if b.CompanyChannelIds != nil {
		ids := int64s(b.CompanyChannelIds)
		in.CompanyChannelIDs = &ids
	} else if sentAsNull(ctx, "company_channel_ids") {
		in.CompanyChannelIDs = &[]int64{}
	}
	sub, err := s.Webhooks.UpdateChannelWebhook(ctx, p, int64(req.Id), in)
	if err != nil {
		return nil, err
	}
	return api.UpdateChannelWebhook200JSONResponse{Success: api.WebhookSubscriptionResultSuccessTrue,
		Data: s.toAPIWebhook(sub), Message: "Webhook subscription updated"}, nil
}

func (s *Server) DeleteChannelWebhook(ctx context.Context, req api.DeleteChannelWebhookRequestObject) (api.DeleteChannelWebhookResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	if err := s.Webhooks.DeleteChannelWebhook(ctx, p, int64(req.Id)); err != nil {
		return nil, err
	}
	return api.DeleteChannelWebhook200JSONResponse{Success: api.SuccessMessageSuccessTrue, Message: "Webhook subscription deleted"}, nil
}

func (s *Server) TestChannelWebhook(ctx context.Context, req api.TestChannelWebhookRequestObject) (api.TestChannelWebhookResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	var n int
	var err error
	if req.Body != nil && req.Body.Event != nil { // extension: that event's AsyncAPI example
		ex, lerr := eventexamples.Lookup(*req.Body.Event)
		if lerr != nil {
			return nil, lerr
		}
		n, err = s.Webhooks.TestChannelWebhookEvent(ctx, p, int64(req.Id), ex.Event, ex.Data)
	} else {
		n, err = s.Webhooks.TestChannelWebhook(ctx, p, int64(req.Id))
	}
	if err != nil {
		return nil, err
	}
	return api.TestChannelWebhook200JSONResponse{Success: api.WebhookTestResultSuccessTrue, Queued: n, Message: "Test event queued"}, nil
}

func (s *Server) ListChannelWebhookDeliveries(ctx context.Context, req api.ListChannelWebhookDeliveriesRequestObject) (api.ListChannelWebhookDeliveriesResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	prm := req.Params
	f := webhooks.DeliveryFilter{Succeeded: prm.Succeeded, Page: page(prm.Page, prm.PerPage, 50), Event: deref(prm.Event)}
	list, total, err := s.Webhooks.ListChannelWebhookDeliveries(ctx, p, int64(req.Id), f)
	if err != nil {
		return nil, err
	}
	return api.ListChannelWebhookDeliveries200JSONResponse{CurrentPage: f.Page.Number, PerPage: f.Page.PerPage, Total: total,
		LastPage: f.Page.LastPage(total), Data: convert(list, s.toAPIDelivery)}, nil
}

func (s *Server) RotateChannelWebhookSecret(ctx context.Context, req api.RotateChannelWebhookSecretRequestObject) (api.RotateChannelWebhookSecretResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	sub, secret, err := s.Webhooks.RotateChannelWebhookSecret(ctx, p, int64(req.Id))
	if err != nil {
		return nil, err
	}
	return api.RotateChannelWebhookSecret200JSONResponse{Success: api.WebhookSubscriptionWithSecretSuccessTrue,
		Data: s.toAPIWebhook(sub), Secret: secret, Message: "Webhook secret rotated"}, nil
}

// RedeliverChannelWebhookDelivery and RecoverChannelWebhookDeliveries are
// extensions (issue 14): they queue finished deliveries again.
func (s *Server) RedeliverChannelWebhookDelivery(ctx context.Context, req api.RedeliverChannelWebhookDeliveryRequestObject) (api.RedeliverChannelWebhookDeliveryResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	n, err := s.Webhooks.RedeliverChannelWebhookDelivery(ctx, p, int64(req.Id), req.DeliveryId.String())
	if err != nil {
		return nil, err
	}
	return api.RedeliverChannelWebhookDelivery200JSONResponse{Success: api.WebhookTestResultSuccessTrue, Queued: n,
		Message: "Delivery queued again"}, nil
}

func (s *Server) RecoverChannelWebhookDeliveries(ctx context.Context, req api.RecoverChannelWebhookDeliveriesRequestObject) (api.RecoverChannelWebhookDeliveriesResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	if req.Body == nil { // the validator requires the body; this guards a direct call
		return nil, &fault.Error{Kind: fault.Invalid, Message: "Since is required", Fields: map[string][]string{"since": {"Since is required"}}}
	}
	n, err := s.Webhooks.RecoverChannelWebhookDeliveries(ctx, p, int64(req.Id), req.Body.Since)
	if err != nil {
		return nil, err
	}
	return api.RecoverChannelWebhookDeliveries200JSONResponse{Success: api.WebhookTestResultSuccessTrue, Queued: n,
		Message: "Failed deliveries queued again"}, nil
}

func (s *Server) toAPIWebhook(sub webhooks.Subscription) api.WebhookSubscription {
	out := api.WebhookSubscription{
		Id: int(sub.ID), CompanyId: int(sub.CompanyID), Name: sub.Name, Url: sub.URL, Events: sub.Events,
		Enabled: sub.Enabled, FailureCount: sub.FailureCount, DisabledReason: sub.DisabledReason,
		SignatureScheme: api.WebhookSignatureScheme(sub.SignatureScheme),
		LastSuccessAt:   s.Times.ManagementPtr(sub.LastSuccessAt), LastFailureAt: s.Times.ManagementPtr(sub.LastFailureAt),
		CreatedAt: s.Times.Management(sub.CreatedAt), UpdatedAt: s.Times.Management(sub.UpdatedAt),
	}
	if out.Events == nil {
		out.Events = []string{}
	}
	if sub.CompanyChannelIDs != nil {
		ids := convert(sub.CompanyChannelIDs, func(id int64) int { return int(id) })
		out.CompanyChannelIds = &ids
	}
	return out
}

func (s *Server) toAPIDelivery(e webhooks.LogEntry) api.WebhookDelivery {
	return api.WebhookDelivery{
		Id: int(e.ID), DeliveryId: parseUUID(e.DeliveryID), Event: e.Event, Attempt: e.Attempt,
		StatusCode: e.StatusCode, Succeeded: e.Succeeded, DurationMs: int(e.DurationMs), Error: e.Error,
		DeliveredAt: s.Times.ManagementPtr(e.DeliveredAt), NextRetryAt: s.Times.ManagementPtr(e.NextRetryAt),
		CreatedAt: s.Times.Management(e.CreatedAt),
	}
}

// parseUUID reads a delivery id the service generated (always valid).
func parseUUID(s string) uuid.UUID {
	id, _ := uuid.Parse(s)
	return id
}
