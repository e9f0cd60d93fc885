package conversations

import "github.com/chatmsg/gateway/internal/store"

// Migrations create the conversation tables.
//
// contact_channels is the conversation. It carries denormalised copies of
// what the listing filters on, so every filter of GET /api/contact-channels
// is a predicate on this one table (plus tag subqueries):
//   - channel_type_id is copied from the company channel at Ensure time: a
//     channel's type never changes, and the type filters (channel_type_id,
//     channelable_type, the official window) then need no call to channels;
//   - the search text is the conversation name and key and the contact name
//     and email, lower-cased and stripped of accents in Go (see normalise),
//     so the text filter is a plain LIKE that behaves the same on both
//     engines; it lives in contact_channel_search, one row per conversation
//     (see 0075 for why not on the conversation's row);
//   - last_inbound_at opens the official 24-hour window (expires_at =
//     last_inbound_at + 24h), so the window filters are ranges on it.
//
// Tags have three kinds (contact, ticket, crm_business) in one table and
// three link tables. businesses is the minimum of the CRM this service needs
// for the crmBusinessTags filter: a business belongs to a contact (and may
// record the conversation it came from) and carries tags; the CRM itself
// lives outside this service. business_tags repeats the business's contact
// so the filter is one index-only scan (tag -> contacts) with no join.
//
// On PostgreSQL a trigram index serves the text filter when the pg_trgm
// extension can be installed (it is a trusted extension since PostgreSQL 13);
// it goes into the public schema so that every schema of the database (tests
// use one per test) shares one installation. Without it the filter is still
// correct, only slower.
var Migrations = []store.Migration{{
	ID:  "0009_conversations",
	Was: "0030_conversations",
	SQLite: `
CREATE TABLE sectors (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	created_at TIMESTAMP NOT NULL,
	UNIQUE (company_id, name)
);
CREATE TABLE contacts (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	identity TEXT NOT NULL,
	name TEXT NOT NULL,
	email TEXT,
	phone TEXT,
	created_at TIMESTAMP NOT NULL,
	updated_at TIMESTAMP NOT NULL,
	UNIQUE (company_id, identity)
);
CREATE TABLE contact_channels (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	contact_id INTEGER NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
	company_channel_id INTEGER NOT NULL REFERENCES company_channels(id) ON DELETE CASCADE,
	channel_type_id INTEGER NOT NULL,
	key TEXT NOT NULL,
	name TEXT NOT NULL,
	is_group BOOLEAN NOT NULL DEFAULT 0,
	status_id INTEGER NOT NULL,
	origin_id INTEGER NOT NULL,
	sector_id INTEGER REFERENCES sectors(id) ON DELETE SET NULL,
	user_id INTEGER REFERENCES users(id) ON DELETE SET NULL,
	unread_count INTEGER NOT NULL DEFAULT 0,
	last_message_at TIMESTAMP,
	last_inbound_at TIMESTAMP,
	first_response_at TIMESTAMP,
	muted BOOLEAN NOT NULL DEFAULT 0,
	pinned BOOLEAN NOT NULL DEFAULT 0,
	opened BOOLEAN NOT NULL DEFAULT 0,
	search_text TEXT NOT NULL,
	created_at TIMESTAMP NOT NULL,
	updated_at TIMESTAMP NOT NULL,
	UNIQUE (company_channel_id, is_group, key)
);
CREATE INDEX contact_channels_company_status ON contact_channels (company_id, status_id, id);
CREATE INDEX contact_channels_company_last_message ON contact_channels (company_id, last_message_at, id);
CREATE INDEX contact_channels_company_window ON contact_channels (company_id, channel_type_id, last_inbound_at);
CREATE INDEX contact_channels_company_user ON contact_channels (company_id, user_id);
CREATE INDEX contact_channels_company_sector ON contact_channels (company_id, sector_id);
CREATE INDEX contact_channels_contact ON contact_channels (contact_id, company_id, status_id);
CREATE TABLE tags (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	kind TEXT NOT NULL,
	name TEXT NOT NULL,
	created_at TIMESTAMP NOT NULL,
	UNIQUE (company_id, kind, name)
);
CREATE TABLE contact_tags (
	contact_id INTEGER NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
	tag_id INTEGER NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
	PRIMARY KEY (contact_id, tag_id)
);
CREATE INDEX contact_tags_tag ON contact_tags (tag_id, contact_id);
CREATE TABLE contact_channel_tags (
	contact_channel_id INTEGER NOT NULL REFERENCES contact_channels(id) ON DELETE CASCADE,
	tag_id INTEGER NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
	PRIMARY KEY (contact_channel_id, tag_id)
);
CREATE INDEX contact_channel_tags_tag ON contact_channel_tags (tag_id, contact_channel_id);
CREATE TABLE businesses (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	contact_id INTEGER NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
	contact_channel_id INTEGER REFERENCES contact_channels(id) ON DELETE SET NULL,
	title TEXT NOT NULL,
	created_at TIMESTAMP NOT NULL
);
CREATE INDEX businesses_contact ON businesses (contact_id);
CREATE TABLE business_tags (
	business_id INTEGER NOT NULL REFERENCES businesses(id) ON DELETE CASCADE,
	tag_id INTEGER NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
	contact_id INTEGER NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
	PRIMARY KEY (business_id, tag_id)
);
CREATE INDEX business_tags_tag ON business_tags (tag_id, contact_id);
CREATE INDEX business_tags_contact ON business_tags (contact_id);
`,
	Postgres: `
CREATE TABLE sectors (
	id BIGSERIAL PRIMARY KEY,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	UNIQUE (company_id, name)
);
CREATE TABLE contacts (
	id BIGSERIAL PRIMARY KEY,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	identity TEXT NOT NULL,
	name TEXT NOT NULL,
	email TEXT,
	phone TEXT,
	created_at TIMESTAMPTZ NOT NULL,
	updated_at TIMESTAMPTZ NOT NULL,
	UNIQUE (company_id, identity)
);
CREATE TABLE contact_channels (
	id BIGSERIAL PRIMARY KEY,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	contact_id BIGINT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
	company_channel_id BIGINT NOT NULL REFERENCES company_channels(id) ON DELETE CASCADE,
	channel_type_id SMALLINT NOT NULL,
	key TEXT NOT NULL,
	name TEXT NOT NULL,
	is_group BOOLEAN NOT NULL DEFAULT FALSE,
	status_id SMALLINT NOT NULL,
	origin_id SMALLINT NOT NULL,
	sector_id BIGINT REFERENCES sectors(id) ON DELETE SET NULL,
	user_id BIGINT REFERENCES users(id) ON DELETE SET NULL,
	unread_count INTEGER NOT NULL DEFAULT 0,
	last_message_at TIMESTAMPTZ,
	last_inbound_at TIMESTAMPTZ,
	first_response_at TIMESTAMPTZ,
	muted BOOLEAN NOT NULL DEFAULT FALSE,
	pinned BOOLEAN NOT NULL DEFAULT FALSE,
	opened BOOLEAN NOT NULL DEFAULT FALSE,
	search_text TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	updated_at TIMESTAMPTZ NOT NULL,
	UNIQUE (company_channel_id, is_group, key)
);
CREATE INDEX contact_channels_company_status ON contact_channels (company_id, status_id, id);
CREATE INDEX contact_channels_company_last_message ON contact_channels (company_id, last_message_at NULLS FIRST, id);
CREATE INDEX contact_channels_company_window ON contact_channels (company_id, channel_type_id, last_inbound_at);
CREATE INDEX contact_channels_company_user ON contact_channels (company_id, user_id);
CREATE INDEX contact_channels_company_sector ON contact_channels (company_id, sector_id);
CREATE INDEX contact_channels_contact ON contact_channels (contact_id, company_id, status_id);
CREATE TABLE tags (
	id BIGSERIAL PRIMARY KEY,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	kind TEXT NOT NULL,
	name TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	UNIQUE (company_id, kind, name)
);
CREATE TABLE contact_tags (
	contact_id BIGINT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
	tag_id BIGINT NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
	PRIMARY KEY (contact_id, tag_id)
);
CREATE INDEX contact_tags_tag ON contact_tags (tag_id, contact_id);
CREATE TABLE contact_channel_tags (
	contact_channel_id BIGINT NOT NULL REFERENCES contact_channels(id) ON DELETE CASCADE,
	tag_id BIGINT NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
	PRIMARY KEY (contact_channel_id, tag_id)
);
CREATE INDEX contact_channel_tags_tag ON contact_channel_tags (tag_id, contact_channel_id);
CREATE TABLE businesses (
	id BIGSERIAL PRIMARY KEY,
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	contact_id BIGINT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
	contact_channel_id BIGINT REFERENCES contact_channels(id) ON DELETE SET NULL,
	title TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX businesses_contact ON businesses (contact_id);
CREATE TABLE business_tags (
	business_id BIGINT NOT NULL REFERENCES businesses(id) ON DELETE CASCADE,
	tag_id BIGINT NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
	contact_id BIGINT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
	PRIMARY KEY (business_id, tag_id)
);
CREATE INDEX business_tags_tag ON business_tags (tag_id, contact_id);
CREATE INDEX business_tags_contact ON business_tags (contact_id);
DO $$ DECLARE s text; BEGIN
  BEGIN CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public; EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'pg_trgm unavailable: %', SQLERRM; END
  ; SELECT n.nspname INTO s FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'
  ; IF s IS NOT NULL THEN EXECUTE format('CREATE INDEX contact_channels_search_trgm ON contact_channels USING gin (search_text %I.gin_trgm_ops)', s); END IF
  ; END $$;
`}, {
	// A conversation's version: bumped by every UPDATE of its row, sent in
	// its events and REST representation, so a subscriber orders what it
	// receives (an event older than the state it holds is skipped).
	ID:       "0010_conversations_version",
	Was:      "0031_conversations_version",
	SQLite:   `ALTER TABLE contact_channels ADD COLUMN version INTEGER NOT NULL DEFAULT 1;`,
	Postgres: `ALTER TABLE contact_channels ADD COLUMN version BIGINT NOT NULL DEFAULT 1;`,
}, {
	// The search text leaves the conversation row for a table of its own.
	// Every message updates its conversation (last_message_at, which an
	// index orders the inbox by), and an UPDATE that changes an indexed
	// column writes a new entry into every index of the row: with the
	// trigram index on the row that was dozens of GIN entries per message,
	// the costliest statement of a send. The text changes only when a
	// name, key or e-mail does, so here its index is written that rarely.
	ID:  "0011_conversations_search",
	Was: "0075_conversations_search",
	SQLite: `
CREATE TABLE contact_channel_search (
	contact_channel_id INTEGER PRIMARY KEY REFERENCES contact_channels(id) ON DELETE CASCADE,
	company_id INTEGER NOT NULL,
	search_text TEXT NOT NULL
);
INSERT INTO contact_channel_search (contact_channel_id, company_id, search_text) SELECT id, company_id, search_text FROM contact_channels;
ALTER TABLE contact_channels DROP COLUMN search_text;
CREATE INDEX contact_channel_search_company ON contact_channel_search (company_id);
`,
	Postgres: `
CREATE TABLE contact_channel_search (
	contact_channel_id BIGINT PRIMARY KEY REFERENCES contact_channels(id) ON DELETE CASCADE,
	company_id BIGINT NOT NULL,
	search_text TEXT NOT NULL
);
INSERT INTO contact_channel_search (contact_channel_id, company_id, search_text) SELECT id, company_id, search_text FROM contact_channels;
DROP INDEX IF EXISTS contact_channels_search_trgm;
ALTER TABLE contact_channels DROP COLUMN search_text;
CREATE INDEX contact_channel_search_company ON contact_channel_search (company_id);
DO $$ DECLARE s text; BEGIN
  SELECT n.nspname INTO s FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'
  ; IF s IS NOT NULL THEN EXECUTE format('CREATE INDEX contact_channel_search_trgm ON contact_channel_search USING gin (search_text %I.gin_trgm_ops)', s); END IF
  ; END $$;
`,
}, {
	// Counts kept per (company, status), so a listing's total is a sum of a
	// few rows instead of a count of the company's conversations. Database
	// triggers keep them in the statement of every change, whichever code
	// path writes the conversation (Ensure, the PATCH, an inbound message
	// that reopens one, the send's one statement in messaging, a company's
	// cascade delete). Each (company, status) is split over 16 slots, the
	// conversation id modulo 16, so concurrent first messages of one company
	// (each creates a conversation and so bumps a count) mostly lock
	// different rows; a reader sums at most 7 × 16 rows.
	//
	// On PostgreSQL inserts and deletes are counted per statement from the
	// transition table (a bulk insert is one grouped upsert, its locks taken
	// in key order); a move between statuses or companies is a row trigger
	// that fires only when status_id or company_id is in the UPDATE and
	// changed, so a message's UPDATE of its conversation never runs it. A
	// delete only decrements: the row exists since the conversation was
	// counted, and a company's cascade may have removed its counts first.
	// The triggers are created before the backfill and CREATE TRIGGER locks
	// contact_channels against writes until the migration commits, so no
	// change falls between the two.
	ID:  "0012_conversations_counts",
	Was: "0076_conversations_counts",
	SQLite: `
CREATE TABLE contact_channel_counts (
	company_id INTEGER NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	status_id INTEGER NOT NULL,
	slot INTEGER NOT NULL,
	n INTEGER NOT NULL,
	PRIMARY KEY (company_id, status_id, slot)
);
CREATE TRIGGER contact_channel_counts_insert AFTER INSERT ON contact_channels BEGIN
	INSERT INTO contact_channel_counts (company_id, status_id, slot, n) VALUES (NEW.company_id, NEW.status_id, NEW.id % 16, 1)
		ON CONFLICT (company_id, status_id, slot) DO UPDATE SET n = n + 1
	; END;
CREATE TRIGGER contact_channel_counts_delete AFTER DELETE ON contact_channels BEGIN
	UPDATE contact_channel_counts SET n = n - 1 WHERE company_id = OLD.company_id AND status_id = OLD.status_id AND slot = OLD.id % 16
	; END;
CREATE TRIGGER contact_channel_counts_move AFTER UPDATE OF company_id, status_id ON contact_channels
	WHEN OLD.company_id <> NEW.company_id OR OLD.status_id <> NEW.status_id BEGIN
	UPDATE contact_channel_counts SET n = n - 1 WHERE company_id = OLD.company_id AND status_id = OLD.status_id AND slot = OLD.id % 16
	; INSERT INTO contact_channel_counts (company_id, status_id, slot, n) VALUES (NEW.company_id, NEW.status_id, NEW.id % 16, 1)
		ON CONFLICT (company_id, status_id, slot) DO UPDATE SET n = n + 1
	; END;
INSERT INTO contact_channel_counts (company_id, status_id, slot, n)
	SELECT company_id, status_id, id % 16, count(*) FROM contact_channels GROUP BY company_id, status_id, id % 16;
`,
	Postgres: `
CREATE TABLE contact_channel_counts (
	company_id BIGINT NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
	status_id SMALLINT NOT NULL,
	slot SMALLINT NOT NULL,
	n BIGINT NOT NULL,
	PRIMARY KEY (company_id, status_id, slot)
);
CREATE FUNCTION contact_channel_counts_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	INSERT INTO contact_channel_counts AS c (company_id, status_id, slot, n)
		SELECT company_id, status_id, id % 16, count(*) FROM contact_channel_counts_new GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
		ON CONFLICT (company_id, status_id, slot) DO UPDATE SET n = c.n + EXCLUDED.n
	; RETURN NULL
	; END $$;
CREATE TRIGGER contact_channel_counts_insert AFTER INSERT ON contact_channels
	REFERENCING NEW TABLE AS contact_channel_counts_new FOR EACH STATEMENT EXECUTE FUNCTION contact_channel_counts_insert();
CREATE FUNCTION contact_channel_counts_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	UPDATE contact_channel_counts AS c SET n = c.n - d.n
		FROM (SELECT company_id, status_id, id % 16 AS slot, count(*) AS n FROM contact_channel_counts_old GROUP BY 1, 2, 3) d
		WHERE c.company_id = d.company_id AND c.status_id = d.status_id AND c.slot = d.slot
	; RETURN NULL
	; END $$;
CREATE TRIGGER contact_channel_counts_delete AFTER DELETE ON contact_channels
	REFERENCING OLD TABLE AS contact_channel_counts_old FOR EACH STATEMENT EXECUTE FUNCTION contact_channel_counts_delete();
CREATE FUNCTION contact_channel_counts_move() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
	INSERT INTO contact_channel_counts AS c (company_id, status_id, slot, n)
		SELECT * FROM (VALUES (OLD.company_id, OLD.status_id, OLD.id % 16, -1), (NEW.company_id, NEW.status_id, NEW.id % 16, 1)) v (company_id, status_id, slot, n)
		ORDER BY 1, 2, 3
		ON CONFLICT (company_id, status_id, slot) DO UPDATE SET n = c.n + EXCLUDED.n
	; RETURN NULL
	; END $$;
CREATE TRIGGER contact_channel_counts_move AFTER UPDATE OF company_id, status_id ON contact_channels FOR EACH ROW
	WHEN (OLD.company_id <> NEW.company_id OR OLD.status_id <> NEW.status_id) EXECUTE FUNCTION contact_channel_counts_move();
INSERT INTO contact_channel_counts (company_id, status_id, slot, n)
	SELECT company_id, status_id, id % 16, count(*) FROM contact_channels GROUP BY 1, 2, 3;
`,
}, {
	// The status listings ordered by last message read one ordered range
	// per status (see listing.go's statusOrdered): the key is the one of
	// contact_channels_company_last_message with the status after the
	// company.
	ID:       "0013_conversations_status_last_message",
	Was:      "0077_conversations_status_last_message",
	SQLite:   `CREATE INDEX contact_channels_company_status_last_message ON contact_channels (company_id, status_id, last_message_at, id);`,
	Postgres: `CREATE INDEX contact_channels_company_status_last_message ON contact_channels (company_id, status_id, last_message_at NULLS FIRST, id);`,
}}
