package channels

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// Unofficial chat-app connections are company channels of type 2. Their
// rows live in company_channels like every channel; the logged flag is the
// connection's session state as the connections capability last saw it
// (it owns the live session and calls SetUnofficialLogged).

// Messages of the unofficial-channel faults. The specific ones name a
// holder in the caller's own company; a number another company proved is
// MsgNumberUnavailable, which says nothing of who holds it.
const (
	MsgConnectionNotFound = "Connection not found"
	MsgKeyInUse           = "The number %s is already used by another connection"
	// MsgKeyIsOfficial: the number is one of the company's official
	// channels; it cannot be a chat-app connection at the same time.
	MsgKeyIsOfficial = "The number %s is already used by an official channel"
	// MsgNumberIsConnection: registering an official channel whose number
	// is a chat-app connection's of the same company.
	MsgNumberIsConnection = "The number %s is already used by a chat-app connection; delete the connection first"
	// MsgNumberUnavailable: another company proved the number (its official
	// channel, or its paired connection).
	MsgNumberUnavailable = "The number %s is not available"
)

// numberTaken is the Rule fault of a number another channel holds, worded
// for the holder when it is the company's own and neutral otherwise.
// Called after a unique violation, outside the failed transaction; self is
// the channel being changed (0 when creating).
func (s *Service) numberTaken(ctx context.Context, companyID, self int64, key string, cause error) error {
	var holder []int
	err := s.db.Bun.NewSelect().Table("company_channels").Column("channel_type_id").
		Where("key = ?", key).Where("company_id = ?", companyID).Where("id <> ?", self).
		Where("channel_type_id IN (?, ?)", int(UnofficialChatapp), int(OfficialChatapp)).Scan(ctx, &holder)
	if err != nil {
		return fault.Internalf(errors.Join(cause, err), "find the holder of a number")
	}
	switch {
	case slices.Contains(holder, int(OfficialChatapp)):
		return fault.Wrap(fault.Rule, fmt.Sprintf(MsgKeyIsOfficial, key), cause)
	case slices.Contains(holder, int(UnofficialChatapp)):
		return fault.Wrap(fault.Rule, fmt.Sprintf(MsgKeyInUse, key), cause)
	}
	return fault.Wrap(fault.Rule, fmt.Sprintf(MsgNumberUnavailable, key), cause)
}

// ownOfficial refuses a connection number that is one of the company's
// official channels (no index covers a company's own pair of types).
func (s *Service) ownOfficial(ctx context.Context, companyID int64, key string) error {
	n, err := s.db.Bun.NewSelect().Table("company_channels").Where("company_id = ?", companyID).
		Where("key = ?", key).Where("channel_type_id = ?", int(OfficialChatapp)).Count(ctx)
	if err != nil {
		return fault.Internalf(err, "check number")
	}
	if n > 0 {
		return fault.New(fault.Rule, fmt.Sprintf(MsgKeyIsOfficial, key))
	}
	return nil
}

// Unofficial is a chat-app connection.
type Unofficial struct {
	Channel
	Logged bool
}

