package channels

import "github.com/chatmsg/gateway/internal/store"

// Migrations create the channel tables.
var Migrations = []store.Migration{{
	ID: "0002_channels",
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
`}}
