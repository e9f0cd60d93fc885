package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/store"
)

// The fan-out turns each stored event into one delivery per subscription
// it matched, after the publisher's commit, oldest event first. It runs on
// one replica at a time (a transaction-scoped advisory lock on PostgreSQL;
// SQLite has one writer anyway), so a subscription's deliveries are queued
// in publish order. The event row is deleted in the transaction that queues
// its deliveries: a crash before that commit leaves the event to fan out
// again, one after it leaves the deliveries. (Since issue 27 the row is not
// deleted but numbered: it stays as the event log of the live stream, until
// the retention job prunes it.) Either way nothing is lost and
// nothing is queued twice.
const (
	// fanOutEvents and fanOutDeliveries bound one fan-out transaction.
	fanOutEvents     = 256
	fanOutDeliveries = 4096
	// insertChunk bounds the rows of one multi-row INSERT (PostgreSQL takes
	// at most 65,535 parameters in a statement).
	insertChunk = 1000
	// fanOutLock is the advisory lock that lets one replica fan out at a
	// time (the first key of the two-key form).
	fanOutLock = 726354490
)

// eventRow is a published event waiting for its fan-out: the envelope
// without its delivery_id, and the subscriptions it is for.
type eventRow struct {
	bun.BaseModel   `bun:"table:webhook_events"`
	ID              int64     `bun:"id,pk,autoincrement"`
	Event           string    `bun:"event"`
	Envelope        string    `bun:"envelope"`
	SubscriptionIDs string    `bun:"subscription_ids"`
	CreatedAt       time.Time `bun:"created_at"`
	// CompanyID and CompanyChannelID filter the live stream.
	CompanyID        int64  `bun:"company_id"`
	CompanyChannelID *int64 `bun:"company_channel_id"`
	// Seq is NULL until the event is fanned out, then its place in the
	// event log (see eventLogMigration).
	Seq *int64 `bun:"seq"`
}

// fanOut queues the deliveries of up to fanOutEvents stored events and
// reports whether events may remain. It returns false at once when another
// replica holds the fan-out.
func (s *Service) fanOut(ctx context.Context) (more bool, err error) {
	var queued []deliveryRow
	var numbered bool
	err = s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if s.db.Dialect == store.Postgres {
			var mine bool
			// Keyed by schema too: services on separate schemas of one
			// database (tests do that) fan out independently.
			if err := tx.NewRaw("SELECT pg_try_advisory_xact_lock(?, hashtext(current_schema()))", fanOutLock).Scan(ctx, &mine); err != nil {
				return err
			}
			if !mine {
				return nil
			}
		}
		var evs []eventRow
		if err := tx.NewSelect().Model(&evs).Where("seq IS NULL").Order("id").Limit(fanOutEvents).Scan(ctx); err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		now := s.now().UTC()
		taken := make([]int64, 0, len(evs))
		rows := make([]deliveryRow, 0, len(evs))
		for _, ev := range evs {
			if len(taken) > 0 && len(rows) >= fanOutDeliveries {
				more = true
				break
			}
			taken = append(taken, ev.ID)
			built, err := addressed(ev, now)
			if err != nil {
				// A stored envelope that does not parse was written by a
				// bug; dropping it loudly keeps every later event flowing.
				s.log.ErrorContext(ctx, "webhooks: event dropped at fan-out", "event_id", ev.ID, "event", ev.Event, "err", err)
				continue
			}
			rows = append(rows, built...)
		}
		more = more || len(evs) == fanOutEvents
		for chunk := range slices.Chunk(rows, insertChunk) {
			if _, err := tx.NewInsert().Model(&chunk).Returning("NULL").Exec(ctx); err != nil {
				return err
			}
		}
		if err := markDue(ctx, tx, subscriptionsOf(rows), now); err != nil {
			return err
		}
		if err := numberEvents(ctx, tx, taken); err != nil {
			return err
		}
		numbered = true
		queued = rows
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("fan out events: %w", err)
	}
	if numbered {
		s.signalLogged()
	}
	if len(queued) > 0 {
		s.metrics.queued.Add(float64(len(queued)))
		s.wakeLanes(subscriptionsOf(queued))
	}
	return more, nil
}

// FanOut fans out every stored event now, as the background fan-out does
// after each commit: for tools and tests that need the deliveries queued
// before they look. Events another replica is fanning out at this moment
// are left to it.
func (s *Service) FanOut(ctx context.Context) error {
	for {
		more, err := s.fanOut(ctx)
		if err != nil || !more {
			return err
		}
	}
}

// addressed builds ev's delivery to each of its subscriptions: the stored
// envelope with a delivery_id of its own.
func addressed(ev eventRow, now time.Time) ([]deliveryRow, error) {
	var env events.Envelope
	if err := json.Unmarshal([]byte(ev.Envelope), &env); err != nil {
		return nil, err
	}
	subs := decodeIDs(ev.SubscriptionIDs)
	rows := make([]deliveryRow, 0, len(subs))
	for _, sub := range subs {
		d, err := (envelope{env}).delivery(uuid.NewString())
		if err != nil {
			return nil, err
		}
		rows = append(rows, deliveryRow{SubscriptionID: sub, DeliveryID: d.ID, Event: d.Event, Body: string(d.Body),
			NextAttemptAt: now, CreatedAt: now})
	}
	return rows, nil
}

func subscriptionsOf(rows []deliveryRow) []int64 {
	ids := make([]int64, 0, len(rows))
	seen := make(map[int64]bool, len(rows))
	for _, r := range rows {
		if !seen[r.SubscriptionID] {
			seen[r.SubscriptionID] = true
			ids = append(ids, r.SubscriptionID)
		}
	}
	return ids
}

// numberEvents gives the fanned-out events taken (ascending ids) their
// place in the event log: seq = id + an offset that puts the first above
// every seq given before. The fan-out runs on one replica at a time, so seq
// grows in the order events become visible to readers of the log, which a
// stream resuming "after seq N" needs (ids are not: a transaction that took
// a lower id may commit later). One statement, whatever the batch.
func numberEvents(ctx context.Context, tx *store.Tx, taken []int64) error {
	var base int64
	if err := tx.NewSelect().Model((*eventRow)(nil)).ColumnExpr("COALESCE(MAX(seq), 0)").Scan(ctx, &base); err != nil {
		return err
	}
	offset := base - taken[0] + 1
	_, err := tx.NewUpdate().Model((*eventRow)(nil)).Set("seq = id + ?", offset).Where("id IN (?)", bun.In(taken)).Exec(ctx)
	return err
}
