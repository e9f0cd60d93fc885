package templates

import "github.com/chatmsg/gateway/internal/store"

// Migrations create the template store, the sync bookkeeping and the
// uploaded media.
var Migrations = []store.Migration{{
	ID:  "0026_templates",
	Was: "0050_templates",
	SQLite: `
CREATE TABLE provider_templates (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	provider_account_id INTEGER NOT NULL REFERENCES provider_accounts(id) ON DELETE CASCADE,
	external_id TEXT NOT NULL,
	name TEXT NOT NULL,
	language TEXT NOT NULL,
	category TEXT NOT NULL,
	status TEXT NOT NULL,
	parameter_format TEXT NOT NULL,
	has_buttons INTEGER NOT NULL,
	header_format TEXT NOT NULL,
	header_media_url TEXT NOT NULL,
	components TEXT NOT NULL,
	synced_at TIMESTAMP NOT NULL,
	created_at TIMESTAMP NOT NULL,
	updated_at TIMESTAMP NOT NULL,
	UNIQUE (provider_account_id, name, language)
);
CREATE TABLE template_sync_state (
	provider_account_id INTEGER PRIMARY KEY REFERENCES provider_accounts(id) ON DELETE CASCADE,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	company_channel_id INTEGER NOT NULL REFERENCES company_channels(id) ON DELETE CASCADE,
	synced_at TIMESTAMP,
	last_error TEXT
);
CREATE TABLE template_media (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	token TEXT NOT NULL UNIQUE,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	provider_account_id INTEGER NOT NULL REFERENCES provider_accounts(id) ON DELETE CASCADE,
	file_name TEXT NOT NULL,
	content_type TEXT NOT NULL,
	size_bytes INTEGER NOT NULL,
	path TEXT NOT NULL,
	created_at TIMESTAMP NOT NULL,
	expires_at TIMESTAMP NOT NULL,
	used_at TIMESTAMP,
	deleted_at TIMESTAMP
);
CREATE INDEX template_media_expiry ON template_media (expires_at) WHERE used_at IS NULL AND deleted_at IS NULL;
`,
	Postgres: `
CREATE TABLE provider_templates (
	id BIGSERIAL PRIMARY KEY,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	provider_account_id BIGINT NOT NULL REFERENCES provider_accounts(id) ON DELETE CASCADE,
	external_id TEXT NOT NULL,
	name TEXT NOT NULL,
	language TEXT NOT NULL,
	category TEXT NOT NULL,
	status TEXT NOT NULL,
	parameter_format TEXT NOT NULL,
	has_buttons BOOLEAN NOT NULL,
	header_format TEXT NOT NULL,
	header_media_url TEXT NOT NULL,
	components TEXT NOT NULL,
	synced_at TIMESTAMPTZ NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	updated_at TIMESTAMPTZ NOT NULL,
	UNIQUE (provider_account_id, name, language)
);
CREATE TABLE template_sync_state (
	provider_account_id BIGINT PRIMARY KEY REFERENCES provider_accounts(id) ON DELETE CASCADE,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	company_channel_id BIGINT NOT NULL REFERENCES company_channels(id) ON DELETE CASCADE,
	synced_at TIMESTAMPTZ,
	last_error TEXT
);
CREATE TABLE template_media (
	id BIGSERIAL PRIMARY KEY,
	token TEXT NOT NULL UNIQUE,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	provider_account_id BIGINT NOT NULL REFERENCES provider_accounts(id) ON DELETE CASCADE,
	file_name TEXT NOT NULL,
	content_type TEXT NOT NULL,
	size_bytes BIGINT NOT NULL,
	path TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	expires_at TIMESTAMPTZ NOT NULL,
	used_at TIMESTAMPTZ,
	deleted_at TIMESTAMPTZ
);
CREATE INDEX template_media_expiry ON template_media (expires_at) WHERE used_at IS NULL AND deleted_at IS NULL;
`}}
