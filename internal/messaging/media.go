package messaging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/internal/msgtype"
)

// mediaIOTimeout bounds a store call made outside a request (reading a
// queued send's file, removing a file after its row went).
const mediaIOTimeout = 5 * time.Minute

// mediaRetryAfter is the Retry-After of an answer refused because the
// media store could not be reached.
const mediaRetryAfter = 5

// mediaKey is the store key of a message file; its row keeps the path
// under messages/ (media_path), as the local directory always laid it out.
func mediaKey(rel string) string { return "messages/" + rel }

// storeFault turns a media store failure into the service's error: an
// unreachable store is Unavailable (503 with Retry-After where the
// operation documents it), anything else Internal.
func storeFault(err error, what string) error {
	if errors.Is(err, filestore.ErrUnavailable) {
		return &fault.Error{Kind: fault.Unavailable, Message: "The media store is unavailable; retry later.",
			RetryAfterSeconds: mediaRetryAfter, Err: fmt.Errorf("%s: %w", what, err)}
	}
	return fault.Internalf(err, "%s", what)
}

// saveMedia stores m in the media store and returns its path under
// messages/: <company>/<random>/<file name>. The caller writes the row
// after, and calls removeMedia when the row is not written, so no row
// points to a file that is not there. Errors: Unavailable, Internal.
func (s *Service) saveMedia(ctx context.Context, companyID int64, m *Media) (string, error) {
	if s.deps.Files == nil {
		return "", fault.Internalf(errors.New("no media store configured"), "store media")
	}
	rel := path.Join(fmt.Sprint(companyID), uuid.NewString(), SafeFileName(m.FileName, m.ContentType))
	if m.StoreKey != "" {
		err := s.deps.Files.Copy(ctx, m.StoreKey, mediaKey(rel))
		if errors.Is(err, filestore.ErrNotFound) {
			s.deps.MissingFiles.Report(ctx, m.StoreKey, "store", s.deps.Files.Kind())
			return "", fault.Wrap(fault.Rule, "The file is no longer in the media store", err)
		}
		if err != nil {
			return "", storeFault(err, "copy media")
		}
		return rel, nil
	}
	r, err := m.Open(ctx)
	if err != nil {
		// The source's own kind stands (its store unavailable: 503); any
		// other error is Internal.
		return "", fmt.Errorf("read media to store: %w", err)
	}
	defer r.Close()
	if err := s.deps.Files.Put(ctx, mediaKey(rel), r, m.Size, m.ContentType); err != nil {
		return "", storeFault(err, "store media")
	}
	return rel, nil
}

// storedMedia is the stored file of message row (a queued send's), read
// from the store each time it is opened. Errors: those of openMedia, when
// the row does not record the file's size.
func (s *Service) storedMedia(row *messageRow) (*Media, error) {
	rel := *row.MediaPath
	m := &Media{FileName: deref(row.MediaName), ContentType: deref(row.MediaContentType),
		Open: func(ctx context.Context) (io.ReadCloser, error) {
			obj, err := s.openMedia(ctx, rel)
			if err != nil {
				return nil, err
			}
			return obj, nil
		}}
	if row.MediaSize != nil {
		m.Size = *row.MediaSize
		return m, nil
	}
	// Rows from before media_size was recorded.
	ctx, cancel := context.WithTimeout(context.Background(), mediaIOTimeout)
	defer cancel()
	obj, err := s.openMedia(ctx, rel)
	if err != nil {
		return nil, err
	}
	m.Size = obj.Size
	return m, obj.Close()
}

// openMedia opens a stored file for reading. Errors: NotFound (logged
// once per file: a row points to a file the store does not have),
// Unavailable, Internal.
func (s *Service) openMedia(ctx context.Context, rel string) (*filestore.Object, error) {
	if s.deps.Files == nil {
		return nil, fault.Internalf(errors.New("no media store configured"), "open media")
	}
	obj, err := s.deps.Files.Get(ctx, mediaKey(rel))
	if errors.Is(err, filestore.ErrNotFound) {
		s.deps.MissingFiles.Report(ctx, mediaKey(rel), "store", s.deps.Files.Kind())
		return nil, fault.Wrap(fault.NotFound, "Media not found", err)
	}
	if err != nil {
		return nil, storeFault(err, "open media")
	}
	return obj, nil
}

// removeMedia deletes a stored file after its row stopped pointing to it
// (a failed write, a revoke with remove_media, a deleted connection); a
// file already gone is not an error. It runs after the caller's request
// may have ended, on its own deadline.
func (s *Service) removeMedia(rel string) {
	if rel == "" || s.deps.Files == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), mediaIOTimeout)
	defer cancel()
	if err := s.deps.Files.Delete(ctx, mediaKey(rel)); err != nil {
		s.deps.Logger.Warn("remove media; the file stays in the store", "key", mediaKey(rel), "err", err)
	}
}

// SafeFileName reduces a client-supplied file name to a plain base name of
// letters (any script), digits, dots, dashes and underscores — nothing that
// separates paths — with a fallback derived from the content type.
func SafeFileName(name, contentType string) string {
	name = filepath.Base(strings.ReplaceAll(name, "\\", "/"))
	var b []rune
	for _, r := range name {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '.', r == '-', r == '_':
			b = append(b, r)
		case r == ' ':
			b = append(b, '_')
		}
	}
	if len(b) > 120 {
		b = b[len(b)-120:] // keep the end: the extension
	}
	out := strings.Trim(string(b), ".")
	if out == "" {
		ext := msgtype.Extension(contentType)
		if ext == "" {
			ext = ".bin"
		}
		out = "file" + ext
	}
	return out
}

// SniffContentType returns the media type of data from its bytes (never
// from a declared type): http.DetectContentType plus the container brands
// it does not know (3GPP video, MP4/M4A audio).
func SniffContentType(data []byte) string {
	if len(data) >= 12 && string(data[4:8]) == "ftyp" {
		brand := string(data[8:12])
		switch {
		case strings.HasPrefix(brand, "3gp"), strings.HasPrefix(brand, "3g2"):
			return "video/3gpp"
		case brand == "M4A ":
			return "audio/mp4"
		case strings.HasPrefix(brand, "mp4"), brand == "isom", brand == "iso2", brand == "avc1", brand == "M4V ":
			return "video/mp4"
		}
	}
	ct := http.DetectContentType(data)
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return ct
}

// Provider media limits (API document, Limits).
const (
	MB             = 1 << 20
	ImageLimit     = 5 * MB
	VideoLimit     = 16 * MB
	AudioLimit     = 16 * MB
	DocumentLimit  = 100 * MB
	imageLimitText = "Images may not be greater than 5 MB"
	videoLimitText = "Videos may not be greater than 16 MB"
	audioLimitText = "Audio files may not be greater than 16 MB"
	docLimitText   = "Documents may not be greater than 100 MB"
)

// LimitFor returns the size limit of a message type and the message that
// reports it exceeded.
func LimitFor(typeID int) (int, string) {
	switch typeID {
	case msgtype.Image:
		return ImageLimit, imageLimitText
	case msgtype.Video:
		return VideoLimit, videoLimitText
	case msgtype.Audio:
		return AudioLimit, audioLimitText
	}
	return DocumentLimit, docLimitText
}
