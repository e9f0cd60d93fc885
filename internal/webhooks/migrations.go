package webhooks

import "github.com/chatmsg/gateway/internal/store"

// Migrations create the webhook tables.
//
// Subscription ids are never reused (AUTOINCREMENT on SQLite, a sequence on
// PostgreSQL): a delivery job still queued for a deleted subscription must
// never reach a newer one.
//
// events is a JSON array of the chosen names; all_events marks "every
// subscribable event", so events added to the catalog later reach such
// subscriptions too. company_channel_ids is stored as ",12,15," (NULL = all
// channels) so the list filter is one portable LIKE.
//
// The delivery log has no foreign key: DeleteChannelWebhook removes a
// subscription's entries in its own transaction, and the hot path (one
// INSERT per attempt) stays free of parent-row locks.
var Migrations = []store.Migration{{
	ID:  "0014_webhooks",
	Was: "0050_webhooks",
	SQLite: `
CREATE TABLE webhook_subscriptions (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	url TEXT NOT NULL,
	events TEXT NOT NULL,
	all_events BOOLEAN NOT NULL,
	company_channel_ids TEXT,
	enabled BOOLEAN NOT NULL,
	secret TEXT NOT NULL,
	failure_count INTEGER NOT NULL DEFAULT 0,
	last_success_at TIMESTAMP,
	last_failure_at TIMESTAMP,
	disabled_reason TEXT,
	created_at TIMESTAMP NOT NULL,
	updated_at TIMESTAMP NOT NULL
);
CREATE INDEX webhook_subscriptions_company ON webhook_subscriptions (company_id, enabled);
CREATE TABLE webhook_delivery_log (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	subscription_id INTEGER NOT NULL,
	delivery_id TEXT NOT NULL,
	event TEXT NOT NULL,
	attempt INTEGER NOT NULL,
	status_code INTEGER NOT NULL,
	succeeded BOOLEAN NOT NULL,
	duration_ms INTEGER NOT NULL,
	error TEXT,
	delivered_at TIMESTAMP,
	next_retry_at TIMESTAMP,
	created_at TIMESTAMP NOT NULL
);
CREATE INDEX webhook_delivery_log_subscription ON webhook_delivery_log (subscription_id, id);
CREATE INDEX webhook_delivery_log_retention ON webhook_delivery_log (succeeded, created_at);
`,
	Postgres: `
CREATE TABLE webhook_subscriptions (
	id BIGSERIAL PRIMARY KEY,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	url TEXT NOT NULL,
	events TEXT NOT NULL,
	all_events BOOLEAN NOT NULL,
	company_channel_ids TEXT,
	enabled BOOLEAN NOT NULL,
	secret TEXT NOT NULL,
	failure_count INTEGER NOT NULL DEFAULT 0,
	last_success_at TIMESTAMPTZ,
	last_failure_at TIMESTAMPTZ,
	disabled_reason TEXT,
	created_at TIMESTAMPTZ NOT NULL,
	updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_subscriptions_company ON webhook_subscriptions (company_id, enabled);
CREATE TABLE webhook_delivery_log (
	id BIGSERIAL PRIMARY KEY,
	subscription_id BIGINT NOT NULL,
	delivery_id UUID NOT NULL,
	event TEXT NOT NULL,
	attempt INTEGER NOT NULL,
	status_code INTEGER NOT NULL,
	succeeded BOOLEAN NOT NULL,
	duration_ms INTEGER NOT NULL,
	error TEXT,
	delivered_at TIMESTAMPTZ,
	next_retry_at TIMESTAMPTZ,
	created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_delivery_log_subscription ON webhook_delivery_log (subscription_id, id);
CREATE INDEX webhook_delivery_log_retention ON webhook_delivery_log (succeeded, created_at);
`}, laneMigration, redeliveryMigration, outboxMigration, brokerMigration, eventLogMigration, probeMigration, retriesDueMigration}

