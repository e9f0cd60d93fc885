// Package templates owns the official channel's templates and the
// temporary header media uploaded for template sends: the per-account
// template store and its sync from the provider (admin command and a
// periodic job), the template list of a channel, the rendering of a
// template send (variables and header media, fetched through the SSRF
// guard and checked against the header format and the provider limits),
// and uploads served at unguessable temporary URLs that die after 72 hours
// unless used in a send.
package templates

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/store"
)

// Statuses of a template at the provider.
const (
	StatusApproved = "APPROVED"
	// StatusDisabled marks a template the provider no longer lists; it
	// keeps its id so old sends still name it, but cannot be sent.
	StatusDisabled = "DISABLED"
)

// Template is a stored provider template.
type Template struct {
	ID                int64
	CompanyID         int64
	ProviderAccountID int64
	ExternalID        string
	Name              string
	Language          string
	Category          string
	Status            string
	// ParameterFormat is POSITIONAL ({{1}}) or NAMED ({{first_name}}).
	ParameterFormat string
	HasButtons      bool
	// HeaderFormat is TEXT, IMAGE, VIDEO, DOCUMENT or "" (no header).
	HeaderFormat string
	// HeaderMediaURL is the media registered with a media header, used
	// when a send gives no header_media_url.
	HeaderMediaURL string
	Components     []official.TemplateDefComponent
	SyncedAt       time.Time
}

type templateRow struct {
	bun.BaseModel     `bun:"table:provider_templates,alias:t"`
	ID                int64     `bun:"id,pk,autoincrement"`
	CompanyID         int64     `bun:"company_id"`
	ProviderAccountID int64     `bun:"provider_account_id"`
	ExternalID        string    `bun:"external_id"`
	Name              string    `bun:"name"`
	Language          string    `bun:"language"`
	Category          string    `bun:"category"`
	Status            string    `bun:"status"`
	ParameterFormat   string    `bun:"parameter_format"`
	HasButtons        bool      `bun:"has_buttons"`
	HeaderFormat      string    `bun:"header_format"`
	HeaderMediaURL    string    `bun:"header_media_url"`
	Components        string    `bun:"components"`
	SyncedAt          time.Time `bun:"synced_at"`
	CreatedAt         time.Time `bun:"created_at"`
	UpdatedAt         time.Time `bun:"updated_at"`
}

func (r *templateRow) toDomain() (Template, error) {
	t := Template{ID: r.ID, CompanyID: r.CompanyID, ProviderAccountID: r.ProviderAccountID, ExternalID: r.ExternalID,
		Name: r.Name, Language: r.Language, Category: r.Category, Status: r.Status, ParameterFormat: r.ParameterFormat,
		HasButtons: r.HasButtons, HeaderFormat: r.HeaderFormat, HeaderMediaURL: r.HeaderMediaURL, SyncedAt: r.SyncedAt.UTC()}
	if err := json.Unmarshal([]byte(r.Components), &t.Components); err != nil {
		return t, fault.Internalf(err, "decode components of template %d", r.ID)
	}
	return t, nil
}

// ChannelDirectory resolves company channels (*channels.Service).
type ChannelDirectory interface {
	Get(ctx context.Context, companyID, id int64) (channels.Channel, error)
	ListCompanyChannels(ctx context.Context, companyID int64, f channels.ListFilter) ([]channels.Channel, int, error)
}

// Provider lists an account's templates at the provider (*official.Client).
type Provider interface {
	ListTemplates(ctx context.Context, acc *channels.ProviderAccount) ([]official.Template, error)
}

// Deps are what the templates service works with.
type Deps struct {
	DB       *store.DB
	Channels ChannelDirectory
	Provider Provider
	// Fetch is the SSRF-guarded client that fetches header_media_url.
	Fetch *http.Client
	Now   clock.Clock
	// Files stores uploaded header media (internal/filestore), under
	// templates/; MissingFiles logs, once per file, an upload whose file
	// the store lacks.
	Files        filestore.Store
	MissingFiles *filestore.MissingLog
	// Spool holds header media fetched from a URL while its send stores
	// it.
	Spool filestore.Spool
	// PublicBaseURL is how clients reach the gateway; upload URLs are
	// PublicBaseURL/media/<token>/<file name>.
	PublicBaseURL string
	Logger        *slog.Logger
}

// Service is the templates capability.
type Service struct {
	deps Deps
}

var _ messaging.TemplatePreparer = (*Service)(nil)

// NewService returns the templates service.
func NewService(deps Deps) *Service {
	if deps.Now == nil {
		deps.Now = clock.System
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Fetch == nil {
		deps.Fetch = &http.Client{Timeout: time.Minute}
	}
	deps.PublicBaseURL = strings.TrimRight(deps.PublicBaseURL, "/")
	return &Service{deps: deps}
}

// AccountChannel returns the company's official channel of a provider
// account. Errors: NotFound (also for another company's account).
func (s *Service) AccountChannel(ctx context.Context, companyID, accountID int64) (channels.Channel, error) {
	t := channels.OfficialChatapp
	for page := 1; ; page++ {
		list, total, err := s.deps.Channels.ListCompanyChannels(ctx, companyID, channels.ListFilter{TypeID: &t, Page: store.Page{Number: page, PerPage: 500}})
		if err != nil {
			return channels.Channel{}, err
		}
		for _, ch := range list {
			if ch.ProviderAccount != nil && ch.ProviderAccount.ID == accountID {
				return ch, nil
			}
		}
		if page*500 >= total || len(list) == 0 {
			return channels.Channel{}, fault.New(fault.NotFound, "Provider account not found")
		}
	}
}

// ListForChannel returns the approved templates of a company channel.
// official is false (and the list empty) for a channel that is not an
// official channel. An account never synced is synced first.
// Errors: NotFound for a missing channel or one of another company.
func (s *Service) ListForChannel(ctx context.Context, companyID, channelID int64) (official bool, list []Template, err error) {
	ch, err := s.deps.Channels.Get(ctx, companyID, channelID)
	if err != nil {
		if fault.KindOf(err) == fault.NotFound {
			return false, nil, fault.New(fault.NotFound, "Company channel not found")
		}
		return false, nil, err
	}
	if ch.TypeID != channels.OfficialChatapp || ch.ProviderAccount == nil {
		return false, []Template{}, nil
	}
	s.syncIfNever(ctx, ch)
	var rows []templateRow
	if err := s.deps.DB.Bun.NewSelect().Model(&rows).Where("t.provider_account_id = ?", ch.ProviderAccount.ID).
		Where("t.company_id = ?", companyID).Where("t.status = ?", StatusApproved).Order("t.name ASC", "t.language ASC").Scan(ctx); err != nil {
		return true, nil, fault.Internalf(err, "list templates")
	}
	list = make([]Template, 0, len(rows))
	for i := range rows {
		t, err := rows[i].toDomain()
		if err != nil {
			return true, nil, err
		}
		list = append(list, t)
	}
	return true, list, nil
}

// Get returns a stored template of the company. Errors: NotFound.
func (s *Service) Get(ctx context.Context, companyID, id int64) (Template, error) {
	var row templateRow
	err := s.deps.DB.Bun.NewSelect().Model(&row).Where("t.company_id = ?", companyID).Where("t.id = ?", id).Scan(ctx)
	if store.IsNoRows(err) {
		return Template{}, fault.New(fault.NotFound, "Template not found")
	}
	if err != nil {
		return Template{}, fault.Internalf(err, "get template")
	}
	return row.toDomain()
}