type unofficialRow struct {
	bun.BaseModel `bun:"table:company_channels,alias:cc"`
	ID            int64     `bun:"id,pk,autoincrement"`
	CompanyID     int64     `bun:"company_id"`
	Key           string    `bun:"key"`
	Name          string    `bun:"name"`
	ChannelTypeID int       `bun:"channel_type_id"`
	Logged        bool      `bun:"logged"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

func (r unofficialRow) toDomain() Unofficial {
	return Unofficial{Channel: Channel{ID: r.ID, CompanyID: r.CompanyID, Key: r.Key, Name: r.Name, TypeID: TypeID(r.ChannelTypeID),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}, Logged: r.Logged}
}

// CreateUnofficial creates a connection of the company, not logged in. Its
// number is reserved in the company only until it is paired. Errors: Rule
// when the number is another connection's or an official channel's of the
// company.
func (s *Service) CreateUnofficial(ctx context.Context, companyID int64, name, key string) (Unofficial, error) {
	if err := s.ownOfficial(ctx, companyID, key); err != nil {
		return Unofficial{}, err
	}
	now := s.now().UTC()
	row := unofficialRow{CompanyID: companyID, Key: key, Name: name, ChannelTypeID: int(UnofficialChatapp), CreatedAt: now, UpdatedAt: now}
	if _, err := s.db.Bun.NewInsert().Model(&row).Returning("id").Exec(ctx); err != nil {
		if store.IsUniqueViolation(err) {
			return Unofficial{}, s.numberTaken(ctx, companyID, 0, key, err)
		}
		return Unofficial{}, fault.Internalf(err, "insert connection")
	}
	return row.toDomain(), nil
}

// GetUnofficial returns the company's connection chosen by id or key (at
// least one; when both are given they must name the same connection). A
// missing connection, or one of another company, is NotFound.
func (s *Service) GetUnofficial(ctx context.Context, companyID int64, id *int64, key *string) (Unofficial, error) {
	return getUnofficial(ctx, s.db.Bun, companyID, id, key)
}

func getUnofficial(ctx context.Context, db bun.IDB, companyID int64, id *int64, key *string) (Unofficial, error) {
	if id == nil && key == nil {
		return Unofficial{}, fault.New(fault.Invalid, "Id or key is required")
	}
	var row unofficialRow
	q := db.NewSelect().Model(&row).Where("cc.company_id = ?", companyID).Where("cc.channel_type_id = ?", int(UnofficialChatapp))
	if id != nil {
		q = q.Where("cc.id = ?", *id)
	}
	if key != nil {
		q = q.Where("cc.key = ?", *key)
	}
	err := q.Scan(ctx)
	if store.IsNoRows(err) {
		return Unofficial{}, fault.New(fault.NotFound, MsgConnectionNotFound)
	}
	if err != nil {
		return Unofficial{}, fault.Internalf(err, "get connection")
	}
	return row.toDomain(), nil
}

// UnofficialByID returns a connection by id whatever its company (the
// connections capability resolves leases and session events with it).
func (s *Service) UnofficialByID(ctx context.Context, id int64) (Unofficial, error) {
	var row unofficialRow
	err := s.db.Bun.NewSelect().Model(&row).Where("cc.id = ?", id).Where("cc.channel_type_id = ?", int(UnofficialChatapp)).Scan(ctx)
	if store.IsNoRows(err) {
		return Unofficial{}, fault.New(fault.NotFound, MsgConnectionNotFound)
	}
	if err != nil {
		return Unofficial{}, fault.Internalf(err, "get connection")
	}
	return row.toDomain(), nil
}

// UnofficialChange is what UpdateUnofficial changes; nil fields stay.
type UnofficialChange struct {
	Name   *string
	NewKey *string
}

// UpdateUnofficial renames a connection or changes its number. Errors:
// NotFound, Rule when the new number is used by another connection.
func (s *Service) UpdateUnofficial(ctx context.Context, companyID, id int64, ch UnofficialChange) (Unofficial, error) {
	if ch.NewKey != nil {
		if err := s.ownOfficial(ctx, companyID, *ch.NewKey); err != nil {
			return Unofficial{}, err
		}
	}
	q := s.db.Bun.NewUpdate().Model((*unofficialRow)(nil)).
		Where("company_id = ?", companyID).Where("id = ?", id).Where("channel_type_id = ?", int(UnofficialChatapp)).
		Set("updated_at = ?", s.now().UTC())
	if ch.Name != nil {
		q = q.Set("name = ?", *ch.Name)
	}
	if ch.NewKey != nil {
		q = q.Set("key = ?", *ch.NewKey)
	}
	res, err := q.Exec(ctx)
	s.cache.clear()
	if err != nil {
		if store.IsUniqueViolation(err) && ch.NewKey != nil {
			return Unofficial{}, s.numberTaken(ctx, companyID, id, *ch.NewKey, err)
		}
		return Unofficial{}, fault.Internalf(err, "update connection")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Unofficial{}, fault.New(fault.NotFound, MsgConnectionNotFound)
	}
	return s.GetUnofficial(ctx, companyID, &id, nil)
}

// DeleteUnofficial deletes a connection inside tx (the caller deletes what
// hangs on it in the same transaction). The caller runs afterCommit once tx
// committed: it clears the lookup cache then, so a lookup between the
// delete and the commit, which still reads the row, cannot keep the deleted
// channel cached. Errors: NotFound.
func (s *Service) DeleteUnofficial(ctx context.Context, tx *store.Tx, companyID, id int64) (afterCommit func(), err error) {
	res, err := tx.NewDelete().Model((*unofficialRow)(nil)).
		Where("company_id = ?", companyID).Where("id = ?", id).Where("channel_type_id = ?", int(UnofficialChatapp)).Exec(ctx)
	if err != nil {
		return nil, fault.Internalf(err, "delete connection")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, fault.New(fault.NotFound, MsgConnectionNotFound)
	}
	return s.cache.clear, nil
}

// SetUnofficialLogged records the session state of a connection; it
// reports whether the flag changed (updated_at moves only then). Logged
// reserves the number across companies: Rule when another channel proved
// it first (neutral unless the holder is the company's own).
func (s *Service) SetUnofficialLogged(ctx context.Context, id int64, logged bool) (bool, error) {
	res, err := s.db.Bun.NewUpdate().Model((*unofficialRow)(nil)).
		Set("logged = ?", logged).Set("updated_at = ?", s.now().UTC()).
		Where("id = ?", id).Where("channel_type_id = ?", int(UnofficialChatapp)).Where("logged <> ?", logged).Exec(ctx)
	if err != nil && logged && store.IsUniqueViolation(err) {
		// Pairing proves the number: another channel proved it first
		// (company_channels_chatapp_number).
		c, gerr := s.UnofficialByID(ctx, id)
		if gerr != nil {
			return false, gerr
		}
		return false, s.numberTaken(ctx, c.CompanyID, id, c.Key, err)
	}
	if err != nil {
		return false, fault.Internalf(err, "set connection logged")
	}
	n, _ := res.RowsAffected()
	if n > 0 {
		s.cache.clear() // updated_at moved
	}
	return n > 0, nil
}

// UnofficialFilter narrows ListUnofficial. Time bounds are inclusive.
type UnofficialFilter struct {
	// Text matches the name (case-insensitively) or the number.
	Text   string
	Logged *bool
	// OrderBy is one of id, name, key, logged, created_at, updated_at.
	OrderBy                string
	Desc                   bool
	CreatedFrom, CreatedTo *time.Time
	UpdatedFrom, UpdatedTo *time.Time
	Page                   store.Page
}

var unofficialOrder = map[string]string{"id": "cc.id", "name": "cc.name", "key": "cc.key", "logged": "cc.logged",
	"created_at": "cc.created_at", "updated_at": "cc.updated_at"}

// ListUnofficial lists a company's connections.
func (s *Service) ListUnofficial(ctx context.Context, companyID int64, f UnofficialFilter) ([]Unofficial, int, error) {
	var rows []unofficialRow
	q := s.db.Bun.NewSelect().Model(&rows).Where("cc.company_id = ?", companyID).Where("cc.channel_type_id = ?", int(UnofficialChatapp))
	if f.Text != "" {
		pattern := store.LikeContains(f.Text)
		q = q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("cc.name "+s.db.ILike()+` ? ESCAPE '\'`, pattern).WhereOr(`cc.key LIKE ? ESCAPE '\'`, pattern)
		})
	}
	if f.Logged != nil {
		q = q.Where("cc.logged = ?", *f.Logged)
	}
	for _, b := range []struct {
		col string
		op  string
		t   *time.Time
	}{{"cc.created_at", ">=", f.CreatedFrom}, {"cc.created_at", "<=", f.CreatedTo}, {"cc.updated_at", ">=", f.UpdatedFrom}, {"cc.updated_at", "<=", f.UpdatedTo}} {
		if b.t != nil {
			q = q.Where(b.col+" "+b.op+" ?", b.t.UTC())
		}
	}
	col, ok := unofficialOrder[f.OrderBy]
	if !ok {
		col = "cc.id"
	}
	dir := " ASC"
	if f.Desc {
		dir = " DESC"
	}
	q = q.OrderExpr(col + dir)
	if col != "cc.id" {
		q = q.OrderExpr("cc.id" + dir)
	}
	total, err := store.ScanPage(ctx, q, f.Page)
	if err != nil {
		return nil, 0, fault.Internalf(err, "list connections")
	}
	out := make([]Unofficial, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, total, nil
}
