package conversations

import (
	"context"
	"fmt"
	"strings"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// The API document manages sectors, tags, contacts' details and CRM
// businesses in other parts of the platform; these methods are how that
// data enters this service (admin commands, imports, tests). Every one is
// company-scoped: ids of another company are NotFound.

// CreateSector adds a sector. Errors: Invalid (empty name), Rule (name
// taken), Internal.
func (s *Service) CreateSector(ctx context.Context, companyID int64, name string) (Sector, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return Sector{}, fault.New(fault.Invalid, "sector name is required")
	}
	r := sectorRow{CompanyID: companyID, Name: name, CreatedAt: stamp(s.now())}
	if _, err := s.db.Bun.NewInsert().Model(&r).Returning("id").Exec(ctx); err != nil {
		if store.IsUniqueViolation(err) {
			return Sector{}, fault.New(fault.Rule, fmt.Sprintf("sector %q already exists", name))
		}
		return Sector{}, fault.Internalf(err, "insert sector")
	}
	return Sector{ID: r.ID, Name: r.Name}, nil
}

// CreateTag adds a tag of a kind. Errors: Invalid, Rule (name taken for the
// kind), Internal.
func (s *Service) CreateTag(ctx context.Context, companyID int64, kind TagKind, name string) (Tag, error) {
	name = strings.TrimSpace(name)
	if !kind.Valid() || name == "" {
		return Tag{}, fault.New(fault.Invalid, "tag kind (contact, ticket, crm_business) and name are required")
	}
	r := tagRow{CompanyID: companyID, Kind: string(kind), Name: name, CreatedAt: stamp(s.now())}
	if _, err := s.db.Bun.NewInsert().Model(&r).Returning("id").Exec(ctx); err != nil {
		if store.IsUniqueViolation(err) {
			return Tag{}, fault.New(fault.Rule, fmt.Sprintf("%s tag %q already exists", kind, name))
		}
		return Tag{}, fault.Internalf(err, "insert tag")
	}
	return Tag{ID: r.ID, Kind: kind, Name: r.Name}, nil
}

// TagContact attaches contact tags to a contact (idempotent).
func (s *Service) TagContact(ctx context.Context, companyID, contactID int64, tagIDs ...int64) error {
	if err := s.owned(ctx, "contacts", companyID, contactID, "Contact not found."); err != nil {
		return err
	}
	return s.attach(ctx, companyID, ContactTag, tagIDs, "INSERT INTO contact_tags (contact_id, tag_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
		func(tagID int64) []any { return []any{contactID, tagID} })
}

// TagConversation attaches ticket tags to a conversation (idempotent).
func (s *Service) TagConversation(ctx context.Context, companyID, conversationID int64, tagIDs ...int64) error {
	if err := s.owned(ctx, "contact_channels", companyID, conversationID, "Conversation not found."); err != nil {
		return err
	}
	return s.attach(ctx, companyID, TicketTag, tagIDs, "INSERT INTO contact_channel_tags (contact_channel_id, tag_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
		func(tagID int64) []any { return []any{conversationID, tagID} })
}

// Business is the part of a CRM business (deal) this service keeps: whose
// it is and its tags.
type Business struct {
	ID               int64
	ContactID        int64
	ContactChannelID *int64
	Title            string
}

// CreateBusiness records a CRM business of a contact, optionally with the
// conversation it came from. Its crm_business tags count for every
// conversation of the contact.
func (s *Service) CreateBusiness(ctx context.Context, companyID, contactID int64, conversationID *int64, title string) (Business, error) {
	if err := s.owned(ctx, "contacts", companyID, contactID, "Contact not found."); err != nil {
		return Business{}, err
	}
	if conversationID != nil {
		if err := s.owned(ctx, "contact_channels", companyID, *conversationID, "Conversation not found."); err != nil {
			return Business{}, err
		}
	}
	r := businessRow{CompanyID: companyID, ContactID: contactID, ContactChannelID: conversationID, Title: title, CreatedAt: stamp(s.now())}
	if _, err := s.db.Bun.NewInsert().Model(&r).Returning("id").Exec(ctx); err != nil {
		return Business{}, fault.Internalf(err, "insert business")
	}
	return Business{ID: r.ID, ContactID: contactID, ContactChannelID: conversationID, Title: title}, nil
}

