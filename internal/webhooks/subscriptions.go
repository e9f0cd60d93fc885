package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// Client-safe messages of the management operations.
const (
	msgNotFound = "Webhook not found."
	msgDisabled = "Webhook is disabled."
	// The document's validation messages (x-required-message /
	// x-invalid-message of WebhookName and WebhookUrl).
	msgNameRequired = "Name is required"
	msgNameInvalid  = "Name is required and may not be greater than 150 characters"
	msgURLInvalid   = "Url must be a valid http or https URL"
	// msgURLRefused takes the host: an address the SSRF guard refuses on
	// every dial (issue 29: such a subscription used to be accepted and
	// then fail every delivery with no hint of the setting).
	msgURLRefused = "Url host %s is an address the service may not reach; an operator can allow it with OUTBOUND_ALLOW_CIDRS"
	// msgChannelUnknown takes the id that is not a channel of the company.
	msgChannelUnknown = "Company channel %d does not exist"
	// msgEventsUnknown: names were given and none is subscribable. The
	// document's "omitted = all" holds for an omitted (or empty) list only;
	// subscribing to everything because every given name was mistyped
	// would surprise the client (issue 16).
	msgEventsUnknown = "Events must name at least one subscribable event"
	maxNameLength    = 150
)

// Subscription is a webhook subscription as clients see it (never the
// secret).
type Subscription struct {
	ID        int64
	CompanyID int64
	Name      string
	URL       string
	// Events are the subscribed names; every subscribable event when the
	// subscription took "all".
	Events []string
	// CompanyChannelIDs filters channel-scope events; nil = all channels.
	CompanyChannelIDs []int64
	Enabled           bool
	FailureCount      int
	LastSuccessAt     *time.Time
	LastFailureAt     *time.Time
	DisabledReason    *string
	// SignatureScheme is SchemeSvc or SchemeStandard (an extension).
	SignatureScheme string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// CreateInput is the body of createChannelWebhook.
type CreateInput struct {
	Name string
	URL  string
	// Events nil or empty = all; unknown names are discarded; names of
	// which none is subscribable are Invalid.
	Events []string
	// CompanyChannelIDs nil or empty = all channels.
	CompanyChannelIDs []int64
	// Enabled nil = true.
	Enabled *bool
	// SignatureScheme "" = SchemeSvc.
	SignatureScheme string
}

// UpdateInput carries only the fields to change (nil = unchanged).
type UpdateInput struct {
	Name   *string
	URL    *string
	Events *[]string
	// CompanyChannelIDs non-nil sets the filter; pointing to nil or an
	// empty slice means all channels.
	CompanyChannelIDs *[]int64
	// Enabled true also resets failure_count and disabled_reason.
	Enabled *bool
	// SignatureScheme nil = unchanged.
	SignatureScheme *string
}

// ListFilter narrows listChannelWebhooks.
type ListFilter struct {
	// Filter searches name and url.
	Filter  string
	Enabled *bool
	// CompanyChannelID keeps subscriptions receiving that channel's events,
	// including those without a channel filter.
	CompanyChannelID *int64
	// OrderBy is one of id, name, url, enabled, created_at, updated_at,
	// failure_count (default id).
	OrderBy string
	Desc    bool
	Page    store.Page
}

// AvailableEvent is a subscribable event of the catalog.
type AvailableEvent struct {
	Name        string
	Description string
}

type subscriptionRow struct {
	bun.BaseModel `bun:"table:webhook_subscriptions"`
	ID            int64  `bun:"id,pk,autoincrement"`
	CompanyID     int64  `bun:"company_id"`
	Name          string `bun:"name"`
	URL           string `bun:"url"`
	// Destination is the sealed broker URL with credentials ('' when URL
	// is the destination); read by the delivery path only.
	Destination    string     `bun:"destination"`
	Events         string     `bun:"events"`
	AllEvents      bool       `bun:"all_events"`
	ChannelIDs     *string    `bun:"company_channel_ids"`
	Enabled        bool       `bun:"enabled"`
	Secret         string     `bun:"secret"`
	FailureCount   int        `bun:"failure_count"`
	LastSuccessAt  *time.Time `bun:"last_success_at"`
	LastFailureAt  *time.Time `bun:"last_failure_at"`
	DisabledReason *string    `bun:"disabled_reason"`
	// SignatureScheme is SchemeSvc or SchemeStandard.
	SignatureScheme string    `bun:"signature_scheme"`
	CreatedAt       time.Time `bun:"created_at"`
	UpdatedAt       time.Time `bun:"updated_at"`
}

func (r subscriptionRow) toDomain() Subscription {
	return Subscription{
		ID: r.ID, CompanyID: r.CompanyID, Name: r.Name, URL: r.URL,
		Events: r.eventNames(), CompanyChannelIDs: decodeChannels(r.ChannelIDs),
		Enabled: r.Enabled, FailureCount: r.FailureCount, LastSuccessAt: store.UTC(r.LastSuccessAt),
		LastFailureAt: store.UTC(r.LastFailureAt), DisabledReason: r.DisabledReason, SignatureScheme: r.scheme(),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// scheme is the row's signature scheme; a row read without that column
// (or before the migration filled it) signs with the document's scheme.
func (r subscriptionRow) scheme() string {
	if r.SignatureScheme == SchemeStandard {
		return SchemeStandard
	}
	return SchemeSvc
}

// msgSchemeInvalid is the x-invalid-message of WebhookSignatureScheme; the
// request validator refuses other values first, this guards direct callers.
const msgSchemeInvalid = "Signature scheme must be svc or standard-webhooks"

func validateScheme(scheme string, fields map[string][]string) {
	if scheme != SchemeSvc && scheme != SchemeStandard {
		fields["signature_scheme"] = append(fields["signature_scheme"], msgSchemeInvalid)
	}
}

func (r subscriptionRow) eventNames() []string {
	if r.AllEvents {
		return subscribableNames()
	}
	var names []string
	_ = json.Unmarshal([]byte(r.Events), &names)
	return normalizeEvents(names) // drops names the catalog no longer has
}

// subscribes reports whether the row receives event name.
func (r subscriptionRow) subscribes(name string) bool {
	if r.AllEvents {
		return true
	}
	// events is a JSON array of catalog names, which contain no quotes or
	// escapes: a substring test on the quoted name is exact.
	return strings.Contains(r.Events, `"`+name+`"`)
}

// acceptsChannel reports whether a channel-scope event of channel id passes
// the row's filter.
func (r subscriptionRow) acceptsChannel(id *int64) bool {
	if r.ChannelIDs == nil {
		return true
	}
	return id != nil && strings.Contains(*r.ChannelIDs, ","+strconv.FormatInt(*id, 10)+",")
}

func subscribableNames() []string {
	var out []string
	for _, e := range events.Subscribable() {
		out = append(out, e.Name)
	}
	return out
}

// normalizeEvents keeps subscribable names only, once each, in catalog
// order.
func normalizeEvents(names []string) []string {
	var out []string
	for _, e := range events.Subscribable() {
		if slices.Contains(names, e.Name) {
			out = append(out, e.Name)
		}
	}
	return out
}

// encodeEvents returns the stored form of a requested events list: nil or
// empty means all (a list naming only unknown events was refused by
// validateEvents before).
func encodeEvents(names []string) (stored string, all bool) {
	kept := normalizeEvents(names)
	if len(kept) == 0 {
		return "[]", true
	}
	b, _ := json.Marshal(kept)
	return string(b), false
}

// encodeChannels stores channel ids as ",1,5,9," (sorted, unique), nil for
// all channels.
func encodeChannels(ids []int64) *string {
	if len(ids) == 0 {
		return nil
	}
	s := encodeIDs(ids)
	return &s
}

func decodeChannels(s *string) []int64 {
	if s == nil {
		return nil
	}
	return decodeIDs(*s)
}

// newSecret returns a signing secret: 32 random bytes, hex, with a prefix
// that makes leaked secrets easy to recognise. The whole string is the HMAC
// key (its UTF-8 bytes).
func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "whsec_" + hex.EncodeToString(b[:]), nil
}

// validateName and validateURL are the server-side checks the schema cannot
// express (a blank name; a URL the pattern lets through that does not parse
// as http(s) with a host).
func validateName(name string, fields map[string][]string) {
	if strings.TrimSpace(name) == "" {
		fields["name"] = append(fields["name"], msgNameRequired)
	} else if utf8.RuneCountInString(name) > maxNameLength {
		fields["name"] = append(fields["name"], msgNameInvalid)
	}
}

// validateEvents refuses a list that names events of which none is
// subscribable; unknown names next to a known one are discarded, as the
// document says.
func validateEvents(names []string, fields map[string][]string) {
	if len(names) > 0 && len(normalizeEvents(names)) == 0 {
		fields["events"] = append(fields["events"], msgEventsUnknown)
	}
}

// validateURL also refuses a host every delivery would be refused: a
// literal address the SSRF guard does not allow, or localhost. A host name
// is judged at each delivery, on what DNS returns then.
func (s *Service) validateURL(raw string, fields map[string][]string) {
	if _, msg := parseDestination(raw); msg != "" {
		fields["url"] = append(fields["url"], msg)
		return
	}
	if host, refused := s.guard.RefusedHost(raw); refused {
		fields["url"] = append(fields["url"], fmt.Sprintf(msgURLRefused, host))
	}
}

// validateChannels records a field error for every id that is not a
// channel of the company: a filter naming a foreign or missing channel would
// silently never match.
func (s *Service) validateChannels(ctx context.Context, companyID int64, ids []int64, fields map[string][]string) error {
	if s.channels == nil {
		return nil
	}
	for _, id := range ids {
		_, err := s.channels.Get(ctx, companyID, id)
		if fault.KindOf(err) == fault.NotFound {
			fields["company_channel_ids"] = append(fields["company_channel_ids"], fmt.Sprintf(msgChannelUnknown, id))
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func invalid(fields map[string][]string) error {
	if len(fields) == 0 {
		return nil
	}
	// The message is the first error, in the document's field order.
	msg := ""
	for _, k := range []string{"name", "url", "events", "company_channel_ids", "signature_scheme"} {
		if len(fields[k]) > 0 {
			msg = fields[k][0]
			break
		}
	}
	return &fault.Error{Kind: fault.Invalid, Message: msg, Fields: fields}
}

// CreateChannelWebhook creates a subscription and returns it with its
// secret (shown only here and on rotation). Errors: Forbidden,
// RateLimited, Invalid.
func (s *Service) CreateChannelWebhook(ctx context.Context, p auth.Principal, in CreateInput) (Subscription, string, error) {
	if err := s.throttle(ctx, p); err != nil {
		return Subscription{}, "", err
	}
	fields := map[string][]string{}
	validateName(in.Name, fields)
	s.validateURL(in.URL, fields)
	validateEvents(in.Events, fields)
	if in.SignatureScheme == "" {
		in.SignatureScheme = SchemeSvc
	}
	validateScheme(in.SignatureScheme, fields)
	if err := s.validateChannels(ctx, p.CompanyID, in.CompanyChannelIDs, fields); err != nil {
		return Subscription{}, "", err
	}
	if err := invalid(fields); err != nil {
		return Subscription{}, "", err
	}
	secret, stored, err := s.newSealedSecret()
	if err != nil {
		return Subscription{}, "", fault.Internalf(err, "generate secret")
	}
	shown, sealed, err := s.storedURL(in.URL)
	if err != nil {
		return Subscription{}, "", fault.Internalf(err, "seal destination")
	}
	now := s.now().UTC()
	row := subscriptionRow{CompanyID: p.CompanyID, Name: in.Name, URL: shown, Destination: sealed, ChannelIDs: encodeChannels(in.CompanyChannelIDs),
		Enabled: in.Enabled == nil || *in.Enabled, Secret: stored, SignatureScheme: in.SignatureScheme, CreatedAt: now, UpdatedAt: now}
	if in.Events == nil {
		row.Events, row.AllEvents = "[]", true
	} else {
		row.Events, row.AllEvents = encodeEvents(in.Events)
	}
	if _, err := s.db.Bun.NewInsert().Model(&row).Exec(ctx); err != nil {
		return Subscription{}, "", fault.Internalf(err, "insert subscription")
	}
	s.subs.invalidate()
	return row.toDomain(), secret, nil
}

// ListChannelWebhooks lists the company's subscriptions. Errors: Forbidden,
// RateLimited.
func (s *Service) ListChannelWebhooks(ctx context.Context, p auth.Principal, f ListFilter) ([]Subscription, int, error) {
	if err := s.throttle(ctx, p); err != nil {
		return nil, 0, err
	}
	var rows []subscriptionRow
	q := s.db.Bun.NewSelect().Model(&rows).Where("company_id = ?", p.CompanyID)
	if f.Filter != "" {
		pattern := store.LikeContains(f.Filter)
		op := s.db.ILike()
		q = q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("name "+op+" ? ESCAPE '\\'", pattern).WhereOr("url "+op+" ? ESCAPE '\\'", pattern)
		})
	}
	if f.Enabled != nil {
		q = q.Where("enabled = ?", *f.Enabled)
	}
	if f.CompanyChannelID != nil {
		q = q.WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("company_channel_ids IS NULL").
				WhereOr("company_channel_ids LIKE ?", "%,"+strconv.FormatInt(*f.CompanyChannelID, 10)+",%")
		})
	}
	col := "id"
	if slices.Contains([]string{"name", "url", "enabled", "created_at", "updated_at", "failure_count"}, f.OrderBy) {
		col = f.OrderBy
	}
	dir := " ASC"
	if f.Desc {
		dir = " DESC"
	}
	q = q.OrderExpr(col + dir)
	if col != "id" {
		q = q.OrderExpr("id" + dir)
	}
	total, err := store.ScanPage(ctx, q, f.Page)
	if err != nil {
		return nil, 0, fault.Internalf(err, "list subscriptions")
	}
	out := make([]Subscription, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, total, nil
}

// ListAvailableWebhookEvents returns the subscribable events of the
// catalog (never ping). Errors: Forbidden, RateLimited.
func (s *Service) ListAvailableWebhookEvents(ctx context.Context, p auth.Principal) ([]AvailableEvent, error) {
	if err := s.throttle(ctx, p); err != nil {
		return nil, err
	}
	var out []AvailableEvent
	for _, e := range events.Subscribable() {
		out = append(out, AvailableEvent{Name: e.Name, Description: e.Description})
	}
	return out, nil
}

// get loads a subscription of the company; another company's id is not
// found, exactly like a missing one.
func (s *Service) get(ctx context.Context, db bun.IDB, companyID, id int64) (subscriptionRow, error) {
	var row subscriptionRow
	err := db.NewSelect().Model(&row).Where("id = ?", id).Where("company_id = ?", companyID).Limit(1).Scan(ctx)
	if store.IsNoRows(err) {
		return row, fault.New(fault.NotFound, msgNotFound)
	}
	if err != nil {
		return row, fault.Internalf(err, "load subscription %d", id)
	}
	return row, nil
}

// GetChannelWebhook returns one subscription of the company (an
// extension; never the secret). Errors: Forbidden, RateLimited, NotFound
// (another company's id too).
func (s *Service) GetChannelWebhook(ctx context.Context, p auth.Principal, id int64) (Subscription, error) {
	if err := s.throttle(ctx, p); err != nil {
		return Subscription{}, err
	}
	row, err := s.get(ctx, s.db.Bun, p.CompanyID, id)
	if err != nil {
		return Subscription{}, err
	}
	return row.toDomain(), nil
}

// UpdateChannelWebhook changes only the given fields. Errors: Forbidden,
// RateLimited, Invalid, NotFound.
func (s *Service) UpdateChannelWebhook(ctx context.Context, p auth.Principal, id int64, in UpdateInput) (Subscription, error) {
	if err := s.throttle(ctx, p); err != nil {
		return Subscription{}, err
	}
	fields := map[string][]string{}
	if in.Name != nil {
		validateName(*in.Name, fields)
	}
	if in.URL != nil {
		s.validateURL(*in.URL, fields)
	}
	if in.Events != nil {
		validateEvents(*in.Events, fields)
	}
	if in.SignatureScheme != nil {
		validateScheme(*in.SignatureScheme, fields)
	}
	if in.CompanyChannelIDs != nil {
		if err := s.validateChannels(ctx, p.CompanyID, *in.CompanyChannelIDs, fields); err != nil {
			return Subscription{}, err
		}
	}
	if err := invalid(fields); err != nil {
		return Subscription{}, err
	}
	var out Subscription
	err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		row, err := s.get(ctx, tx, p.CompanyID, id)
		if err != nil {
			return err
		}
		if in.Name != nil {
			row.Name = *in.Name
		}
		// The masked URL a read returned, sent back unchanged, keeps the
		// stored credentials.
		if in.URL != nil && *in.URL != row.URL {
			if row.URL, row.Destination, err = s.storedURL(*in.URL); err != nil {
				return fault.Internalf(err, "seal destination")
			}
		}
		if in.Events != nil {
			row.Events, row.AllEvents = encodeEvents(*in.Events)
		}
		if in.CompanyChannelIDs != nil {
			row.ChannelIDs = encodeChannels(*in.CompanyChannelIDs)
		}
		if in.SignatureScheme != nil {
			row.SignatureScheme = *in.SignatureScheme
		}
		if in.Enabled != nil {
			row.Enabled = *in.Enabled
			if *in.Enabled {
				// Re-enabling starts the consecutive-failure count afresh.
				row.FailureCount, row.DisabledReason = 0, nil
			}
		}
		row.UpdatedAt = s.now().UTC()
		// Only the columns a client may change: the worker updates the
		// delivery columns concurrently and must not be overwritten.
		cols := []string{"name", "url", "destination", "events", "all_events", "company_channel_ids", "enabled", "signature_scheme", "updated_at"}
		if in.Enabled != nil && *in.Enabled {
			cols = append(cols, "failure_count", "disabled_reason")
		}
		if _, err := tx.NewUpdate().Model(&row).Column(cols...).WherePK().Exec(ctx); err != nil {
			return fault.Internalf(err, "update subscription %d", id)
		}
		out = row.toDomain()
		return nil
	})
	s.subs.invalidate()
	return out, err
}

