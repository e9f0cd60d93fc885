package channels

import "github.com/chatmsg/gateway/internal/store"

// Migrations create the channel tables.
var Migrations = append([]store.Migration{{
	ID:  "0003_channels",
	Was: "0002_channels",
	SQLite: `
CREATE TABLE provider_accounts (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	business_account_id TEXT NOT NULL,
	phone_number_id TEXT NOT NULL UNIQUE,
	access_token TEXT NOT NULL,
	app_secret TEXT NOT NULL,
	base_url TEXT NOT NULL,
	created_at TIMESTAMP NOT NULL
);
CREATE TABLE company_channels (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	key TEXT NOT NULL,
	name TEXT NOT NULL,
	channel_type_id INTEGER NOT NULL,
	provider_account_id INTEGER REFERENCES provider_accounts(id),
	created_at TIMESTAMP NOT NULL,
	updated_at TIMESTAMP NOT NULL,
	UNIQUE (channel_type_id, key)
);
CREATE INDEX company_channels_company ON company_channels (company_id, id);
`,
	Postgres: `
CREATE TABLE provider_accounts (
	id BIGSERIAL PRIMARY KEY,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	business_account_id TEXT NOT NULL,
	phone_number_id TEXT NOT NULL UNIQUE,
	access_token TEXT NOT NULL,
	app_secret TEXT NOT NULL,
	base_url TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE company_channels (
	id BIGSERIAL PRIMARY KEY,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	key TEXT NOT NULL,
	name TEXT NOT NULL,
	channel_type_id INTEGER NOT NULL,
	provider_account_id BIGINT REFERENCES provider_accounts(id),
	created_at TIMESTAMPTZ NOT NULL,
	updated_at TIMESTAMPTZ NOT NULL,
	UNIQUE (channel_type_id, key)
);
CREATE INDEX company_channels_company ON company_channels (company_id, id);
`}}, unofficialMigrations...)

// unofficialMigrations add what connections need to company_channels.
var unofficialMigrations = []store.Migration{{
	ID:  "0004_channels_unofficial",
	Was: "0070_channels_unofficial",
	SQLite: `
ALTER TABLE company_channels ADD COLUMN logged BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX company_channels_logged ON company_channels (channel_type_id, logged);
`,
	Postgres: `
ALTER TABLE company_channels ADD COLUMN logged BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX company_channels_logged ON company_channels (channel_type_id, logged);
`}, {
	// One number, one channel: a number lives on the chat app or on its
	// official channel, never both, whatever the companies (keys of both
	// types are the canonical digits-only number).
	ID:  "0005_channels_one_number",
	Was: "0071_channels_one_number",
	SQLite: `
CREATE UNIQUE INDEX company_channels_chatapp_number ON company_channels (key) WHERE channel_type_id IN (2, 3);
`,
	Postgres: `
CREATE UNIQUE INDEX company_channels_chatapp_number ON company_channels (key) WHERE channel_type_id IN (2, 3);
`}, {
	// A number is reserved across companies only once ownership is proven:
	// an official channel (the provider registered it) or a paired
	// connection (the phone scanned the code). An unpaired connection holds
	// its number in its own company only, so no company can squat another's
	// number, nor learn whether it is registered (issue 29). The original
	// UNIQUE (channel_type_id, key) becomes unique per company for
	// connections and stays global for every other type. SQLite cannot
	// drop a table constraint: the table is rebuilt (SQLiteRebuild).
	ID:            "0006_channels_proven_numbers",
	Was:           "0076_channels_proven_numbers",
	SQLiteRebuild: true,
	SQLite: `
CREATE TABLE company_channels_new (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	key TEXT NOT NULL,
	name TEXT NOT NULL,
	channel_type_id INTEGER NOT NULL,
	provider_account_id INTEGER REFERENCES provider_accounts(id),
	created_at TIMESTAMP NOT NULL,
	updated_at TIMESTAMP NOT NULL,
	logged BOOLEAN NOT NULL DEFAULT FALSE
);
INSERT INTO company_channels_new (id, company_id, key, name, channel_type_id, provider_account_id, created_at, updated_at, logged)
	SELECT id, company_id, key, name, channel_type_id, provider_account_id, created_at, updated_at, logged FROM company_channels;
INSERT INTO sqlite_sequence (name, seq)
	SELECT 'company_channels_new', seq FROM sqlite_sequence WHERE name = 'company_channels'
	AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'company_channels_new');
UPDATE sqlite_sequence SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'company_channels'), 0))
	WHERE name = 'company_channels_new';
DROP TABLE company_channels;
ALTER TABLE company_channels_new RENAME TO company_channels;
CREATE INDEX company_channels_company ON company_channels (company_id, id);
CREATE INDEX company_channels_logged ON company_channels (channel_type_id, logged);
CREATE UNIQUE INDEX company_channels_type_key ON company_channels (channel_type_id, key) WHERE channel_type_id <> 2;
CREATE UNIQUE INDEX company_channels_connection_number ON company_channels (company_id, key) WHERE channel_type_id = 2;
CREATE UNIQUE INDEX company_channels_chatapp_number ON company_channels (key) WHERE channel_type_id = 3 OR (channel_type_id = 2 AND logged);
`,
	Postgres: `
ALTER TABLE company_channels DROP CONSTRAINT company_channels_channel_type_id_key_key;
DROP INDEX company_channels_chatapp_number;
CREATE UNIQUE INDEX company_channels_type_key ON company_channels (channel_type_id, key) WHERE channel_type_id <> 2;
CREATE UNIQUE INDEX company_channels_connection_number ON company_channels (company_id, key) WHERE channel_type_id = 2;
CREATE UNIQUE INDEX company_channels_chatapp_number ON company_channels (key) WHERE channel_type_id = 3 OR (channel_type_id = 2 AND logged);
`}}
