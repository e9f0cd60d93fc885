package conversations

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

type queryer = bun.IDB

// Relations say which relations a read includes (`with`).
type Relations struct {
	Contact bool
	Tags    bool
	Sector  bool
	User    bool
	Window  bool // providerOpenedWindow
}

// AllRelations includes every relation.
var AllRelations = Relations{Contact: true, Tags: true, Sector: true, User: true, Window: true}

// TagOperation says how the tag filter's ids combine.
type TagOperation string

const (
	// TagsAll (XAND): the conversation has every listed tag, of all kinds.
	TagsAll TagOperation = "XAND"
	// TagsAny (XOR): the conversation has at least one listed tag, of any kind.
	TagsAny TagOperation = "XOR"
	// TagsEachKind (AND, the default): for each kind given, the conversation
	// has at least one of that kind's listed tags; the kinds combine with AND.
	TagsEachKind TagOperation = "AND"
)

// TagFilter is the tags_ids filter. A kind with no ids does not filter.
type TagFilter struct {
	Contact   []int64
	Ticket    []int64
	Business  []int64
	Operation TagOperation
}

func (f TagFilter) empty() bool { return len(f.Contact)+len(f.Ticket)+len(f.Business) == 0 }

// TimeRange is an inclusive [From, To] range.
type TimeRange struct {
	From, To time.Time
}

// SortColumns are the columns the listing sorts on (orderBy).
var SortColumns = []string{"id", "name", "key", "last_message_at", "created_at", "updated_at", "unread_count", "status_id"}

// ListFilter is GET /api/contact-channels' query. Every filter set composes
// with AND.
type ListFilter struct {
	Page store.Page
	// OrderBy is one of SortColumns (default id); Ascending flips the
	// default descending order. Ties break on id in the same direction;
	// a null last_message_at sorts as the oldest.
	OrderBy   string
	Ascending bool
	With      Relations

	// Text matches the conversation name or key or the contact name or
	// email, case- and accent-insensitively, anywhere in the text.
	Text string
	Tags TagFilter

	SectorID      *int64
	WithoutSector bool

	// StatusIDs, when not empty, selects exactly these statuses. Otherwise
	// ShowAllStatuses selects all, IncludeClosed all but Spam and Banned,
	// and by default Resolved, Cancelled, Spam and Banned are excluded.
	StatusIDs       []StatusID
	ShowAllStatuses bool
	IncludeClosed   bool

	// ChannelTypeIDs: the conversation's channel type is each of them
	// (channel_type_id and channelable_type both land here).
	ChannelTypeIDs   []channels.TypeID
	ChannelKey       *string
	CompanyChannelID *int64

	// WindowMinMinutes / WindowMaxMinutes bound the remaining minutes of the
	// official 24-hour window (a closed window counts as 0). Either one
	// restricts the list to official conversations (channel type 3).
	WindowMinMinutes *int
	WindowMaxMinutes *int

	UserID         *int64
	WithoutUser    bool
	NeverResponded bool
	OriginID       *OriginID

	CreatedAt     *TimeRange
	UpdatedAt     *TimeRange
	LastMessageAt *TimeRange

	IsGroup    *bool
	Muted      *bool
	Pinned     *bool
	Opened     *bool
	OnlyUnread bool
}

// DefaultStatuses are the statuses listed when no status filter is given.
var DefaultStatuses = []StatusID{StatusOpen, StatusPending, StatusInProgress}

// List is one page of the listing and its total.
type List struct {
	Data []Conversation
	// Total is the number of conversations matching the filter. When
	// TotalIsCapped, the count stopped there and more match (see
	// countLimit); otherwise it is exact.
	Total         int
	TotalIsCapped bool
}

