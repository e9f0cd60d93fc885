package templates

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/filestore"
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

// MediaFile is an upload: Key is its file in the media store.
type MediaFile struct {
	Key         string
	FileName    string
	ContentType string
	Size        int64
}

// OpenFile is an upload to serve, open: the caller closes Body.
type OpenFile struct {
	MediaFile
	Body io.ReadCloser
}

// uploadKey is the store key of an upload; its row keeps the path under
// templates/ (<token>/<file name>).
func uploadKey(rel string) string { return "templates/" + rel }

// retryAfter is the Retry-After of an answer refused because the media
// store could not be reached.
const retryAfter = 5

// storeFault turns a media store failure into the service's error: an
// unreachable store is Unavailable, anything else Internal.
func storeFault(err error, what string) error {
	if errors.Is(err, filestore.ErrUnavailable) {
		return &fault.Error{Kind: fault.Unavailable, Message: "The media store is unavailable; retry later.",
			RetryAfterSeconds: retryAfter, Err: fmt.Errorf("%s: %w", what, err)}
	}
	return fault.Internalf(err, "%s", what)
}

// UploadSendMedia stores a file of size bytes read from r for a template
// header and returns its temporary URL (valid 72 hours unless used in a
// send). The type is taken from the bytes, never from the declared type.
// The file is streamed into the media store; its row is written only once
// the file is stored, and a row that cannot be written takes its file
// away again.
//
// Errors: NotFound for a provider account that is not the company's;
// Rule for an empty file, an unsupported type or a file over the limit of
// its kind; Unavailable when the media store cannot be reached; Internal.
func (s *Service) UploadSendMedia(ctx context.Context, companyID, accountID int64, fileName string, r io.Reader, size int64) (Upload, error) {
	ch, err := s.AccountChannel(ctx, companyID, accountID)
	if err != nil {
		return Upload{}, err
	}
	if size <= 0 {
		return Upload{}, fault.New(fault.Rule, "File is required")
	}
	br := bufio.NewReaderSize(r, 512)
	head, err := br.Peek(512)
	if err != nil && !errors.Is(err, io.EOF) {
		return Upload{}, fault.Wrap(fault.Invalid, "The file could not be read.", err)
	}
	ct := messaging.SniffContentType(head)
	if !slices.Contains(uploadTypes, ct) {
		return Upload{}, fault.New(fault.Rule, "File must be of type image/jpeg, image/png, image/webp, video/mp4, video/3gpp or application/pdf")
	}
	if limit, msg := messaging.LimitFor(msgtype.ForContentType(ct)); size > int64(limit) {
		return Upload{}, fault.New(fault.Rule, msg)
	}
	token, err := newToken()
	if err != nil {
		return Upload{}, fault.Internalf(err, "token")
	}
	name := messaging.SafeFileName(fileName, ct)
	rel := path.Join(token, name)
	if err := s.deps.Files.Put(ctx, uploadKey(rel), br, size, ct); err != nil {
		if errors.Is(err, filestore.ErrSize) {
			return Upload{}, fault.Wrap(fault.Invalid, "The file could not be read.", err)
		}
		return Upload{}, storeFault(err, "store upload")
	}
	now := s.deps.Now()
	row := mediaRow{Token: token, CompanyID: companyID, ProviderAccountID: ch.ProviderAccount.ID, FileName: name, ContentType: ct,
		SizeBytes: size, Path: rel, CreatedAt: now, ExpiresAt: now.Add(UploadLifetime)}
	if _, err := s.deps.DB.Bun.NewInsert().Model(&row).Returning("id").Exec(ctx); err != nil {
		if rmErr := s.deps.Files.Delete(context.WithoutCancel(ctx), uploadKey(rel)); rmErr != nil {
			s.deps.Logger.WarnContext(ctx, "remove unrecorded upload", "key", uploadKey(rel), "err", rmErr)
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

// OpenMedia opens the upload behind a URL token and file name, to serve
// it from the media store (whichever replica stored it): the URL is public
// (the token is the secret), so it answers whatever the company. The
// caller closes Body.
// Errors: NotFound for an unknown token or file name, and for an upload
// whose file the store lacks (logged once); ErrGone once it expired
// unused; Unavailable when the store cannot be reached; Internal.
func (s *Service) OpenMedia(ctx context.Context, token, fileName string) (OpenFile, error) {
	f, err := s.openUpload(ctx, token, func(q *bun.SelectQuery) *bun.SelectQuery { return q })
	if err != nil {
		return OpenFile{}, err
	}
	if f.FileName != fileName {
		return OpenFile{}, fault.New(fault.NotFound, "Media not found")
	}
	obj, err := s.openFile(ctx, f)
	if err != nil {
		return OpenFile{}, err
	}
	f.Size = obj.Size
	return OpenFile{MediaFile: f, Body: obj}, nil
}

// openFile opens an upload's file. Errors: NotFound (logged once),
// Unavailable, Internal.
func (s *Service) openFile(ctx context.Context, f MediaFile) (*filestore.Object, error) {
	obj, err := s.deps.Files.Get(ctx, f.Key)
	if errors.Is(err, filestore.ErrNotFound) {
		s.deps.MissingFiles.Report(ctx, f.Key, "store", s.deps.Files.Kind())
		return nil, fault.Wrap(fault.NotFound, "Media not found", err)
	}
	if err != nil {
		return nil, storeFault(err, "open upload")
	}
	return obj, nil
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
	return MediaFile{Key: uploadKey(row.Path), FileName: row.FileName, ContentType: row.ContentType, Size: row.SizeBytes}, nil
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
// it deleted. A file the store cannot delete now gives its row back
// (deleted_at cleared) and ends the run, so the next run tries again.
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
		if err := s.deps.Files.Delete(ctx, uploadKey(r.Path)); err != nil {
			if _, uerr := s.deps.DB.Bun.NewUpdate().Model((*mediaRow)(nil)).Set("deleted_at = NULL").Where("id = ?", r.ID).Exec(ctx); uerr != nil {
				err = errors.Join(err, uerr)
			}
			return n, storeFault(err, "delete expired upload")
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
