package httpapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/connections"
	"github.com/chatmsg/gateway/internal/connector"
	"github.com/chatmsg/gateway/internal/connector/sim"
	"github.com/chatmsg/gateway/internal/fault"
)

// Chat-app connections (API document endpoints 1 to 9) and the controls of
// the simulator driver. Every error answers 509 {success:false, message}
// (the operations document no other business status).

func companyOf(ctx context.Context) int64 {
	p, _ := auth.FromContext(ctx)
	return p.CompanyID
}

func selector(id *int, key *string) connections.Selector {
	return connections.Selector{ID: int64Ptr(id), Key: key}
}

func (s *Server) toAPIChatapp(c channels.Unofficial) api.Chatapp {
	return api.Chatapp{Id: int(c.ID), Key: c.Key, Name: c.Name, Logged: c.Logged,
		CreatedAt: s.Times.Management(c.CreatedAt), UpdatedAt: s.Times.Management(c.UpdatedAt)}
}

// chatapps are the connection records with their live state (extension).
func (s *Server) chatapps(ctx context.Context, list ...channels.Unofficial) ([]api.Chatapp, error) {
	states, err := s.Connections.States(ctx, list)
	if err != nil {
		return nil, err
	}
	out := convert(list, s.toAPIChatapp)
	for i := range out {
		st := states[list[i].ID]
		state := api.ChatappState(st.State)
		out[i].State = &state
		if st.Reason != "" {
			out[i].StateReason = &st.Reason
		}
	}
	return out, nil
}

func (s *Server) ListChatapps(ctx context.Context, req api.ListChatappsRequestObject) (api.ListChatappsResponseObject, error) {
	q := req.Params
	f := channels.UnofficialFilter{Logged: q.Logged, Page: page(q.Page, q.PerPage, 100), OrderBy: "id", Text: deref(q.Filter)}
	if q.OrderBy != nil {
		f.OrderBy = string(*q.OrderBy)
	}
	f.Desc = q.OrderMode != nil && strings.EqualFold(string(*q.OrderMode), "desc")
	op := operationFrom(ctx)
	created, err := parseDateRange(op, "created_at", q.CreatedAt, s.Times.Location)
	if err != nil {
		return nil, err
	}
	if created != nil {
		f.CreatedFrom, f.CreatedTo = &created.From, &created.To
	}
	updated, err := parseDateRange(op, "updated_at", q.UpdatedAt, s.Times.Location)
	if err != nil {
		return nil, err
	}
	if updated != nil {
		f.UpdatedFrom, f.UpdatedTo = &updated.From, &updated.To
	}
	list, total, err := s.Connections.ListChatapps(ctx, companyOf(ctx), f)
	if err != nil {
		return nil, err
	}
	data, err := s.chatapps(ctx, list...)
	if err != nil {
		return nil, err
	}
	return api.ListChatapps200JSONResponse{CurrentPage: f.Page.Number, PerPage: f.Page.PerPage, Total: total,
		LastPage: f.Page.LastPage(total), Data: data}, nil
}

func (s *Server) ChatappQrcode(ctx context.Context, req api.ChatappQrcodeRequestObject) (api.ChatappQrcodeResponseObject, error) {
	b := req.Body
	qr, err := s.Connections.ChatappQrcode(ctx, companyOf(ctx), selector(b.Id, b.Key), connector.PairingOptions{OS: b.Os, Browser: b.Browser,
		PhoneCode: b.PhoneCode != nil && *b.PhoneCode})
	if err != nil {
		return nil, err
	}
	return api.ChatappQrcode200JSONResponse{Success: true, Message: "QR code generated", Data: api.ChatappQrcode{
		Id: int(qr.Connection.ID), Key: qr.Connection.Key, Code: qr.Code, Qrcode: connections.DataURL(qr.PNG),
		ExpiresAt: s.Times.Management(qr.ExpiresAt)}}, nil
}

func (s *Server) ChatappCreate(ctx context.Context, req api.ChatappCreateRequestObject) (api.ChatappCreateResponseObject, error) {
	c, err := s.Connections.ChatappCreate(ctx, companyOf(ctx), req.Body.Name, req.Body.Key)
	if err != nil {
		return nil, err
	}
	data, err := s.chatapps(ctx, c)
	if err != nil {
		return nil, err
	}
	return api.ChatappCreate200JSONResponse{Success: true, Message: "Connection created", Data: data[0]}, nil
}

func (s *Server) ChatappUpdate(ctx context.Context, req api.ChatappUpdateRequestObject) (api.ChatappUpdateResponseObject, error) {
	b := req.Body
	if b.NewKey != nil && b.Key == nil {
		return nil, fault.New(fault.Invalid, ruleMessage(operationFrom(ctx), "newKeyRequiresKey"))
	}
	c, err := s.Connections.ChatappUpdate(ctx, companyOf(ctx), selector(b.Id, b.Key), channels.UnofficialChange{Name: b.Name, NewKey: b.NewKey})
	if err != nil {
		return nil, err
	}
	data, err := s.chatapps(ctx, c)
	if err != nil {
		return nil, err
	}
	return api.ChatappUpdate200JSONResponse{Success: true, Message: "Connection updated", Data: data[0]}, nil
}

