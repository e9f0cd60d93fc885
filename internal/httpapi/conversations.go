package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/fault"
)

func (s *Server) ListContactChannels(ctx context.Context, req api.ListContactChannelsRequestObject) (api.ListContactChannelsResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	f, err := s.toListFilter(operationFrom(ctx), req.Params)
	if err != nil {
		return nil, err
	}
	list, err := s.Conversations.ListContactChannels(ctx, p.CompanyID, f)
	if err != nil {
		return nil, err
	}
	return contactChannelPage{CurrentPage: f.Page.Number, PerPage: f.Page.PerPage, Total: list.Total, LastPage: f.Page.LastPage(list.Total),
		TotalIsCapped: list.TotalIsCapped,
		Data:          convert(list.Data, func(c conversations.Conversation) contactChannelJSON { return s.toAPIContactChannel(c, f.With) })}, nil
}

func (s *Server) UpdateContactChannel(ctx context.Context, req api.UpdateContactChannelRequestObject) (api.UpdateContactChannelResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	op := operationFrom(ctx)
	b := req.Body
	if b == nil {
		return nil, fault.New(fault.Invalid, "The request body is required.")
	}
	if b.UserId != nil && b.WithoutUser != nil && *b.WithoutUser {
		msg := ruleMessage(op, "userConflict")
		return nil, &fault.Error{Kind: fault.Invalid, Message: msg, Fields: map[string][]string{"user_id": {msg}}}
	}
	if b.SectorId != nil && b.WithoutSector != nil && *b.WithoutSector {
		msg := ruleMessage(op, "sectorConflict")
		return nil, &fault.Error{Kind: fault.Invalid, Message: msg, Fields: map[string][]string{"sector_id": {msg}}}
	}
	u := conversations.Update{Pinned: b.Pinned, Muted: b.Muted, Opened: b.Opened,
		Unassign: deref(b.WithoutUser), ClearSector: deref(b.WithoutSector), MarkRead: deref(b.MarkRead)}
	if b.UserId != nil {
		id := int64(*b.UserId)
		u.UserID = &id
	}
	if b.SectorId != nil {
		id := int64(*b.SectorId)
		u.SectorID = &id
	}
	if b.StatusId != nil {
		st := conversations.StatusID(*b.StatusId)
		u.StatusID = &st
	}
	c, err := s.Conversations.UpdateContactChannel(ctx, p.CompanyID, int64(req.Id), u)
	if err != nil {
		return nil, err
	}
	return contactChannelResult{Success: true, Message: "Conversation updated.",
		Data: s.toAPIContactChannel(c, conversations.AllRelations)}, nil
}

func (s *Server) PublishEvent(ctx context.Context, req api.PublishEventRequestObject) (api.PublishEventResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	b := req.Body
	if b == nil {
		return nil, fault.New(fault.Invalid, "The request body is required.")
	}
	data, err := json.Marshal(b.Data)
	if err != nil {
		return nil, fault.Wrap(fault.Invalid, "Data must be an object", err)
	}
	in := conversations.PublishInput{Event: string(b.Event), Data: data}
	if b.OccurredAt != nil {
		in.OccurredAt = *b.OccurredAt
	}
	if err := s.Conversations.PublishEvent(ctx, p.CompanyID, in); err != nil {
		return nil, err
	}
	return api.PublishEvent202JSONResponse{Success: true, Event: string(b.Event), Message: "Event accepted for delivery."}, nil
}

