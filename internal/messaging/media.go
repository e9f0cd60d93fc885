package messaging

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/google/uuid"

	"github.com/chatmsg/gateway/internal/msgtype"
)

// saveMedia stores m under the media directory and returns its path
// relative to that directory: <company>/<random>/<file name>.
func (s *Service) saveMedia(companyID int64, m *Media) (string, error) {
	if s.deps.MediaDir == "" {
		return "", errors.New("messaging: no media directory configured")
	}
	rel := filepath.Join(fmt.Sprint(companyID), uuid.NewString(), SafeFileName(m.FileName, m.ContentType))
	abs := filepath.Join(s.deps.MediaDir, rel)
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return "", err
	}
	if err := os.WriteFile(abs, m.Data, 0o640); err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

// readMedia loads a stored file.
func (s *Service) readMedia(rel string) ([]byte, error) {
	abs, err := s.mediaPath(rel)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(abs)
}

// removeMedia deletes a stored file and its directory; a file already gone
// is not an error.
func (s *Service) removeMedia(rel string) {
	if rel == "" {
		return
	}
	abs, err := s.mediaPath(rel)
	if err != nil {
		s.deps.Logger.Warn("refusing to remove media outside the media directory", "path", rel)
		return
	}
	if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.deps.Logger.Warn("remove media", "path", rel, "err", err)
		return
	}
	_ = os.Remove(filepath.Dir(abs)) // the per-file directory, when empty
}

// mediaPath resolves rel inside the media directory and refuses anything
// that would escape it.
func (s *Service) mediaPath(rel string) (string, error) {
	root := filepath.Clean(s.deps.MediaDir)
	abs := filepath.Join(root, filepath.FromSlash(rel))
	if !strings.HasPrefix(abs, root+string(filepath.Separator)) {
		return "", fmt.Errorf("media path %q escapes the media directory", rel)
	}
	return abs, nil
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