// TagBusiness attaches crm_business tags to a business (idempotent).
func (s *Service) TagBusiness(ctx context.Context, companyID, businessID int64, tagIDs ...int64) error {
	var b businessRow
	err := s.db.Bun.NewSelect().Model(&b).Where("b.company_id = ?", companyID).Where("b.id = ?", businessID).Scan(ctx)
	if store.IsNoRows(err) {
		return fault.New(fault.NotFound, "Business not found.")
	}
	if err != nil {
		return fault.Internalf(err, "look up business")
	}
	return s.attach(ctx, companyID, BusinessTag, tagIDs, "INSERT INTO business_tags (business_id, tag_id, contact_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
		func(tagID int64) []any { return []any{businessID, tagID, b.ContactID} })
}

// UpdateContact sets a contact's name and email and refreshes the search
// text of its conversations (the text filter covers the contact's name and
// email). Errors: NotFound, Invalid, Internal.
func (s *Service) UpdateContact(ctx context.Context, companyID, contactID int64, name string, email *string) (Contact, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return Contact{}, fault.New(fault.Invalid, "contact name is required")
	}
	var out Contact
	err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		var c contactRow
		err := tx.NewSelect().Model(&c).Where("ct.company_id = ?", companyID).Where("ct.id = ?", contactID).Scan(ctx)
		if store.IsNoRows(err) {
			return fault.New(fault.NotFound, "Contact not found.")
		}
		if err != nil {
			return fault.Internalf(err, "read contact")
		}
		c.Name, c.Email, c.UpdatedAt = name, email, stamp(s.now())
		if _, err := tx.NewUpdate().Model(&c).Column("name", "email", "updated_at").WherePK().Exec(ctx); err != nil {
			return fault.Internalf(err, "update contact")
		}
		var convs []conversationRow
		if err := tx.NewSelect().Model(&convs).Column("id", "company_id", "name", "key").Where("cc.contact_id = ?", c.ID).Scan(ctx); err != nil {
			return fault.Internalf(err, "read contact's conversations")
		}
		for _, cv := range convs {
			if err := setSearchText(ctx, tx, cv.ID, cv.CompanyID, searchText(cv.Name, cv.Key, c)); err != nil {
				return err
			}
		}
		out = c.toDomain()
		return nil
	})
	return out, err
}

// owned checks that row id of table belongs to the company.
func (s *Service) owned(ctx context.Context, table string, companyID, id int64, notFound string) error {
	n, err := s.db.Bun.NewSelect().Table(table).Where("company_id = ?", companyID).Where("id = ?", id).Count(ctx)
	if err != nil {
		return fault.Internalf(err, "look up %s", table)
	}
	if n == 0 {
		return fault.New(fault.NotFound, notFound)
	}
	return nil
}

// attach links tags of kind to an owner row with insert (one row per tag,
// args giving its values), all or none; the tags must be the company's and
// of that kind, so a tag filter can never reach across companies or kinds.
func (s *Service) attach(ctx context.Context, companyID int64, kind TagKind, tagIDs []int64, insert string, args func(tagID int64) []any) error {
	tagIDs = uniq(tagIDs)
	if len(tagIDs) == 0 {
		return nil
	}
	return s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		n, err := tx.NewSelect().Model((*tagRow)(nil)).Where("t.company_id = ?", companyID).Where("t.kind = ?", string(kind)).
			Where("t.id IN (?)", bun.In(tagIDs)).Count(ctx)
		if err != nil {
			return fault.Internalf(err, "look up tags")
		}
		if int(n) != len(tagIDs) {
			return fault.New(fault.NotFound, fmt.Sprintf("Some tags are not %s tags of this company.", kind))
		}
		for _, id := range tagIDs {
			if _, err := tx.NewRaw(insert, args(id)...).Exec(ctx); err != nil {
				return fault.Internalf(err, "attach tag")
			}
		}
		return nil
	})
}
