package conversations_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// loadShape is the data set of the listing benchmark: one company with
// Conversations conversations (one per contact) spread over five channels,
// the statuses, assignments, sectors and tags a busy support team has.
//
// The data set also has 1,000,000 messages. The messages table
// belongs to messaging and the listing never reads it: it reads only the
// columns messages maintain here through RecordMessage (last_message_at,
// last_inbound_at, unread_count, first_response_at), so the seed writes
// those with the distribution such a history produces instead of
// inserting the messages.
type loadShape struct {
	Conversations int
	Users         int
	Sectors       int
	Tags          int // per kind
}

// seedLoad fills a PostgreSQL database (migrated) for the benchmark with
// set-based INSERT … SELECT generate_series statements: 100,000
// conversations take a few seconds. It returns the company and the tag
// ids per kind. last_message_at follows activity that decays with age:
// age = 180 days × u³ (u uniform), so about half of the conversations
// talked in the last 3 days and a long tail is months old; messages per
// conversation follow the same skew (recent ones hold more of them).
func seedLoad(ctx context.Context, tb testing.TB, db *store.DB, now time.Time, s loadShape) (companyID int64, tags map[conversations.TagKind][]int64) {
	tb.Helper()
	clk := func() time.Time { return now }
	a := auth.NewService(db, clk)
	companyID, err := a.CreateCompany(ctx, "Load")
	if err != nil {
		tb.Fatal(err)
	}
	exec := func(q string, args ...any) {
		tb.Helper()
		if _, err := db.Bun.ExecContext(ctx, q, args...); err != nil {
			tb.Fatalf("seed: %v\n%s", err, q)
		}
	}
	exec(`INSERT INTO users (company_id, name, email, created_at) SELECT ?, 'Attendant ' || g, 'a' || g || '@load.test', ? FROM generate_series(1, ?) g`, companyID, now, s.Users)
	exec(`INSERT INTO sectors (company_id, name, created_at) SELECT ?, 'Sector ' || g, ? FROM generate_series(1, ?) g`, companyID, now, s.Sectors)
	for _, k := range []conversations.TagKind{conversations.ContactTag, conversations.TicketTag, conversations.BusinessTag} {
		exec(`INSERT INTO tags (company_id, kind, name, created_at) SELECT ?, ?, ? || ' ' || g, ? FROM generate_series(1, ?) g`, companyID, string(k), string(k), now, s.Tags)
	}
	ch := channels.NewService(db, clk)
	off, err := ch.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: companyID, Name: "Official", Key: "5511900000001",
		BusinessAccountID: "waba", PhoneNumberID: "pn-load", AccessToken: "t", AppSecret: "s", BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		tb.Fatal(err)
	}
	chans := []int64{off.ID,
		insertChannel(tb, db, companyID, channels.UnofficialChatapp, "5511900000002"),
		insertChannel(tb, db, companyID, channels.UnofficialChatapp, "5511900000003"),
		insertChannel(tb, db, companyID, channels.SocialMessenger, "page-load"),
		insertChannel(tb, db, companyID, channels.EmbeddedChat, "site-load"),
	}
	// Names: first and last names, some accented; the search text holds
	// the normalised form (what normalise() computes), as Ensure writes it.
	first := `ARRAY['Ana','João','Maria','José','Carla','Bruno','Fernanda','Luís','Beatriz','Mateus','Júlia','Rafael','Camila','Thiago','Letícia','Gabriel','Larissa','Lucas','Patrícia','André']`
	firstN := `ARRAY['ana','joao','maria','jose','carla','bruno','fernanda','luis','beatriz','mateus','julia','rafael','camila','thiago','leticia','gabriel','larissa','lucas','patricia','andre']`
	last := `ARRAY['Silva','Souza','Oliveira','Santos','Pereira','Costa','Rodrigues','Almeida','Nascimento','Lima','Araújo','Fernandes','Carvalho','Gomes','Martins','Rocha','Ribeiro','Alves','Monteiro','Mendes']`
	lastN := `ARRAY['silva','souza','oliveira','santos','pereira','costa','rodrigues','almeida','nascimento','lima','araujo','fernandes','carvalho','gomes','martins','rocha','ribeiro','alves','monteiro','mendes']`
	exec(`INSERT INTO contacts (company_id, identity, name, email, phone, created_at, updated_at)
		SELECT ?, 'phone:55119' || lpad(g::text, 8, '0'),
			(`+first+`)[1 + g % 20] || ' ' || (`+last+`)[1 + (g / 20) % 20] || ' ' || g,
			CASE WHEN g % 3 = 0 THEN 'c' || g || '@mail.test' END, '55119' || lpad(g::text, 8, '0'), ?, ?
		FROM generate_series(1, ?) g`, companyID, now, now, s.Conversations)
	// One conversation per contact. u = a per-row pseudo-random number
	// (hash of the row number, stable across runs).
	exec(`WITH src AS (
			SELECT c.id AS contact_id, c.name, c.email, c.phone, g,
				(abs(hashtext('u' || g)) % 1000000) / 1000000.0 AS u,
				(abs(hashtext('v' || g)) % 1000000) / 1000000.0 AS v,
				(abs(hashtext('w' || g)) % 1000) AS w
			FROM contacts c JOIN LATERAL (SELECT substr(c.identity, 12)::int AS g) n ON true
			WHERE c.company_id = ?
		)
		INSERT INTO contact_channels (company_id, contact_id, company_channel_id, channel_type_id, key, name, is_group,
			status_id, origin_id, sector_id, user_id, unread_count, last_message_at, last_inbound_at, first_response_at,
			muted, pinned, opened, created_at, updated_at)
		SELECT ?, contact_id, (ARRAY[?, ?, ?, ?, ?]::bigint[])[ch], (ARRAY[3, 2, 2, 5, 1])[ch], phone, name, w < 20,
			CASE WHEN w < 300 THEN 1 WHEN w < 400 THEN 2 WHEN w < 600 THEN 3 WHEN w < 900 THEN 4 WHEN w < 950 THEN 5 WHEN w < 980 THEN 6 ELSE 7 END,
			1 + w % 4,
			CASE WHEN w % 5 <> 0 THEN (SELECT min(id) FROM sectors WHERE company_id = ?) + w % ? END,
			CASE WHEN w % 10 < 7 THEN (SELECT min(id) FROM users WHERE company_id = ?) + w % ? END,
			CASE WHEN v < 0.3 THEN 1 + (w % 5) ELSE 0 END,
			last_at,
			CASE WHEN w % 10 <> 9 THEN last_at - (v * interval '2 hours') END,
			CASE WHEN w % 4 <> 0 THEN last_at - (v * interval '1 hour') END,
			w % 17 = 0, w % 23 = 0, w % 29 = 0,
			last_at - interval '30 days' * v, last_at
		FROM (SELECT *, CASE WHEN g % 10 < 5 THEN 1 WHEN g % 10 < 7 THEN 2 WHEN g % 10 < 8 THEN 3 WHEN g % 10 < 9 THEN 4 ELSE 5 END AS ch,
			?::timestamptz - interval '180 days' * (u * u * u) AS last_at FROM src) x`,
		companyID, companyID, chans[0], chans[1], chans[2], chans[3], chans[4], companyID, s.Sectors, companyID, s.Users, now)
	exec(`INSERT INTO contact_channel_search (contact_channel_id, company_id, search_text)
		SELECT cc.id, cc.company_id,
			(`+firstN+`)[1 + g % 20] || ' ' || (`+lastN+`)[1 + (g / 20) % 20] || ' ' || g || chr(31) || c.phone || chr(31) ||
				(`+firstN+`)[1 + g % 20] || ' ' || (`+lastN+`)[1 + (g / 20) % 20] || ' ' || g || coalesce(chr(31) || c.email, '')
		FROM contact_channels cc JOIN contacts c ON c.id = cc.contact_id JOIN LATERAL (SELECT substr(c.identity, 12)::int AS g) n ON true
		WHERE cc.company_id = ?`, companyID)
	// Tags: 0-3 contact tags per contact, 0-2 ticket tags per conversation,
	// a business for one contact in five with 1-2 business tags.
	exec(`INSERT INTO contact_tags (contact_id, tag_id)
		SELECT DISTINCT c.id, t.min + (abs(hashtext(c.id::text || '-' || k)) % ?)
		FROM contacts c, generate_series(1, 3) k, (SELECT min(id) FROM tags WHERE company_id = ? AND kind = 'contact') t
		WHERE c.company_id = ? AND abs(hashtext('ct' || c.id || k)) % 2 = 0`, s.Tags, companyID, companyID)
	exec(`INSERT INTO contact_channel_tags (contact_channel_id, tag_id)
		SELECT DISTINCT cc.id, t.min + (abs(hashtext(cc.id::text || '+' || k)) % ?)
		FROM contact_channels cc, generate_series(1, 2) k, (SELECT min(id) FROM tags WHERE company_id = ? AND kind = 'ticket') t
		WHERE cc.company_id = ? AND abs(hashtext('tt' || cc.id || k)) % 2 = 0`, s.Tags, companyID, companyID)
	exec(`INSERT INTO businesses (company_id, contact_id, title, created_at)
		SELECT ?, id, 'Deal ' || id, ? FROM contacts WHERE company_id = ? AND id % 5 = 0`, companyID, now, companyID)
	exec(`INSERT INTO business_tags (business_id, tag_id, contact_id)
		SELECT DISTINCT b.id, t.min + (abs(hashtext(b.id::text || '*' || k)) % ?), b.contact_id
		FROM businesses b, generate_series(1, 2) k, (SELECT min(id) FROM tags WHERE company_id = ? AND kind = 'crm_business') t
		WHERE b.company_id = ?`, s.Tags, companyID, companyID)
	// Steady state: autovacuum has set the visibility map (index-only
	// scans for the counts) and statistics exist.
	for _, table := range []string{"contacts", "contact_channels", "contact_channel_search", "contact_channel_counts", "tags", "contact_tags", "contact_channel_tags", "businesses", "business_tags"} {
		exec("VACUUM ANALYZE " + table)
	}

	return companyID, seededTags(ctx, tb, db, companyID)
}

