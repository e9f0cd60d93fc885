// Package auth owns companies, their users and access tokens, and the
// permissions a token carries. Every request is resolved here to a Principal
// whose company scopes all data the request can reach.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// Permission names. Every operation of openapi.yaml names the one it
// requires in its x-permission, and info.x-permissions lists them all; a
// test keeps this list and the document's equal. The webhook and template
// names are the API document's own.
const (
	PermConnectionsView   = "connections_view"
	PermConnectionsManage = "connections_manage"
	PermMessagesSend      = "messages_send"
	PermMessagesManage    = "messages_manage"
	PermConversationsView = "conversations_view"
	// PermConversationsUpdate guards the conversation update extension.
	PermConversationsUpdate = "conversations_update"
	// PermEventsPublish lets a platform component publish company-scope
	// events through the API (an extension of this service).
	PermEventsPublish       = "events_publish"
	PermCompanyChannelsView = "company_channels_view"
	PermTemplatesView       = "provider_templates_view"
	PermTemplatesUpload     = "provider_templates_upload"
	PermWebhooksView        = "channel_webhooks_view"
	PermWebhooksCreate      = "channel_webhooks_create"
	PermWebhooksUpdate      = "channel_webhooks_update"
	PermWebhooksDelete      = "channel_webhooks_delete"
)

// AllPermissions is what "--permissions all" grants, in the document's order.
var AllPermissions = []string{
	PermConnectionsView, PermConnectionsManage, PermMessagesSend, PermMessagesManage,
	PermConversationsView, PermConversationsUpdate, PermEventsPublish, PermCompanyChannelsView,
	PermTemplatesView, PermTemplatesUpload,
	PermWebhooksView, PermWebhooksCreate, PermWebhooksUpdate, PermWebhooksDelete,
}

// Principal is the authenticated caller of a request.
type Principal struct {
	CompanyID   int64
	UserID      int64
	TokenID     int64
	Permissions []string
}

// Can reports whether the principal holds perm.
func (p Principal) Can(perm string) bool { return slices.Contains(p.Permissions, perm) }

// Require returns a Forbidden error unless the principal holds perm.
func (p Principal) Require(perm string) error {
	if !p.Can(perm) {
		return fault.New(fault.Forbidden, "This action is unauthorized.")
	}
	return nil
}

type principalKey struct{}

// WithPrincipal stores p in ctx.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal of the request; ok is false for
// unauthenticated contexts.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

type company struct {
	bun.BaseModel `bun:"table:companies"`
	ID            int64     `bun:"id,pk,autoincrement"`
	Name          string    `bun:"name"`
	CreatedAt     time.Time `bun:"created_at"`
}

type user struct {
	bun.BaseModel `bun:"table:users"`
	ID            int64     `bun:"id,pk,autoincrement"`
	CompanyID     int64     `bun:"company_id"`
	Name          string    `bun:"name"`
	Email         string    `bun:"email"`
	CreatedAt     time.Time `bun:"created_at"`
}

type tokenRow struct {
	bun.BaseModel `bun:"table:access_tokens"`
	ID            int64      `bun:"id,pk,autoincrement"`
	CompanyID     int64      `bun:"company_id"`
	UserID        int64      `bun:"user_id"`
	Name          string     `bun:"name"`
	Hash          string     `bun:"token_hash"`
	Permissions   string     `bun:"permissions"`
	ExpiresAt     *time.Time `bun:"expires_at"`
	RevokedAt     *time.Time `bun:"revoked_at"`
	CreatedAt     time.Time  `bun:"created_at"`
}

