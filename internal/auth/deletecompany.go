package auth

import (
	"context"
	"fmt"
	"strings"

	"github.com/chatmsg/gateway/internal/fault"
)

// DeleteCompany removes the company companyID, when its name starts with
// namePrefix, and through the ON DELETE CASCADE of every table that names
// it everything it owns. Only the test-only provider states
// (internal/pactstates) call it, to leave a verified gateway's database as
// they found it; the prefix keeps them from deleting a company they did not
// create. The API has no such operation. before, when not nil, runs once
// the company is known to qualify, before it is deleted: it removes what
// the cascade does not reach.
func (s *Service) DeleteCompany(ctx context.Context, companyID int64, namePrefix string, before func(context.Context) error) error {
	var c company
	err := s.db.Bun.NewSelect().Model(&c).Where("id = ?", companyID).Scan(ctx)
	if err != nil || namePrefix == "" || !strings.HasPrefix(c.Name, namePrefix) {
		return fault.New(fault.NotFound, fmt.Sprintf("company %d not found", companyID))
	}
	if before != nil {
		if err := before(ctx); err != nil {
			return err
		}
	}
	var tokenIDs []int64
	if err := s.db.Bun.NewSelect().Model((*tokenRow)(nil)).Column("id").
		Where("company_id = ?", companyID).Scan(ctx, &tokenIDs); err != nil {
		return fault.Internalf(err, "delete company: tokens")
	}
	if _, err := s.db.Bun.NewDelete().Model((*company)(nil)).Where("id = ?", companyID).Exec(ctx); err != nil {
		return fault.Internalf(err, "delete company")
	}
	// A cached token would otherwise still authenticate for the cache's TTL.
	for _, id := range tokenIDs {
		s.tokens.forget(id)
	}
	return nil
}
