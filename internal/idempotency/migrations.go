package idempotency

import "github.com/chatmsg/gateway/internal/store"

// Migrations create the table of remembered answers. A row is claimed
// (status NULL) by the request that does the work and completed with its
// answer; the primary key is what makes concurrent duplicates, on any
// replica, wait for the first instead of doing the work again.
var Migrations = []store.Migration{{
	ID:  "0027_idempotency",
	Was: "0001_idempotency",
	SQLite: `
CREATE TABLE idempotency_keys (
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	idem_key TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	owner TEXT NOT NULL,
	status INTEGER,
	header TEXT,
	body BLOB,
	claimed_at TIMESTAMP NOT NULL,
	expires_at TIMESTAMP NOT NULL,
	PRIMARY KEY (company_id, idem_key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
`,
	Postgres: `
CREATE TABLE idempotency_keys (
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	idem_key TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	owner TEXT NOT NULL,
	status INTEGER,
	header TEXT,
	body BYTEA,
	claimed_at TIMESTAMPTZ NOT NULL,
	expires_at TIMESTAMPTZ NOT NULL,
	PRIMARY KEY (company_id, idem_key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
`}}