// DeleteChannelWebhook removes a subscription, its delivery log and its
// pending deliveries. Deliveries stop at once: a lane running meanwhile
// finds the subscription gone at its next read. Errors: Forbidden, RateLimited,
// NotFound.
func (s *Service) DeleteChannelWebhook(ctx context.Context, p auth.Principal, id int64) error {
	if err := s.throttle(ctx, p); err != nil {
		return err
	}
	err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if _, err := s.get(ctx, tx, p.CompanyID, id); err != nil {
			return err
		}
		// Pending deliveries go first, in the order a lane writes its
		// outcomes (deliveries, then the subscription's counters), so a
		// delete racing a lane's batch waits for it instead of deadlocking.
		if _, err := tx.NewDelete().Model((*deliveryRow)(nil)).Where("subscription_id = ?", id).Exec(ctx); err != nil {
			return fault.Internalf(err, "delete pending deliveries of %d", id)
		}
		res, err := tx.NewDelete().Model((*subscriptionRow)(nil)).Where("id = ?", id).Where("company_id = ?", p.CompanyID).Exec(ctx)
		if err != nil {
			return fault.Internalf(err, "delete subscription %d", id)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.New(fault.NotFound, msgNotFound)
		}
		if _, err := tx.NewDelete().Model((*logRow)(nil)).Where("subscription_id = ?", id).Exec(ctx); err != nil {
			return fault.Internalf(err, "delete delivery log of %d", id)
		}
		if _, err := tx.NewDelete().Table("webhook_lanes").Where("subscription_id = ?", id).Exec(ctx); err != nil {
			return fault.Internalf(err, "delete lane of %d", id)
		}
		if _, err := tx.NewDelete().Model((*finishedRow)(nil)).Where("subscription_id = ?", id).Exec(ctx); err != nil {
			return fault.Internalf(err, "delete finished deliveries of %d", id)
		}
		return nil
	})
	s.subs.invalidate()
	return err
}

