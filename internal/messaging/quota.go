package messaging

import (
	"context"
	"database/sql"
	"time"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// QuotaExhaustedMessage is the plain-text body of the 402 answer.
const QuotaExhaustedMessage = "Message quota of your plan is exhausted. Upgrade your plan to keep sending."

// Quota is a company's monthly message quota and what it used this month.
type Quota struct {
	CompanyID int64 `json:"company_id"`
	// MonthlyLimit is nil when the company is unlimited (the default).
	MonthlyLimit *int64 `json:"monthly_limit"`
	Period       string `json:"period"`
	Used         int64  `json:"used"`
}

// period is the calendar month (UTC) a send counts against.
func period(t time.Time) string { return t.UTC().Format("2006-01") }

// SetQuota sets a company's monthly message quota; nil makes it unlimited.
// Errors: Invalid for a negative limit.
func (s *Service) SetQuota(ctx context.Context, companyID int64, monthlyLimit *int64) (Quota, error) {
	if monthlyLimit != nil && *monthlyLimit < 0 {
		return Quota{}, fault.New(fault.Invalid, "monthly limit must be zero or more (omit it for unlimited)")
	}
	now := s.deps.Now()
	err := s.deps.DB.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO message_quotas (company_id, monthly_limit, updated_at) VALUES (?, ?, ?)
ON CONFLICT (company_id) DO UPDATE SET monthly_limit = EXCLUDED.monthly_limit, updated_at = EXCLUDED.updated_at`, companyID, monthlyLimit, now)
		return err
	})
	if err != nil {
		return Quota{}, fault.Internalf(err, "set quota")
	}
	return s.QuotaOf(ctx, companyID)
}

// QuotaOf reports a company's quota and this month's usage.
func (s *Service) QuotaOf(ctx context.Context, companyID int64) (Quota, error) {
	q := Quota{CompanyID: companyID, Period: period(s.deps.Now())}
	var limit sql.NullInt64
	err := s.deps.DB.Bun.NewSelect().Table("message_quotas").Column("monthly_limit").Where("company_id = ?", companyID).Scan(ctx, &limit)
	if err != nil && !store.IsNoRows(err) {
		return q, fault.Internalf(err, "read quota")
	}
	if limit.Valid {
		q.MonthlyLimit = &limit.Int64
	}
	err = s.deps.DB.Bun.NewSelect().Table("message_usage").Column("used").Where("company_id = ?", companyID).Where("period = ?", q.Period).Scan(ctx, &q.Used)
	if err != nil && !store.IsNoRows(err) {
		return q, fault.Internalf(err, "read usage")
	}
	return q, nil
}

// consumeQuota counts one send against the company's month inside tx, or
// fails with Quota when the month's quota is used up. It is one upsert:
// the first send of a month inserts the counter at 1 (unless the limit is
// 0), later ones add 1 while the counter is under the limit. On
// PostgreSQL the conflicting row is locked and the condition evaluated on
// its latest version, so concurrent sends race for the last units
// exactly; SQLite has one writer at a time.
func consumeQuota(ctx context.Context, tx *store.Tx, companyID int64, now time.Time) error {
	var used int64
	err := store.ScanBound(ctx, tx, quotaUpsert(""), quotaArgs(companyID, now), &used)
	if store.IsNoRows(err) {
		return fault.New(fault.Quota, QuotaExhaustedMessage)
	}
	if err != nil {
		return fault.Internalf(err, "count usage")
	}
	return nil
}

// quotaPart is consumeQuota's upsert as the query "counted" of a
// statement, counting only when the query after has a row (storeOne).
func quotaPart(companyID int64, now time.Time, after store.Part) store.Part {
	return store.NewPart("counted", quotaUpsert(" FROM "+after.Name), quotaArgs(companyID, now)...)
}

// quotaUpsert is the upsert; from (" FROM q") makes it depend on q.
func quotaUpsert(from string) string {
	return `INSERT INTO message_usage (company_id, period, used)
		SELECT CAST(? AS BIGINT), CAST(? AS TEXT), 1` + from + ` WHERE COALESCE((SELECT monthly_limit FROM message_quotas WHERE company_id = ?), 1) > 0
		ON CONFLICT (company_id, period) DO UPDATE SET used = message_usage.used + 1
		WHERE message_usage.used < COALESCE((SELECT monthly_limit FROM message_quotas WHERE company_id = ?), message_usage.used + 1)
		RETURNING used`
}

func quotaArgs(companyID int64, now time.Time) []any {
	return []any{companyID, period(now), companyID, companyID}
}
