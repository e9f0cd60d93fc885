package auth

import "github.com/chatmsg/gateway/internal/store"

// Migrations create the auth tables.
var Migrations = append([]store.Migration{{
	ID: "0001_auth",
	SQLite: `
CREATE TABLE companies (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	name TEXT NOT NULL,
	created_at TIMESTAMP NOT NULL
);
CREATE TABLE users (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	email TEXT NOT NULL,
	created_at TIMESTAMP NOT NULL,
	UNIQUE (company_id, email)
);
CREATE TABLE access_tokens (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	token_hash TEXT NOT NULL UNIQUE,
	permissions TEXT NOT NULL,
	expires_at TIMESTAMP,
	revoked_at TIMESTAMP,
	created_at TIMESTAMP NOT NULL
);
CREATE INDEX access_tokens_company ON access_tokens (company_id);
`,
	Postgres: `
CREATE TABLE companies (
	id BIGSERIAL PRIMARY KEY,
	name TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE users (
	id BIGSERIAL PRIMARY KEY,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	email TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	UNIQUE (company_id, email)
);
CREATE TABLE access_tokens (
	id BIGSERIAL PRIMARY KEY,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	token_hash TEXT NOT NULL UNIQUE,
	permissions TEXT NOT NULL,
	expires_at TIMESTAMPTZ,
	revoked_at TIMESTAMPTZ,
	created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX access_tokens_company ON access_tokens (company_id);
`}}, permissionMigrations...)

// permissionMigrations give tokens issued before every operation had a
// permission exactly what they could do then: the operations that needed
// none (connections, sends, edits, conversations, company channels) and the
// upload, which needed the template-view permission. Permissions a token
// lacked (webhooks, templates, events) stay lacking: no token gains rights.
var permissionMigrations = []store.Migration{{
	ID:       "0002_auth_operation_permissions",
	SQLite:   grantLegacyPermissions,
	Postgres: grantLegacyPermissions,
}}

// grantLegacyPermissions is plain SQL both dialects accept (|| concatenates
// text in SQLite and PostgreSQL alike).
const grantLegacyPermissions = `
UPDATE access_tokens SET permissions = permissions || ',provider_templates_upload'
	WHERE ',' || permissions || ',' LIKE '%,provider_templates_view,%';
UPDATE access_tokens SET permissions = CASE WHEN permissions = '' THEN '' ELSE permissions || ',' END
	|| 'connections_view,connections_manage,messages_send,messages_manage,conversations_view,conversations_update,company_channels_view';
`
