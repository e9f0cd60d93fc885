package channels

import (
	"context"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// FindByKey returns the company's channel of type t with key (a number).
// A missing channel, or one of another company, is NotFound. Found
// channels are cached (CacheTTL).
func (s *Service) FindByKey(ctx context.Context, companyID int64, t TypeID, key string) (Channel, error) {
	now := s.now()
	k := lookupKey{companyID, t, key}
	if ch, ok := s.cache.getKey(k, now); ok {
		return ch, nil
	}
	gen := s.cache.generation()
	var row channelRow
	err := s.db.Bun.NewSelect().Model(&row).Relation("Account").
		Where("cc.company_id = ?", companyID).Where("cc.channel_type_id = ?", int(t)).Where("cc.key = ?", key).Scan(ctx)
	if store.IsNoRows(err) {
		return Channel{}, fault.New(fault.NotFound, "Channel not found.")
	}
	if err != nil {
		return Channel{}, fault.Internalf(err, "find channel by key")
	}
	ch, err := s.opened(row.toDomain())
	if err != nil {
		return Channel{}, err
	}
	s.cache.put(gen, ch, now)
	return ch, nil
}

// FindByPhoneNumberID returns the official channel of a provider phone
// number id (inbound provider webhooks name the number that way).
func (s *Service) FindByPhoneNumberID(ctx context.Context, phoneNumberID string) (Channel, error) {
	var row channelRow
	err := s.db.Bun.NewSelect().Model(&row).Relation("Account").
		Where("account.phone_number_id = ?", phoneNumberID).Where("cc.channel_type_id = ?", int(OfficialChatapp)).Scan(ctx)
	if store.IsNoRows(err) {
		return Channel{}, fault.New(fault.NotFound, "Channel not found.")
	}
	if err != nil {
		return Channel{}, fault.Internalf(err, "find channel by phone number id")
	}
	return s.opened(row.toDomain())
}
