package logging_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/logging"
)

const token = "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5"

func TestRedactMediaTokens(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		log  func(*slog.Logger)
		want string // must appear
	}{
		{"header media path", func(l *slog.Logger) { l.Info("request", "path", "/media/"+token+"/a.pdf") }, `path=/media/[redacted]/a.pdf`},
		{"message media URL", func(l *slog.Logger) {
			l.Info("sent", "url", "https://gw.example.com/message-media/"+token+"/photo.jpg")
		}, `url=https://gw.example.com/message-media/[redacted]/photo.jpg`},
		{"stored file path in an error", func(l *slog.Logger) {
			l.Warn("delete expired upload", "err", fmt.Errorf("remove data/media/%s: %w", token, errors.New("busy")))
		}, `err="remove data/media/[redacted]: busy"`},
		{"in the message", func(l *slog.Logger) { l.Info("GET /media/" + token + "/x") }, `msg="GET /media/[redacted]/x"`},
		{"in a group", func(l *slog.Logger) { l.Info("r", slog.Group("req", "path", "/media/"+token+"/x")) }, `req.path=/media/[redacted]/x`},
		{"in With attributes", func(l *slog.Logger) { l.With("path", "/message-media/"+token+"/x").Info("r") }, `path=/message-media/[redacted]/x`},
		{"other values untouched", func(l *slog.Logger) { l.Info("r", "path", "/api/chatapps", "n", 3) }, `path=/api/chatapps n=3`},
		{"short segments are not tokens", func(l *slog.Logger) { l.Info("r", "path", "/media/abc/x") }, `path=/media/abc/x`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.log(slog.New(logging.RedactMediaTokens(slog.NewTextHandler(&buf, nil))))
			if strings.Contains(buf.String(), token) || !strings.Contains(buf.String(), tc.want) {
				t.Fatalf("got %s, want it to contain %s and not the token", buf.String(), tc.want)
			}
		})
	}
}