// RotateChannelWebhookSecret replaces the secret; the old one is invalid
// at once, also for attempts already scheduled (every attempt reads the
// current secret). Errors: Forbidden, RateLimited, NotFound.
func (s *Service) RotateChannelWebhookSecret(ctx context.Context, p auth.Principal, id int64) (Subscription, string, error) {
	if err := s.throttle(ctx, p); err != nil {
		return Subscription{}, "", err
	}
	secret, stored, err := s.newSealedSecret()
	if err != nil {
		return Subscription{}, "", fault.Internalf(err, "generate secret")
	}
	var out Subscription
	err = s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		row, err := s.get(ctx, tx, p.CompanyID, id)
		if err != nil {
			return err
		}
		row.Secret, row.UpdatedAt = stored, s.now().UTC()
		if _, err := tx.NewUpdate().Model(&row).Column("secret", "updated_at").WherePK().Exec(ctx); err != nil {
			return fault.Internalf(err, "rotate secret of %d", id)
		}
		out = row.toDomain()
		return nil
	})
	if err != nil {
		return Subscription{}, "", err
	}
	return out, secret, nil
}

// TestChannelWebhook queues one ping (data {}) to the subscription,
// whatever its events list, and returns how many deliveries were queued.
// Errors: Forbidden, RateLimited, NotFound, Rule (disabled).
func (s *Service) TestChannelWebhook(ctx context.Context, p auth.Principal, id int64) (int, error) {
	if err := s.throttle(ctx, p); err != nil {
		return 0, err
	}
	err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		row, err := s.get(ctx, tx, p.CompanyID, id)
		if err != nil {
			return err
		}
		if !row.Enabled {
			return fault.New(fault.Rule, msgDisabled)
		}
		ev := Event{Name: events.Ping, CompanyID: p.CompanyID, Data: struct{}{}}
		return s.enqueue(ctx, tx, ev, []subscriptionRow{row})
	})
	if err != nil {
		return 0, err
	}
	return 1, nil
}