// Token is an access token as listed to an administrator (never the secret).
type Token struct {
	ID          int64      `json:"id"`
	CompanyID   int64      `json:"company_id"`
	UserID      int64      `json:"user_id"`
	Name        string     `json:"name"`
	Permissions []string   `json:"permissions"`
	ExpiresAt   *time.Time `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
	CreatedAt   time.Time  `json:"created_at"`
}

func (r tokenRow) toDomain() Token {
	return Token{ID: r.ID, CompanyID: r.CompanyID, UserID: r.UserID, Name: r.Name,
		Permissions: splitPerms(r.Permissions), ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt, CreatedAt: r.CreatedAt}
}

// Service is the auth capability.
type Service struct {
	db     *store.DB
	now    clock.Clock
	tokens tokenCache
}

// NewService returns the auth service over db.
func NewService(db *store.DB, now clock.Clock) *Service {
	return &Service{db: db, now: now, tokens: tokenCache{entries: map[string]cachedToken{}}}
}

// Why a token was refused. Authenticate wraps one of them in its
// Unauthenticated fault: the log says which, the client only ever reads the
// document's "Unauthenticated." (telling "revoked" from "unknown" would
// confirm a stolen token once existed).
var (
	ErrTokenMissing   = errors.New("no bearer token")
	ErrTokenMalformed = errors.New("bearer token malformed")
	ErrTokenUnknown   = errors.New("bearer token unknown")
	ErrTokenRevoked   = errors.New("bearer token revoked")
	ErrTokenExpired   = errors.New("bearer token expired")
)

// maxTokenLength bounds a token worth a lookup; issued tokens are 46
// characters.
const maxTokenLength = 512

// Authenticate resolves a raw bearer token. Missing, malformed, unknown,
// revoked and expired tokens are all Unauthenticated with the document's
// message, wrapping the Err* reason. A malformed token (not RFC 6750's
// b64token syntax, or longer than any issued one) never reaches the
// database.
//
// A valid token is remembered for TokenCacheTTL, so a burst of requests
// costs one lookup. A revoke made through this Service applies at once; one
// made by another process (another replica, the admin command) applies
// within TokenCacheTTL. Expiry is checked on every call.
func (s *Service) Authenticate(ctx context.Context, raw string) (Principal, error) {
	unauth := func(reason error) error { return fault.Wrap(fault.Unauthenticated, "Unauthenticated.", reason) }
	if raw == "" {
		return Principal{}, unauth(ErrTokenMissing)
	}
	if !wellFormed(raw) {
		return Principal{}, unauth(ErrTokenMalformed)
	}
	hash := hashToken(raw)
	now := s.now()
	if c, ok := s.tokens.get(hash, now); ok {
		if c.expiresAt != nil && !now.Before(*c.expiresAt) {
			return Principal{}, unauth(ErrTokenExpired)
		}
		return c.principal, nil
	}
	gen := s.tokens.generation()
	var row tokenRow
	err := s.db.Bun.NewSelect().Model(&row).Where("token_hash = ?", hash).Limit(1).Scan(ctx)
	if store.IsNoRows(err) {
		return Principal{}, unauth(ErrTokenUnknown)
	}
	if err != nil {
		return Principal{}, fault.Internalf(err, "look up token")
	}
	if row.RevokedAt != nil {
		return Principal{}, unauth(ErrTokenRevoked)
	}
	if row.ExpiresAt != nil && !now.Before(*row.ExpiresAt) {
		return Principal{}, unauth(ErrTokenExpired)
	}
	p := Principal{CompanyID: row.CompanyID, UserID: row.UserID, TokenID: row.ID, Permissions: splitPerms(row.Permissions)}
	s.tokens.put(gen, hash, cachedToken{principal: p, expiresAt: row.ExpiresAt, until: now.Add(TokenCacheTTL)}, now)
	return p, nil
}

// wellFormed reports whether raw is an RFC 6750 b64token
// (1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=") of a
// length an issued token could have.
func wellFormed(raw string) bool {
	if len(raw) > maxTokenLength {
		return false
	}
	body := strings.TrimRight(raw, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/':
		default:
			return false
		}
	}
	return true
}

// TokenCacheTTL is how long a successful token lookup is reused: the bound
// on how late a revoke made elsewhere (another replica, the admin command)
// takes effect on this process.
const TokenCacheTTL = 5 * time.Second

// tokenCacheSize bounds the remembered tokens, so a flood of distinct valid
// tokens cannot grow memory without limit.
const tokenCacheSize = 10_000

type cachedToken struct {
	principal Principal
	expiresAt *time.Time
	until     time.Time
}

// tokenCache maps token hashes to principals. Only valid tokens enter it:
// unknown ones always reach the database, so a guessed token is never
// cached and a newly created one works at once. gen guards against a lookup
// that read the token before a revoke in this process storing what it read
// after the revoke's forget.
type tokenCache struct {
	mu      sync.Mutex
	gen     uint64
	entries map[string]cachedToken
}

func (c *tokenCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *tokenCache) get(hash string, now time.Time) (cachedToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok || !now.Before(e.until) {
		return cachedToken{}, false
	}
	return e, true
}

func (c *tokenCache) put(gen uint64, hash string, e cachedToken, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return // a revoke happened since the lookup read the row
	}
	if len(c.entries) >= tokenCacheSize {
		for h, old := range c.entries {
			if !now.Before(old.until) {
				delete(c.entries, h)
			}
		}
		if len(c.entries) >= tokenCacheSize {
			clear(c.entries) // all still fresh: start over rather than grow
		}
	}
	c.entries[hash] = e
}

// forget drops the token's entry, so its revoke applies to this process at
// once.
func (c *tokenCache) forget(tokenID int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for h, e := range c.entries {
		if e.principal.TokenID == tokenID {
			delete(c.entries, h)
		}
	}
}

// BootstrapResult is printed by `gateway admin bootstrap`; scripts depend on
// its exact JSON shape.
type BootstrapResult struct {
	CompanyID int64  `json:"company_id"`
	UserID    int64  `json:"user_id"`
	Token     string `json:"token"`
}

// Bootstrap creates a company, its first user and a token for that user.
func (s *Service) Bootstrap(ctx context.Context, companyName, email string, perms []string, ttl time.Duration) (BootstrapResult, error) {
	var res BootstrapResult
	err := s.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		c, err := createCompany(ctx, tx, companyName, s.now())
		if err != nil {
			return err
		}
		u, err := createUser(ctx, tx, c, nameFromEmail(email), email, s.now())
		if err != nil {
			return err
		}
		raw, _, err := s.createToken(ctx, tx, c, u, "bootstrap", perms, ttl)
		if err != nil {
			return err
		}
		res = BootstrapResult{CompanyID: c, UserID: u, Token: raw}
		return nil
	})
	return res, err
}

// CreateCompany adds a company and returns its id.
func (s *Service) CreateCompany(ctx context.Context, name string) (int64, error) {
	return createCompany(ctx, s.db.Bun, name, s.now())
}

// CreateUser adds a user to a company and returns its id.
func (s *Service) CreateUser(ctx context.Context, companyID int64, name, email string) (int64, error) {
	if err := s.companyExists(ctx, companyID); err != nil {
		return 0, err
	}
	if name == "" {
		name = nameFromEmail(email)
	}
	return createUser(ctx, s.db.Bun, companyID, name, email, s.now())
}

// CreateToken issues a token for a user; the raw token is returned once and
// only its SHA-256 is stored.
func (s *Service) CreateToken(ctx context.Context, userID int64, name string, perms []string, ttl time.Duration) (string, Token, error) {
	var u user
	err := s.db.Bun.NewSelect().Model(&u).Where("id = ?", userID).Scan(ctx)
	if store.IsNoRows(err) {
		return "", Token{}, fault.New(fault.NotFound, fmt.Sprintf("user %d not found", userID))
	}
	if err != nil {
		return "", Token{}, fault.Internalf(err, "look up user")
	}
	return s.createToken(ctx, s.db.Bun, u.CompanyID, u.ID, name, perms, ttl)
}

// ListTokens lists a company's tokens, newest first.
func (s *Service) ListTokens(ctx context.Context, companyID int64) ([]Token, error) {
	var rows []tokenRow
	if err := s.db.Bun.NewSelect().Model(&rows).Where("company_id = ?", companyID).Order("id DESC").Scan(ctx); err != nil {
		return nil, fault.Internalf(err, "list tokens")
	}
	out := make([]Token, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}

// RevokeToken makes a token unusable at once.
func (s *Service) RevokeToken(ctx context.Context, tokenID int64) error {
	now := s.now()
	res, err := s.db.Bun.NewUpdate().Model((*tokenRow)(nil)).Set("revoked_at = ?", now).
		Where("id = ?", tokenID).Where("revoked_at IS NULL").Exec(ctx)
	if err != nil {
		return fault.Internalf(err, "revoke token")
	}
	s.tokens.forget(tokenID)
	if n, _ := res.RowsAffected(); n == 0 {
		return fault.New(fault.NotFound, fmt.Sprintf("token %d not found or already revoked", tokenID))
	}
	return nil
}

// ParsePermissions turns "all" or a comma-separated list into permission
// names, refusing unknown ones.
func ParsePermissions(s string) ([]string, error) {
	if strings.TrimSpace(s) == "all" {
		return slices.Clone(AllPermissions), nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(AllPermissions, p) {
			return nil, fault.New(fault.Invalid, fmt.Sprintf("unknown permission %q (known: all, %s)", p, strings.Join(AllPermissions, ", ")))
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (s *Service) companyExists(ctx context.Context, id int64) error {
	n, err := s.db.Bun.NewSelect().Model((*company)(nil)).Where("id = ?", id).Count(ctx)
	if err != nil {
		return fault.Internalf(err, "look up company")
	}
	if n == 0 {
		return fault.New(fault.NotFound, fmt.Sprintf("company %d not found", id))
	}
	return nil
}

func (s *Service) createToken(ctx context.Context, db bun.IDB, companyID, userID int64, name string, perms []string, ttl time.Duration) (string, Token, error) {
	raw, err := newTokenString()
	if err != nil {
		return "", Token{}, fault.Internalf(err, "generate token")
	}
	now := s.now()
	row := tokenRow{CompanyID: companyID, UserID: userID, Name: name, Hash: hashToken(raw),
		Permissions: strings.Join(perms, ","), CreatedAt: now}
	if ttl > 0 {
		exp := now.Add(ttl)
		row.ExpiresAt = &exp
	}
	if _, err := db.NewInsert().Model(&row).Returning("id").Exec(ctx); err != nil {
		return "", Token{}, fault.Internalf(err, "insert token")
	}
	return raw, row.toDomain(), nil
}

func createCompany(ctx context.Context, db bun.IDB, name string, now time.Time) (int64, error) {
	if strings.TrimSpace(name) == "" {
		return 0, fault.New(fault.Invalid, "company name is required")
	}
	c := company{Name: name, CreatedAt: now}
	if _, err := db.NewInsert().Model(&c).Returning("id").Exec(ctx); err != nil {
		return 0, fault.Internalf(err, "insert company")
	}
	return c.ID, nil
}

func createUser(ctx context.Context, db bun.IDB, companyID int64, name, email string, now time.Time) (int64, error) {
	if !strings.Contains(email, "@") {
		return 0, fault.New(fault.Invalid, "a valid user email is required")
	}
	u := user{CompanyID: companyID, Name: name, Email: email, CreatedAt: now}
	if _, err := db.NewInsert().Model(&u).Returning("id").Exec(ctx); err != nil {
		if store.IsUniqueViolation(err) {
			return 0, fault.New(fault.Rule, fmt.Sprintf("a user with email %s already exists in this company", email))
		}
		return 0, fault.Internalf(err, "insert user")
	}
	return u.ID, nil
}

func newTokenString() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "gw_" + base64.RawURLEncoding.EncodeToString(b), nil
}

func hashToken(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}

func splitPerms(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func nameFromEmail(email string) string {
	if i := strings.IndexByte(email, '@'); i > 0 {
		return email[:i]
	}
	return email
}

// User is a company user as other capabilities show it (assignees).
type User struct {
	ID        int64
	CompanyID int64
	Name      string
	Email     string
}

// UsersByID returns the company's users among ids; ids of other companies
// are absent from the map.
func (s *Service) UsersByID(ctx context.Context, companyID int64, ids []int64) (map[int64]User, error) {
	out := map[int64]User{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []user
	if err := s.db.Bun.NewSelect().Model(&rows).Where("company_id = ?", companyID).Where("id IN (?)", bun.In(ids)).Scan(ctx); err != nil {
		return nil, fault.Internalf(err, "load users")
	}
	for _, r := range rows {
		out[r.ID] = User{ID: r.ID, CompanyID: r.CompanyID, Name: r.Name, Email: r.Email}
	}
	return out, nil
}
