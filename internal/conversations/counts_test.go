package conversations_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/conversations"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// countRow is one (company, status) count, kept or counted.
type countRow struct {
	CompanyID int64 `bun:"company_id"`
	StatusID  int   `bun:"status_id"`
	N         int64 `bun:"n"`
}

// assertCountsKept compares the kept counts with count(*) over
// contact_channels, for every company and status (a kept count of 0 and
// a missing row are the same).
func assertCountsKept(t *testing.T, db *store.DB, when string) {
	t.Helper()
	ctx := context.Background()
	var kept, counted []countRow
	if err := db.Bun.NewRaw(`SELECT company_id, status_id, CAST(SUM(n) AS BIGINT) AS n FROM contact_channel_counts
		GROUP BY company_id, status_id HAVING SUM(n) <> 0 ORDER BY company_id, status_id`).Scan(ctx, &kept); err != nil {
		t.Fatalf("%s: read kept counts: %v", when, err)
	}
	if err := db.Bun.NewRaw(`SELECT company_id, status_id, count(*) AS n FROM contact_channels
		GROUP BY company_id, status_id ORDER BY company_id, status_id`).Scan(ctx, &counted); err != nil {
		t.Fatalf("%s: count conversations: %v", when, err)
	}
	if !slices.Equal(kept, counted) {
		t.Fatalf("%s: kept counts %+v, count(*) %+v", when, kept, counted)
	}
}