// ListContactChannels lists the company's conversations matching f, with
// the total over all pages. A listing filtered by statuses only (the
// default, show_all_statuses, include_closed, status_id(s)) takes its total
// from the counts kept per company and status; any other filter counts
// matching rows up to countLimit. Errors: Invalid (unknown sort column),
// Internal.
func (s *Service) ListContactChannels(ctx context.Context, companyID int64, f ListFilter) (List, error) {
	orderBy := f.OrderBy
	if orderBy == "" {
		orderBy = "id"
	}
	if !slices.Contains(SortColumns, orderBy) {
		return List{}, &fault.Error{Kind: fault.Invalid, Message: "OrderBy must be one of " + fmt.Sprint(SortColumns),
			Fields: map[string][]string{"orderBy": {"unknown sort column " + orderBy}}}
	}
	if f.Page.Number < 1 {
		f.Page.Number = 1
	}
	var channelIDs []int64
	if f.ChannelKey != nil {
		ids, err := s.channelIDsByKey(ctx, companyID, *f.ChannelKey)
		if err != nil {
			return List{}, err
		}
		if len(ids) == 0 {
			return List{Data: []Conversation{}}, nil
		}
		channelIDs = ids
	}

	statuses := f.statuses()
	only := f.onlyStatuses()
	var rows []conversationRow
	var q *bun.SelectQuery
	if only && len(statuses) > 1 && slices.Contains(statusOrdered, orderBy) {
		q = s.mergedByStatus(&rows, companyID, statuses, orderBy, f.Ascending, f.Page)
	} else {
		q = s.db.Bun.NewSelect().Model(&rows).Where("cc.company_id = ?", companyID)
		q = s.applyFilter(q, f, channelIDs, stamp(s.now()))
		q = orderQuery(q, orderBy, f.Ascending)
	}
	if err := q.Limit(int64(f.Page.PerPage)).Offset(int64(offset(f.Page))).Scan(ctx); err != nil {
		return List{}, fault.Internalf(err, "list conversations")
	}
	var out List
	var err error
	if only {
		out.Total, err = s.keptCount(ctx, companyID, statuses)
	} else {
		out.Total, out.TotalIsCapped, err = s.cappedCount(ctx, companyID, f, channelIDs)
	}
	if err != nil {
		return List{}, err
	}
	out.Data = make([]Conversation, len(rows))
	for i, r := range rows {
		out.Data[i] = r.toDomain()
	}
	if err := s.load(ctx, companyID, out.Data, f.With); err != nil {
		return List{}, err
	}
	return out, nil
}

// statusOrdered are the sort columns that an index with the status after
// the company serves in order: (company_id, status_id, id) for id and
// status_id, (company_id, status_id, last_message_at, id) for
// last_message_at.
var statusOrdered = []string{"id", "last_message_at", "status_id"}

// mergedByStatus is the page of a listing by several statuses and nothing
// else, ordered by a statusOrdered column: one branch per status reads, in
// index order, only as many rows as the page needs (offset + per page),
// and the outer query orders the union of the branches (PostgreSQL merges
// them) and cuts the page. A single IN over the statuses could not use the
// index order: it would read and sort every conversation of those statuses,
// the company's whole inbox.
func (s *Service) mergedByStatus(rows *[]conversationRow, companyID int64, statuses []StatusID, orderBy string, asc bool, p store.Page) *bun.SelectQuery {
	need := offset(p) + p.PerPage
	parts := make([]string, len(statuses))
	branches := make([]any, len(statuses))
	for i, st := range statuses {
		parts[i] = fmt.Sprintf("SELECT * FROM (?) AS b%d", i)
		b := s.db.Bun.NewSelect().Model((*conversationRow)(nil)).Where("cc.company_id = ?", companyID).Where("cc.status_id = ?", int(st))
		branches[i] = orderQuery(b, orderBy, asc).Limit(int64(need))
	}
	q := s.db.Bun.NewSelect().Model(rows).ModelTableExpr("("+strings.Join(parts, " UNION ALL ")+") AS cc", branches...)
	return orderQuery(q, orderBy, asc)
}

func offset(p store.Page) int { return (max(p.Number, 1) - 1) * p.PerPage }

// statuses resolves the status rule (see ListFilter.StatusIDs) to the set
// of statuses listed, in ascending order without repeats.
func (f ListFilter) statuses() []StatusID {
	switch {
	case len(f.StatusIDs) > 0:
		out := slices.Clone(f.StatusIDs)
		slices.Sort(out)
		return slices.Compact(out)
	case f.ShowAllStatuses:
		return []StatusID{StatusOpen, StatusPending, StatusInProgress, StatusResolved, StatusCancelled, StatusSpam, StatusBanned}
	case f.IncludeClosed:
		return []StatusID{StatusOpen, StatusPending, StatusInProgress, StatusResolved, StatusCancelled}
	default:
		return DefaultStatuses
	}
}

// onlyStatuses reports whether f filters by statuses and nothing else, so
// that its total is a sum of kept counts. Every field is a filter unless
// cleared here: a filter added to ListFilter later counts as one without
// a change to this method.
func (f ListFilter) onlyStatuses() bool {
	g := f
	g.Page, g.OrderBy, g.Ascending, g.With = store.Page{}, "", false, Relations{}
	g.StatusIDs, g.ShowAllStatuses, g.IncludeClosed = nil, false, false
	if g.Tags.empty() {
		g.Tags = TagFilter{}
	}
	return reflect.ValueOf(g).IsZero()
}

