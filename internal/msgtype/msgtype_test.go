package msgtype_test

import (
	"testing"

	"github.com/chatmsg/gateway/internal/msgtype"
)

func TestForContentType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		contentType string
		want        int
	}{
		{"image/png", msgtype.Image},
		{"image/webp", msgtype.Image},
		{"video/mp4", msgtype.Video},
		{"video/3gpp", msgtype.Video},
		{"audio/ogg; codecs=opus", msgtype.Audio},
		{"audio/mp4", msgtype.Audio},
		{"application/pdf", msgtype.Document},
		{"text/plain; charset=utf-8", msgtype.Document},
		{"", msgtype.Document},
	} {
		if got := msgtype.ForContentType(tc.contentType); got != tc.want {
			t.Errorf("ForContentType(%q) = %d, want %d", tc.contentType, got, tc.want)
		}
	}
}

func TestExtension(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ contentType, want string }{
		{"image/jpeg", ".jpg"},
		{"image/png", ".png"},
		{"image/webp", ".webp"},
		{"video/mp4", ".mp4"},
		{"video/3gpp", ".3gp"},
		{"audio/mpeg", ".mp3"},
		{"audio/ogg; codecs=opus", ".ogg"},
		{"audio/mp4", ".m4a"},
		{"Application/PDF", ".pdf"},
		{"application/octet-stream", ""},
		{"", ""},
	} {
		if got := msgtype.Extension(tc.contentType); got != tc.want {
			t.Errorf("Extension(%q) = %q, want %q", tc.contentType, got, tc.want)
		}
	}
}
