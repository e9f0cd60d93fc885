// Package channels owns the company channels (the numbers and accounts a
// company talks through, of channel types 1 to 6) and the official
// provider accounts behind official channels. Other capabilities resolve a
// channel here; registration of official channels is an admin operation
// because the API document leaves it to the platform's settings.
package channels

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/secrets"
	"github.com/chatmsg/gateway/internal/store"
)

// TypeID is a channel type, numbered as the API document lists them.
type TypeID int

const (
	EmbeddedChat       TypeID = 1
	UnofficialChatapp  TypeID = 2
	OfficialChatapp    TypeID = 3
	PhotoSocialNetwork TypeID = 4
	SocialMessenger    TypeID = 5
	BotMessenger       TypeID = 6
)

var typeNames = map[TypeID]string{
	EmbeddedChat: "embedded_chat", UnofficialChatapp: "chatapp", OfficialChatapp: "ofc_chatapp",
	PhotoSocialNetwork: "photo_social_network", SocialMessenger: "social_messenger", BotMessenger: "bot_messenger",
}

// displayNames are the names of the channel types: the API document's
// channel_type ("name of the channel type") in REST and events alike.
var displayNames = map[TypeID]string{
	EmbeddedChat: "Embedded chat", UnofficialChatapp: "Unofficial chat app", OfficialChatapp: "Official chat app",
	PhotoSocialNetwork: "Photo social network", SocialMessenger: "Social messenger", BotMessenger: "Bot messenger",
}

// Name is the channel type's platform code as the API spells it (the
// values of platform and channelable_type).
func (t TypeID) Name() string { return typeNames[t] }

// DisplayName is the channel type's name, the API's channel_type.
func (t TypeID) DisplayName() string { return displayNames[t] }

// Valid reports whether t is one of the six channel types.
func (t TypeID) Valid() bool { _, ok := typeNames[t]; return ok }

// ProviderAccount is an official business account with the credentials the
// provider client needs.
type ProviderAccount struct {
	ID                int64
	CompanyID         int64
	BusinessAccountID string
	PhoneNumberID     string
	AccessToken       string
	AppSecret         string
	BaseURL           string
}

