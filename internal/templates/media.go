package templates

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/store"
)

// UploadLifetime is how long an upload lives unless used in a send.
const UploadLifetime = 72 * time.Hour

// ErrGone is an upload that expired unused (its file is or will be
// deleted); its URL answers 410.
var ErrGone = errors.New("uploaded media expired")

// uploadTypes are the accepted upload types, checked on the bytes.
var uploadTypes = []string{"image/jpeg", "image/png", "image/webp", "video/mp4", "video/3gpp", "application/pdf"}

type mediaRow struct {
	bun.BaseModel     `bun:"table:template_media,alias:tm"`
	ID                int64      `bun:"id,pk,autoincrement"`
	Token             string     `bun:"token"`
	CompanyID         int64      `bun:"company_id"`
	ProviderAccountID int64      `bun:"provider_account_id"`
	FileName          string     `bun:"file_name"`
	ContentType       string     `bun:"content_type"`
	SizeBytes         int64      `bun:"size_bytes"`
	Path              string     `bun:"path"`
	CreatedAt         time.Time  `bun:"created_at"`
	ExpiresAt         time.Time  `bun:"expires_at"`
	UsedAt            *time.Time `bun:"used_at"`
	DeletedAt         *time.Time `bun:"deleted_at"`
}

// Upload is a stored upload and its temporary URL.
type Upload struct {
	URL       string
	FileName  string
	ExpiresAt time.Time
}

// MediaFile is an upload to serve.
type MediaFile struct {
	Path        string
	FileName    string
	ContentType string
	Size        int64
}

// UploadSendMedia stores a file for a template header and returns its
// temporary URL (valid 72 hours unless used in a send). The type is taken
// from the bytes, never from the declared type.
//
// Errors: NotFound for a provider account that is not the company's;
// Rule for an empty file, an unsupported type or a file over the limit of
// its kind; Internal.
func (s *Service) UploadSendMedia(ctx context.Context, companyID, accountID int64, fileName string, data []byte) (Upload, error) {
	ch, err := s.AccountChannel(ctx, companyID, accountID)
	if err != nil {
		return Upload{}, err
	}
	if len(data) == 0 {
		return Upload{}, fault.New(fault.Rule, "File is required")
	}
	ct := messaging.SniffContentType(data)
	if !slices.Contains(uploadTypes, ct) {
		return Upload{}, fault.New(fault.Rule, "File must be of type image/jpeg, image/png, image/webp, video/mp4, video/3gpp or application/pdf")
	}
	if limit, msg := messaging.LimitFor(msgtype.ForContentType(ct)); len(data) > limit {
		return Upload{}, fault.New(fault.Rule, msg)
	}
	token, err := newToken()
	if err != nil {
		return Upload{}, fault.Internalf(err, "token")
	}
	name := messaging.SafeFileName(fileName, ct)
	rel := filepath.Join(token, name)
	abs := filepath.Join(s.deps.MediaDir, rel)
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return Upload{}, fault.Internalf(err, "store upload")
	}
	if err := os.WriteFile(abs, data, 0o640); err != nil {
		return Upload{}, fault.Internalf(err, "store upload")
	}
	now := s.deps.Now()
	row := mediaRow{Token: token, CompanyID: companyID, ProviderAccountID: ch.ProviderAccount.ID, FileName: name, ContentType: ct,
		SizeBytes: int64(len(data)), Path: filepath.ToSlash(rel), CreatedAt: now, ExpiresAt: now.Add(UploadLifetime)}
	if _, err := s.deps.DB.Bun.NewInsert().Model(&row).Returning("id").Exec(ctx); err != nil {
		if rmErr := os.RemoveAll(filepath.Dir(abs)); rmErr != nil {
			s.deps.Logger.WarnContext(ctx, "remove unrecorded upload", "path", abs, "err", rmErr)
		}
		return Upload{}, fault.Internalf(err, "record upload")
	}
	return Upload{URL: s.mediaURL(token, name), FileName: name, ExpiresAt: row.ExpiresAt}, nil
}

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func (s *Service) mediaURL(token, name string) string {
	return s.deps.PublicBaseURL + "/media/" + token + "/" + url.PathEscape(name)
}

// uploadToken recognises a URL of the gateway's own uploads.
func (s *Service) uploadToken(rawURL string) (string, bool) {
	prefix := s.deps.PublicBaseURL + "/media/"
	if s.deps.PublicBaseURL == "" || !strings.HasPrefix(rawURL, prefix) {
		return "", false
	}
	token, _, _ := strings.Cut(strings.TrimPrefix(rawURL, prefix), "/")
	return token, token != ""
}

