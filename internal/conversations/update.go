package conversations

import (
	"context"
	"errors"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// Update is a change to a conversation (PATCH /api/contact-channels/{id}).
// Nil fields are left as they are.
type Update struct {
	// UserID assigns or transfers the conversation to a user of the company.
	UserID *int64
	// Unassign removes the assigned user.
	Unassign bool
	// SectorID moves the conversation to a sector of the company.
	SectorID *int64
	// ClearSector removes the sector.
	ClearSector bool
	StatusID    *StatusID
	Pinned      *bool
	Muted       *bool
	Opened      *bool
	// MarkRead sets unread_count to 0.
	MarkRead bool
}

// Messages of the update's checks against data (the adapter checks the
// combinations of fields before calling).
const (
	msgUnknownUser   = "The selected user id is not a user of this company."
	msgUnknownSector = "The selected sector id is not a sector of this company."
)

// errUserChanged means the assignee changed between the read outside the
// transaction (where users are loaded from auth) and the locked read inside.
var errUserChanged = errors.New("assigned user changed concurrently")

// UpdateContactChannel applies u to the company's conversation id and
// publishes, in the same transaction, omnichat.conversation.assigned when
// the conversation gets a new assignee (with change_context
// {previous_user_id, assigned_user_id}) and omnichat.conversation.closed
// when its status moves from an open status to Resolved or Cancelled (with
// {previous_status_id, status_id}). Payloads describe the conversation
// after the whole update. It returns the conversation with every relation.
// Errors: NotFound (missing or another company's), Invalid (assignee not a
// user of the company, unknown sector), Internal.
func (s *Service) UpdateContactChannel(ctx context.Context, companyID, id int64, u Update) (Conversation, error) {
	// Users live in auth and are read through its service, which on SQLite
	// cannot run inside our transaction (one connection): load them first,
	// then re-check inside the locked transaction and start over in the
	// rare case the assignee changed in between.
	for attempt := 0; ; attempt++ {
		err := s.updateOnce(ctx, companyID, id, u)
		if errors.Is(err, errUserChanged) && attempt < 3 {
			continue
		}
		if err != nil {
			return Conversation{}, err
		}
		return s.Get(ctx, companyID, id, AllRelations)
	}
}

func (s *Service) updateOnce(ctx context.Context, companyID, id int64, u Update) error {
	before, err := s.row(ctx, s.db.Bun, companyID, id, false)
	if err != nil {
		return err
	}
	var ids []int64
	if before.UserID != nil {
		ids = append(ids, *before.UserID)
	}
	if u.UserID != nil {
		ids = append(ids, *u.UserID)
	}
	users, err := s.users.UsersByID(ctx, companyID, ids)
	if err != nil {
		return err
	}
	if u.UserID != nil {
		if _, ok := users[*u.UserID]; !ok {
			return &fault.Error{Kind: fault.Invalid, Message: msgUnknownUser, Fields: map[string][]string{"user_id": {msgUnknownUser}}}
		}
	}

	return s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		cur, err := s.row(ctx, tx, companyID, id, true)
		if err != nil {
			return err
		}
		if cur.UserID != nil {
			if _, ok := users[*cur.UserID]; !ok {
				return errUserChanged
			}
		}
		next := cur
		var sector *Sector
		if u.SectorID != nil {
			sec, err := s.sector(ctx, tx, companyID, *u.SectorID)
			if err != nil {
				return err
			}
			next.SectorID = &sec.ID
		}
		if u.ClearSector {
			next.SectorID = nil
		}
		if u.UserID != nil {
			uid := *u.UserID
			next.UserID = &uid
		}
		if u.Unassign {
			next.UserID = nil
		}
		if u.StatusID != nil {
			next.StatusID = int(*u.StatusID)
		}
		if u.Pinned != nil {
			next.Pinned = *u.Pinned
		}
		if u.Muted != nil {
			next.Muted = *u.Muted
		}
		if u.Opened != nil {
			next.Opened = *u.Opened
		}
		if u.MarkRead {
			next.UnreadCount = 0
		}
		if sameState(cur, next) {
			return nil
		}
		next.UpdatedAt = stamp(s.now())
		// The new version comes back into next, so the events below carry it.
		if _, err := tx.NewUpdate().Model(&next).
			Column("sector_id", "user_id", "status_id", "pinned", "muted", "opened", "unread_count", "updated_at").
			Set(bumpVersion).WherePK().Returning("version").Exec(ctx); err != nil {
			return fault.Internalf(err, "update conversation")
		}

		assigned := next.UserID != nil && !sameID(cur.UserID, next.UserID)
		closed := StatusID(next.StatusID).Closed() && !StatusID(cur.StatusID).Closed()
		if !assigned && !closed {
			return nil
		}
		var contact contactRow
		if err := tx.NewSelect().Model(&contact).Where("ct.id = ?", next.ContactID).Scan(ctx); err != nil {
			return fault.Internalf(err, "read contact")
		}
		if next.SectorID != nil {
			sec, err := s.sector(ctx, tx, companyID, *next.SectorID)
			if err != nil {
				return err
			}
			sector = &sec
		}
		var user *auth.User
		if next.UserID != nil {
			uu := users[*next.UserID]
			user = &uu
		}
		conv := next.toDomain()
		ct := contact.toDomain()
		conv.Contact, conv.Sector, conv.User = &ct, sector, user
		if assigned {
			if err := s.publish(ctx, tx, events.OmnichatConversationAssigned, conv, s.AssignedPayload(conv, cur.UserID)); err != nil {
				return err
			}
		}
		if closed {
			if err := s.publish(ctx, tx, events.OmnichatConversationClosed, conv, s.ClosedPayload(conv, StatusID(cur.StatusID))); err != nil {
				return err
			}
		}
		return nil
	})
}

func sameID(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func sameState(a, b conversationRow) bool {
	return sameID(a.SectorID, b.SectorID) && sameID(a.UserID, b.UserID) && a.StatusID == b.StatusID &&
		a.Pinned == b.Pinned && a.Muted == b.Muted && a.Opened == b.Opened && a.UnreadCount == b.UnreadCount
}

// row reads the company's conversation id; forUpdate locks it until the
// transaction ends (PostgreSQL; SQLite transactions already hold the
// database's single write lock).
func (s *Service) row(ctx context.Context, db queryer, companyID, id int64, forUpdate bool) (conversationRow, error) {
	var r conversationRow
	q := db.NewSelect().Model(&r).Where("cc.company_id = ?", companyID).Where("cc.id = ?", id)
	if forUpdate && s.db.Dialect == store.Postgres {
		q = q.For("UPDATE")
	}
	err := q.Scan(ctx)
	if store.IsNoRows(err) {
		return r, fault.New(fault.NotFound, "Conversation not found.")
	}
	if err != nil {
		return r, fault.Internalf(err, "read conversation")
	}
	return r, nil
}

func (s *Service) sector(ctx context.Context, db queryer, companyID, id int64) (Sector, error) {
	var r sectorRow
	err := db.NewSelect().Model(&r).Where("s.company_id = ?", companyID).Where("s.id = ?", id).Scan(ctx)
	if store.IsNoRows(err) {
		return Sector{}, &fault.Error{Kind: fault.Invalid, Message: msgUnknownSector, Fields: map[string][]string{"sector_id": {msgUnknownSector}}}
	}
	if err != nil {
		return Sector{}, fault.Internalf(err, "read sector")
	}
	return Sector{ID: r.ID, Name: r.Name}, nil
}
