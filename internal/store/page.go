package store

import (
	"context"

	"github.com/uptrace/bun"
)

// Page is a requested page of a list (1-based).
type Page struct {
	Number  int
	PerPage int
}

// LastPage is the number of the last page for total rows (at least 1, as the
// list envelope reports it).
func (p Page) LastPage(total int) int {
	if total == 0 || p.PerPage <= 0 {
		return 1
	}
	return (total + p.PerPage - 1) / p.PerPage
}

// ScanPage applies the page's limit and offset to q, scans the rows into q's
// model and returns the total row count without the limit.
func ScanPage(ctx context.Context, q *bun.SelectQuery, p Page) (int, error) {
	if p.Number < 1 {
		p.Number = 1
	}
	n, err := q.Limit(int64(p.PerPage)).Offset(int64((p.Number - 1) * p.PerPage)).ScanAndCount(ctx)
	return int(n), err
}