// OpenMedia returns the upload behind a URL token, to serve it: the URL is
// public (the token is the secret), so it answers whatever the company.
// Errors: NotFound for an unknown token; ErrGone once it expired unused.
func (s *Service) OpenMedia(ctx context.Context, token string) (MediaFile, error) {
	return s.openUpload(ctx, token, func(q *bun.SelectQuery) *bun.SelectQuery { return q })
}

// openCompanyUpload is OpenMedia for a send of the company: another
// company's upload is NotFound like an unknown token.
func (s *Service) openCompanyUpload(ctx context.Context, companyID int64, token string) (MediaFile, error) {
	return s.openUpload(ctx, token, func(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("tm.company_id = ?", companyID) })
}

func (s *Service) openUpload(ctx context.Context, token string, scope func(*bun.SelectQuery) *bun.SelectQuery) (MediaFile, error) {
	var row mediaRow
	err := scope(s.deps.DB.Bun.NewSelect().Model(&row).Where("tm.token = ?", token)).Scan(ctx)
	if store.IsNoRows(err) {
		return MediaFile{}, fault.New(fault.NotFound, "Media not found")
	}
	if err != nil {
		return MediaFile{}, fault.Internalf(err, "load upload")
	}
	if row.DeletedAt != nil || (row.UsedAt == nil && !s.deps.Now().Before(row.ExpiresAt)) {
		return MediaFile{}, ErrGone
	}
	return MediaFile{Path: filepath.Join(s.deps.MediaDir, filepath.FromSlash(row.Path)), FileName: row.FileName,
		ContentType: row.ContentType, Size: row.SizeBytes}, nil
}

// MarkMediaUsed lifts the deadline of the company's gateway upload behind
// url (a no-op for any other URL), inside the send's transaction.
func (s *Service) MarkMediaUsed(ctx context.Context, tx *store.Tx, companyID int64, rawURL string) error {
	token, ok := s.uploadToken(rawURL)
	if !ok {
		return nil
	}
	if _, err := tx.NewUpdate().Model((*mediaRow)(nil)).Set("used_at = ?", s.deps.Now()).Where("company_id = ?", companyID).
		Where("token = ?", token).Where("used_at IS NULL").Where("deleted_at IS NULL").Exec(ctx); err != nil {
		return fault.Internalf(err, "mark upload used")
	}
	return nil
}

// DeleteExpiredMedia deletes the files of uploads that were not used
// within their lifetime; their URLs then answer 410. It returns how many
// it deleted.
func (s *Service) DeleteExpiredMedia(ctx context.Context) (int, error) {
	var rows []mediaRow
	if err := s.deps.DB.Bun.NewSelect().Model(&rows).Where("tm.used_at IS NULL").Where("tm.deleted_at IS NULL").
		Where("tm.expires_at <= ?", s.deps.Now()).Order("tm.id").Limit(1000).Scan(ctx); err != nil {
		return 0, fault.Internalf(err, "list expired uploads")
	}
	n := 0
	for _, r := range rows {
		// Claim the row first: a send marking it used at the same moment
		// wins, and its file stays.
		res, err := s.deps.DB.Bun.NewUpdate().Model((*mediaRow)(nil)).Set("deleted_at = ?", s.deps.Now()).
			Where("id = ?", r.ID).Where("used_at IS NULL").Where("deleted_at IS NULL").Exec(ctx)
		if err != nil {
			return n, fault.Internalf(err, "mark upload deleted")
		}
		if k, _ := res.RowsAffected(); k == 0 {
			continue
		}
		dir := filepath.Join(s.deps.MediaDir, filepath.FromSlash(filepath.Dir(r.Path)))
		if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.deps.Logger.WarnContext(ctx, "delete expired upload", "path", dir, "err", err)
		}
		n++
	}
	return n, nil
}

// MediaCleanupArgs is the periodic job that deletes expired uploads.
type MediaCleanupArgs struct{}

// Kind implements river.JobArgs.
func (MediaCleanupArgs) Kind() string { return "templates.media_cleanup" }

// MediaCleanupWorker runs DeleteExpiredMedia.
type MediaCleanupWorker struct {
	river.WorkerDefaults[MediaCleanupArgs]
	svc *Service
}

// NewMediaCleanupWorker returns the cleanup worker.
func NewMediaCleanupWorker(svc *Service) *MediaCleanupWorker { return &MediaCleanupWorker{svc: svc} }

// Work implements river.Worker.
func (w *MediaCleanupWorker) Work(ctx context.Context, _ *river.Job[MediaCleanupArgs]) error {
	n, err := w.svc.DeleteExpiredMedia(ctx)
	if n > 0 {
		w.svc.deps.Logger.InfoContext(ctx, "expired uploads deleted", "count", n)
	}
	if err != nil {
		return fmt.Errorf("delete expired uploads: %w", err)
	}
	return nil
}