// toListFilter converts the listing's query into the domain filter. The
// validator has already checked types, enums and bounds; what is left is
// turning date ranges into instants in the service time zone.
func (s *Server) toListFilter(op *openapi3.Operation, q api.ListContactChannelsParams) (conversations.ListFilter, error) {
	f := conversations.ListFilter{Page: page(q.Page, q.PerPage, 20), OrderBy: "id",
		SectorID: int64Ptr(q.SectorId), CompanyChannelID: int64Ptr(q.CompanyChannelId), UserID: int64Ptr(q.UserId),
		ChannelKey: q.ChannelKey, WindowMinMinutes: q.OfcWindowMinMinutes, WindowMaxMinutes: q.OfcWindowMaxMinutes,
		WithoutSector: deref(q.WithoutSector), WithoutUser: deref(q.WithoutUser), NeverResponded: deref(q.NeverRespondedAttendant),
		ShowAllStatuses: deref(q.ShowAllStatuses), IncludeClosed: deref(q.IncludeClosed), OnlyUnread: deref(q.OnlyUnread),
		IsGroup: q.IsGroup, Muted: q.Muted, Pinned: q.Pinned, Opened: q.Opened}
	if q.OrderBy != nil {
		f.OrderBy = string(*q.OrderBy)
	}
	if q.OrderMode != nil {
		f.Ascending = strings.EqualFold(string(*q.OrderMode), "asc")
	}
	if q.With != nil {
		for _, r := range *q.With {
			switch r {
			case api.ContactChannelRelationContact:
				f.With.Contact = true
			case api.ContactChannelRelationTags:
				f.With.Tags = true
			case api.ContactChannelRelationSector:
				f.With.Sector = true
			case api.ContactChannelRelationUser:
				f.With.User = true
			case api.ContactChannelRelationProviderOpenedWindow:
				f.With.Window = true
			}
		}
	}
	if q.Filter != nil {
		f.Text = strings.TrimSpace(*q.Filter)
	}
	if t := q.TagsIds; t != nil {
		f.Tags = conversations.TagFilter{Contact: int64s(t.ContactTags), Ticket: int64s(t.TicketTags), Business: int64s(t.CrmBusinessTags)}
	}
	f.Tags.Operation = conversations.TagsEachKind
	if q.TagsOperation != nil {
		f.Tags.Operation = conversations.TagOperation(*q.TagsOperation)
	}
	if q.StatusId != nil {
		f.StatusIDs = append(f.StatusIDs, conversations.StatusID(*q.StatusId))
	}
	if q.StatusIds != nil {
		for _, st := range *q.StatusIds {
			f.StatusIDs = append(f.StatusIDs, conversations.StatusID(st))
		}
	}
	if q.ChannelTypeId != nil {
		f.ChannelTypeIDs = append(f.ChannelTypeIDs, channels.TypeID(*q.ChannelTypeId))
	}
	if q.ChannelableType != nil {
		for t := channels.EmbeddedChat; t <= channels.BotMessenger; t++ {
			if t.Name() == string(*q.ChannelableType) {
				f.ChannelTypeIDs = append(f.ChannelTypeIDs, t)
			}
		}
	}
	if q.ContactChannelOriginId != nil {
		o := conversations.OriginID(*q.ContactChannelOriginId)
		f.OriginID = &o
	}
	var err error
	loc := s.Times.Location
	if f.CreatedAt, err = parseDateRange(op, "created_at", q.CreatedAt, loc); err != nil {
		return f, err
	}
	if f.UpdatedAt, err = parseDateRange(op, "updated_at", q.UpdatedAt, loc); err != nil {
		return f, err
	}
	if f.LastMessageAt, err = parseDateRange(op, "last_message_at", q.LastMessageAt, loc); err != nil {
		return f, err
	}
	return f, nil
}