// laneMigration adds the pending deliveries a subscription's lane drains
// (see README, "How it runs"). A row lives from publish until its outcome is
// final (delivered, refused, or out of attempts) and is deleted in the same
// transaction that writes that attempt's log entry. attempts counts the
// attempts made; next_attempt_at is when the next one is due.
var laneMigration = store.Migration{
	ID:  "0015_webhook_deliveries",
	Was: "0051_webhook_deliveries",
	SQLite: `
CREATE TABLE webhook_deliveries (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	subscription_id INTEGER NOT NULL,
	delivery_id TEXT NOT NULL,
	event TEXT NOT NULL,
	body TEXT NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0,
	next_attempt_at TIMESTAMP NOT NULL,
	created_at TIMESTAMP NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (subscription_id, next_attempt_at, id);
CREATE INDEX webhook_deliveries_next ON webhook_deliveries (next_attempt_at);
`,
	Postgres: `
CREATE TABLE webhook_deliveries (
	id BIGSERIAL PRIMARY KEY,
	subscription_id BIGINT NOT NULL,
	delivery_id UUID NOT NULL,
	event TEXT NOT NULL,
	body TEXT NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0,
	next_attempt_at TIMESTAMPTZ NOT NULL,
	created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (subscription_id, next_attempt_at, id);
CREATE INDEX webhook_deliveries_next ON webhook_deliveries (next_attempt_at);
`}

// redeliveryMigration adds the signature scheme of a subscription (issue 14)
// and keeps the events of finished deliveries so they can be sent again
// (redeliver, recover). A pending row of webhook_deliveries is deleted when
// its outcome is final; its event moves to webhook_finished_deliveries in the
// same transaction (see lane.go, recordBatch), one row per delivery id,
// replaced when a redelivery of it finishes. failed marks a delivery that
// ended without success (out of attempts, refused, or dropped because the
// subscription was disabled); finished_at is when. Rows are pruned with the
// retention job (3 days when delivered, 30 when failed) and deleted with their
// subscription.
var redeliveryMigration = store.Migration{
	ID:  "0016_webhooks_signature_scheme",
	Was: "0052_webhooks_signature_scheme",
	SQLite: `
ALTER TABLE webhook_subscriptions ADD COLUMN signature_scheme TEXT NOT NULL DEFAULT 'svc';
CREATE TABLE webhook_finished_deliveries (
	delivery_id TEXT PRIMARY KEY,
	subscription_id INTEGER NOT NULL,
	event TEXT NOT NULL,
	body TEXT NOT NULL,
	failed BOOLEAN NOT NULL,
	finished_at TIMESTAMP NOT NULL
);
CREATE INDEX webhook_finished_deliveries_subscription ON webhook_finished_deliveries (subscription_id, failed, finished_at);
CREATE INDEX webhook_finished_deliveries_retention ON webhook_finished_deliveries (failed, finished_at);
`,
	Postgres: `
ALTER TABLE webhook_subscriptions ADD COLUMN signature_scheme TEXT NOT NULL DEFAULT 'svc';
CREATE TABLE webhook_finished_deliveries (
	delivery_id UUID PRIMARY KEY,
	subscription_id BIGINT NOT NULL,
	event TEXT NOT NULL,
	body TEXT NOT NULL,
	failed BOOLEAN NOT NULL,
	finished_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_finished_deliveries_subscription ON webhook_finished_deliveries (subscription_id, failed, finished_at);
CREATE INDEX webhook_finished_deliveries_retention ON webhook_finished_deliveries (failed, finished_at);
`}

// outboxMigration moves fan-out out of the publisher's transaction and lanes
// out of River (see README, "How it runs").
//
// webhook_events is the outbox: Publish writes one row per event, whatever
// the number of subscriptions, with the subscriptions it matched
// (",12,15,"); the fan-out turns it into one webhook_deliveries row per
// subscription after commit and deletes it in the same transaction.
//
// webhook_lanes has one row per subscription that has had deliveries:
// due_at is its earliest due delivery (NULL when none), lease_token and
// lease_until say which replica's dispatcher runs its lane, and failures and
// in_flight_limit carry its breaker from one run to the next. Existing
// pending deliveries get their lane rows here, so an upgrade loses none.
var outboxMigration = store.Migration{
	ID:  "0017_webhook_outbox_lanes",
	Was: "0053_webhook_outbox_lanes",
	SQLite: `
CREATE TABLE webhook_events (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	event TEXT NOT NULL,
	envelope TEXT NOT NULL,
	subscription_ids TEXT NOT NULL,
	created_at TIMESTAMP NOT NULL
);
CREATE TABLE webhook_lanes (
	subscription_id INTEGER PRIMARY KEY,
	due_at TIMESTAMP,
	lease_token TEXT,
	lease_until TIMESTAMP,
	failures INTEGER NOT NULL DEFAULT 0,
	in_flight_limit INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX webhook_lanes_due ON webhook_lanes (due_at);
INSERT INTO webhook_lanes (subscription_id, due_at) SELECT subscription_id, MIN(next_attempt_at) FROM webhook_deliveries GROUP BY subscription_id;
`,
	Postgres: `
CREATE TABLE webhook_events (
	id BIGSERIAL PRIMARY KEY,
	event TEXT NOT NULL,
	envelope TEXT NOT NULL,
	subscription_ids TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE webhook_lanes (
	subscription_id BIGINT PRIMARY KEY,
	due_at TIMESTAMPTZ,
	lease_token TEXT,
	lease_until TIMESTAMPTZ,
	failures INTEGER NOT NULL DEFAULT 0,
	in_flight_limit INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX webhook_lanes_due ON webhook_lanes (due_at);
INSERT INTO webhook_lanes (subscription_id, due_at) SELECT subscription_id, MIN(next_attempt_at) FROM webhook_deliveries GROUP BY subscription_id;
`}