func (s *Server) ChatappDelete(ctx context.Context, req api.ChatappDeleteRequestObject) (api.ChatappDeleteResponseObject, error) {
	if err := s.Connections.ChatappDelete(ctx, companyOf(ctx), selector(req.Body.Id, req.Body.Key)); err != nil {
		return nil, err
	}
	return api.ChatappDelete200JSONResponse{Success: true, Message: "Connection deleted"}, nil
}

func (s *Server) ChatappLogout(ctx context.Context, req api.ChatappLogoutRequestObject) (api.ChatappLogoutResponseObject, error) {
	if err := s.Connections.ChatappLogout(ctx, companyOf(ctx), selector(req.Body.Id, req.Body.Key)); err != nil {
		return nil, err
	}
	return api.ChatappLogout200JSONResponse{Success: true, Message: "Connection logged out"}, nil
}

func toAPIContacts(list []connector.Contact) []api.ChatappContact {
	out := make([]api.ChatappContact, len(list))
	for i, c := range list {
		out[i] = api.ChatappContact{Key: c.Key, Name: c.Name}
		if c.Notify != "" {
			notify := c.Notify
			out[i].Notify = &notify
		}
	}
	return out
}

func (s *Server) ChatappContactList(ctx context.Context, req api.ChatappContactListRequestObject) (api.ChatappContactListResponseObject, error) {
	list, err := s.Connections.ChatappContactList(ctx, companyOf(ctx), selector(req.Body.Id, req.Body.Key))
	if err != nil {
		return nil, err
	}
	return api.ChatappContactList200JSONResponse{Success: true, Message: fmt.Sprintf("%d contacts", len(list)), Data: toAPIContacts(list)}, nil
}

func (s *Server) ChatappGroupList(ctx context.Context, req api.ChatappGroupListRequestObject) (api.ChatappGroupListResponseObject, error) {
	list, err := s.Connections.ChatappGroupList(ctx, companyOf(ctx), selector(req.Body.Id, req.Body.Key))
	if err != nil {
		return nil, err
	}
	out := convert(list, func(g connector.Group) api.ChatappGroup {
		return api.ChatappGroup{Key: g.Key, Name: g.Name, Announce: g.Announce, IsAdmin: g.IsAdmin, ParticipantsCount: g.Participants}
	})
	return api.ChatappGroupList200JSONResponse{Success: true, Message: fmt.Sprintf("%d groups", len(list)), Data: out}, nil
}

func (s *Server) ChatappCheckOnChatapp(ctx context.Context, req api.ChatappCheckOnChatappRequestObject) (api.ChatappCheckOnChatappResponseObject, error) {
	b := req.Body
	groups := b.AreGroups != nil && *b.AreGroups
	list, err := s.Connections.ChatappCheckOnChatapp(ctx, companyOf(ctx), selector(b.Id, b.Key), b.Numbers, groups)
	if err != nil {
		return nil, err
	}
	out := make([]api.ChatappNumberCheck, len(list))
	for i, c := range list {
		out[i] = api.ChatappNumberCheck{Number: c.Entry, Exists: c.Exists}
		if c.Exists {
			key := c.Key
			out[i].Key = &key
		}
	}
	return api.ChatappCheckOnChatapp200JSONResponse{Success: true, Message: fmt.Sprintf("%d numbers checked", len(list)), Data: out}, nil
}

// Simulator controls.

func (s *Server) SimulatorPair(ctx context.Context, req api.SimulatorPairRequestObject) (api.SimulatorPairResponseObject, error) {
	c, err := s.Connections.SimulatorPair(ctx, companyOf(ctx), int64(req.Id))
	if err != nil {
		return nil, err
	}
	data, err := s.chatapps(ctx, c)
	if err != nil {
		return nil, err
	}
	return api.SimulatorPair200JSONResponse{Success: true, Message: "Connection paired", Data: data[0]}, nil
}

func (s *Server) SimulatorUnlink(ctx context.Context, req api.SimulatorUnlinkRequestObject) (api.SimulatorUnlinkResponseObject, error) {
	if err := s.Connections.SimulatorUnlink(ctx, companyOf(ctx), int64(req.Id)); err != nil {
		return nil, err
	}
	return api.SimulatorUnlink200JSONResponse{Success: true, Message: "Device unlinked"}, nil
}

func (s *Server) SimulatorSeedContacts(ctx context.Context, req api.SimulatorSeedContactsRequestObject) (api.SimulatorSeedContactsResponseObject, error) {
	specs := make([]sim.ContactSpec, len(req.Body.Contacts))
	for i, c := range req.Body.Contacts {
		specs[i] = sim.ContactSpec{Key: c.Key, Name: c.Name, OnChatapp: c.OnChatapp, Notify: deref(c.Notify)}
	}
	list, err := s.Connections.SimulatorSeedContacts(ctx, companyOf(ctx), int64(req.Id), specs)
	if err != nil {
		return nil, err
	}
	return api.SimulatorSeedContacts200JSONResponse{Success: true, Message: fmt.Sprintf("%d contacts added", len(list)), Data: toAPIContacts(list)}, nil
}

