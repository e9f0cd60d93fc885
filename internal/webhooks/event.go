// Package webhooks owns outbound webhook subscriptions and the delivery of
// signed JSON events to them: matching, the outbox, signing, retries, the
// delivery log and automatic disabling.
package webhooks

import (
	"context"
	"time"

	"github.com/chatmsg/gateway/internal/store"
)

// Event is one occurrence to deliver to every matching subscription of a
// company. Capabilities publish events inside the transaction that changes
// the data the event describes, so the event exists exactly when that change
// committed (outbox).
type Event struct {
	// Name is one of the event names of the catalog (gen/events), e.g.
	// events.OmnichatMessageReceived.
	Name      string
	CompanyID int64
	// CompanyChannelID is the channel a channel-scope event concerns; nil for
	// company-scope events. Subscriptions filter channel-scope events on it.
	CompanyChannelID *int64
	// OccurredAt is when the change happened; the zero value means now.
	OccurredAt time.Time
	// Data is the event's data payload (a gen/events payload type or any
	// value that marshals to the event's AsyncAPI data schema).
	Data any
}

// Publisher is what other capabilities call to publish events; *Service
// implements it. Publish returns fault.Invalid for an unknown event name.
type Publisher interface {
	Publish(ctx context.Context, tx *store.Tx, ev Event) error
}

// Audience is what a publisher asks before a change that needs a
// transaction only for its event: whether Publish would queue any
// delivery of the event now, matched as Publish matches it (the same
// cache, so a subscription created through another replica counts within
// SubscriptionCacheTTL, as it does for Publish). *Service implements it.
type Audience interface {
	Listens(ctx context.Context, companyID int64, name string, companyChannelID *int64) (bool, error)
}
