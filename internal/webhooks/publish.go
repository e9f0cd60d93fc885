package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// Publish stores ev for the company's enabled subscriptions that want it,
// inside tx: the event exists exactly when the caller's change commits, and
// it costs the caller one INSERT whatever the number of subscriptions (the
// fan-out to one delivery per subscription runs after commit, see
// fanout.go). The channel filter applies to channel-scope events only.
// Errors: Invalid (unknown or non-subscribable event name); Internal when
// the data does not match the event's AsyncAPI schema (a bug in the
// publisher: nothing leaves the service that the document does not
// describe). Every event is stored, whether a subscription wants it or not:
// the live stream carries them all (see enqueue).
func (s *Service) Publish(ctx context.Context, tx *store.Tx, ev Event) error {
	matched, err := s.matching(ctx, tx, ev.CompanyID, ev.Name, ev.CompanyChannelID)
	if err != nil {
		return err
	}
	return s.enqueue(ctx, tx, ev, matched)
}

// Listens implements Audience. On SQLite, whose one connection a caller's
// open transaction holds, it must be called outside any transaction.
func (s *Service) Listens(ctx context.Context, companyID int64, name string, companyChannelID *int64) (bool, error) {
	matched, err := s.matching(ctx, s.db.Bun, companyID, name, companyChannelID)
	return len(matched) > 0 || s.streamListens(companyID), err
}

// matching is the company's enabled subscriptions that want the event,
// read through db when they are not cached.
func (s *Service) matching(ctx context.Context, db bun.IDB, companyID int64, name string, companyChannelID *int64) ([]subscriptionRow, error) {
	info, ok := events.Lookup(name)
	if !ok || !info.Subscribable {
		return nil, fault.New(fault.Invalid, fmt.Sprintf("unknown event %q", name))
	}
	rows, err := s.subs.enabled(ctx, db, companyID)
	if err != nil {
		return nil, fault.Internalf(err, "match subscriptions")
	}
	var matched []subscriptionRow
	for _, r := range rows {
		if r.subscribes(name) && (info.Scope != events.ScopeChannel || r.acceptsChannel(companyChannelID)) {
			matched = append(matched, r)
		}
	}
	return matched, nil
}

// enqueue writes ev to the outbox for subs in tx, and wakes the fan-out
// once tx commits.
//
// The row is written even when no subscription matched: the outbox is also
// the event log the live stream reads (issue 27), which carries every
// event. It is still the one INSERT; its fan-out queues nothing.
func (s *Service) enqueue(ctx context.Context, tx *store.Tx, ev Event, subs []subscriptionRow) error {
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = s.now()
	}
	env, err := newEnvelope(ev, s.times)
	if err != nil {
		return err
	}
	body, err := marshal(env.Envelope)
	if err != nil {
		return fault.Internalf(err, "marshal envelope")
	}
	ids := make([]int64, len(subs))
	for i, sub := range subs {
		ids[i] = sub.ID
	}
	row := eventRow{Event: ev.Name, Envelope: string(body), SubscriptionIDs: encodeIDs(ids), CreatedAt: s.now().UTC(),
		CompanyID: ev.CompanyID, CompanyChannelID: ev.CompanyChannelID}
	if _, err := tx.NewInsert().Model(&row).Returning("NULL").Exec(ctx); err != nil {
		return fault.Internalf(err, "store event %s", ev.Name)
	}
	tx.AfterCommit(s.wakeFanOut)
	return nil
}

// NewDelivery builds the delivery of ev under deliveryID exactly as Publish
// does (envelope, field order, time format); with NewDeliveryRequest it is
// the whole wire format, for contract tests and tools. A zero OccurredAt
// means now.
func NewDelivery(ev Event, deliveryID string, times clock.Formatter) (Delivery, error) {
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = time.Now()
	}
	if times.Location == nil {
		times = clock.NewFormatter(nil)
	}
	env, err := newEnvelope(ev, times)
	if err != nil {
		return Delivery{}, err
	}
	return env.delivery(deliveryID)
}

// envelope is an event ready to be addressed: its data marshalled and
// checked once, whatever the number of subscriptions.
type envelope struct{ events.Envelope }

func newEnvelope(ev Event, times clock.Formatter) (envelope, error) {
	info, ok := events.Lookup(ev.Name)
	if !ok {
		return envelope{}, fault.New(fault.Invalid, fmt.Sprintf("unknown event %q", ev.Name))
	}
	data, err := marshal(ev.Data)
	if err != nil {
		return envelope{}, fault.Internalf(err, "marshal %s data", ev.Name)
	}
	if bytes.Equal(data, []byte("null")) {
		data = []byte("{}")
	}
	if err := eventschema.ValidateData(ev.Name, data); err != nil {
		return envelope{}, fault.Internalf(err, "publish %s", ev.Name)
	}
	return envelope{events.Envelope{Event: ev.Name, CompanyID: ev.CompanyID, OccurredAt: times.Offset(ev.OccurredAt),
		Description: info.Description, Data: data}}, nil
}

func (e envelope) delivery(id string) (Delivery, error) {
	e.DeliveryID = id
	body, err := marshal(e.Envelope)
	if err != nil {
		return Delivery{}, fault.Internalf(err, "marshal envelope")
	}
	return Delivery{ID: id, Event: e.Event, Body: body}, nil
}

// marshal is json.Marshal without HTML escaping (receivers read the
// bodies; "<" needs no \u003c) and without the trailing newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
