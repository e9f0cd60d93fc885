package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

var boundMigrations = []store.Migration{{
	ID:       "0001_notes",
	SQLite:   "CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL, flag BOOLEAN NOT NULL, at TIMESTAMP, hits INTEGER NOT NULL DEFAULT 0);",
	Postgres: "CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, body TEXT NOT NULL, flag BOOLEAN NOT NULL, at TIMESTAMPTZ, hits BIGINT NOT NULL DEFAULT 0);",
}}

type noteRow struct {
	bun.BaseModel `bun:"table:notes"`
	ID            int64      `bun:"id,pk,autoincrement"`
	Body          string     `bun:"body"`
	Flag          bool       `bun:"flag"`
	At            *time.Time `bun:"at"`
	Hits          int64      `bun:"hits"`
}

// ScanBound must read and write what bun's own queries do, on both
// engines, inside and outside a unit of work.
func TestScanBound(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if err := db.Migrate(ctx, boundMigrations); err != nil {
			t.Fatal(err)
		}
		at := time.Date(2026, 11, 24, 10, 30, 0, 123000000, time.UTC)
		note := noteRow{Body: "it's ?", Flag: true, At: &at}
		if _, err := db.Bun.NewInsert().Model(&note).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		later := at.Add(time.Hour)
		tests := []struct {
			name string
			run  func(db bun.IDB) (noteRow, error)
			want func(n noteRow) bool
		}{
			{"model with a time and a pointer left alone", func(db bun.IDB) (noteRow, error) {
				var n noteRow
				err := store.ScanBound(ctx, db, `UPDATE notes SET hits = hits + 1, at = COALESCE(?, at) WHERE id = ? AND flag = ? RETURNING *`,
					[]any{(*time.Time)(nil), note.ID, true}, &n)
				return n, err
			}, func(n noteRow) bool { return n.Hits == 1 && n.At != nil && n.At.Equal(at) && n.Body == "it's ?" }},
			{"columns in order, a time bound", func(db bun.IDB) (noteRow, error) {
				var n noteRow
				err := store.ScanBound(ctx, db, `UPDATE notes SET at = ?, hits = hits + 1 WHERE id = ? RETURNING id, hits, at`,
					[]any{later, note.ID}, &n.ID, &n.Hits, &n.At)
				return n, err
			}, func(n noteRow) bool { return n.ID == note.ID && n.Hits == 2 && n.At != nil && n.At.Equal(later) }},
			{"a value whose type only a CAST gives", func(db bun.IDB) (noteRow, error) {
				var n noteRow
				err := store.ScanBound(ctx, db, `INSERT INTO notes (body, flag, hits) SELECT CAST(? AS TEXT), ?, CAST(? AS BIGINT) RETURNING id, body, hits`,
					[]any{"x", false, int64(7)}, &n.ID, &n.Body, &n.Hits)
				return n, err
			}, func(n noteRow) bool { return n.ID > note.ID && n.Body == "x" && n.Hits == 7 }},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				n, err := tc.run(db.Bun)
				if err != nil || !tc.want(n) {
					t.Fatalf("got %+v, %v", n, err)
				}
			})
		}

		t.Run("no row is sql.ErrNoRows, in a unit of work", func(t *testing.T) {
			err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
				var n noteRow
				return store.ScanBound(ctx, tx, `UPDATE notes SET hits = hits + 1 WHERE id = ? RETURNING *`, []any{int64(-1)}, &n)
			})
			if !store.IsNoRows(err) {
				t.Fatalf("want no rows, got %v", err)
			}
		})
		t.Run("a unit of work's write is its own until it commits", func(t *testing.T) {
			err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
				var hits int64
				if err := store.ScanBound(ctx, tx, `UPDATE notes SET hits = 100 WHERE id = ? RETURNING hits`, []any{note.ID}, &hits); err != nil {
					return err
				}
				return errRollback
			})
			if !errors.Is(err, errRollback) {
				t.Fatal(err)
			}
			var n noteRow
			if err := db.Bun.NewSelect().Model(&n).Where("id = ?", note.ID).Scan(ctx); err != nil || n.Hits != 2 {
				t.Fatalf("rolled-back write visible: %+v, %v", n, err)
			}
		})
	})
}

var errRollback = errors.New("roll back")
