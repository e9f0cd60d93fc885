package httpapi

import (
	"context"

	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
)

func (s *Server) ListCompanyChannels(ctx context.Context, req api.ListCompanyChannelsRequestObject) (api.ListCompanyChannelsResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	f := channels.ListFilter{Page: page(req.Params.Page, req.Params.PerPage, 100)}
	if req.Params.ChannelTypeId != nil {
		t := channels.TypeID(*req.Params.ChannelTypeId)
		f.TypeID = &t
	}
	list, total, err := s.Channels.ListCompanyChannels(ctx, p.CompanyID, f)
	if err != nil {
		return nil, err
	}
	return api.ListCompanyChannels200JSONResponse{CurrentPage: f.Page.Number, PerPage: f.Page.PerPage, Total: total,
		LastPage: f.Page.LastPage(total), Data: convert(list, s.toAPIChannel)}, nil
}

func (s *Server) toAPIChannel(ch channels.Channel) api.CompanyChannel {
	out := api.CompanyChannel{Id: int(ch.ID), Key: ch.Key, Name: ch.Name, ChannelTypeId: api.ChannelTypeId(ch.TypeID),
		ChannelType: ch.TypeID.DisplayName(), Platform: api.Platform(ch.TypeID.Name()), CreatedAt: s.Times.Management(ch.CreatedAt), UpdatedAt: s.Times.Management(ch.UpdatedAt)}
	if a := ch.ProviderAccount; a != nil {
		out.ProviderAccount = &api.ProviderAccount{Id: int(a.ID), BusinessAccountId: a.BusinessAccountID, PhoneNumberId: a.PhoneNumberID}
	}
	return out
}
