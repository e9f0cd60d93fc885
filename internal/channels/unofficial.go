package channels

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// Unofficial chat-app connections are company channels of type 2. Their
// rows live in company_channels like every channel; the logged flag is the
// connection's session state as the connections capability last saw it
// (it owns the live session and calls SetUnofficialLogged).

// UnofficialMigrations add what connections need to company_channels.
var UnofficialMigrations = []store.Migration{{
	ID: "0070_channels_unofficial",
	SQLite: `
ALTER TABLE company_channels ADD COLUMN logged BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX company_channels_logged ON company_channels (channel_type_id, logged);
`,
	Postgres: `
ALTER TABLE company_channels ADD COLUMN logged BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX company_channels_logged ON company_channels (channel_type_id, logged);
`}, {
	// One number, one channel: a number lives on the chat app or on its
	// official channel, never both, whatever the companies (keys of both
	// types are the canonical digits-only number).
	ID: "0071_channels_one_number",
	SQLite: `
CREATE UNIQUE INDEX company_channels_chatapp_number ON company_channels (key) WHERE channel_type_id IN (2, 3);
`,
	Postgres: `
CREATE UNIQUE INDEX company_channels_chatapp_number ON company_channels (key) WHERE channel_type_id IN (2, 3);
`}}

// Messages of the unofficial-channel faults.
const (
	MsgConnectionNotFound = "Connection not found"
	MsgKeyInUse           = "The number %s is already used by another connection"
	// MsgKeyIsOfficial: the number is an official channel's (of any
	// company); it cannot be a chat-app connection at the same time.
	MsgKeyIsOfficial = "The number %s is already used by an official channel"
	// MsgNumberIsConnection: registering an official channel whose number
	// is a chat-app connection's.
	MsgNumberIsConnection = "The number %s is already used by a chat-app connection; delete the connection first"
)

// numberTaken is the Rule fault of a number another chat-app channel holds
// (unique index company_channels_chatapp_number), worded for the type that
// holds it. Called after a unique violation, outside the failed
// transaction.
func (s *Service) numberTaken(ctx context.Context, key string, cause error) error {
	var holder int
	err := s.db.Bun.NewSelect().Table("company_channels").Column("channel_type_id").
		Where("key = ?", key).Where("channel_type_id IN (?, ?)", int(UnofficialChatapp), int(OfficialChatapp)).Limit(1).Scan(ctx, &holder)
	if err != nil && !store.IsNoRows(err) {
		return fault.Internalf(errors.Join(cause, err), "find the holder of a number")
	}
	if TypeID(holder) == OfficialChatapp {
		return fault.New(fault.Rule, fmt.Sprintf(MsgKeyIsOfficial, key))
	}
	return fault.New(fault.Rule, fmt.Sprintf(MsgKeyInUse, key))
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

// CreateUnofficial creates a connection of the company, not logged in.
// Errors: Rule when the number is used by another connection.
func (s *Service) CreateUnofficial(ctx context.Context, companyID int64, name, key string) (Unofficial, error) {
	now := s.now().UTC()
	row := unofficialRow{CompanyID: companyID, Key: key, Name: name, ChannelTypeID: int(UnofficialChatapp), CreatedAt: now, UpdatedAt: now}
	if _, err := s.db.Bun.NewInsert().Model(&row).Returning("id").Exec(ctx); err != nil {
		if store.IsUniqueViolation(err) {
			return Unofficial{}, s.numberTaken(ctx, key, err)
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
			return Unofficial{}, s.numberTaken(ctx, *ch.NewKey, err)
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
// reports whether the flag changed (updated_at moves only then).
func (s *Service) SetUnofficialLogged(ctx context.Context, id int64, logged bool) (bool, error) {
	res, err := s.db.Bun.NewUpdate().Model((*unofficialRow)(nil)).
		Set("logged = ?", logged).Set("updated_at = ?", s.now().UTC()).
		Where("id = ?", id).Where("channel_type_id = ?", int(UnofficialChatapp)).Where("logged <> ?", logged).Exec(ctx)
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
