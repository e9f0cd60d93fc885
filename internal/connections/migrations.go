package connections

import "github.com/chatmsg/gateway/internal/store"

// Migrations create the connections tables: one session row per connection
// that has (or had) a live session — its paired device and the lease of the
// replica holding it — and the mailbox through which replicas forward calls
// to a connection's owner. Times of leases and calls are Unix milliseconds so
// both engines compare them the same way.
var Migrations = []store.Migration{{
	ID:  "0007_connections",
	Was: "0071_connections",
	SQLite: `
CREATE TABLE chatapp_sessions (
	company_channel_id INTEGER PRIMARY KEY REFERENCES company_channels(id) ON DELETE CASCADE,
	device_ref TEXT,
	paired_at TIMESTAMP,
	owner_id TEXT NOT NULL DEFAULT '',
	fence INTEGER NOT NULL DEFAULT 0,
	lease_expires_ms INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX chatapp_sessions_owner ON chatapp_sessions (owner_id);
CREATE TABLE chatapp_calls (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_channel_id INTEGER NOT NULL REFERENCES company_channels(id) ON DELETE CASCADE,
	owner_id TEXT NOT NULL,
	op TEXT NOT NULL,
	request BLOB NOT NULL,
	state INTEGER NOT NULL DEFAULT 0,
	response BLOB,
	created_ms INTEGER NOT NULL
);
CREATE INDEX chatapp_calls_owner ON chatapp_calls (owner_id, state);
`,
	Postgres: `
CREATE TABLE chatapp_sessions (
	company_channel_id BIGINT PRIMARY KEY REFERENCES company_channels(id) ON DELETE CASCADE,
	device_ref TEXT,
	paired_at TIMESTAMPTZ,
	owner_id TEXT NOT NULL DEFAULT '',
	fence BIGINT NOT NULL DEFAULT 0,
	lease_expires_ms BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX chatapp_sessions_owner ON chatapp_sessions (owner_id);
CREATE TABLE chatapp_calls (
	id BIGSERIAL PRIMARY KEY,
	company_channel_id BIGINT NOT NULL REFERENCES company_channels(id) ON DELETE CASCADE,
	owner_id TEXT NOT NULL,
	op TEXT NOT NULL,
	request BYTEA NOT NULL,
	state INTEGER NOT NULL DEFAULT 0,
	response BYTEA,
	created_ms BIGINT NOT NULL
);
CREATE INDEX chatapp_calls_owner ON chatapp_calls (owner_id, state);
`}, {
	// The session's state as the chat app last reported it.
	ID:  "0008_connections_state",
	Was: "0072_connections_state",
	SQLite: `
ALTER TABLE chatapp_sessions ADD COLUMN state TEXT NOT NULL DEFAULT '';
ALTER TABLE chatapp_sessions ADD COLUMN state_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE chatapp_sessions ADD COLUMN state_ms BIGINT NOT NULL DEFAULT 0;
`,
	Postgres: `
ALTER TABLE chatapp_sessions ADD COLUMN state TEXT NOT NULL DEFAULT '';
ALTER TABLE chatapp_sessions ADD COLUMN state_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE chatapp_sessions ADD COLUMN state_ms BIGINT NOT NULL DEFAULT 0;
`}}
