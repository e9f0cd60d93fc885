package auth

import (
	"context"
	"strings"

	"github.com/chatmsg/gateway/internal/fault"
)

// BootstrapConflicts is what a bootstrap with the same company name or e-mail would duplicate.
type BootstrapConflicts struct {
	// CompanyIDs are the companies already named like the new one.
	CompanyIDs []int64
	// UserCompanyIDs are the companies that already have a user with the e-mail.
	UserCompanyIDs []int64
}

// Any reports whether a bootstrap would duplicate a company or a user.
func (c BootstrapConflicts) Any() bool { return len(c.CompanyIDs) > 0 || len(c.UserCompanyIDs) > 0 }

// FindBootstrapConflicts lists the companies named companyName and the users with email, both
// compared without case and surrounding spaces ("Acme " and "acme" are one company to an operator),
// so `admin bootstrap` can refuse to create a second company by accident. Errors: Internal.
func (s *Service) FindBootstrapConflicts(ctx context.Context, companyName, email string) (BootstrapConflicts, error) {
	var c BootstrapConflicts
	name, mail := strings.ToLower(strings.TrimSpace(companyName)), strings.ToLower(strings.TrimSpace(email))
	if name != "" {
		if err := s.db.Bun.NewSelect().Model((*company)(nil)).Column("id").
			Where("lower(trim(name)) = ?", name).Order("id").Scan(ctx, &c.CompanyIDs); err != nil {
			return c, fault.Internalf(err, "look up companies named %q", companyName)
		}
	}
	if mail != "" {
		if err := s.db.Bun.NewSelect().Model((*user)(nil)).ColumnExpr("DISTINCT company_id").
			Where("lower(trim(email)) = ?", mail).OrderExpr("company_id").Scan(ctx, &c.UserCompanyIDs); err != nil {
			return c, fault.Internalf(err, "look up users with email %q", email)
		}
	}
	return c, nil
}