// brokerMigration (issue 27) adds the sealed broker URL of a subscription
// whose URL carries credentials (see destination.go): url keeps the URL with
// the credentials masked. ” when url is the destination.
var brokerMigration = store.Migration{
	ID:       "0029_webhooks_broker_destinations",
	SQLite:   `ALTER TABLE webhook_subscriptions ADD COLUMN destination TEXT NOT NULL DEFAULT '';`,
	Postgres: `ALTER TABLE webhook_subscriptions ADD COLUMN destination TEXT NOT NULL DEFAULT '';`,
}

// eventLogMigration (issue 27) keeps the outbox rows after their fan-out as
// the event log the live stream reads and resumes from. seq is NULL until
// the event is fanned out; the fan-out (one replica at a time) then numbers
// it above every earlier seq, so seq grows in the order events become
// visible, which id does not (two transactions commit in either order).
// company_id and company_channel_id let a stream filter without parsing
// envelopes. Rows from before this migration are fanned out as before and
// carry company 0 (no stream sees them).
var eventLogMigration = store.Migration{
	ID: "0030_webhook_event_log",
	SQLite: `
ALTER TABLE webhook_events ADD COLUMN company_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhook_events ADD COLUMN company_channel_id INTEGER;
ALTER TABLE webhook_events ADD COLUMN seq INTEGER;
CREATE INDEX webhook_events_seq ON webhook_events (seq, id);
CREATE INDEX webhook_events_company_seq ON webhook_events (company_id, seq);
CREATE INDEX webhook_events_created ON webhook_events (created_at);
`,
	Postgres: `
ALTER TABLE webhook_events ADD COLUMN company_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhook_events ADD COLUMN company_channel_id BIGINT;
ALTER TABLE webhook_events ADD COLUMN seq BIGINT;
CREATE INDEX webhook_events_seq ON webhook_events (seq, id);
CREATE INDEX webhook_events_company_seq ON webhook_events (company_id, seq);
CREATE INDEX webhook_events_created ON webhook_events (created_at);
`}

// probeMigration (issue 31) keeps an open breaker's cool-down in its lane's
// row (probe_at: no probe before it; NULL when the breaker is closed), so a
// lane that moves to another replica does not probe a dead endpoint again
// at once.
var probeMigration = store.Migration{
	ID:       "0032_webhook_lanes_probe_at",
	SQLite:   `ALTER TABLE webhook_lanes ADD COLUMN probe_at TIMESTAMP;`,
	Postgres: `ALTER TABLE webhook_lanes ADD COLUMN probe_at TIMESTAMPTZ;`,
}

// retriesDueMigration (issue 25) indexes the due retries of a subscription
// apart from its first attempts: a lane takes retries first (fetchDue), and
// a dead endpoint's backlog of first attempts would otherwise be read on
// every fetch to find them.
var retriesDueMigration = store.Migration{
	ID:       "0033_webhook_deliveries_retries_due",
	SQLite:   `CREATE INDEX webhook_deliveries_retries_due ON webhook_deliveries (subscription_id, next_attempt_at, id) WHERE attempts > 0;`,
	Postgres: `CREATE INDEX webhook_deliveries_retries_due ON webhook_deliveries (subscription_id, next_attempt_at, id) WHERE attempts > 0;`,
}
