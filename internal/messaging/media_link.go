package messaging

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"path"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/store"
)

// DefaultMediaURLLifetime is how long the URL of a message's file stays
// valid unless configured otherwise: long enough for a subscriber whose
// endpoint was down for days to fetch the file of an event delivered late.
const DefaultMediaURLLifetime = 7 * 24 * time.Hour

// MediaURLPath is where message files are served: MediaURLPath +
// "{token}/{filename}".
const MediaURLPath = "/message-media/"

// MediaLink is one URL of a message's file: its token is random and known
// only to whoever got the URL (the table keeps its hash), and it stops
// working at ExpiresAt.
type MediaLink struct {
	URL         string
	FileName    string
	ContentType string
	Size        int64
	ExpiresAt   time.Time
}

// MediaFile is a message file to serve, open: the caller closes Body.
type MediaFile struct {
	Body        io.ReadCloser
	FileName    string
	ContentType string
	Size        int64
}

type mediaLinkRow struct {
	bun.BaseModel `bun:"table:message_media_links,alias:ml"`
	TokenHash     string    `bun:"token_hash,pk"`
	MessageID     int64     `bun:"message_id"`
	ExpiresAt     time.Time `bun:"expires_at"`
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// mintMediaLink records a new URL of m's file on db (the publishing
// transaction, or the database for an API answer). Every call makes a new
// URL: one per event or answer, each valid for the configured lifetime.
func (s *Service) mintMediaLink(ctx context.Context, db bun.IDB, m Message) (*MediaLink, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fault.Internalf(err, "media link token")
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	row := mediaLinkRow{TokenHash: hashToken(token), MessageID: m.ID, ExpiresAt: s.deps.Now().Add(s.opts.MediaURLLifetime).UTC()}
	if _, err := db.NewInsert().Model(&row).Exec(ctx); err != nil {
		return nil, fault.Internalf(err, "record media link of message %d", m.ID)
	}
	size := m.MediaSize
	if size == 0 && s.deps.Files != nil {
		// A file stored before sizes were recorded.
		if info, err := s.deps.Files.Stat(ctx, mediaKey(m.MediaPath)); err == nil {
			size = info.Size
		}
	}
	name := path.Base(m.MediaPath)
	return &MediaLink{URL: s.deps.PublicBaseURL + MediaURLPath + token + "/" + url.PathEscape(name), FileName: name,
		ContentType: m.MediaContentType, Size: size, ExpiresAt: row.ExpiresAt}, nil
}

// withMediaLink returns m with a fresh URL of its file when it has one.
func (s *Service) withMediaLink(ctx context.Context, db bun.IDB, m Message) (Message, error) {
	if m.MediaPath == "" || m.MediaLink != nil {
		return m, nil
	}
	link, err := s.mintMediaLink(ctx, db, m)
	if err != nil {
		return m, err
	}
	m.MediaLink = link
	return m, nil
}

// MediaOf returns m with a fresh URL of its file (MediaLink), for an API
// answer about the message; m unchanged when it has no file.
// Errors: Internal.
func (s *Service) MediaOf(ctx context.Context, m Message) (Message, error) {
	return s.withMediaLink(ctx, s.deps.DB.Bun, m)
}

// mediaPayload is the payload's `media` extension: the file's URL minted
// for this event, nil (absent) when the message has no file yet.
func mediaPayload(f clock.Formatter, m Message) *events.MessageMedia {
	l := m.MediaLink
	if l == nil {
		return nil
	}
	return &events.MessageMedia{MimeType: l.ContentType, Filename: l.FileName, Size: l.Size, URL: l.URL, ExpiresAt: f.Offset(l.ExpiresAt)}
}

// OpenMessageMedia opens the file behind a URL of a message's file, from
// the media store (whichever replica stored it). The URL is public (the
// token is the secret), so it answers whatever the company. The caller
// closes the file's Body.
//
// Errors: NotFound for an unknown or expired token, a file name that is
// not the message's, a message whose file was removed, and a file the row
// names but the store lacks (logged once); Unavailable when the store
// cannot be reached; Internal.
func (s *Service) OpenMessageMedia(ctx context.Context, token, fileName string) (MediaFile, error) {
	notFound := fault.New(fault.NotFound, "Media not found")
	var row messageRow
	err := s.deps.DB.Bun.NewSelect().Model(&row).
		Join("JOIN message_media_links AS ml ON ml.message_id = m.id").
		Where("ml.token_hash = ?", hashToken(token)).Where("ml.expires_at > ?", s.deps.Now().UTC()).
		Where("m.media_path IS NOT NULL").Scan(ctx)
	if store.IsNoRows(err) {
		return MediaFile{}, notFound
	}
	if err != nil {
		return MediaFile{}, fault.Internalf(err, "load media link")
	}
	m := row.toDomain()
	if path.Base(m.MediaPath) != fileName {
		return MediaFile{}, notFound
	}
	obj, err := s.openMedia(ctx, m.MediaPath)
	if fault.KindOf(err) == fault.NotFound {
		return MediaFile{}, notFound
	}
	if err != nil {
		return MediaFile{}, err
	}
	return MediaFile{Body: obj, FileName: fileName, ContentType: m.MediaContentType, Size: obj.Size}, nil
}

// DeleteExpiredMediaLinks deletes the rows of URLs that expired (they
// answer 404 either way) and returns how many, at most 5000 per call.
func (s *Service) DeleteExpiredMediaLinks(ctx context.Context) (int, error) {
	sub := s.deps.DB.Bun.NewSelect().Model((*mediaLinkRow)(nil)).Column("token_hash").
		Where("expires_at <= ?", s.deps.Now().UTC()).Limit(5000)
	res, err := s.deps.DB.Bun.NewDelete().Model((*mediaLinkRow)(nil)).Where("token_hash IN (?)", sub).Exec(ctx)
	if err != nil {
		return 0, fault.Internalf(err, "delete expired media links")
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// MediaLinkCleanupArgs is the periodic job that deletes expired URLs of
// message files.
type MediaLinkCleanupArgs struct{}

// Kind implements river.JobArgs.
func (MediaLinkCleanupArgs) Kind() string { return "messaging.media_link_cleanup" }

// MediaLinkCleanupWorker runs DeleteExpiredMediaLinks.
type MediaLinkCleanupWorker struct {
	river.WorkerDefaults[MediaLinkCleanupArgs]
	svc *Service
}

// NewMediaLinkCleanupWorker returns the cleanup worker.
func NewMediaLinkCleanupWorker(svc *Service) *MediaLinkCleanupWorker {
	return &MediaLinkCleanupWorker{svc: svc}
}

// Work implements river.Worker.
func (w *MediaLinkCleanupWorker) Work(ctx context.Context, _ *river.Job[MediaLinkCleanupArgs]) error {
	n, err := w.svc.DeleteExpiredMediaLinks(ctx)
	if n > 0 {
		w.svc.deps.Logger.InfoContext(ctx, "expired media links deleted", "count", n)
	}
	if err != nil {
		return fmt.Errorf("delete expired media links: %w", err)
	}
	return nil
}

// GetMessageMediaLink returns the company's message id with a fresh URL of
// its file (MediaLink), for a client whose URL expired.
//
// Errors: NotFound for another company's or an unknown message, a message
// without a file, and one whose file is still being fetched; Internal.
func (s *Service) GetMessageMediaLink(ctx context.Context, companyID, id int64) (Message, error) {
	m, err := s.Get(ctx, companyID, id)
	if err != nil {
		return Message{}, err
	}
	switch {
	case m.MediaPath != "":
		return s.MediaOf(ctx, m)
	case m.MediaPending:
		return Message{}, fault.New(fault.NotFound, "The media of this message is not stored yet")
	}
	return Message{}, fault.New(fault.NotFound, "This message has no media")
}
