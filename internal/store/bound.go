package store

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
)

// ScanBound runs query, written with bun's ? placeholders (plain ones only:
// no ?? or named placeholders, no ? in literals), and scans its first row
// into dest as bun's RawQuery.Scan does: one model (a struct pointer) or
// one destination per column. No row is sql.ErrNoRows.
//
// On PostgreSQL the values travel as bind parameters: the statement text is
// the same on every call, so pgx prepares it once per connection and
// PostgreSQL stops planning it after a few runs. bun inlines every value
// instead, which makes each statement new text that PostgreSQL parses and
// plans again: measured on the send path, planning alone cost more than
// executing for the hottest statements. Use it for statements that run on
// every send or delivery; anything else reads better as bun queries. A
// parameter whose type PostgreSQL cannot infer from its place (e.g. a
// SELECT list) needs a CAST(? AS …), which SQLite reads too.
//
// On SQLite, in process with no round trip and no planner worth sparing,
// bun's inlined form is kept, so both engines read and write values the
// same way they always have.
func ScanBound(ctx context.Context, db bun.IDB, query string, args []any, dest ...any) error {
	if db.Dialect().Name() != dialect.PG {
		return db.NewRaw(query, args...).Scan(ctx, dest...)
	}
	q, err := beneath(db)
	if err != nil {
		return err
	}
	rows, err := q.QueryContext(ctx, numberedOnce(query), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if len(dest) == 1 {
		// bun's model scanning needs its *bun.DB, which a bun.Conn or
		// bun.Tx does not export; any query built on db carries it.
		if err := db.NewRaw("").DB().ScanRow(ctx, rows, dest[0]); err != nil {
			return err
		}
	} else if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}

// sqlQuerier is database/sql beneath bun, where arguments are not inlined.
type sqlQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func beneath(db bun.IDB) (sqlQuerier, error) {
	switch d := db.(type) {
	case *Tx:
		return beneath(d.IDB)
	case *bun.DB:
		return d.DB, nil
	case bun.Conn:
		return d.Conn, nil
	case *bun.Conn:
		return d.Conn, nil
	case bun.Tx:
		return d.Tx, nil
	case *bun.Tx:
		return d.Tx, nil
	}
	return nil, fmt.Errorf("store: no database/sql beneath %T", db)
}

// numberedOnce is numbered, remembered: bound statements are a fixed set
// of texts (that is why they are bound), and rewriting the send's
// statement on every call took 3.5% of the gateway's CPU under load. The
// memory is bounded, should a caller ever build a text from data.
func numberedOnce(query string) string {
	if v, ok := numberedTexts.Load(query); ok {
		return v.(string)
	}
	n := numbered(query)
	if numberedCount.Load() < maxNumberedTexts {
		if _, loaded := numberedTexts.LoadOrStore(query, n); !loaded {
			numberedCount.Add(1)
		}
	}
	return n
}

const maxNumberedTexts = 1024

var (
	numberedTexts sync.Map // query → numbered(query)
	numberedCount atomic.Int32
)

// numbered turns bun's ? placeholders into PostgreSQL's $1, $2, ….
func numbered(query string) string {
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// InsertColumns are the columns and values bun's INSERT of model (a struct
// pointer) writes, as bind arguments: every field but an autoincrement
// primary key, a nullzero field's zero value as NULL. For a hand-written
// INSERT that must write what the model's bun INSERT writes (one drawn from
// the model never misses a column added to it later).
func InsertColumns(db bun.IDB, model any) (cols []string, vals []any) {
	v := reflect.ValueOf(model).Elem()
	for _, f := range db.Dialect().Tables().Get(v.Type()).Fields {
		if f.IsPK && f.AutoIncrement {
			continue
		}
		cols = append(cols, f.Name)
		if f.NullZero && f.HasZeroValue(v) {
			vals = append(vals, nil)
			continue
		}
		vals = append(vals, f.Value(v).Interface())
	}
	return cols, vals
}
