package loadtest

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// SeedOptions say whose conversations SeedConversations writes.
type SeedOptions struct {
	DatabaseURL string // the gateway's PostgreSQL database
	CompanyID   int64
	// CompanyChannelID is the channel the conversations are on; 0 takes
	// the company's first channel.
	CompanyChannelID int64
	N                int // conversations (each with its own contact)
	// MatchEvery names one conversation in MatchEvery "Cliente João …"
	// (the others "Cliente Maria …"), so ?filter=joao matches 1/MatchEvery
	// of them (50: 2%).
	MatchEvery int
	Log        func(format string, args ...any)
}

// SeedReport is what SeedConversations wrote.
type SeedReport struct {
	Conversations int     `json:"conversations"`
	Matching      int     `json:"matching_joao"`
	ByStatus      [8]int  `json:"by_status"` // index = status_id
	Seconds       float64 `json:"seconds"`
}

// seedStatus is the status of the i-th seeded conversation: 60% Open (1),
// 20% Pending (2), 10% In progress (3), 10% Resolved (4).
func seedStatus(i int) int {
	switch i % 10 {
	case 0, 1, 2, 3, 4, 5:
		return 1
	case 6, 7:
		return 2
	case 8:
		return 3
	}
	return 4
}

// SeedConversations writes o.N conversations of one company through SQL
// (COPY), with the values the service writes when a contact first writes
// on an official channel (conversations.Ensure, then RecordMessage for
// the inbound message): a contact per conversation (identity
// "phone:<number>", its phone), the conversation (channel type of the
// channel, origin 1 contact-initiated, version 1, unread 1, last message
// and last inbound at the same time, times in UTC to the microsecond), and
// its search text (name, key and the contact's name, joined by U+001F,
// lower case without accents), in contact_channel_search. Times spread
// over the last o.N minutes, one conversation a minute, so ordering by
// last_message_at has distinct values. Statuses follow seedStatus.
func SeedConversations(ctx context.Context, o SeedOptions) (SeedReport, error) {
	begin := time.Now()
	rep := SeedReport{}
	if o.MatchEvery <= 0 {
		o.MatchEvery = 50
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	conn, err := pgx.Connect(ctx, o.DatabaseURL)
	if err != nil {
		return rep, err
	}
	defer conn.Close(context.Background())
	var typeID int16
	if o.CompanyChannelID == 0 {
		err = conn.QueryRow(ctx, `SELECT id, channel_type_id FROM company_channels WHERE company_id = $1 ORDER BY id LIMIT 1`,
			o.CompanyID).Scan(&o.CompanyChannelID, &typeID)
	} else {
		err = conn.QueryRow(ctx, `SELECT channel_type_id FROM company_channels WHERE company_id = $1 AND id = $2`,
			o.CompanyID, o.CompanyChannelID).Scan(&typeID)
	}
	if err != nil {
		return rep, fmt.Errorf("the company's channel: %w", err)
	}
	// Ids come from the tables' own sequences, reserved in one step, so
	// conversations the gateway creates later do not collide with them.
	reserve := func(table string) (int64, error) {
		var last int64
		err := conn.QueryRow(ctx, `SELECT setval(pg_get_serial_sequence($1, 'id'), nextval(pg_get_serial_sequence($1, 'id')) + $2 - 1)`,
			table, o.N).Scan(&last)
		return last - int64(o.N) + 1, err
	}
	contact0, err := reserve("contacts")
	if err != nil {
		return rep, err
	}
	conv0, err := reserve("contact_channels")
	if err != nil {
		return rep, err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	fold := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
	const batch = 50000
	for start := 0; start < o.N; start += batch {
		end := min(start+batch, o.N)
		var contacts, convs, search [][]any
		for i := start; i < end; i++ {
			key := fmt.Sprintf("55119%08d", i)
			name := fmt.Sprintf("Cliente Maria %d", i)
			if i%o.MatchEvery == 0 {
				name = fmt.Sprintf("Cliente João %d", i)
				rep.Matching++
			}
			at := now.Add(-time.Duration(o.N-i) * time.Minute)
			status := seedStatus(i)
			rep.ByStatus[status]++
			cid, vid := contact0+int64(i), conv0+int64(i)
			contacts = append(contacts, []any{cid, o.CompanyID, "phone:" + key, name, key, at, at})
			convs = append(convs, []any{vid, o.CompanyID, cid, o.CompanyChannelID, typeID, key, name, false, int16(status),
				int16(1), int32(1), at, at, false, false, false, int64(1), at, at})
			folded, _, ferr := transform.String(fold, strings.Join([]string{name, key, name}, "\x1f"))
			if ferr != nil {
				return rep, ferr
			}
			search = append(search, []any{vid, o.CompanyID, strings.ToLower(folded)})
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return rep, err
		}
		for _, c := range []struct {
			table string
			cols  []string
			rows  [][]any
		}{
			{"contacts", []string{"id", "company_id", "identity", "name", "phone", "created_at", "updated_at"}, contacts},
			{"contact_channels", []string{"id", "company_id", "contact_id", "company_channel_id", "channel_type_id", "key", "name",
				"is_group", "status_id", "origin_id", "unread_count", "last_message_at", "last_inbound_at", "muted", "pinned", "opened",
				"version", "created_at", "updated_at"}, convs},
			{"contact_channel_search", []string{"contact_channel_id", "company_id", "search_text"}, search},
		} {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{c.table}, c.cols, pgx.CopyFromRows(c.rows)); err != nil {
				_ = tx.Rollback(ctx)
				return rep, fmt.Errorf("copy into %s: %w", c.table, err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return rep, err
		}
		rep.Conversations = end
		o.Log("seeded %d of %d conversations", end, o.N)
	}
	if _, err := conn.Exec(ctx, `ANALYZE contacts, contact_channels, contact_channel_search`); err != nil {
		return rep, err
	}
	rep.Seconds = time.Since(begin).Seconds()
	return rep, nil
}
