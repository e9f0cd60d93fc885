package filestore

import "github.com/chatmsg/gateway/internal/store"

// Migrations create the database backend's tables on both engines (they
// stay empty unless the database backend is used). Chunks are stored
// uncompressed on PostgreSQL (STORAGE EXTERNAL): media are compressed
// already, and TOAST's compression would only cost CPU.
var Migrations = []store.Migration{{
	ID:  "0028_filestore",
	Was: "20261127_filestore",
	SQLite: `
CREATE TABLE file_objects (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	file_key TEXT NOT NULL UNIQUE,
	size INTEGER NOT NULL,
	content_type TEXT NOT NULL,
	created_at TIMESTAMP NOT NULL
);
CREATE TABLE file_chunks (
	object_id INTEGER NOT NULL REFERENCES file_objects (id) ON DELETE CASCADE,
	seq INTEGER NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY (object_id, seq)
);
`,
	Postgres: `
CREATE TABLE file_objects (
	id BIGSERIAL PRIMARY KEY,
	file_key TEXT NOT NULL UNIQUE,
	size BIGINT NOT NULL,
	content_type TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE file_chunks (
	object_id BIGINT NOT NULL REFERENCES file_objects (id) ON DELETE CASCADE,
	seq INTEGER NOT NULL,
	data BYTEA NOT NULL,
	PRIMARY KEY (object_id, seq)
);
ALTER TABLE file_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
`,
}}
