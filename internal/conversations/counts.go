package conversations

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/fault"
)

// CountCap is how far a filtered listing counts its matches exactly. A
// filter (text, tags, flags, dates, …) can match any share of a company's
// conversations, and counting them all costs as much as reading them, so
// such a total stops at the cap (or at the end of the page asked for, when
// that lies deeper) and says so (List.TotalIsCapped). A listing by statuses
// alone needs no cap: its total comes from contact_channel_counts.
const CountCap = 1000

// keptCount is the number of the company's conversations in the given
// statuses, from the counts the triggers of migration
// 0012_conversations_counts keep per (company, status, slot).
func (s *Service) keptCount(ctx context.Context, companyID int64, statuses []StatusID) (int, error) {
	var n int64
	err := s.db.Bun.NewSelect().TableExpr("contact_channel_counts").ColumnExpr("CAST(COALESCE(SUM(n), 0) AS BIGINT)").
		Where("company_id = ?", companyID).Where("status_id IN (?)", bun.In(ints(statuses))).Scan(ctx, &n)
	if err != nil {
		return 0, fault.Internalf(err, "read conversation counts")
	}
	return int(n), nil
}

// cappedCount counts the conversations matching f up to countLimit: the
// count is exact below it; above it the answer is the limit and capped.
func (s *Service) cappedCount(ctx context.Context, companyID int64, f ListFilter, channelIDs []int64) (total int, capped bool, err error) {
	limit := countLimit(f)
	matches := s.db.Bun.NewSelect().TableExpr("contact_channels AS cc").ColumnExpr("1").Where("cc.company_id = ?", companyID)
	matches = s.applyFilter(matches, f, channelIDs, stamp(s.now())).Limit(int64(limit + 1))
	var n int
	if err := s.db.Bun.NewSelect().TableExpr("(?) AS m", matches).ColumnExpr("count(*)").Scan(ctx, &n); err != nil {
		return 0, false, fault.Internalf(err, "count conversations")
	}
	if n > limit {
		return limit, true, nil
	}
	return n, false, nil
}

// countLimit is where a filtered count stops: CountCap, or the end of the
// page asked for when that is deeper, rounded up to a whole number of pages.
// A capped total therefore always reaches the current page (last_page is
// never before current_page) and ends on a full page; asking for the page
// after last_page counts further.
func countLimit(f ListFilter) int {
	limit := max(CountCap, offset(f.Page)+f.Page.PerPage)
	if pp := f.Page.PerPage; pp > 0 {
		limit = (limit + pp - 1) / pp * pp
	}
	return limit
}
