package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestWith: parts render as one WITH clause whose arguments follow the
// parts' order, and the statement runs on both engines; a part whose
// placeholders and arguments disagree is refused when it is built.
func TestWith(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if err := db.Migrate(ctx, boundMigrations); err != nil {
			t.Fatal(err)
		}
		added := store.NewPart("added", `INSERT INTO notes (body, flag, hits) SELECT CAST(? AS TEXT), ?, CAST(? AS BIGINT) RETURNING id, hits`, "first", true, int64(3))
		q := store.With(added, store.NewPart("counted", `SELECT hits + CAST(? AS BIGINT) AS total FROM added`, int64(4))).
			Then(`SELECT total FROM counted WHERE total > ?`, int64(1))
		if want := "WITH added AS (INSERT"; !strings.HasPrefix(q.SQL, want) || len(q.Args) != 5 {
			t.Fatalf("rendered %q with %d args", q.SQL, len(q.Args))
		}
		var total int64
		if db.Dialect == store.Postgres {
			if err := store.ScanBound(ctx, db.Bun, q.SQL, q.Args, &total); err != nil || total != 7 {
				t.Fatalf("ran: %d, %v", total, err)
			}
		} else {
			// SQLite has no data-modifying WITH queries: the parts run as
			// plain queries.
			q = store.With(store.NewPart("counted", `SELECT CAST(? AS BIGINT) + CAST(? AS BIGINT) AS total`, int64(3), int64(4))).
				Then(`SELECT total FROM counted WHERE total > ?`, int64(1))
			if err := store.ScanBound(ctx, db.Bun, q.SQL, q.Args, &total); err != nil || total != 7 {
				t.Fatalf("ran: %d, %v", total, err)
			}
		}
	})
	for _, tc := range []struct {
		name  string
		build func()
	}{
		{"a placeholder without its argument", func() { store.NewPart("p", `SELECT ? + ?`, 1) }},
		{"an argument without its placeholder", func() { store.With(store.Part{Name: "p", SQL: `SELECT 1`, Args: []any{1}}) }},
		{"a main query short of an argument", func() { store.With(store.NewPart("p", `SELECT 1`)).Then(`SELECT ?`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("built without complaint")
				}
			}()
			tc.build()
		})
	}
}