// Get returns the company's conversation id with the relations asked for.
// Errors: NotFound, Internal.
func (s *Service) Get(ctx context.Context, companyID, id int64, with Relations) (Conversation, error) {
	r, err := s.row(ctx, s.db.Bun, companyID, id, false)
	if err != nil {
		return Conversation{}, err
	}
	out := []Conversation{r.toDomain()}
	if err := s.load(ctx, companyID, out, with); err != nil {
		return Conversation{}, err
	}
	return out[0], nil
}

func orderQuery(q *bun.SelectQuery, col string, asc bool) *bun.SelectQuery {
	dir := "DESC"
	if asc {
		dir = "ASC"
	}
	switch col {
	case "id":
		return q.OrderExpr("cc.id " + dir)
	case "last_message_at":
		// A null (no message yet) sorts as the oldest on both engines;
		// PostgreSQL's default would put nulls first in DESC.
		nulls := "NULLS LAST"
		if asc {
			nulls = "NULLS FIRST"
		}
		return q.OrderExpr("cc.last_message_at " + dir + " " + nulls).OrderExpr("cc.id " + dir)
	default:
		return q.OrderExpr("cc." + col + " " + dir).OrderExpr("cc.id " + dir)
	}
}

func (s *Service) applyFilter(q *bun.SelectQuery, f ListFilter, channelIDs []int64, now time.Time) *bun.SelectQuery {
	// Statuses.
	if st := f.statuses(); len(st) < 7 {
		q = q.Where("cc.status_id IN (?)", bun.In(ints(st)))
	}

	if f.Text != "" {
		// EXISTS on the search row's key: PostgreSQL plans a semi-join,
		// which can probe that key per conversation. That stays cheap
		// when statistics are missing (a new company: an IN over the
		// company's search rows was rescanned per conversation then) and
		// lets the trigram index drive it for a large company.
		q = q.Where(`EXISTS (SELECT 1 FROM contact_channel_search AS s WHERE s.contact_channel_id = cc.id AND s.search_text LIKE ? ESCAPE '\')`,
			store.LikeContains(normalise(f.Text)))
	}
	if !f.Tags.empty() {
		q = q.Where("?", tagPredicate(f.Tags))
	}

	if f.SectorID != nil {
		q = q.Where("cc.sector_id = ?", *f.SectorID)
	}
	if f.WithoutSector {
		q = q.Where("cc.sector_id IS NULL")
	}

	types := slices.Clone(f.ChannelTypeIDs)
	if f.WindowMinMinutes != nil || f.WindowMaxMinutes != nil {
		types = append(types, channels.OfficialChatapp)
	}
	for _, t := range types {
		q = q.Where("cc.channel_type_id = ?", int(t))
	}
	if channelIDs != nil {
		q = q.Where("cc.company_channel_id IN (?)", bun.In(channelIDs))
	}
	if f.CompanyChannelID != nil {
		q = q.Where("cc.company_channel_id = ?", *f.CompanyChannelID)
	}
	// remaining = floor((last_inbound_at + 24h - now) / 1min), 0 when
	// closed or never opened. remaining >= m (m > 0) ⇔ last_inbound_at >=
	// now - 24h + m min; remaining <= M ⇔ never opened, or last_inbound_at
	// < now - 24h + (M+1) min (an expired window satisfies that too).
	if m := f.WindowMinMinutes; m != nil && *m > 0 {
		q = q.Where("cc.last_inbound_at >= ?", now.Add(-WindowLength+time.Duration(*m)*time.Minute))
	}
	if m := f.WindowMaxMinutes; m != nil && time.Duration(*m)*time.Minute < WindowLength {
		q = q.Where("(cc.last_inbound_at IS NULL OR cc.last_inbound_at < ?)", now.Add(-WindowLength+time.Duration(*m+1)*time.Minute))
	}

	if f.UserID != nil {
		q = q.Where("cc.user_id = ?", *f.UserID)
	}
	if f.WithoutUser {
		q = q.Where("cc.user_id IS NULL")
	}
	if f.NeverResponded {
		q = q.Where("cc.first_response_at IS NULL")
	}
	if f.OriginID != nil {
		q = q.Where("cc.origin_id = ?", int(*f.OriginID))
	}
	for _, r := range []struct {
		col string
		r   *TimeRange
	}{{"created_at", f.CreatedAt}, {"updated_at", f.UpdatedAt}, {"last_message_at", f.LastMessageAt}} {
		if r.r != nil {
			q = q.Where("cc."+r.col+" >= ?", stamp(r.r.From)).Where("cc."+r.col+" <= ?", stamp(r.r.To))
		}
	}
	for _, flag := range []struct {
		col string
		v   *bool
	}{{"is_group", f.IsGroup}, {"muted", f.Muted}, {"pinned", f.Pinned}, {"opened", f.Opened}} {
		if flag.v != nil {
			q = q.Where("cc."+flag.col+" = ?", *flag.v)
		}
	}
	if f.OnlyUnread {
		q = q.Where("cc.unread_count > 0")
	}
	return q
}