// LogEntry is one delivery attempt of the delivery log.
type LogEntry struct {
	ID          int64
	DeliveryID  string
	Event       string
	Attempt     int
	StatusCode  int
	Succeeded   bool
	DurationMs  int64
	Error       *string
	DeliveredAt *time.Time
	NextRetryAt *time.Time
	CreatedAt   time.Time
}

// DeliveryFilter narrows listChannelWebhookDeliveries.
type DeliveryFilter struct {
	Event     string
	Succeeded *bool
	Page      store.Page
}

// ListChannelWebhookDeliveries lists a subscription's attempts, newest
// first. Errors: Forbidden, RateLimited, NotFound.
func (s *Service) ListChannelWebhookDeliveries(ctx context.Context, p auth.Principal, id int64, f DeliveryFilter) ([]LogEntry, int, error) {
	if err := s.throttle(ctx, p); err != nil {
		return nil, 0, err
	}
	if _, err := s.get(ctx, s.db.Bun, p.CompanyID, id); err != nil {
		return nil, 0, err
	}
	var rows []logRow
	q := s.db.Bun.NewSelect().Model(&rows).Where("subscription_id = ?", id)
	if f.Event != "" {
		q = q.Where("event = ?", f.Event)
	}
	if f.Succeeded != nil {
		q = q.Where("succeeded = ?", *f.Succeeded)
	}
	total, err := store.ScanPage(ctx, q.Order("id DESC"), f.Page)
	if err != nil {
		return nil, 0, fault.Internalf(err, "list deliveries of %d", id)
	}
	out := make([]LogEntry, len(rows))
	for i, r := range rows {
		out[i] = LogEntry{ID: r.ID, DeliveryID: r.DeliveryID, Event: r.Event, Attempt: r.Attempt, StatusCode: r.StatusCode,
			Succeeded: r.Succeeded, DurationMs: r.DurationMs, Error: r.Error, DeliveredAt: store.UTC(r.DeliveredAt),
			NextRetryAt: store.UTC(r.NextRetryAt), CreatedAt: r.CreatedAt.UTC()}
	}
	return out, total, nil
}