// TestCountsKept changes conversations through every path that writes
// them (Ensure, the PATCH, an inbound message that reopens, the send's
// RecordOutbound, a rolled-back transaction, multi-row statements, moves
// between companies, deletes, a company's cascade delete) and checks after
// each step that the kept counts equal count(*), and that the listing's
// totals by statuses are the kept counts.
func TestCountsKept(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		exec := func(t *testing.T, q string, args ...any) {
			t.Helper()
			if _, err := db.Bun.ExecContext(ctx, q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		status := func(s conversations.StatusID) *conversations.StatusID { return &s }
		otherChannel := insertChannel(t, db, b.otherID, channels.SocialMessenger, "page-other")
		third, err := b.auth.CreateCompany(ctx, "Third")
		if err != nil {
			t.Fatal(err)
		}
		thirdChannel := insertChannel(t, db, third, channels.SocialMessenger, "page-third")

		var ids []int64
		steps := []struct {
			name string
			do   func(t *testing.T)
		}{
			{"creates on three channels and two companies", func(t *testing.T) {
				for i := range 40 {
					ch, typ, company := b.official, channels.OfficialChatapp, b.companyID
					switch i % 4 {
					case 1:
						ch, typ = b.chatapp, channels.UnofficialChatapp
					case 2:
						ch, typ = b.social, channels.SocialMessenger
					case 3:
						ch, typ, company = otherChannel, channels.SocialMessenger, b.otherID
					}
					ref := b.ensure(t, conversations.EnsureInput{CompanyID: company, CompanyChannelID: ch, ChannelTypeID: typ,
						ContactKey: fmt.Sprintf("55119%08d", i), ContactName: fmt.Sprintf("Contact %d", i), OriginID: 1})
					ids = append(ids, ref.ID)
				}
			}},
			{"an existing conversation is not counted twice", func(t *testing.T) {
				b.ensure(t, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.official, ChannelTypeID: channels.OfficialChatapp,
					ContactKey: "5511900000000", OriginID: 1})
			}},
			{"status changes through the PATCH", func(t *testing.T) {
				for i, id := range ids {
					if i%4 == 3 {
						continue // the other company's
					}
					st := conversations.StatusID(1 + i%7)
					if _, err := b.svc.UpdateContactChannel(ctx, b.companyID, id, conversations.Update{StatusID: &st}); err != nil {
						t.Fatalf("update %d: %v", id, err)
					}
				}
			}},
			{"a PATCH that keeps the status", func(t *testing.T) {
				pinned := true
				if _, err := b.svc.UpdateContactChannel(ctx, b.companyID, ids[0], conversations.Update{Pinned: &pinned, StatusID: status(conversations.StatusOpen)}); err != nil {
					t.Fatal(err)
				}
			}},
			{"inbound messages reopen Resolved and Cancelled", func(t *testing.T) {
				for _, id := range ids {
					b.record(t, id, t0.Add(time.Minute), true)
				}
			}},
			{"outbound messages, one of them a new conversation", func(t *testing.T) {
				err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
					for _, key := range []string{"5511900000004", "5511988887777"} {
						if _, err := b.svc.RecordOutbound(ctx, tx, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.official,
							ChannelTypeID: channels.OfficialChatapp, ContactKey: key, OriginID: 2}, t0.Add(2*time.Minute)); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}},
			{"a rolled-back creation and status change", func(t *testing.T) {
				errRollback := errors.New("roll back")
				err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
					if _, err := b.svc.Ensure(ctx, tx, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.social,
						ChannelTypeID: channels.SocialMessenger, ContactKey: "rolled-back", OriginID: 1}); err != nil {
						return err
					}
					if _, err := tx.ExecContext(ctx, "UPDATE contact_channels SET status_id = 6 WHERE id = ?", ids[1]); err != nil {
						return err
					}
					return errRollback
				})
				if !errors.Is(err, errRollback) {
					t.Fatalf("transaction: %v", err)
				}
			}},
			{"a multi-row status change", func(t *testing.T) {
				exec(t, "UPDATE contact_channels SET status_id = CASE WHEN id % 3 = 0 THEN 4 ELSE 7 END WHERE company_id = ? AND id % 2 = 0", b.companyID)
			}},
			{"moves to another company, with and without a status change", func(t *testing.T) {
				exec(t, "UPDATE contact_channels SET company_id = ?, company_channel_id = ? WHERE id IN (?, ?)", third, thirdChannel, ids[0], ids[1])
				exec(t, "UPDATE contact_channels SET company_id = ?, company_channel_id = ?, status_id = 5 WHERE id = ?", third, thirdChannel, ids[2])
			}},
			{"a message's update of its conversation leaves the counts", func(t *testing.T) {
				exec(t, "UPDATE contact_channels SET status_id = status_id, unread_count = unread_count + 1 WHERE company_id = ?", b.companyID)
			}},
			{"deletes, one and several", func(t *testing.T) {
				exec(t, "DELETE FROM contact_channels WHERE id = ?", ids[4])
				exec(t, "DELETE FROM contact_channels WHERE company_id = ? AND id % 5 = 0", b.companyID)
			}},
			{"a company's cascade delete", func(t *testing.T) {
				exec(t, "DELETE FROM companies WHERE id = ?", third)
			}},
		}
		// Each step starts from the state the earlier ones left, so a failed
		// step stops the rest.
		for _, step := range steps {
			if !t.Run(step.name, func(t *testing.T) {
				step.do(t)
				assertCountsKept(t, db, "after the step")
			}) {
				t.FailNow()
			}
		}

		// The listing's totals by statuses are the kept counts, and they
		// equal the rows the listing pages through.
		rules := []struct {
			name string
			f    conversations.ListFilter
		}{
			{"default", conversations.ListFilter{}},
			{"include_closed", conversations.ListFilter{IncludeClosed: true}},
			{"show_all_statuses", conversations.ListFilter{ShowAllStatuses: true}},
			{"status_ids", conversations.ListFilter{StatusIDs: []conversations.StatusID{conversations.StatusBanned, conversations.StatusResolved}}},
			{"status_id", conversations.ListFilter{StatusIDs: []conversations.StatusID{conversations.StatusSpam}}},
		}
		for _, r := range rules {
			t.Run(r.name, func(t *testing.T) {
				for _, company := range []int64{b.companyID, b.otherID} {
					f := r.f
					f.Page = store.Page{Number: 1, PerPage: 500}
					list, err := b.svc.ListContactChannels(ctx, company, f)
					if err != nil {
						t.Fatalf("company %d: %v", company, err)
					}
					if list.Total != len(list.Data) || list.TotalIsCapped {
						t.Errorf("company %d: total %d (capped %v), %d listed", company, list.Total, list.TotalIsCapped, len(list.Data))
					}
				}
			})
		}
	})
}

// TestCountsKeptConcurrently creates conversations of one company and
// moves them between statuses from 8 goroutines at once (on PostgreSQL
// concurrent transactions bump the same counts): no change is lost and no
// transaction fails.
func TestCountsKeptConcurrently(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		errs := make(chan error, 8)
		for g := range 8 {
			go func() {
				errs <- func() error {
					for i := range 6 {
						var ref conversations.Ref
						err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
							var err error
							ref, err = b.svc.Ensure(ctx, tx, conversations.EnsureInput{CompanyID: b.companyID, CompanyChannelID: b.chatapp,
								ChannelTypeID: channels.UnofficialChatapp, ContactKey: fmt.Sprintf("55118%04d%04d", g, i), OriginID: 1})
							return err
						})
						if err != nil {
							return fmt.Errorf("ensure: %w", err)
						}
						st := conversations.StatusID(1 + (g+i)%7)
						if _, err := b.svc.UpdateContactChannel(ctx, b.companyID, ref.ID, conversations.Update{StatusID: &st}); err != nil {
							return fmt.Errorf("update: %w", err)
						}
					}
					return nil
				}()
			}()
		}
		for range 8 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		assertCountsKept(t, db, "after concurrent creates and moves")
	})
}