// tagPredicate builds the tags_ids condition from uncorrelated IN
// subqueries (sets of contact or conversation ids), which PostgreSQL runs
// as semi-joins or hashed subplans with good row estimates. XAND asks for
// every listed id, one subquery per id: a single GROUP BY … HAVING
// COUNT(DISTINCT tag_id) = n is shorter but its result size is
// unestimable and the planner then picks nested loops (≈100 ms instead of
// ≈5 ms at 100,000 conversations). AND asks for any id of each kind, XOR
// for any id of any kind.
func tagPredicate(f TagFilter) bun.Safe {
	type kind struct {
		ids         []int64
		column, sub string
	}
	kinds := []kind{
		{uniq(f.Contact), "cc.contact_id", "SELECT contact_id FROM contact_tags"},
		{uniq(f.Ticket), "cc.id", "SELECT contact_channel_id FROM contact_channel_tags"},
		{uniq(f.Business), "cc.contact_id", "SELECT contact_id FROM business_tags"},
	}
	var parts []string
	for _, k := range kinds {
		if len(k.ids) == 0 {
			continue
		}
		if f.Operation == TagsAll {
			for _, id := range k.ids {
				parts = append(parts, fmt.Sprintf("%s IN (%s WHERE tag_id = %d)", k.column, k.sub, id))
			}
			continue
		}
		parts = append(parts, fmt.Sprintf("%s IN (%s WHERE tag_id IN (%s))", k.column, k.sub, joinInts(k.ids)))
	}
	sep := " AND "
	if f.Operation == TagsAny {
		sep = " OR "
	}
	return bun.Safe("(" + strings.Join(parts, sep) + ")")
}

func (s *Service) channelIDsByKey(ctx context.Context, companyID int64, key string) ([]int64, error) {
	var ids []int64
	for page := 1; ; page++ {
		list, total, err := s.channels.ListCompanyChannels(ctx, companyID, channels.ListFilter{Page: store.Page{Number: page, PerPage: 500}})
		if err != nil {
			return nil, err
		}
		for _, ch := range list {
			if ch.Key == key {
				ids = append(ids, ch.ID)
			}
		}
		if page*500 >= total || len(list) == 0 {
			return ids, nil
		}
	}
}

// load fills the relations asked for, one query per relation for the
// whole page. The contact is always read: the record's phone is the
// contact's.
func (s *Service) load(ctx context.Context, companyID int64, list []Conversation, with Relations) error {
	if len(list) == 0 {
		return nil
	}
	db := s.db.Bun
	contactIDs := make([]int64, 0, len(list))
	convIDs := make([]int64, 0, len(list))
	var sectorIDs, userIDs []int64
	for _, c := range list {
		contactIDs = append(contactIDs, c.ContactID)
		convIDs = append(convIDs, c.ID)
		if c.SectorID != nil {
			sectorIDs = append(sectorIDs, *c.SectorID)
		}
		if c.UserID != nil {
			userIDs = append(userIDs, *c.UserID)
		}
	}
	var contacts []contactRow
	if err := db.NewSelect().Model(&contacts).Where("ct.company_id = ?", companyID).Where("ct.id IN (?)", bun.In(uniq(contactIDs))).Scan(ctx); err != nil {
		return fault.Internalf(err, "load contacts")
	}
	byContact := map[int64]Contact{}
	for _, c := range contacts {
		byContact[c.ID] = c.toDomain()
	}
	sectors := map[int64]Sector{}
	if with.Sector && len(sectorIDs) > 0 {
		var rows []sectorRow
		if err := db.NewSelect().Model(&rows).Where("s.company_id = ?", companyID).Where("s.id IN (?)", bun.In(uniq(sectorIDs))).Scan(ctx); err != nil {
			return fault.Internalf(err, "load sectors")
		}
		for _, r := range rows {
			sectors[r.ID] = Sector{ID: r.ID, Name: r.Name}
		}
	}
	users := map[int64]auth.User{}
	if with.User && len(userIDs) > 0 {
		var err error
		if users, err = s.users.UsersByID(ctx, companyID, uniq(userIDs)); err != nil {
			return err
		}
	}
	var tags map[int64][]Tag
	if with.Tags {
		var err error
		if tags, err = s.loadTags(ctx, companyID, convIDs, contactIDs, list); err != nil {
			return err
		}
	}
	now := s.now()
	for i := range list {
		c := &list[i]
		contact, ok := byContact[c.ContactID]
		if ok {
			c.Phone = contact.Phone
		}
		if with.Contact && ok {
			cc := contact
			c.Contact = &cc
		}
		if with.Sector && c.SectorID != nil {
			if sec, ok := sectors[*c.SectorID]; ok {
				c.Sector = &sec
			}
		}
		if with.User && c.UserID != nil {
			if u, ok := users[*c.UserID]; ok {
				c.User = &u
			}
		}
		if with.Tags {
			c.Tags = tags[c.ID]
			if c.Tags == nil {
				c.Tags = []Tag{}
			}
		}
		if with.Window && c.ChannelTypeID == channels.OfficialChatapp {
			w := WindowAt(c.LastInboundAt, now)
			c.Window = &w
			c.WindowRemainingMinutes = w.RemainingMinutes(now)
		}
	}
	return nil
}

