package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/chatmsg/gateway/gen/api"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/eventstream"
	"github.com/chatmsg/gateway/internal/fault"
)

// The live event stream (issue 27). The ticket endpoint goes through the
// contract pipeline like every operation; the stream itself is routed
// before it (see NewHandler): it authenticates by ticket or token itself
// (the document marks it security: []), and a long-lived connection must
// not hold one of the client's in-flight request slots.

func (s *Server) CreateEventStreamTicket(ctx context.Context, _ api.CreateEventStreamTicketRequestObject) (api.CreateEventStreamTicketResponseObject, error) {
	p, _ := auth.FromContext(ctx)
	t, err := s.Stream.IssueTicket(ctx, p)
	if err != nil {
		return nil, err
	}
	return api.CreateEventStreamTicket201JSONResponse{Ticket: t.Ticket, ExpiresAt: t.ExpiresAt.UTC()}, nil
}

// StreamEvents is served by streamHandler; the generated router never
// reaches it.
func (s *Server) StreamEvents(context.Context, api.StreamEventsRequestObject) (api.StreamEventsResponseObject, error) {
	return nil, fault.New(fault.Internal, "the event stream is served by its own handler")
}

const msgNotEventStream = "This operation answers text/event-stream; send Accept: text/event-stream."

// streamHandler serves GET /api/events/stream.
func (s *Server) streamHandler(c *Contract) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, pathParams, err := c.FindRoute(r)
		if err != nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not found."})
			return
		}
		op := route.Operation
		r = r.WithContext(context.WithValue(r.Context(), operationKey, op))
		if h, ok := r.Context().Value(opHolderKey{}).(*opHolder); ok {
			h.op = op
		}
		// The edge's checks come first, as in the contract pipeline: a
		// ticket or filter carrying a NUL or invalid UTF-8 answers 422
		// before anything reads it.
		if fe := checkParameters(r, route, pathParams); fe != nil {
			writeError(w, r, s.Logger, op, fe)
			return
		}
		company, err := s.streamPrincipal(r, op)
		if err != nil {
			if fault.KindOf(err) == fault.Unauthenticated {
				w.Header().Set("WWW-Authenticate", bearerChallenge(err))
			}
			writeError(w, r, s.Logger, op, err)
			return
		}
		// Checked after authentication, so a missing permission answers
		// 403 whatever the client accepts.
		if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			writeJSON(w, http.StatusNotAcceptable, map[string]any{"message": msgNotEventStream})
			return
		}
		f, after, err := streamQuery(r)
		if err != nil {
			writeError(w, r, s.Logger, op, err)
			return
		}
		if err := s.Stream.Serve(r.Context(), w, company, f, after); err != nil {
			writeError(w, r, s.Logger, op, err)
		}
	})
}

// streamPrincipal authenticates the stream: a ticket (which carries the
// permission it was issued with) or a bearer token with the permission.
func (s *Server) streamPrincipal(r *http.Request, op *openapi3.Operation) (int64, error) {
	if t := r.URL.Query().Get("ticket"); t != "" {
		return s.Stream.RedeemTicket(r.Context(), t)
	}
	p, err := s.Auth.Authenticate(r.Context(), bearerToken(r))
	if err != nil {
		return 0, err
	}
	if h, ok := r.Context().Value(opHolderKey{}).(*opHolder); ok {
		h.principal = &p
	}
	if err := authorize(op, p); err != nil {
		return 0, err
	}
	return p.CompanyID, nil
}

// streamQuery reads the filters and the resume point.
func streamQuery(r *http.Request) (eventstream.Filter, *int64, error) {
	q := r.URL.Query()
	var f eventstream.Filter
	fields := map[string][]string{}
	for name := range strings.SplitSeq(q.Get("events"), ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if info, ok := events.Lookup(name); !ok || !info.Subscribable {
			fields["events"] = append(fields["events"], "Events must name subscribable events")
			continue
		}
		f.Events = append(f.Events, name)
	}
	for id := range strings.SplitSeq(q.Get("company_channel_ids"), ",") {
		if id = strings.TrimSpace(id); id == "" {
			continue
		}
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n < 1 {
			fields["company_channel_ids"] = append(fields["company_channel_ids"], "Company channel ids must be positive integers")
			continue
		}
		f.ChannelIDs = append(f.ChannelIDs, n)
	}
	var after *int64
	for _, v := range []struct{ field, value string }{{"last_event_id", q.Get("last_event_id")}, {"Last-Event-ID", r.Header.Get("Last-Event-ID")}} {
		if v.value == "" {
			continue
		}
		n, err := strconv.ParseInt(v.value, 10, 64)
		if err != nil || n < 0 {
			fields[v.field] = append(fields[v.field], "Last event id must be an event id of the stream")
			continue
		}
		if after == nil || n > *after {
			after = &n
		}
	}
	if len(fields) > 0 {
		msg := ""
		for _, k := range []string{"events", "company_channel_ids", "last_event_id", "Last-Event-ID"} {
			if len(fields[k]) > 0 {
				msg = fields[k][0]
				break
			}
		}
		return f, nil, &fault.Error{Kind: fault.Invalid, Message: msg, Fields: fields}
	}
	return f, after, nil
}
