package conversations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// PublishInput is a company-scope event a platform component reports
// (POST /api/events).
type PublishInput struct {
	Event string
	// Data is the event's data payload as received; it is validated against
	// the event's AsyncAPI data schema and delivered byte for byte.
	Data json.RawMessage
	// OccurredAt is when it happened; zero means now.
	OccurredAt time.Time
}

// CompanyScopeEvents are the events PublishEvent accepts: the catalog's
// company-scope events (crm.business.*, contact.import.completed), which
// other parts of the platform produce.
func CompanyScopeEvents() []string {
	var out []string
	for _, info := range events.Catalog {
		if info.Scope == events.ScopeCompany {
			out = append(out, info.Name)
		}
	}
	return out
}

// PublishEvent validates a company-scope event and publishes it to the
// company's subscriptions. Channel-scope events are this service's own
// (conversations, messages) and cannot be injected. Errors: Invalid (not a
// company-scope event; data not matching the schema, with one entry per
// failing path in Fields), Internal.
func (s *Service) PublishEvent(ctx context.Context, companyID int64, in PublishInput) error {
	info, ok := events.Lookup(in.Event)
	if !ok || info.Scope != events.ScopeCompany {
		msg := "Event must be one of " + strings.Join(CompanyScopeEvents(), ", ")
		return &fault.Error{Kind: fault.Invalid, Message: msg, Fields: map[string][]string{"event": {msg}}}
	}
	if err := eventschema.ValidateData(in.Event, in.Data); err != nil {
		var se *eventschema.Error
		if !errors.As(err, &se) {
			return fault.Internalf(err, "validate %s data", in.Event)
		}
		fields := map[string][]string{}
		first := ""
		for _, p := range se.Problems {
			field := "data" + strings.ReplaceAll(p.Path, "/", ".")
			fields[field] = append(fields[field], p.Message)
			if first == "" {
				first = fmt.Sprintf("The data does not match the %s schema: %s: %s", in.Event, field, p.Message)
			}
		}
		if first == "" {
			first = fmt.Sprintf("The data does not match the %s schema.", in.Event)
			fields["data"] = []string{first}
		}
		return &fault.Error{Kind: fault.Invalid, Message: first, Fields: fields, Err: err}
	}
	at := in.OccurredAt
	if at.IsZero() {
		at = s.now()
	}
	// The event's outbox row is the only write: it needs no transaction
	// around it to appear exactly when it is stored.
	return s.db.InOneStatement(ctx, func(ctx context.Context, tx *store.Tx) error {
		// Company-scope events carry no channel: they reach every
		// subscription of the company that subscribed to them.
		return s.pub.Publish(ctx, tx, webhooks.Event{Name: in.Event, CompanyID: companyID, OccurredAt: at.UTC(), Data: in.Data})
	})
}