var kindOrder = map[TagKind]int{ContactTag: 0, TicketTag: 1, BusinessTag: 2}

// loadTags returns, per conversation id, its ticket tags, its contact's
// tags and the tags of its contact's CRM businesses, each tag once.
func (s *Service) loadTags(ctx context.Context, companyID int64, convIDs, contactIDs []int64, list []Conversation) (map[int64][]Tag, error) {
	type link struct {
		OwnerID int64  `bun:"owner_id"`
		ID      int64  `bun:"id"`
		Kind    string `bun:"kind"`
		Name    string `bun:"name"`
	}
	db := s.db.Bun
	var ticket, contact, business []link
	if err := db.NewRaw(`SELECT l.contact_channel_id AS owner_id, t.id, t.kind, t.name FROM contact_channel_tags l
		JOIN tags t ON t.id = l.tag_id WHERE t.company_id = ? AND l.contact_channel_id IN (?)`, companyID, bun.In(convIDs)).Scan(ctx, &ticket); err != nil {
		return nil, fault.Internalf(err, "load ticket tags")
	}
	if err := db.NewRaw(`SELECT l.contact_id AS owner_id, t.id, t.kind, t.name FROM contact_tags l
		JOIN tags t ON t.id = l.tag_id WHERE t.company_id = ? AND l.contact_id IN (?)`, companyID, bun.In(uniq(contactIDs))).Scan(ctx, &contact); err != nil {
		return nil, fault.Internalf(err, "load contact tags")
	}
	if err := db.NewRaw(`SELECT DISTINCT l.contact_id AS owner_id, t.id, t.kind, t.name FROM business_tags l
		JOIN tags t ON t.id = l.tag_id WHERE t.company_id = ? AND l.contact_id IN (?)`, companyID, bun.In(uniq(contactIDs))).Scan(ctx, &business); err != nil {
		return nil, fault.Internalf(err, "load business tags")
	}
	group := func(links []link) map[int64][]Tag {
		m := map[int64][]Tag{}
		for _, l := range links {
			m[l.OwnerID] = append(m[l.OwnerID], Tag{ID: l.ID, Kind: TagKind(l.Kind), Name: l.Name})
		}
		return m
	}
	byConv, byContact, byBusinessContact := group(ticket), group(contact), group(business)
	out := map[int64][]Tag{}
	for _, c := range list {
		var tags []Tag
		tags = append(tags, byContact[c.ContactID]...)
		tags = append(tags, byConv[c.ID]...)
		tags = append(tags, byBusinessContact[c.ContactID]...)
		sort.SliceStable(tags, func(i, j int) bool {
			if tags[i].Kind != tags[j].Kind {
				return kindOrder[tags[i].Kind] < kindOrder[tags[j].Kind]
			}
			return tags[i].ID < tags[j].ID
		})
		out[c.ID] = tags
	}
	return out, nil
}

func ints[T ~int](xs []T) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}

func uniq(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

func joinInts(ids []int64) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(id)
	}
	return s
}