var rangeBound = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2})(:\d{2}(?:\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$`)

// parseDateRange reads a `[start, end]` query range: a bound without a
// zone is in the service time zone, and an end that is a bare date covers
// that whole day. A bound the pattern admits but the calendar does not
// (2026-02-30) answers the parameter's documented message.
func parseDateRange(op *openapi3.Operation, param string, bounds *[]string, loc *time.Location) (*conversations.TimeRange, error) {
	if bounds == nil {
		return nil, nil
	}
	if loc == nil {
		loc = time.UTC
	}
	invalid := func() error {
		msg := parameterMessage(op, param)
		return &fault.Error{Kind: fault.Invalid, Message: msg, Fields: map[string][]string{param: {msg}}}
	}
	b := *bounds
	if len(b) != 2 {
		return nil, invalid()
	}
	var out [2]time.Time
	for i, v := range b {
		m := rangeBound.FindStringSubmatch(strings.TrimSpace(v))
		if m == nil {
			return nil, invalid()
		}
		if m[2] == "" {
			d, err := time.ParseInLocation("2006-01-02", m[1], loc)
			if err != nil {
				return nil, invalid()
			}
			if i == 1 {
				d = d.AddDate(0, 0, 1).Add(-time.Microsecond)
			}
			out[i] = d
			continue
		}
		layout, value := "2006-01-02T15:04", m[1]+"T"+m[2]
		if m[3] != "" {
			layout += ":05"
			value += m[3]
		}
		var t time.Time
		var err error
		switch zone := m[4]; {
		case zone == "":
			t, err = time.ParseInLocation(layout, value, loc)
		case zone == "Z":
			t, err = time.Parse(layout+"Z07:00", value+zone)
		case strings.Contains(zone, ":"):
			t, err = time.Parse(layout+"-07:00", value+zone)
		default:
			t, err = time.Parse(layout+"-0700", value+zone)
		}
		if err != nil {
			return nil, invalid()
		}
		out[i] = t
	}
	return &conversations.TimeRange{From: out[0].UTC(), To: out[1].UTC()}, nil
}

// parameterMessage is a query parameter's x-invalid-message.
func parameterMessage(op *openapi3.Operation, name string) string {
	if op != nil {
		for _, p := range op.Parameters {
			if p.Value != nil && p.Value.Name == name {
				if msg := stringExt(p.Value.Extensions, "x-invalid-message"); msg != "" {
					return msg
				}
			}
		}
	}
	return "The " + humanize(name) + " field is invalid."
}

// contactChannelJSON is a ContactChannel of the document. The generated
// model cannot tell "relation not asked for" (key absent) from "asked for
// and empty" (null): relations are raw JSON pointers here, nil = absent.
// Times are formatted by the one formatter (ISO 8601 with offset).
type contactChannelJSON struct {
	ID                   int64            `json:"id"`
	Name                 string           `json:"name"`
	Key                  string           `json:"key"`
	Phone                *string          `json:"phone"`
	IsGroup              bool             `json:"is_group"`
	StatusID             int              `json:"status_id"`
	CompanyChannelID     int64            `json:"company_channel_id"`
	ChannelTypeID        int              `json:"channel_type_id"`
	ChannelType          string           `json:"channel_type"`
	Platform             string           `json:"platform"`
	OriginID             int              `json:"origin_id"`
	UnreadCount          int              `json:"unread_count"`
	Muted                bool             `json:"muted"`
	Pinned               bool             `json:"pinned"`
	Opened               bool             `json:"opened"`
	LastMessageAt        string           `json:"last_message_at"`
	CreatedAt            string           `json:"created_at"`
	UpdatedAt            string           `json:"updated_at"`
	Version              int64            `json:"version"`
	Contact              *json.RawMessage `json:"contact,omitempty"`
	Tags                 *json.RawMessage `json:"tags,omitempty"`
	Sector               *json.RawMessage `json:"sector,omitempty"`
	User                 *json.RawMessage `json:"user,omitempty"`
	ProviderOpenedWindow *json.RawMessage `json:"provider_opened_window,omitempty"`
}

type contactChannelPage struct {
	CurrentPage int `json:"current_page"`
	PerPage     int `json:"per_page"`
	Total       int `json:"total"`
	LastPage    int `json:"last_page"`
	// TotalIsCapped (extension): Total stopped at the count's bound.
	TotalIsCapped bool                 `json:"total_is_capped"`
	Data          []contactChannelJSON `json:"data"`
}

func (r contactChannelPage) VisitListContactChannelsResponse(w http.ResponseWriter) error {
	writeJSON(w, http.StatusOK, r)
	return nil
}

type contactChannelResult struct {
	Success bool               `json:"success"`
	Data    contactChannelJSON `json:"data"`
	Message string             `json:"message"`
}

func (r contactChannelResult) VisitUpdateContactChannelResponse(w http.ResponseWriter) error {
	writeJSON(w, http.StatusOK, r)
	return nil
}

// relation marshals v as a present relation (nil pointers become null).
func relation(v any) *json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	raw := json.RawMessage(b)
	return &raw
}

func (s *Server) toAPIContactChannel(c conversations.Conversation, with conversations.Relations) contactChannelJSON {
	out := contactChannelJSON{ID: c.ID, Name: c.Name, Key: c.Key, Phone: c.Phone, IsGroup: c.IsGroup, StatusID: int(c.StatusID),
		CompanyChannelID: c.CompanyChannelID, ChannelTypeID: int(c.ChannelTypeID), ChannelType: c.ChannelTypeID.DisplayName(),
		Platform: c.ChannelTypeID.Name(), OriginID: int(c.OriginID), UnreadCount: c.UnreadCount, Muted: c.Muted, Pinned: c.Pinned,
		Opened: c.Opened, LastMessageAt: s.Times.Offset(c.LastMessageAtOrCreated()), CreatedAt: s.Times.Offset(c.CreatedAt), UpdatedAt: s.Times.Offset(c.UpdatedAt),
		Version: c.Version}
	if with.Contact {
		var v *api.ContactSummary
		if ct := c.Contact; ct != nil {
			v = &api.ContactSummary{Id: int(ct.ID), Name: ct.Name, Email: ct.Email, Phone: ct.Phone}
		}
		out.Contact = relation(v)
	}
	if with.Tags {
		out.Tags = relation(convert(c.Tags, func(t conversations.Tag) api.Tag {
			return api.Tag{Id: int(t.ID), Name: t.Name, Kind: api.TagKind(t.Kind)}
		}))
	}
	if with.Sector {
		var v *api.SectorSummary
		if sec := c.Sector; sec != nil {
			v = &api.SectorSummary{Id: int(sec.ID), Name: sec.Name}
		}
		out.Sector = relation(v)
	}
	if with.User {
		var v *api.UserSummary
		if u := c.User; u != nil {
			v = &api.UserSummary{Id: int(u.ID), Name: u.Name, Email: u.Email}
		}
		out.User = relation(v)
	}
	if with.Window {
		// Only official conversations have the provider's window; for the
		// others the relation is null.
		type window struct {
			Open             bool    `json:"open"`
			ExpiresAt        *string `json:"expires_at"`
			RemainingMinutes int     `json:"remaining_minutes"`
		}
		var v *window
		if w := c.Window; w != nil {
			v = &window{Open: w.Open, ExpiresAt: s.Times.OffsetPtr(w.ExpiresAt), RemainingMinutes: c.WindowRemainingMinutes}
		}
		out.ProviderOpenedWindow = relation(v)
	}
	return out
}