// TestCountsBackfill upgrades a database with conversations made before
// the counts existed: the migration counts them, per company and status.
func TestCountsBackfill(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		all := slices.Concat(auth.Migrations, channels.Migrations, conversations.Migrations)
		before := slices.IndexFunc(all, func(m store.Migration) bool { return m.ID == "0012_conversations_counts" })
		if before < 0 {
			t.Fatal("migration 0012_conversations_counts not found")
		}
		if err := db.Migrate(ctx, all[:before]); err != nil {
			t.Fatalf("migrate to 0075: %v", err)
		}
		a := auth.NewService(db, func() time.Time { return t0 })
		var companies []int64
		for c := range 2 {
			id, err := a.CreateCompany(ctx, fmt.Sprintf("Company %d", c))
			if err != nil {
				t.Fatal(err)
			}
			companies = append(companies, id)
			chID := insertChannel(t, db, id, channels.SocialMessenger, fmt.Sprintf("page-%d", c))
			for i := range 30 + 7*c {
				var contactID int64
				if err := db.Bun.NewRaw(`INSERT INTO contacts (company_id, identity, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?) RETURNING id`,
					id, fmt.Sprintf("key:%d", i), fmt.Sprintf("Contact %d", i), t0, t0).Scan(ctx, &contactID); err != nil {
					t.Fatal(err)
				}
				if _, err := db.Bun.ExecContext(ctx, `INSERT INTO contact_channels (company_id, contact_id, company_channel_id, channel_type_id, key, name,
					status_id, origin_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
					id, contactID, chID, int(channels.SocialMessenger), fmt.Sprintf("key-%d", i), fmt.Sprintf("Contact %d", i), 1+(i*(c+2))%7, t0, t0); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := db.Migrate(ctx, all); err != nil {
			t.Fatalf("migrate from 0075: %v", err)
		}
		assertCountsKept(t, db, "after the backfill")
		svc := conversations.NewService(db, func() time.Time { return t0 }, clock.NewFormatter(nil), a, channels.NewService(db, nil), &recorder{})
		for _, id := range companies {
			list, err := svc.ListContactChannels(ctx, id, conversations.ListFilter{Page: store.Page{Number: 1, PerPage: 500}, ShowAllStatuses: true})
			if err != nil || list.Total != len(list.Data) || list.TotalIsCapped {
				t.Fatalf("company %d: total %d (capped %v), %d listed, %v", id, list.Total, list.TotalIsCapped, len(list.Data), err)
			}
		}
	})
}

// seedConversations inserts n conversations of the company on channel ch
// with one statement (statuses 1, 2, 3 in turn, no messages yet).
func seedConversations(t *testing.T, db *store.DB, companyID, ch int64, n int) {
	t.Helper()
	ctx := context.Background()
	var contactID int64
	if err := db.Bun.NewRaw(`INSERT INTO contacts (company_id, identity, name, created_at, updated_at) VALUES (?, 'key:seed', 'Seed', ?, ?) RETURNING id`,
		companyID, t0, t0).Scan(ctx, &contactID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Bun.ExecContext(ctx, `WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?)
		INSERT INTO contact_channels (company_id, contact_id, company_channel_id, channel_type_id, key, name, status_id, origin_id, created_at, updated_at)
		SELECT ?, ?, ?, ?, 'k' || i, 'Name ' || i, 1 + i % 3, 1, ?, ? FROM g`,
		n, companyID, contactID, ch, int(channels.SocialMessenger), t0, t0); err != nil {
		t.Fatal(err)
	}
}

// TestCountCap: a filtered listing counts exactly up to CountCap (or the
// end of the page asked for, rounded up to a whole page) and says when it
// stopped; last_page never falls before the page asked for; a listing by
// statuses only is exact whatever its size.
func TestCountCap(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		const n = conversations.CountCap + 30
		seedConversations(t, db, b.companyID, b.social, n)
		assertCountsKept(t, db, "after the seed")
		unmuted := false
		cases := []struct {
			name       string
			f          conversations.ListFilter
			wantTotal  int
			wantCapped bool
			wantRows   int
		}{
			{"statuses only: kept count", conversations.ListFilter{Page: store.Page{Number: 1, PerPage: 20}}, n, false, 20},
			{"filtered: capped at CountCap", conversations.ListFilter{Page: store.Page{Number: 1, PerPage: 20}, Muted: &unmuted}, conversations.CountCap, true, 20},
			{"filtered: cap rounded up to a whole page", conversations.ListFilter{Page: store.Page{Number: 1, PerPage: 30}, Muted: &unmuted}, 1020, true, 30},
			{"filtered: the page after the cap counts further", conversations.ListFilter{Page: store.Page{Number: 51, PerPage: 20}, Muted: &unmuted}, 1020, true, 20},
			{"filtered: a page past the end counts exactly", conversations.ListFilter{Page: store.Page{Number: 52, PerPage: 20}, Muted: &unmuted}, n, false, 10},
			{"filtered: a deep large page counts exactly", conversations.ListFilter{Page: store.Page{Number: 3, PerPage: 500}, Muted: &unmuted}, n, false, 30},
			{"filtered: few matches are exact", conversations.ListFilter{Page: store.Page{Number: 1, PerPage: 20}, ChannelTypeIDs: []channels.TypeID{channels.OfficialChatapp}}, 0, false, 0},
			{"filtered: a text filter under the cap is exact", conversations.ListFilter{Page: store.Page{Number: 1, PerPage: 20}, Text: "nobody"}, 0, false, 0},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				list, err := b.svc.ListContactChannels(ctx, b.companyID, tc.f)
				if err != nil {
					t.Fatal(err)
				}
				if list.Total != tc.wantTotal || list.TotalIsCapped != tc.wantCapped || len(list.Data) != tc.wantRows {
					t.Fatalf("total %d capped %v rows %d; want %d %v %d", list.Total, list.TotalIsCapped, len(list.Data), tc.wantTotal, tc.wantCapped, tc.wantRows)
				}
				if last := tc.f.Page.LastPage(list.Total); list.Total > 0 && last < tc.f.Page.Number {
					t.Fatalf("last page %d before the page asked for, %d", last, tc.f.Page.Number)
				}
			})
		}
	})
}

// TestListingByStatusesOrder pages through the listings by statuses only
// (one ordered read per status, merged) and compares every page with the
// same listing through the general query (a filter that matches every
// conversation), for each status rule, sort column and direction, with
// ties and conversations without messages.
func TestListingByStatusesOrder(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		b := setup(t, db)
		ctx := context.Background()
		seedConversations(t, db, b.companyID, b.social, 45)
		seedConversations(t, db, b.otherID, insertChannel(t, db, b.otherID, channels.SocialMessenger, "page-other"), 5)
		var ids []int64
		if err := db.Bun.NewRaw("SELECT id FROM contact_channels WHERE company_id = ? ORDER BY id", b.companyID).Scan(ctx, &ids); err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			var last *time.Time
			if i%5 != 0 {
				at := t0.Add(time.Duration(i%7) * time.Minute) // ties
				last = &at
			}
			if _, err := db.Bun.ExecContext(ctx, "UPDATE contact_channels SET status_id = ?, last_message_at = ? WHERE id = ?", 1+i%7, last, id); err != nil {
				t.Fatal(err)
			}
		}
		unpinned := false
		rules := []struct {
			name string
			f    conversations.ListFilter
		}{
			{"default", conversations.ListFilter{}},
			{"include_closed", conversations.ListFilter{IncludeClosed: true}},
			{"show_all_statuses", conversations.ListFilter{ShowAllStatuses: true}},
			{"status_ids", conversations.ListFilter{StatusIDs: []conversations.StatusID{7, 2, 5, 2}}},
			{"status_id", conversations.ListFilter{StatusIDs: []conversations.StatusID{4}}},
		}
		for _, r := range rules {
			for _, orderBy := range []string{"id", "last_message_at", "status_id"} {
				for _, asc := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/%s/asc=%v", r.name, orderBy, asc), func(t *testing.T) {
						for page := 1; page <= 8; page++ {
							f := r.f
							f.OrderBy, f.Ascending, f.Page = orderBy, asc, store.Page{Number: page, PerPage: 7}
							got, err := b.svc.ListContactChannels(ctx, b.companyID, f)
							if err != nil {
								t.Fatal(err)
							}
							f.Pinned = &unpinned
							want, err := b.svc.ListContactChannels(ctx, b.companyID, f)
							if err != nil {
								t.Fatal(err)
							}
							if g, w := idsOf(got.Data), idsOf(want.Data); !slices.Equal(g, w) || got.Total != want.Total {
								t.Fatalf("page %d: ids %v total %d, want %v total %d", page, g, got.Total, w, want.Total)
							}
						}
					})
				}
			}
		}
	})
}

func idsOf(list []conversations.Conversation) []int64 {
	out := make([]int64, len(list))
	for i, c := range list {
		out[i] = c.ID
	}
	return out
}
