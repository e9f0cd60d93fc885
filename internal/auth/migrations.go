package auth

import "github.com/chatmsg/gateway/internal/store"

// Migrations create the auth tables.
var Migrations = []store.Migration{{
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
`}}
