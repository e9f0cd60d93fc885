package eventstream

import "github.com/chatmsg/gateway/internal/store"

// Migrations create the stream tickets. Only the SHA-256 of a ticket is
// stored: the table never holds a usable credential.
var Migrations = []store.Migration{{
	ID: "0031_event_stream_tickets",
	SQLite: `
CREATE TABLE event_stream_tickets (
	ticket_hash TEXT PRIMARY KEY,
	company_id INTEGER NOT NULL,
	user_id INTEGER NOT NULL,
	token_id INTEGER NOT NULL,
	expires_at TIMESTAMP NOT NULL
);
CREATE INDEX event_stream_tickets_expiry ON event_stream_tickets (expires_at);
`,
	Postgres: `
CREATE TABLE event_stream_tickets (
	ticket_hash TEXT PRIMARY KEY,
	company_id BIGINT NOT NULL,
	user_id BIGINT NOT NULL,
	token_id BIGINT NOT NULL,
	expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX event_stream_tickets_expiry ON event_stream_tickets (expires_at);
`}}