func (s *Server) SimulatorSeedGroup(ctx context.Context, req api.SimulatorSeedGroupRequestObject) (api.SimulatorSeedGroupResponseObject, error) {
	b := req.Body
	spec := sim.GroupSpec{Name: b.Name, IsMember: b.IsMember, Key: deref(b.Key), Announce: deref(b.Announce),
		IsAdmin: deref(b.IsAdmin), Participants: deref(b.ParticipantsCount)}
	g, err := s.Connections.SimulatorSeedGroup(ctx, companyOf(ctx), int64(req.Id), spec)
	if err != nil {
		return nil, err
	}
	return api.SimulatorSeedGroup200JSONResponse{Success: true, Message: "Group added", Data: api.SimulatorGroup{
		Key: g.Key, Name: g.Name, Announce: g.Announce, IsMember: g.IsMember, IsAdmin: g.IsAdmin, ParticipantsCount: g.Participants}}, nil
}

func (s *Server) SimulatorInbound(ctx context.Context, req api.SimulatorInboundRequestObject) (api.SimulatorInboundResponseObject, error) {
	b := req.Body
	spec := sim.InboundSpec{From: b.From, Name: deref(b.Name), GroupKey: deref(b.GroupKey), Text: deref(b.Text),
		FromMe: b.FromMe != nil && *b.FromMe, ReplyTo: deref(b.ReplyTo), Forwarded: b.Forwarded != nil && *b.Forwarded,
		Reaction: deref(b.Reaction), ReactionRemoved: b.ReactionRemoved != nil && *b.ReactionRemoved, EditOf: deref(b.EditOf), RevokeOf: deref(b.RevokeOf)}
	if b.File != nil {
		spec.File = &connector.File{Name: b.File.Name, ContentType: b.File.ContentType, Data: b.File.Data}
	}
	if l := b.Location; l != nil {
		spec.Location = &sim.LocationSpec{Latitude: l.Latitude, Longitude: l.Longitude, Name: deref(l.Name), Address: deref(l.Address)}
	}
	if c := b.Contact; c != nil {
		spec.Contact = &sim.CardSpec{Name: c.Name, VCard: c.Vcard}
	}
	if p := b.Poll; p != nil {
		spec.Poll = &sim.PollSpec{Question: p.Question, Options: p.Options}
	}
	in, err := s.Connections.SimulatorInbound(ctx, companyOf(ctx), int64(req.Id), spec)
	if err != nil {
		return nil, err
	}
	out := api.SimulatorInbound200JSONResponse{Success: true, Message: "Message delivered"}
	out.Data.ExternalId, out.Data.ChatKey, out.Data.IsGroup, out.Data.MessageTypeId = in.ExternalID, in.Chat.Key, in.Chat.IsGroup, api.MessageTypeId(in.TypeID)
	return out, nil
}

var receiptStatus = map[api.SimulatorReceiptRequestStatus]int{
	api.SimulatorReceiptRequestStatusDelivered: connector.StatusDelivered, api.SimulatorReceiptRequestStatusRead: connector.StatusRead,
	api.SimulatorReceiptRequestStatusFailed: connector.StatusFailed,
}

func (s *Server) SimulatorReceipt(ctx context.Context, req api.SimulatorReceiptRequestObject) (api.SimulatorReceiptResponseObject, error) {
	b := req.Body
	if _, err := s.Connections.SimulatorReceipt(ctx, companyOf(ctx), int64(req.Id), b.ExternalId, receiptStatus[b.Status], deref(b.Reason)); err != nil {
		return nil, err
	}
	return api.SimulatorReceipt200JSONResponse{Success: true, Message: "Receipt delivered"}, nil
}

func (s *Server) SimulatorMessages(ctx context.Context, req api.SimulatorMessagesRequestObject) (api.SimulatorMessagesResponseObject, error) {
	list, err := s.Connections.SimulatorMessages(ctx, companyOf(ctx), int64(req.Id))
	if err != nil {
		return nil, err
	}
	out := make([]api.SimulatorMessage, len(list))
	for i, m := range list {
		out[i] = api.SimulatorMessage{ExternalId: m.ExternalID, ChatKey: m.Chat.Key, IsGroup: m.Chat.IsGroup, Text: m.Text,
			Edited: m.Edited, Revoked: m.Revoked, SentAt: s.Times.Management(m.SentAt), SendCount: &m.SendCount}
		if m.FileName != "" {
			name, ctype, size := m.FileName, m.ContentType, m.FileSize
			out[i].FileName, out[i].ContentType, out[i].FileSize = &name, &ctype, &size
		}
	}
	return api.SimulatorMessages200JSONResponse{Success: true, Message: fmt.Sprintf("%d messages", len(list)), Data: out}, nil
}