// Channel is a company channel.
type Channel struct {
	ID              int64
	CompanyID       int64
	Key             string
	Name            string
	TypeID          TypeID
	ProviderAccount *ProviderAccount
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

type accountRow struct {
	bun.BaseModel     `bun:"table:provider_accounts"`
	ID                int64     `bun:"id,pk,autoincrement"`
	CompanyID         int64     `bun:"company_id"`
	BusinessAccountID string    `bun:"business_account_id"`
	PhoneNumberID     string    `bun:"phone_number_id"`
	AccessToken       string    `bun:"access_token"`
	AppSecret         string    `bun:"app_secret"`
	BaseURL           string    `bun:"base_url"`
	CreatedAt         time.Time `bun:"created_at"`
}

func (r *accountRow) toDomain() *ProviderAccount {
	if r == nil || r.ID == 0 {
		return nil
	}
	return &ProviderAccount{ID: r.ID, CompanyID: r.CompanyID, BusinessAccountID: r.BusinessAccountID,
		PhoneNumberID: r.PhoneNumberID, AccessToken: r.AccessToken, AppSecret: r.AppSecret, BaseURL: r.BaseURL}
}

type channelRow struct {
	bun.BaseModel     `bun:"table:company_channels,alias:cc"`
	ID                int64       `bun:"id,pk,autoincrement"`
	CompanyID         int64       `bun:"company_id"`
	Key               string      `bun:"key"`
	Name              string      `bun:"name"`
	ChannelTypeID     int         `bun:"channel_type_id"`
	ProviderAccountID *int64      `bun:"provider_account_id"`
	Account           *accountRow `bun:"rel:belongs-to,join:provider_account_id=id"`
	CreatedAt         time.Time   `bun:"created_at"`
	UpdatedAt         time.Time   `bun:"updated_at"`
}

func (r channelRow) toDomain() Channel {
	return Channel{ID: r.ID, CompanyID: r.CompanyID, Key: r.Key, Name: r.Name, TypeID: TypeID(r.ChannelTypeID),
		ProviderAccount: r.Account.toDomain(), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// Service is the channels capability.
type Service struct {
	db      *store.DB
	now     clock.Clock
	cache   *lookupCache
	keyring *secrets.Keyring
}

// NewService returns the channels service.
func NewService(db *store.DB, now clock.Clock) *Service {
	if now == nil {
		now = clock.System
	}
	return &Service{db: db, now: now, cache: newLookupCache()}
}

// OfficialInput registers an official channel and its provider account.
type OfficialInput struct {
	CompanyID         int64
	Name              string
	Key               string
	BusinessAccountID string
	PhoneNumberID     string
	AccessToken       string
	AppSecret         string
	BaseURL           string
}

var digitsOnly = regexp.MustCompile(`^[0-9]{8,15}$`)

// RegisterOfficial creates a provider account and its official channel.
// Errors: Invalid for malformed input, Rule when the number is taken.
func (s *Service) RegisterOfficial(ctx context.Context, in OfficialInput) (Channel, error) {
	var missing []string
	for name, v := range map[string]string{"name": in.Name, "key": in.Key, "business account id": in.BusinessAccountID,
		"phone number id": in.PhoneNumberID, "access token": in.AccessToken, "app secret": in.AppSecret, "base url": in.BaseURL} {
		if strings.TrimSpace(v) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return Channel{}, fault.New(fault.Invalid, "missing: "+strings.Join(missing, ", "))
	}
	if !digitsOnly.MatchString(in.Key) {
		return Channel{}, fault.New(fault.Invalid, "key must be the number with country code, digits only")
	}
	var out Channel
	err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		now := s.now()
		// The clear answer for a number that is one of the company's
		// connections; another company's paired connection proved the
		// number (neutral answer), its unpaired one reserves nothing. The
		// unique indexes settle races.
		var own, proven int
		if err := tx.NewSelect().Table("company_channels").ColumnExpr("COUNT(*)").
			Where("key = ?", in.Key).Where("channel_type_id = ?", int(UnofficialChatapp)).Where("company_id = ?", in.CompanyID).Scan(ctx, &own); err != nil {
			return fault.Internalf(err, "check number")
		}
		if own > 0 {
			return fault.New(fault.Rule, fmt.Sprintf(MsgNumberIsConnection, in.Key))
		}
		if err := tx.NewSelect().Table("company_channels").ColumnExpr("COUNT(*)").
			Where("key = ?", in.Key).Where("channel_type_id = ?", int(UnofficialChatapp)).Where("logged").Scan(ctx, &proven); err != nil {
			return fault.Internalf(err, "check number")
		}
		if proven > 0 {
			return fault.New(fault.Rule, fmt.Sprintf(MsgNumberUnavailable, in.Key))
		}
		acc := accountRow{CompanyID: in.CompanyID, BusinessAccountID: in.BusinessAccountID, PhoneNumberID: in.PhoneNumberID,
			AccessToken: in.AccessToken, AppSecret: in.AppSecret, BaseURL: strings.TrimRight(in.BaseURL, "/"), CreatedAt: now}
		if err := s.sealAccount(&acc); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(&acc).Returning("id").Exec(ctx); err != nil {
			if store.IsUniqueViolation(err) {
				return fault.New(fault.Rule, "phone number id is already registered")
			}
			return fault.Internalf(err, "insert provider account")
		}
		row := channelRow{CompanyID: in.CompanyID, Key: in.Key, Name: in.Name, ChannelTypeID: int(OfficialChatapp),
			ProviderAccountID: &acc.ID, CreatedAt: now, UpdatedAt: now}
		if _, err := tx.NewInsert().Model(&row).Returning("id").Exec(ctx); err != nil {
			if store.IsUniqueViolation(err) {
				return fault.Wrap(fault.Rule, fmt.Sprintf(MsgNumberUnavailable, in.Key), err)
			}
			return fault.Internalf(err, "insert channel")
		}
		row.Account = &acc
		var err error
		out, err = s.opened(row.toDomain())
		return err
	})
	s.cache.clear()
	return out, err
}

// ListFilter narrows ListCompanyChannels.
type ListFilter struct {
	TypeID *TypeID
	Page   store.Page
}

// ListCompanyChannels lists a company's channels by id.
func (s *Service) ListCompanyChannels(ctx context.Context, companyID int64, f ListFilter) ([]Channel, int, error) {
	var rows []channelRow
	q := s.db.Bun.NewSelect().Model(&rows).Relation("Account").Where("cc.company_id = ?", companyID).Order("cc.id ASC")
	if f.TypeID != nil {
		q = q.Where("cc.channel_type_id = ?", int(*f.TypeID))
	}
	total, err := store.ScanPage(ctx, q, f.Page)
	if err != nil {
		return nil, 0, fault.Internalf(err, "list company channels")
	}
	out := make([]Channel, len(rows))
	for i, r := range rows {
		if out[i], err = s.opened(r.toDomain()); err != nil {
			return nil, 0, err
		}
	}
	return out, total, nil
}

// Get returns a company's channel by id. Another company's channel is
// NotFound, as is a missing one. Found channels are cached (CacheTTL).
func (s *Service) Get(ctx context.Context, companyID, id int64) (Channel, error) {
	now := s.now()
	if ch, ok := s.cache.getID(companyID, id, now); ok {
		return ch, nil
	}
	gen := s.cache.generation()
	var row channelRow
	err := s.db.Bun.NewSelect().Model(&row).Relation("Account").Where("cc.company_id = ?", companyID).Where("cc.id = ?", id).Scan(ctx)
	if store.IsNoRows(err) {
		return Channel{}, fault.New(fault.NotFound, "Channel not found.")
	}
	if err != nil {
		return Channel{}, fault.Internalf(err, "get channel")
	}
	ch, err := s.opened(row.toDomain())
	if err != nil {
		return Channel{}, err
	}
	s.cache.put(gen, ch, now)
	return ch, nil
}
