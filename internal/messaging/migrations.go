package messaging

import "github.com/chatmsg/gateway/internal/store"

// Migrations create the messaging tables: messages, and the per-company
// monthly quota and its usage counter.
var Migrations = []store.Migration{{
	ID:  "0018_messages",
	Was: "0040_messages",
	SQLite: `
CREATE TABLE messages (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	uuid TEXT NOT NULL UNIQUE,
	external_id TEXT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	company_channel_id INTEGER NOT NULL REFERENCES company_channels(id) ON DELETE CASCADE,
	contact_channel_id INTEGER NOT NULL,
	contact_key TEXT NOT NULL,
	conversation_name TEXT NOT NULL,
	is_group INTEGER NOT NULL DEFAULT 0,
	text TEXT NOT NULL DEFAULT '',
	message_type_id INTEGER NOT NULL,
	message_source_id INTEGER NOT NULL,
	status_id INTEGER NOT NULL,
	failure_reason TEXT,
	edited INTEGER NOT NULL DEFAULT 0,
	is_forwarded INTEGER NOT NULL DEFAULT 0,
	revoked_at TIMESTAMP,
	replied_message_id INTEGER,
	user_id INTEGER,
	media_path TEXT,
	media_name TEXT,
	media_content_type TEXT,
	outbound TEXT,
	platform_at TIMESTAMP NOT NULL,
	received_at TIMESTAMP NOT NULL,
	created_at TIMESTAMP NOT NULL,
	updated_at TIMESTAMP NOT NULL
);
CREATE UNIQUE INDEX messages_channel_external ON messages (company_channel_id, external_id);
CREATE INDEX messages_company ON messages (company_id, id);
CREATE INDEX messages_conversation ON messages (contact_channel_id, id);
CREATE TABLE message_quotas (
	company_id INTEGER PRIMARY KEY REFERENCES companies(id) ON DELETE CASCADE,
	monthly_limit INTEGER,
	updated_at TIMESTAMP NOT NULL
);
CREATE TABLE message_usage (
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	period TEXT NOT NULL,
	used INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (company_id, period)
);
`,
	Postgres: `
CREATE TABLE messages (
	id BIGSERIAL PRIMARY KEY,
	uuid TEXT NOT NULL UNIQUE,
	external_id TEXT,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	company_channel_id BIGINT NOT NULL REFERENCES company_channels(id) ON DELETE CASCADE,
	contact_channel_id BIGINT NOT NULL,
	contact_key TEXT NOT NULL,
	conversation_name TEXT NOT NULL,
	is_group BOOLEAN NOT NULL DEFAULT FALSE,
	text TEXT NOT NULL DEFAULT '',
	message_type_id INTEGER NOT NULL,
	message_source_id INTEGER NOT NULL,
	status_id INTEGER NOT NULL,
	failure_reason TEXT,
	edited BOOLEAN NOT NULL DEFAULT FALSE,
	is_forwarded BOOLEAN NOT NULL DEFAULT FALSE,
	revoked_at TIMESTAMPTZ,
	replied_message_id BIGINT,
	user_id BIGINT,
	media_path TEXT,
	media_name TEXT,
	media_content_type TEXT,
	outbound TEXT,
	platform_at TIMESTAMPTZ NOT NULL,
	received_at TIMESTAMPTZ NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	updated_at TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX messages_channel_external ON messages (company_channel_id, external_id);
CREATE INDEX messages_company ON messages (company_id, id);
CREATE INDEX messages_conversation ON messages (contact_channel_id, id);
CREATE TABLE message_quotas (
	company_id BIGINT PRIMARY KEY REFERENCES companies(id) ON DELETE CASCADE,
	monthly_limit BIGINT,
	updated_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE message_usage (
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	period TEXT NOT NULL,
	used BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (company_id, period)
);
`}, {
	// A message handed to its transport carries the hand-off until its
	// outcome is recorded: a later attempt that still finds it knows the
	// far side may have the message, and must not blindly send it again.
	ID:  "0019_messages_handoff",
	Was: "0041_messages_handoff",
	SQLite: `
ALTER TABLE messages ADD COLUMN handoffs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN outcome_unknown INTEGER NOT NULL DEFAULT 0;
`,
	Postgres: `
ALTER TABLE messages ADD COLUMN handoffs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN outcome_unknown BOOLEAN NOT NULL DEFAULT FALSE;
`}, {
	// The member who wrote a group message (ContactKey is the group): its
	// events say who that was, and only that member's edits and revokes
	// apply to it (the chat app relays any client's).
	ID:  "0020_messages_sender",
	Was: "0042_messages_sender",
	SQLite: `
ALTER TABLE messages ADD COLUMN sender_key TEXT;
ALTER TABLE messages ADD COLUMN sender_name TEXT;
`,
	Postgres: `
ALTER TABLE messages ADD COLUMN sender_key TEXT;
ALTER TABLE messages ADD COLUMN sender_name TEXT;
`}, {
	// A message's version: bumped by every UPDATE that changes what its
	// event or REST representation shows, in the same statement, and sent
	// with it, so a subscriber can tell the newer state from the older.
	ID:       "0021_messages_version",
	Was:      "0043_messages_version",
	SQLite:   `ALTER TABLE messages ADD COLUMN version INTEGER NOT NULL DEFAULT 1;`,
	Postgres: `ALTER TABLE messages ADD COLUMN version BIGINT NOT NULL DEFAULT 1;`,
}, {
	// A message's file is published with its size, and an official
	// channel's inbound file is fetched after the message is stored: the
	// provider's media id waits in media_pending_id until the fetch job
	// stores the file.
	ID:  "0022_messages_media",
	Was: "0044_messages_media",
	SQLite: `
ALTER TABLE messages ADD COLUMN media_size INTEGER;
ALTER TABLE messages ADD COLUMN media_pending_id TEXT;
`,
	Postgres: `
ALTER TABLE messages ADD COLUMN media_size BIGINT;
ALTER TABLE messages ADD COLUMN media_pending_id TEXT;
`}, {
	// The URLs of message files: one row per URL handed out (an event or an
	// API answer), found by the SHA-256 of its token so the table never
	// holds a usable URL; expired rows are deleted periodically.
	ID:  "0023_media_links",
	Was: "0073_media_links",
	SQLite: `
CREATE TABLE message_media_links (
	token_hash TEXT PRIMARY KEY,
	message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
	expires_at TIMESTAMP NOT NULL
);
CREATE INDEX message_media_links_message ON message_media_links (message_id);
CREATE INDEX message_media_links_expiry ON message_media_links (expires_at);
`,
	Postgres: `
CREATE TABLE message_media_links (
	token_hash TEXT PRIMARY KEY,
	message_id BIGINT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
	expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX message_media_links_message ON message_media_links (message_id);
CREATE INDEX message_media_links_expiry ON message_media_links (expires_at);
`}, {
	// The send queue is the messages table itself (queue.go): a Pending
	// message with send_due_at is due then, in unix milliseconds so both
	// engines compare and index it alike. The partial index holds only the
	// messages waiting to be sent, whatever the size of the table.
	ID:  "0024_messages_send_queue",
	Was: "0074_messages_send_queue",
	SQLite: `
ALTER TABLE messages ADD COLUMN send_due_at INTEGER;
ALTER TABLE messages ADD COLUMN send_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN send_recover INTEGER NOT NULL DEFAULT 0;
CREATE INDEX messages_send_due ON messages (send_due_at) WHERE send_due_at IS NOT NULL;
`,
	Postgres: `
ALTER TABLE messages ADD COLUMN send_due_at BIGINT;
ALTER TABLE messages ADD COLUMN send_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN send_recover BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX messages_send_due ON messages (send_due_at) WHERE send_due_at IS NOT NULL;
`}, {
	// The send queue's claim is fair across senders (queue.go): it finds
	// the senders with queued messages one index probe each, and each
	// sender's due messages as a range, whatever the backlog of one.
	ID:       "0025_messages_send_queue_by_sender",
	Was:      "0076_messages_send_queue_by_sender",
	SQLite:   `CREATE INDEX messages_send_due_by_sender ON messages (company_channel_id, send_due_at) WHERE send_due_at IS NOT NULL;`,
	Postgres: `CREATE INDEX messages_send_due_by_sender ON messages (company_channel_id, send_due_at) WHERE send_due_at IS NOT NULL;`,
}}