// benchShape is the benchmark's data set.
var benchShape = loadShape{Conversations: 100_000, Users: 50, Sectors: 10, Tags: 20}

// BenchmarkListContactChannels measures the common listings on PostgreSQL
// with 100,000 conversations of one company (the effect of 1,000,000
// messages on them, see loadShape) and reports p50 and p99 per query.
// Run: TEST_DATABASE_URL=… go test -run '^$' -bench ListContactChannels ./internal/conversations/
// With CONVERSATIONS_SEED_SCHEMA=<schema> it runs against that schema, as
// TestSeedLoadSchema left it (any size), instead of seeding a new one.
func BenchmarkListContactChannels(b *testing.B) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var db *store.DB
	var companyID int64
	var tags map[conversations.TagKind][]int64
	if schema := os.Getenv("CONVERSATIONS_SEED_SCHEMA"); schema != "" {
		db, companyID, tags = openSeeded(ctx, b, schema)
	} else {
		db = storetest.Postgres(b)
		if err := db.Migrate(ctx, slices.Concat(auth.Migrations, channels.Migrations, conversations.Migrations)); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		companyID, tags = seedLoad(ctx, b, db, now, benchShape)
		b.Logf("seeded in %s", time.Since(start).Round(time.Millisecond))
	}
	svc := conversations.NewService(db, func() time.Time { return now }, clock.NewFormatter(nil), auth.NewService(db, nil), channels.NewService(db, nil), &recorder{})
	page := store.Page{Number: 1, PerPage: 20}
	eight := 60
	tenHours := 600
	cases := []struct {
		name string
		f    conversations.ListFilter
	}{
		{"default", conversations.ListFilter{Page: page}},
		{"default_by_last_message", conversations.ListFilter{Page: page, OrderBy: "last_message_at"}},
		{"status_resolved_by_last_message", conversations.ListFilter{Page: page, OrderBy: "last_message_at", StatusIDs: []conversations.StatusID{conversations.StatusResolved}}},
		{"statuses_spam_banned", conversations.ListFilter{Page: page, StatusIDs: []conversations.StatusID{conversations.StatusSpam, conversations.StatusBanned}}},
		{"show_all_page_50_by_last_message_asc", conversations.ListFilter{Page: store.Page{Number: 50, PerPage: 20}, OrderBy: "last_message_at", Ascending: true, ShowAllStatuses: true}},
		{"filter_text_joao", conversations.ListFilter{Page: page, Text: "joao"}},
		{"filter_text", conversations.ListFilter{Page: page, Text: "souza"}},
		{"filter_text_rare", conversations.ListFilter{Page: page, Text: "patricia monteiro 1"}},
		{"window_range", conversations.ListFilter{Page: page, ChannelTypeIDs: []channels.TypeID{channels.OfficialChatapp}, WindowMinMinutes: &eight, WindowMaxMinutes: &tenHours}},
		{"tags_xand", conversations.ListFilter{Page: page, Tags: conversations.TagFilter{Operation: conversations.TagsAll,
			Contact: tags[conversations.ContactTag][:2], Ticket: tags[conversations.TicketTag][:1]}}},
		{"tags_and", conversations.ListFilter{Page: page, Tags: conversations.TagFilter{Operation: conversations.TagsEachKind,
			Contact: tags[conversations.ContactTag][:3], Business: tags[conversations.BusinessTag][:2]}}},
		{"with_all_relations", conversations.ListFilter{Page: page, With: conversations.AllRelations}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var samples []time.Duration
			total, capped := 0, false
			for b.Loop() {
				t := time.Now()
				list, err := svc.ListContactChannels(ctx, companyID, tc.f)
				if err != nil {
					b.Fatal(err)
				}
				samples = append(samples, time.Since(t))
				total, capped = list.Total, list.TotalIsCapped
			}
			slices.Sort(samples)
			pct := func(p float64) float64 {
				return float64(samples[int(p*float64(len(samples)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(float64(total), "matches")
			b.Logf("%d samples, p50 %.2f ms, p99 %.2f ms, total %d (capped %v)", len(samples), pct(0.5), pct(0.99), total, capped)
		})
	}
}

// openSeeded opens a schema TestSeedLoadSchema seeded and finds its
// company and tags.
func openSeeded(ctx context.Context, b *testing.B, schema string) (*store.DB, int64, map[conversations.TagKind][]int64) {
	url := os.Getenv(storetest.EnvPostgres)
	if url == "" {
		b.Skip(storetest.EnvPostgres + " not set")
	}
	db, err := store.OpenPostgres(ctx, url, store.Options{SearchPath: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	var companyID int64
	if err := db.Bun.NewRaw("SELECT id FROM companies WHERE name = 'Load' ORDER BY id LIMIT 1").Scan(ctx, &companyID); err != nil {
		b.Fatalf("schema %s has no seeded company: %v", schema, err)
	}
	return db, companyID, seededTags(ctx, b, db, companyID)
}

// seededTags are the company's tag ids per kind, in id order.
func seededTags(ctx context.Context, tb testing.TB, db *store.DB, companyID int64) map[conversations.TagKind][]int64 {
	tb.Helper()
	tags := map[conversations.TagKind][]int64{}
	var rows []struct {
		ID   int64  `bun:"id"`
		Kind string `bun:"kind"`
	}
	if err := db.Bun.NewRaw(`SELECT id, kind FROM tags WHERE company_id = ? ORDER BY id`, companyID).Scan(ctx, &rows); err != nil {
		tb.Fatal(err)
	}
	for _, r := range rows {
		tags[conversations.TagKind(r.Kind)] = append(tags[conversations.TagKind(r.Kind)], r.ID)
	}
	return tags
}

// TestSeedLoadSchema is the benchmark's seeding as a tool: with
// CONVERSATIONS_SEED_SCHEMA=<schema> (and TEST_DATABASE_URL) it creates that
// schema, migrates it and seeds the benchmark's data set, and leaves it in
// place for EXPLAIN ANALYZE sessions (drop it by hand afterwards).
// CONVERSATIONS_SEED_SIZE sets the number of conversations (default the
// benchmark's 100,000; the README's EXPLAIN figures are at 1,000,000).
func TestSeedLoadSchema(t *testing.T) {
	schema := os.Getenv("CONVERSATIONS_SEED_SCHEMA")
	url := os.Getenv(storetest.EnvPostgres)
	if schema == "" || url == "" {
		t.Skip("CONVERSATIONS_SEED_SCHEMA and " + storetest.EnvPostgres + " not set")
	}
	ctx := context.Background()
	admin, err := store.OpenPostgres(ctx, url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Bun.ExecContext(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	db, err := store.OpenPostgres(ctx, url, store.Options{SearchPath: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx, slices.Concat(auth.Migrations, channels.Migrations, conversations.Migrations)); err != nil {
		t.Fatal(err)
	}
	shape := benchShape
	if n := os.Getenv("CONVERSATIONS_SEED_SIZE"); n != "" {
		if shape.Conversations, err = strconv.Atoi(n); err != nil || shape.Conversations < 1 {
			t.Fatalf("CONVERSATIONS_SEED_SIZE=%q: want a positive number", n)
		}
	}
	start := time.Now()
	companyID, _ := seedLoad(ctx, t, db, time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), shape)
	t.Logf("seeded %d conversations in %s", shape.Conversations, time.Since(start).Round(time.Millisecond))
	t.Logf("seeded schema %s: company %d", schema, companyID)
}
