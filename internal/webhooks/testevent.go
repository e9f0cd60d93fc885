package webhooks

import (
	"context"
	"encoding/json"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// TestChannelWebhookEvent is TestChannelWebhook with another event than
// ping (an extension): it queues data, the event's example from the
// AsyncAPI document (internal/eventexamples), to the subscription alone,
// through the same outbox as every event, so it is signed with the
// subscription's secret and scheme, retried and logged like any delivery.
// The subscription need not list the event: the caller asked for it.
// Errors as TestChannelWebhook; Invalid for an event the catalog lacks.
func (s *Service) TestChannelWebhookEvent(ctx context.Context, p auth.Principal, id int64, event string, data json.RawMessage) (int, error) {
	if _, ok := events.Lookup(event); !ok {
		return 0, &fault.Error{Kind: fault.Invalid, Message: "The selected event is invalid.",
			Fields: map[string][]string{"event": {"The selected event is invalid."}}}
	}
	if err := s.throttle(ctx, p); err != nil {
		return 0, err
	}
	err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		row, err := s.get(ctx, tx, p.CompanyID, id)
		if err != nil {
			return err
		}
		if !row.Enabled {
			return fault.New(fault.Rule, msgDisabled)
		}
		return s.enqueue(ctx, tx, Event{Name: event, CompanyID: p.CompanyID, Data: data}, []subscriptionRow{row})
	})
	if err != nil {
		return 0, err
	}
	return 1, nil
}
